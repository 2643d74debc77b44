//! Local transactions: collecting the writeset, ordering and certifying it, commit order,
//! brute-force abort and replay; and isolated statements (TOI), which are ordered the same way.
use super::{Core, InFlight, LocalTrx, TrxState};
use crate::application::{WsHandle, TRX_ID_UNDEFINED};
use crate::certification::{Chains, ChainsBuilder, Key, KeySet, KeyType, Verdict};
use crate::types::{flags, Gtid, Seqno, SourceTrx, Status, TrxMeta, Uuid, SEQNO_UNDEFINED};
use crate::writeset::{Outgoing, Writeset, WritesetBuilder};
use std::time::Duration;

/// An isolated statement as the server gives it: its keys' parts, and its data.
pub type Statement = (Vec<Vec<Vec<u8>>>, Vec<u8>);

/// Handles of remote writesets carry this bit so they never match a local transaction.
pub const REMOTE_HANDLE: u64 = 1 << 63;

/// What `certify_start` decided.
#[derive(Debug)]
pub enum CertifyStart {
    /// Nothing to order: the call's result.
    Done(Status, TrxMeta),
    /// Wait `pace` (this member's turn under a flow-control pace), encode and submit this
    /// writeset (outside the lock), then wait for its outcome.
    Submit { writeset: Outgoing, local_id: u64, pace: Duration },
}

/// What a replay applies, on the transaction's own client thread.
#[derive(Debug)]
pub struct ReplayPlan {
    pub data: Vec<u8>,
    pub flags: u32,
    pub meta: TrxMeta,
    pub token: u64,
}

impl<W: Clone + PartialEq> Core<W> {
    fn handle_id(&self, handle: WsHandle) -> Option<u64> {
        if handle.opaque & REMOTE_HANDLE != 0 {
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

    /// The transaction for `handle`, created on first use; returns its token.
    fn open_trx(&mut self, handle: WsHandle) -> u64 {
        if let Some(id) = self.handle_id(handle) {
            return id;
        }
        let id = self.next_handle;
        self.next_handle += 1;
        self.trxs.insert(id, LocalTrx::new(handle.trx_id, 0));
        if handle.trx_id != TRX_ID_UNDEFINED {
            self.handle_of_trx.insert(handle.trx_id, id);
        }
        id
    }

    fn meta_of(&self, trx: &LocalTrx) -> TrxMeta {
        TrxMeta {
            gtid: if trx.seqno >= 0 { Gtid::new(self.group(), trx.seqno) } else { Gtid::UNDEFINED },
            source: SourceTrx { node: self.member(), trx_id: trx.trx_id, conn_id: trx.conn_id },
            depends_on: trx.depends_on,
        }
    }

    /// Adds the chains of keys the server appended (`ChainsBuilder::of`, made before the
    /// lock) to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_key(&mut self, handle: WsHandle, chains: ChainsBuilder) -> u64 {
        let id = self.open_trx(handle);
        self.trxs.get_mut(&id).expect("just opened").collected.append_keys(chains);
        id
    }

    /// Appends data to the transaction's writeset; returns its token for the handle's `opaque`.
    pub fn append_data(&mut self, handle: WsHandle, buffers: &[&[u8]]) -> u64 {
        let id = self.open_trx(handle);
        let trx = self.trxs.get_mut(&id).expect("just opened");
        for buffer in buffers {
            trx.collected.append_data(buffer);
        }
        id
    }

    /// Registers a writeset about to be sent, so the delivery path hands its place and
    /// verdict back to the sender instead of applying it.
    fn prepare_writeset(
        &mut self,
        source: SourceTrx,
        ws_flags: u32,
        body: WritesetBuilder,
        trx: Option<u64>,
    ) -> Outgoing {
        let local_id = self.next_local_id;
        self.next_local_id += 1;
        let last_seen = self.committed.last_contiguous();
        self.ordering.in_flight.insert(local_id, InFlight { last_seen, trx, outcome: None, waiter: None });
        let queued = self.send_queue_len();
        self.counters.send_queue.sample(queued);
        let (keys_bytes, data_bytes) = (body.key_bytes(), body.data_len());
        let c = &mut self.counters;
        c.replicated += 1;
        c.repl_keys += body.key_count() as i64;
        c.repl_keys_bytes += keys_bytes as i64;
        c.repl_data_bytes += data_bytes as i64;
        c.replicated_bytes += (keys_bytes + data_bytes) as i64;
        Outgoing { source, local_id, last_seen, flags: ws_flags, body }
    }

    /// The first half of `certify`, at `now` (any monotonic clock): checks, then the writeset
    /// to order. `None` while the node is paused (FTWRL, donor), after registering `waiter`;
    /// a BF abort ends that wait.
    pub fn certify_start(
        &mut self,
        conn_id: u64,
        handle: WsHandle,
        ws_flags: u32,
        waiter: &W,
        now: Duration,
    ) -> Option<CertifyStart> {
        let unordered = TrxMeta::unordered(SourceTrx { node: self.member(), trx_id: handle.trx_id, conn_id });
        let Some(id) = self.handle_id(handle) else {
            // Nothing was appended: nothing to replicate.
            return Some(CertifyStart::Done(Status::Ok, unordered));
        };
        let aborted = self.trxs[&id].state == TrxState::Aborted;
        if self.writers_held() && !aborted && !self.failed {
            self.unpause_waiters.push(waiter.clone());
            self.trx_waiters.insert(id, waiter.clone());
            return None;
        }
        let max_size = self.settings.max_writeset_bytes;
        let can_replicate = self.can_replicate();
        let trx = self.trxs.get_mut(&id).expect("looked up above");
        trx.conn_id = conn_id;
        trx.flags = ws_flags;
        if aborted {
            return Some(CertifyStart::Done(Status::TrxFail, unordered));
        }
        if !can_replicate {
            return Some(CertifyStart::Done(Status::ConnFail, unordered));
        }
        let size = trx.collected.data_len() + trx.collected.key_bytes();
        if size as u64 > max_size {
            log::warn!(
                "writeset of trx {} is {size} bytes, over the limit of {max_size} (repl.max_ws_size, and what \
                 the group carries): the transaction is rolled back",
                trx.trx_id
            );
            return Some(CertifyStart::Done(Status::SizeExceeded, unordered));
        }
        let body = std::mem::take(&mut trx.collected);
        let trx_id = trx.trx_id;
        trx.state = TrxState::Ordering;
        let source = SourceTrx { node: self.member(), trx_id, conn_id };
        let writeset = self.prepare_writeset(source, ws_flags, body, Some(id));
        let local_id = writeset.local_id;
        self.trxs.get_mut(&id).expect("looked up above").local_id = local_id;
        // A streaming transaction's fragments take no turns under a pace (a stop holds them):
        // one at a time, each already waits for its own certification, and a fragment kept
        // waiting keeps its rows locked; paced like small writesets, a 1 MB-fragment UPDATE
        // took 1.3-1.4 times as long (docs/design/flow-control.md).
        let whole = ws_flags & flags::TRX_START != 0 && ws_flags & flags::TRX_END != 0;
        let members = self.connection.as_ref().map_or(1, |c| c.view.members.len());
        let pace = if whole { self.flow.writer_turn(members, now) } else { Duration::ZERO };
        Some(CertifyStart::Submit { writeset, local_id, pace })
    }

    /// The second half of `certify`: the outcome once the writeset is ordered and
    /// certified; `None` after registering `waiter` for it.
    pub fn certify_outcome(&mut self, handle: WsHandle, local_id: u64, waiter: &W) -> Option<(Status, TrxMeta)> {
        let flight = self.ordering.in_flight.get_mut(&local_id)?;
        let Some(outcome) = flight.outcome else {
            flight.waiter = Some(waiter.clone());
            return None;
        };
        self.ordering.in_flight.remove(&local_id);
        let conn_id = self.handle_id(handle).and_then(|id| self.trxs.get(&id)).map_or(0, |t| t.conn_id);
        let unordered = TrxMeta::unordered(SourceTrx { node: self.member(), trx_id: handle.trx_id, conn_id });
        let log_conflicts = self.settings.log_conflicts;
        let Some(id) = self.handle_id(handle) else { return Some((Status::TrxFail, unordered)) };
        let trx = self.trxs.get_mut(&id).expect("looked up above");
        let (seqno, verdict) = match outcome {
            Ok(ordered) => ordered,
            Err(status) => {
                // If it is ordered after all, it is applied like a remote writeset: the
                // client saw an error, but every member ends up with the same data.
                trx.state = TrxState::Aborted;
                return Some((status, unordered));
            }
        };
        trx.seqno = seqno;
        let status = match verdict {
            Verdict::Pass { depends_on } => {
                trx.depends_on = depends_on;
                if trx.must_abort && trx.is_fragment() {
                    // No replay for a fragment: the server rolls the streaming transaction
                    // back (its rollback fragment undoes this one everywhere), and this
                    // seqno passes when the handle is released.
                    trx.state = TrxState::Aborted;
                    Status::TrxFail
                } else if trx.must_abort {
                    trx.state = TrxState::MustReplay;
                    Status::BfAbort
                } else {
                    trx.state = TrxState::Certified;
                    // A local writeset applies (its client commits) from here on.
                    self.counters.apply_monitor.enter(seqno, self.committed.last_contiguous());
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
        if status == Status::TrxFail {
            self.counters.local_cert_failures += 1;
        }
        Some((status, self.meta_of(&self.trxs[&id])))
    }

    /// Enters commit order once every earlier seqno has left it; `None` after registering
    /// `waiter`. A BF abort of this transaction ends the wait (`BfAbort`: roll back, replay).
    pub fn commit_order_enter(&mut self, handle: WsHandle, seqno: Seqno, waiter: &W) -> Option<Status> {
        let id = self.handle_id(handle);
        if let Some(trx) = id.and_then(|id| self.trxs.get(&id)) {
            if matches!(trx.state, TrxState::MustReplay | TrxState::Aborted) {
                return Some(Status::BfAbort);
            }
        }
        if self.failed {
            return Some(Status::NodeFail);
        }
        let held = self.paused_at.is_some_and(|at| seqno > at);
        if self.commit_order.reached(seqno - 1) && !held {
            if let Some(trx) = id.and_then(|id| self.trxs.get_mut(&id)) {
                if trx.state == TrxState::Certified {
                    trx.state = TrxState::Committing;
                }
            }
            self.counters.commit_monitor.enter(seqno, self.commit_order.last_contiguous());
            return Some(Status::Ok);
        }
        if held && self.commit_order.reached(seqno - 1) {
            self.unpause_waiters.push(waiter.clone());
        } else {
            self.commit_order.wait_for(seqno - 1, waiter.clone());
            self.counters.commit_monitor.wait();
        }
        if let Some(id) = id {
            self.trx_waiters.insert(id, waiter.clone());
        }
        None
    }

    /// Leaves commit order; `failed`: the server could not commit it (an applier's error
    /// makes this node's data suspect).
    /// `failed`: committing failed here with this outcome (`vote::outcome_of` the error): the
    /// members vote on it, and the caller waits for the result (`vote_result`).
    pub fn commit_order_leave(&mut self, handle: WsHandle, seqno: Seqno, failed: Option<u64>) -> Status {
        self.commit_order.finish(seqno, &mut self.effects.wake);
        if let Some(outcome) = failed {
            self.vote_failed(seqno, outcome);
        }
        if let Some(trx) = self.handle_id(handle).and_then(|id| self.trxs.get_mut(&id)) {
            trx.left_commit_order = true;
        }
        Status::Ok
    }

    /// The end of a transaction's life here, or of one fragment's: a streaming transaction
    /// whose fragment passed stays, executing, for its next fragment (`BfAbort` if it was
    /// aborted meanwhile). Also called, cheaply, for handles never seen.
    pub fn release(&mut self, handle: WsHandle) -> Status {
        let Some(id) = self.handle_id(handle) else { return Status::Ok };
        self.trx_waiters.remove(&id);
        let trx = self.trxs.get_mut(&id).expect("handle_id only returns live handles");
        let fragment_passed = trx.is_fragment() && matches!(trx.state, TrxState::Certified | TrxState::Committing);
        if fragment_passed {
            let fragment = std::mem::replace(trx, LocalTrx::new(trx.trx_id, trx.conn_id));
            if fragment.must_abort {
                trx.state = TrxState::Aborted;
            }
            self.seqno_released(&fragment);
            return if fragment.must_abort { Status::BfAbort } else { Status::Ok };
        }
        let trx = self.trxs.remove(&id).expect("looked up above");
        self.handle_of_trx.remove(&trx.trx_id);
        self.seqno_released(&trx);
        if matches!(trx.state, TrxState::Committing | TrxState::Replaying) {
            self.counters.local_commits += 1;
        }
        Status::Ok
    }

    /// The seqno of a local writeset (if it has one) is done with here.
    fn seqno_released(&mut self, trx: &LocalTrx) {
        if trx.seqno < 0 {
            return;
        }
        if !trx.left_commit_order {
            // Keep the order moving: a seqno nobody finishes would stall the node. Expected
            // for a writeset that failed or was aborted (the server does not commit it).
            if matches!(trx.state, TrxState::Certified | TrxState::Committing) {
                log::warn!("trx {} released at seqno {} without leaving commit order", trx.trx_id, trx.seqno);
            }
            self.commit_order.finish(trx.seqno, &mut self.effects.wake);
        }
        self.committed.finish(trx.seqno, &mut self.effects.wake);
    }

    /// A rollback fragment for streaming transaction `trx_id`, to submit without waiting: it
    /// is not certified, and every member applies it (this one too, as the server expects:
    /// its own streaming applier of the transaction undoes the stored fragments). Not held
    /// by a pause (the pause may wait for the locks it releases). `ConnFail` if this node
    /// cannot replicate now: the server keeps it and asks again once synced.
    pub fn rollback_fragment(&mut self, trx_id: u64, data: Vec<u8>) -> Result<(Writeset, u64), Status> {
        if !self.can_replicate() {
            return Err(Status::ConnFail);
        }
        let conn_id = self.handle_of_trx.get(&trx_id).map_or(0, |id| self.trxs[id].conn_id);
        let local_id = self.next_local_id;
        self.next_local_id += 1;
        let writeset = Writeset {
            source: SourceTrx { node: self.member(), trx_id, conn_id },
            local_id,
            last_seen: self.committed.last_contiguous(),
            flags: flags::ROLLBACK | flags::PA_UNSAFE,
            chains: Chains::default(),
            key_bytes: 0,
            data,
        };
        self.ordering.rollbacks.insert(local_id, (writeset.clone(), false));
        Ok((writeset, local_id))
    }

    /// Rollback fragments the group refused go again once this node is primary.
    pub(super) fn resend_rollbacks(&mut self) {
        for (local_id, (writeset, refused)) in &mut self.ordering.rollbacks {
            if std::mem::take(refused) {
                self.effects.submit.push((writeset.clone(), *local_id));
            }
        }
    }

    /// Brute-force abort of local transaction `victim` on behalf of seqno `bf_seqno`.
    pub fn abort_certification(&mut self, bf_seqno: Seqno, victim: u64) -> (Status, Seqno) {
        let Some(id) = self.handle_of_trx.get(&victim).copied() else {
            return (Status::Ok, SEQNO_UNDEFINED);
        };
        let trx = self.trxs.get_mut(&id).expect("index and table agree");
        let seqno = trx.seqno;
        // A streaming transaction goes on holding its locks after a fragment commits: that
        // fragment going first does not free the aborter's rows, so it is aborted anyway
        // (docs/design/streaming-replication.md).
        let fragment = trx.is_fragment();
        let status = match trx.state {
            TrxState::Executing => {
                trx.state = TrxState::Aborted;
                Status::Ok
            }
            // Being ordered: unless it already arrived ahead of the aborter, it must not
            // commit before it; it replays if it passes certification.
            TrxState::Ordering => {
                let arrived = self.ordering.in_flight.get(&trx.local_id).and_then(|f| f.outcome);
                match arrived {
                    Some(Ok((seqno, _))) if seqno < bf_seqno && !fragment => return (Status::NotAllowed, seqno),
                    _ => {
                        trx.must_abort = true;
                        // It waits for its own delivery to learn its fate: a full queue
                        // must not hold it back (`may_take_deliveries`).
                        self.release_held_delivery();
                        Status::Ok
                    }
                }
            }
            // A fragment not yet committing: it leaves commit order without committing.
            TrxState::Certified if fragment => {
                trx.state = TrxState::Aborted;
                Status::Ok
            }
            // Ordered after the aborter and not yet committing: roll back, then replay.
            TrxState::Certified if seqno > bf_seqno => {
                trx.state = TrxState::MustReplay;
                Status::Ok
            }
            // A fragment committing: it ends, then the transaction is aborted.
            TrxState::Committing if fragment && !trx.must_abort => {
                trx.must_abort = true;
                Status::Ok
            }
            // Ordered before the aborter (it commits first), already committing, or
            // already aborted: nothing to do.
            _ => Status::NotAllowed,
        };
        if status == Status::Ok {
            if let Some(w) = self.trx_waiters.remove(&id) {
                self.effects.wake.push(w);
            }
        }
        (status, seqno)
    }

    /// A transaction BF-aborted after it was ordered is re-applied on its own client thread
    /// once its dependencies have committed; `None` after registering `waiter` for them.
    pub fn replay_start(&mut self, handle: WsHandle, waiter: &W) -> Option<Result<ReplayPlan, Status>> {
        let Some(id) = self.handle_id(handle) else {
            log::error!("replay of unknown trx {}", handle.trx_id);
            return Some(Err(Status::TrxFail));
        };
        let depends_on = self.trxs[&id].depends_on;
        if !self.committed.reached(depends_on) && !self.failed {
            self.committed.wait_for(depends_on, waiter.clone());
            return None;
        }
        let trx = self.trxs.get_mut(&id).expect("a replaying trx is released only by its own thread");
        if trx.seqno < 0 || trx.state == TrxState::CertFailed || self.failed {
            return Some(Err(Status::TrxFail));
        }
        trx.state = TrxState::Replaying;
        let data = std::mem::take(&mut trx.data);
        let flags = trx.flags;
        let meta = self.meta_of(&self.trxs[&id]);
        Some(Ok(ReplayPlan { data, flags, meta, token: id }))
    }

    pub fn replay_ended(&mut self, applied: bool) {
        if applied {
            self.counters.local_replays += 1;
        }
    }

    // ---- isolated statements (TOI) -------------------------------------------------------

    /// Orders a DDL statement: the writeset to submit, or why not. `None` while the node is
    /// paused, after registering `waiter`.
    /// The statement's keys and data are taken from `statement` only when it is ordered.
    pub fn isolation_start(
        &mut self,
        conn_id: u64,
        statement: &mut Option<Statement>,
        ws_flags: u32,
        waiter: &W,
    ) -> Option<Result<(Outgoing, u64), (Status, TrxMeta)>> {
        let source = SourceTrx { node: self.member(), trx_id: conn_id, conn_id };
        let unordered = TrxMeta::unordered(source);
        if self.writers_held() && self.can_replicate() {
            self.unpause_waiters.push(waiter.clone());
            return None;
        }
        if !self.can_replicate() {
            return Some(Err((Status::ConnFail, unordered)));
        }
        if self.isolation_by_conn.contains_key(&conn_id) {
            log::error!("connection {conn_id} started a second isolated statement before ending the first");
            return Some(Err((Status::TrxFail, unordered)));
        }
        let (key_parts, data) = statement.take().expect("taken only once, when ordered");
        // The v26 call carries no key types: every isolation key is exclusive.
        let keys: KeySet = key_parts.into_iter().map(|parts| Key::new(parts, KeyType::Exclusive)).collect();
        let mut body = WritesetBuilder::default();
        body.append_keys(ChainsBuilder::of(keys.as_slice()));
        body.append_data(&data);
        let writeset = self.prepare_writeset(source, ws_flags | flags::ISOLATION, body, None);
        let local_id = writeset.local_id;
        Some(Ok((writeset, local_id)))
    }

    /// The ordered statement may run once everything before it has committed; it then holds
    /// the commit order until `isolation_end`. `None` after registering `waiter`.
    pub fn isolation_outcome(&mut self, conn_id: u64, local_id: u64, waiter: &W) -> Option<(Status, TrxMeta)> {
        let source = SourceTrx { node: self.member(), trx_id: conn_id, conn_id };
        let unordered = TrxMeta::unordered(source);
        let flight = self.ordering.in_flight.get_mut(&local_id)?;
        let seqno = match flight.outcome {
            None => {
                flight.waiter = Some(waiter.clone());
                return None;
            }
            Some(Err(status)) => {
                self.ordering.in_flight.remove(&local_id);
                return Some((status, unordered));
            }
            Some(Ok((seqno, verdict))) => {
                debug_assert!(matches!(verdict, Verdict::Pass { .. }), "isolation writesets always pass");
                seqno
            }
        };
        if self.isolation_by_conn.insert(conn_id, seqno).is_none() {
            // A crash while the statement runs must force a full state transfer.
            self.save_state(Gtid::new(Uuid::NIL, SEQNO_UNDEFINED));
        }
        if !self.committed.reached(seqno - 1) && !self.failed {
            self.committed.wait_for(seqno - 1, waiter.clone());
            return None;
        }
        self.ordering.in_flight.remove(&local_id);
        if self.failed {
            return Some((Status::NodeFail, unordered));
        }
        let meta = TrxMeta { gtid: Gtid::new(self.group(), seqno), depends_on: seqno - 1, ..unordered };
        Some((Status::Ok, meta))
    }

    /// `failed`: the statement failed here with this outcome (`vote::outcome_of` its error):
    /// the members vote on its seqno, returned as `Err` for the caller to wait on
    /// (`vote_result`).
    pub fn isolation_end(&mut self, conn_id: u64, failed: Option<u64>) -> Result<Status, Seqno> {
        let Some(seqno) = self.isolation_by_conn.remove(&conn_id) else {
            return Ok(Status::ConnFail);
        };
        self.finish_both(seqno);
        if self.isolation_by_conn.is_empty() {
            let running = Gtid::new(self.group(), SEQNO_UNDEFINED);
            self.save_state(running);
        }
        match failed {
            Some(outcome) => {
                self.vote_failed(seqno, outcome);
                Err(seqno)
            }
            None => Ok(Status::Ok),
        }
    }

    /// A writeset or barrier could not even be handed to the group (no connection any more).
    pub fn submit_impossible(&mut self, local_id: u64) {
        if let Some(flight) = self.ordering.in_flight.get_mut(&local_id).filter(|f| f.outcome.is_none()) {
            flight.outcome = Some(Err(Status::ConnFail));
            self.effects.wake.extend(flight.waiter.take());
        }
        if let Some(barrier) = self.ordering.barriers.get_mut(&local_id).filter(|b| b.at.is_none()) {
            barrier.failed = true;
            self.effects.wake.extend(barrier.waiter.take());
        }
    }

    /// Every writeset of ours still waiting for its place gets `status` (the connection ended).
    pub(super) fn fail_in_flight(&mut self, status: Status) {
        for flight in self.ordering.in_flight.values_mut().filter(|f| f.outcome.is_none()) {
            flight.outcome = Some(Err(status));
            self.effects.wake.extend(flight.waiter.take());
        }
        for barrier in self.ordering.barriers.values_mut().filter(|b| b.at.is_none()) {
            barrier.failed = true;
            self.effects.wake.extend(barrier.waiter.take());
        }
    }
}
