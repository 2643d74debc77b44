//! Local transactions: collecting the writeset, ordering and certifying it, commit order,
//! brute-force abort and replay.
use super::{LocalTrx, Provider, Shared, TrxState};
use crate::application::{ApplyRequest, RecvCtx, WsHandle, TRX_ID_UNDEFINED};
use crate::certification::{Key, Verdict};
use crate::types::{Gtid, Seqno, SourceTrx, Status, TrxMeta, SEQNO_UNDEFINED};
use crate::writeset::Writeset;
use lockstep_group::{GroupNode, SubmitError};

impl Shared {
    fn handle_id(&self, handle: WsHandle) -> Option<u64> {
        if handle.opaque & super::applier::REMOTE_HANDLE != 0 {
            return None;
        }
        if handle.opaque != 0 && self.trxs.contains_key(&handle.opaque) {
            return Some(handle.opaque);
        }
        if handle.trx_id == TRX_ID_UNDEFINED {
            return None;
        }
        self.handle_of_trx.get(&handle.trx_id).copied()
    }

    fn trx_mut(&mut self, handle: WsHandle) -> Option<&mut LocalTrx> {
        let id = self.handle_id(handle)?;
        self.trxs.get_mut(&id)
    }

    /// The transaction for `handle`, created on first use; returns its token.
    fn open_trx(&mut self, handle: WsHandle) -> u64 {
        if let Some(id) = self.handle_id(handle) {
            return id;
        }
        let id = self.next_handle;
        self.next_handle += 1;
        self.trxs.insert(
            id,
            LocalTrx {
                trx_id: handle.trx_id,
                keys: Vec::new(),
                data: Vec::new(),
                state: TrxState::Executing,
                flags: 0,
                seqno: SEQNO_UNDEFINED,
                depends_on: SEQNO_UNDEFINED,
                conn_id: 0,
                left_commit_order: false,
                must_abort: false,
                local_id: 0,
            },
        );
        if handle.trx_id != TRX_ID_UNDEFINED {
            self.handle_of_trx.insert(handle.trx_id, id);
        }
        id
    }

    pub(super) fn member(&self) -> crate::types::Uuid {
        self.connection.as_ref().map_or(crate::types::Uuid::NIL, |c| c.member)
    }

    fn meta_of(&self, trx: &LocalTrx) -> TrxMeta {
        TrxMeta {
            gtid: if trx.seqno >= 0 { Gtid::new(self.group(), trx.seqno) } else { Gtid::UNDEFINED },
            source: SourceTrx { node: self.member(), trx_id: trx.trx_id, conn_id: trx.conn_id },
            depends_on: trx.depends_on,
        }
    }

    /// Registers a writeset about to be sent, so the delivery thread hands its place and
    /// verdict back instead of applying it.
    pub(super) fn prepare_writeset(
        &mut self,
        source: SourceTrx,
        ws_flags: u32,
        keys: Vec<Key>,
        data: Vec<u8>,
    ) -> Writeset {
        let local_id = self.next_local_id;
        self.next_local_id += 1;
        let last_seen = self.committed.last_contiguous();
        self.ordering.awaiting.insert(local_id, last_seen);
        let ws = Writeset { source, local_id, last_seen, flags: ws_flags, keys, data };
        let keys_bytes: usize = ws.keys.iter().map(Key::byte_len).sum();
        let c = &mut self.counters;
        c.replicated += 1;
        c.repl_keys += ws.keys.len() as i64;
        c.repl_keys_bytes += keys_bytes as i64;
        c.repl_data_bytes += ws.data.len() as i64;
        c.replicated_bytes += (keys_bytes + ws.data.len()) as i64;
        ws
    }
}

/// How many times a writeset the group says was never ordered is sent again.
const RESUBMITS: usize = 3;

impl Provider {
    /// Sends a prepared writeset through the group and waits for its place and verdict.
    pub(super) fn replicate(&self, node: &GroupNode, ws: &Writeset) -> Result<(Seqno, Verdict), Status> {
        let mut attempts = 0;
        let outcome = loop {
            match node.submit(ws.encode()) {
                Err(SubmitError::Retry) if attempts < RESUBMITS => attempts += 1,
                other => break other,
            }
        };
        let shared = self.lock();
        let id = ws.local_id;
        let (mut shared, _) = match outcome {
            Ok(_) => self.wait_until(shared, None, |s| {
                s.ordering.arrived.contains_key(&id)
                    || !s.ordering.awaiting.contains_key(&id)
                    || s.group_node().is_none()
            }),
            Err(_) => (shared, true),
        };
        if let Some(arrived) = shared.ordering.arrived.remove(&id) {
            return Ok(arrived);
        }
        // If it is ordered after all, the delivery thread applies it like a remote writeset:
        // the client saw an error, but every member ends up with the same data.
        shared.ordering.awaiting.remove(&id);
        match outcome {
            Err(SubmitError::TooLarge) => Err(Status::SizeExceeded),
            Err(e) => {
                log::warn!("writeset of trx {} not replicated: {e}", ws.source.trx_id);
                Err(Status::ConnFail)
            }
            Ok(seqno) => {
                log::warn!("writeset of trx {} ordered at {seqno} but the connection closed", ws.source.trx_id);
                Err(Status::ConnFail)
            }
        }
    }

    /// Adds keys to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_key(&self, handle: WsHandle, keys: Vec<Key>) -> u64 {
        let mut shared = self.lock();
        let id = shared.open_trx(handle);
        shared.trxs.get_mut(&id).expect("just opened").keys.extend(keys);
        id
    }

    /// Appends data to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_data(&self, handle: WsHandle, buffers: &[&[u8]]) -> u64 {
        let mut shared = self.lock();
        let id = shared.open_trx(handle);
        let trx = shared.trxs.get_mut(&id).expect("just opened");
        for buffer in buffers {
            trx.data.extend_from_slice(buffer);
        }
        id
    }

    /// Orders and certifies the transaction's writeset.
    pub fn certify(&self, conn_id: u64, handle: WsHandle, ws_flags: u32) -> (Status, TrxMeta) {
        let shared = self.lock();
        let unordered = TrxMeta::unordered(SourceTrx { node: shared.member(), trx_id: handle.trx_id, conn_id });
        let Some(id) = shared.handle_id(handle) else {
            // Nothing was appended: nothing to replicate.
            return (Status::Ok, unordered);
        };
        // Writes wait while the node is paused (FTWRL, donor); a BF abort ends the wait.
        let (mut shared, _) = self.wait_until(shared, None, |s| {
            s.paused_at.is_none() || matches!(s.trxs.get(&id).map(|t| &t.state), Some(TrxState::Aborted))
        });
        let max_size = shared.options.size("repl.max_ws_size");
        let can_replicate = shared.can_replicate();
        let trx = shared.trxs.get_mut(&id).expect("looked up under the same lock");
        trx.conn_id = conn_id;
        trx.flags = ws_flags;
        if matches!(trx.state, TrxState::Aborted) {
            return (Status::TrxFail, unordered);
        }
        if !can_replicate {
            return (Status::ConnFail, unordered);
        }
        let size = trx.data.len() + trx.keys.iter().map(Key::byte_len).sum::<usize>();
        if size as u64 > max_size {
            log::warn!("writeset of trx {} is {size} bytes, over repl.max_ws_size {max_size}", trx.trx_id);
            return (Status::SizeExceeded, unordered);
        }
        let keys = std::mem::take(&mut trx.keys);
        let data = trx.data.clone();
        let trx_id = trx.trx_id;
        trx.state = TrxState::Ordering;
        let Some(node) = shared.group_node() else { return (Status::ConnFail, unordered) };
        let source = SourceTrx { node: shared.member(), trx_id, conn_id };
        let ws = shared.prepare_writeset(source, ws_flags, keys, data);
        if let Some(trx) = shared.trxs.get_mut(&id) {
            trx.local_id = ws.local_id;
        }
        drop(shared);
        let result = self.replicate(&node, &ws);
        drop(ws);
        let mut shared = self.lock();
        let log_conflicts = shared.options.flag("cert.log_conflicts");
        let Some(trx) = shared.trxs.get_mut(&id) else {
            return (Status::TrxFail, unordered);
        };
        let (seqno, verdict) = match result {
            Ok(r) => r,
            Err(status) => {
                trx.state = TrxState::Aborted;
                return (status, unordered);
            }
        };
        trx.seqno = seqno;
        let status = match verdict {
            Verdict::Pass { depends_on } => {
                trx.depends_on = depends_on;
                if trx.must_abort {
                    trx.state = TrxState::MustReplay;
                    Status::BfAbort
                } else {
                    trx.state = TrxState::Certified;
                    Status::Ok
                }
            }
            Verdict::Fail => {
                trx.state = TrxState::CertFailed;
                if log_conflicts {
                    log::info!("trx {} failed certification at seqno {seqno}", trx.trx_id);
                }
                Status::TrxFail
            }
        };
        let meta = {
            let trx = &shared.trxs[&id];
            shared.meta_of(trx)
        };
        if status == Status::TrxFail {
            shared.counters.local_cert_failures += 1;
        }
        (status, meta)
    }

    /// Waits for every earlier seqno to leave commit order, then enters it.
    pub fn commit_order_enter(&self, handle: WsHandle, meta: &TrxMeta) -> Status {
        let seqno = meta.gtid.seqno;
        if seqno < 0 {
            return Status::TrxMissing;
        }
        let shared = self.lock();
        let id = shared.handle_id(handle);
        let (mut shared, _) = self.wait_until(shared, None, |s| {
            let must_replay =
                id.and_then(|id| s.trxs.get(&id)).is_some_and(|t| matches!(t.state, TrxState::MustReplay));
            let held = s.paused_at.is_some_and(|at| seqno > at);
            must_replay || (s.commit_order.last_contiguous() >= seqno - 1 && !held)
        });
        if let Some(trx) = id.and_then(|id| shared.trxs.get_mut(&id)) {
            match trx.state {
                TrxState::MustReplay => return Status::BfAbort,
                TrxState::Certified => trx.state = TrxState::Committing,
                _ => {}
            }
        }
        Status::Ok
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
        let mut shared = self.lock();
        shared.commit_order.finish(seqno);
        let remote = handle.opaque & super::applier::REMOTE_HANDLE != 0;
        if remote && !error.is_empty() {
            if let Some(c) = shared.connection.as_mut() {
                c.apply_failed = Some(seqno);
            }
        }
        if let Some(trx) = shared.trx_mut(handle) {
            trx.left_commit_order = true;
        }
        drop(shared);
        self.notify();
        Status::Ok
    }

    /// The end of a transaction's life here. Also called, cheaply, for handles never seen.
    pub fn release(&self, handle: WsHandle) -> Status {
        let mut shared = self.lock();
        let Some(id) = shared.handle_id(handle) else { return Status::Ok };
        let trx = shared.trxs.remove(&id).expect("handle_id only returns live handles");
        shared.handle_of_trx.remove(&trx.trx_id);
        if trx.seqno >= 0 {
            if !trx.left_commit_order {
                // Keep the order moving: a seqno nobody finishes would stall the node.
                log::warn!("trx {} released at seqno {} without leaving commit order", trx.trx_id, trx.seqno);
                shared.commit_order.finish(trx.seqno);
            }
            shared.committed.finish(trx.seqno);
            if matches!(trx.state, TrxState::Committing | TrxState::Replaying) {
                shared.counters.local_commits += 1;
            }
            drop(shared);
            self.notify();
        }
        Status::Ok
    }

    /// Brute-force abort of local transaction `victim` on behalf of seqno `bf_seqno`.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> (Status, Seqno) {
        let mut shared = self.lock();
        let Some(id) = shared.handle_of_trx.get(&victim).copied() else {
            return (Status::Ok, SEQNO_UNDEFINED);
        };
        let trx = shared.trxs.get_mut(&id).expect("index and table agree");
        let seqno = trx.seqno;
        let status = match trx.state {
            TrxState::Executing => {
                trx.state = TrxState::Aborted;
                Status::Ok
            }
            // Being ordered: unless it already arrived ahead of the aborter, it must not
            // commit before it; it replays if it passes certification.
            TrxState::Ordering => {
                let local_id = trx.local_id;
                match shared.ordering.arrived.get(&local_id) {
                    Some((seqno, _)) if *seqno < bf_seqno => return (Status::NotAllowed, *seqno),
                    _ => {
                        let trx = shared.trxs.get_mut(&id).expect("index and table agree");
                        trx.must_abort = true;
                        Status::Ok
                    }
                }
            }
            // Ordered after the aborter and not yet committing: roll back, then replay.
            TrxState::Certified if seqno > bf_seqno => {
                trx.state = TrxState::MustReplay;
                Status::Ok
            }
            // Ordered before the aborter (it commits first), already committing, or
            // already aborted: nothing to do.
            _ => Status::NotAllowed,
        };
        drop(shared);
        if status == Status::Ok {
            self.notify();
        }
        (status, seqno)
    }

    /// Re-applies a transaction BF-aborted after it was ordered, on its own client thread.
    pub fn replay_trx(&self, handle: WsHandle, ctx: RecvCtx) -> Status {
        let shared = self.lock();
        let Some(id) = shared.handle_id(handle) else {
            log::error!("replay of unknown trx {}", handle.trx_id);
            return Status::TrxFail;
        };
        let depends_on = shared.trxs[&id].depends_on;
        let (mut shared, _) = self.wait_until(shared, None, |s| s.committed.last_contiguous() >= depends_on);
        let trx = shared.trxs.get_mut(&id).expect("a replaying trx is released only by its own thread");
        if trx.seqno < 0 || matches!(trx.state, TrxState::CertFailed) {
            return Status::TrxFail;
        }
        trx.state = TrxState::Replaying;
        let data = std::mem::take(&mut trx.data);
        let ws_flags = trx.flags;
        let meta = {
            let trx = &shared.trxs[&id];
            shared.meta_of(trx)
        };
        drop(shared);
        let request =
            ApplyRequest { handle: WsHandle { trx_id: handle.trx_id, opaque: id }, flags: ws_flags, data: &data, meta };
        match self.app.apply(ctx, &request) {
            Ok(_) => {
                self.lock().counters.local_replays += 1;
                Status::Ok
            }
            Err(e) => {
                log::error!("replay of trx {} at seqno {} failed in {}", handle.trx_id, meta.gtid.seqno, e.0);
                Status::TrxFail
            }
        }
    }
}
