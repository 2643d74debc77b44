//! Local transactions as the server drives them: the writeset is encoded and submitted
//! outside the core's lock, and the client thread parks until its own verdict arrives.
use super::Provider;
use crate::application::{ApplyRequest, RecvCtx, WsHandle};
use crate::certification::{ChainsBuilder, KeySet};
use crate::core::{outcome_of, CertifyStart, VoteResult, REMOTE_HANDLE};
use crate::types::{Gtid, Seqno, Status, TrxMeta};
use std::time::{Duration, Instant};

/// Bound on the wait for the members' vote on a seqno that failed here.
const VOTE_TIMEOUT: Duration = Duration::from_secs(120);

impl Provider {
    /// Adds keys to the transaction's writeset; returns its token for the handle's `opaque`.
    /// Their chains are hashed before the core's lock is taken.
    pub fn append_key(&self, handle: WsHandle, keys: &KeySet) -> u64 {
        let chains = ChainsBuilder::of(keys.as_slice());
        self.with_core(|core| core.append_key(handle, chains))
    }

    /// Appends data to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_data(&self, handle: WsHandle, buffers: &[&[u8]]) -> u64 {
        self.with_core(|core| core.append_data(handle, buffers))
    }

    /// Orders and certifies the transaction's writeset.
    pub fn certify(&self, conn_id: u64, handle: WsHandle, ws_flags: u32) -> (Status, TrxMeta) {
        let start =
            self.wait_for(None, |core, me| core.certify_start(conn_id, handle, ws_flags, me, self.started.elapsed()));
        let (writeset, local_id, pace) = match start.expect("no deadline") {
            CertifyStart::Done(status, meta) => return (status, meta),
            CertifyStart::Submit { writeset, local_id, pace } => (writeset, local_id, pace),
        };
        if !pace.is_zero() {
            // Our turn under a flow-control pace: tens of milliseconds at most.
            std::thread::sleep(pace);
        }
        let submitted = Instant::now();
        self.submit(writeset.encode(), local_id);
        self.wait_for(None, |core, me| {
            let outcome = core.certify_outcome(handle, local_id, me)?;
            core.replicated_in(submitted.elapsed());
            Some(outcome)
        })
        .expect("no deadline")
    }

    /// Replicates a rollback fragment for streaming transaction `trx_id` without waiting
    /// for its place (it may be called on an applier thread, inside a brute-force abort).
    pub fn rollback(&self, trx_id: u64, data: Vec<u8>) -> Status {
        match self.with_core(|core| core.rollback_fragment(trx_id, data)) {
            Ok((writeset, local_id)) => {
                self.submit(writeset.encode(), local_id);
                Status::Ok
            }
            Err(status) => status,
        }
    }

    /// Hands a writeset's bytes (encoded once, outside the lock) to the group; its outcome
    /// reaches the core by delivery, or by the group's failure report.
    pub(super) fn submit(&self, bytes: Vec<u8>, local_id: u64) {
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

    /// A non-empty `error`: committing failed here. The members vote on the seqno; the
    /// result is the status (Ok: the group failed alike and goes on; NodeFail: this node's
    /// data differs from the group's, and it leaves).
    pub fn commit_order_leave(&self, handle: WsHandle, meta: &TrxMeta, error: &[u8]) -> Status {
        let seqno = meta.gtid.seqno;
        if seqno < 0 {
            return Status::TrxMissing;
        }
        let failed = (!error.is_empty()).then(|| outcome_of(error));
        let status = self.with_core(|core| core.commit_order_leave(handle, seqno, failed));
        if failed.is_none() {
            return status;
        }
        let remote = handle.opaque & REMOTE_HANDLE != 0;
        if self.await_vote(seqno, error, remote) {
            Status::Ok
        } else {
            Status::NodeFail
        }
    }

    /// Waits (bounded) for the members' vote on `seqno`, which failed here with `error`.
    /// Returns whether this node goes on (the group failed alike); if not, it is inconsistent
    /// and leaves (`remote`: an applier's writeset, which ends the node once applied).
    pub(super) fn await_vote(&self, seqno: Seqno, error: &[u8], remote: bool) -> bool {
        let why = String::from_utf8_lossy(error).trim_end_matches('\0').trim().to_string();
        let generation = self.lock_core().generation();
        let deadline = Instant::now() + VOTE_TIMEOUT;
        match self.wait_for(Some(deadline), |core, me| core.vote_result(generation, seqno, me)) {
            Some(VoteResult::Continue) => {
                self.with_core(|core| core.vote_taken(seqno));
                // A Note, as Galera's "consistent with group": the group is consistent, and the
                // server logged the failure itself.
                log::info!("seqno {seqno} failed here as on a majority of the members ({why}): skipped everywhere");
                true
            }
            result => {
                if remote {
                    log::error!(
                        "Inconsistency detected: Inconsistent by consensus on {}: seqno {seqno} failed on this node \
                         ({why}) but not on a majority of the members{}; this node leaves and, restarted, takes a \
                         full state transfer",
                        Gtid::new(self.last_committed_id().uuid, seqno),
                        if result.is_none() { " (the vote did not end in time)" } else { "" }
                    );
                }
                self.with_core(|core| core.vote_lost(seqno, remote));
                false
            }
        }
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
            // A client's thread: it runs as the server runs it.
            boost: 0,
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
