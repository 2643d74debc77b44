//! Local transactions as the server drives them: the writeset is encoded and submitted
//! outside the core's lock, and the client thread parks until its own verdict arrives.
use super::Provider;
use crate::application::{ApplyRequest, RecvCtx, WsHandle};
use crate::certification::Key;
use crate::core::CertifyStart;
use crate::types::{Seqno, Status, TrxMeta};

impl Provider {
    /// Adds keys to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_key(&self, handle: WsHandle, keys: Vec<Key>) -> u64 {
        self.with_core(|core| core.append_key(handle, keys))
    }

    /// Appends data to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_data(&self, handle: WsHandle, buffers: &[&[u8]]) -> u64 {
        self.with_core(|core| core.append_data(handle, buffers))
    }

    /// Orders and certifies the transaction's writeset.
    pub fn certify(&self, conn_id: u64, handle: WsHandle, ws_flags: u32) -> (Status, TrxMeta) {
        let start = self.wait_for(None, |core, me| core.certify_start(conn_id, handle, ws_flags, me));
        let (writeset, local_id) = match start.expect("no deadline") {
            CertifyStart::Done(status, meta) => return (status, meta),
            CertifyStart::Submit { writeset, local_id } => (writeset, local_id),
        };
        self.submit(writeset, local_id);
        self.wait_for(None, |core, me| core.certify_outcome(handle, local_id, me)).expect("no deadline")
    }

    /// Encodes a writeset once, outside the lock, and hands the bytes to the group; its
    /// outcome reaches the core by delivery, or by the group's failure report.
    pub(super) fn submit(&self, writeset: crate::writeset::Writeset, local_id: u64) {
        let bytes = writeset.encode();
        drop(writeset);
        match self.link() {
            Some(link) => link.node.submit_tagged(bytes, local_id),
            None => self.with_core(|core| core.submit_impossible(local_id)),
        }
    }

    /// Waits for every earlier seqno to leave commit order, then enters it.
    pub fn commit_order_enter(&self, handle: WsHandle, meta: &TrxMeta) -> Status {
        let seqno = meta.gtid.seqno;
        if seqno < 0 {
            return Status::TrxMissing;
        }
        self.wait_for(None, |core, me| core.commit_order_enter(handle, seqno, me)).expect("no deadline")
    }

    pub fn commit_order_leave(&self, handle: WsHandle, meta: &TrxMeta, error: &[u8]) -> Status {
        let seqno = meta.gtid.seqno;
        if seqno < 0 {
            return Status::TrxMissing;
        }
        if !error.is_empty() {
            log::warn!(
                "seqno {seqno} failed to commit on this node: {}",
                String::from_utf8_lossy(error).trim_end_matches('\0')
            );
        }
        self.with_core(|core| core.commit_order_leave(handle, seqno, !error.is_empty()))
    }

    /// The end of a transaction's life here. Also called, cheaply, for handles never seen.
    pub fn release(&self, handle: WsHandle) -> Status {
        self.with_core(|core| core.release(handle))
    }

    /// Brute-force abort of local transaction `victim` on behalf of seqno `bf_seqno`.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> (Status, Seqno) {
        self.with_core(|core| core.abort_certification(bf_seqno, victim))
    }

    /// Re-applies a transaction BF-aborted after it was ordered, on its own client thread.
    pub fn replay_trx(&self, handle: WsHandle, ctx: RecvCtx) -> Status {
        let plan = match self.wait_for(None, |core, me| core.replay_start(handle, me)).expect("no deadline") {
            Ok(plan) => plan,
            Err(status) => return status,
        };
        let request = ApplyRequest {
            handle: WsHandle { trx_id: handle.trx_id, opaque: plan.token },
            flags: plan.flags,
            data: &plan.data,
            meta: plan.meta,
        };
        let result = self.app.apply(ctx, &request);
        self.with_core(|core| core.replay_ended(result.is_ok()));
        match result {
            Ok(_) => Status::Ok,
            Err(e) => {
                log::error!("replay of trx {} at seqno {} failed in {}", handle.trx_id, plan.meta.gtid.seqno, e.0);
                Status::TrxFail
            }
        }
    }
}
