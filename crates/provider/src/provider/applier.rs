//! The applier threads MariaDB runs in `recv`: they take ordered events and hand them to
//! the application, applying in parallel where certification allows and committing in
//! seqno order. A joiner's first view also runs its state transfer here.
use super::catch_up::{CatchUp, Donation};
use super::{Event, MemberState, Provider, Shared, Transfer};
use crate::application::{ApplyRequest, RecvCtx, View, WsHandle};
use crate::types::{flags, Gtid, Seqno, Status, TrxMeta};
use crate::writeset::{Control, Writeset};
use std::time::Duration;

/// Handles of remote writesets carry this bit so they never match a local transaction.
pub(super) const REMOTE_HANDLE: u64 = 1 << 63;
/// A joiner whose request found no donor asks again after this long.
const DONOR_RETRY: Duration = Duration::from_secs(1);

impl Provider {
    /// The applier loop of one MariaDB applier thread.
    pub fn recv(&self, ctx: RecvCtx) -> Status {
        let mut shared = self.lock();
        let Some(generation) = shared.connection.as_ref().map(|c| c.generation) else {
            log::error!("recv called while not connected");
            return Status::Fatal;
        };
        shared.receivers += 1;
        drop(shared);
        let result = self.receive_loop(ctx, generation);
        self.lock().receivers -= 1;
        result
    }

    fn receive_loop(&self, ctx: RecvCtx, generation: u64) -> Status {
        let mut shared = self.lock();
        loop {
            if !shared.is_current(generation) {
                return Status::Ok;
            }
            if shared.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Failed) {
                return Status::Fatal;
            }
            let Some(event) = shared.next_event() else {
                shared = self.wait(shared);
                continue;
            };
            drop(shared);
            self.notify();
            let outcome = match event {
                Event::View { view, first_in_connection } => {
                    self.deliver_view(ctx, generation, &view, first_in_connection)
                }
                Event::NonPrimary { view } => {
                    self.app.view(ctx, &view).map(|_| false).map_err(|e| self.callback_failed(e.0))
                }
                Event::Apply { seqno, writeset, depends_on, failed } => {
                    self.apply_remote(ctx, generation, seqno, &writeset, depends_on, failed)
                }
                Event::Donate(donation) => self.donate(ctx, generation, &donation).map(|_| false),
                Event::Skipped { seqno } => self.skip_transferred(generation, seqno),
                Event::Synced { after } => self.become_synced(generation, after).map(|_| false),
                Event::Final { view } => self.deliver_final_view(ctx, &view).map(|_| false),
            };
            match outcome {
                Err(status) => return status,
                Ok(true) => {
                    let shared = self.lock();
                    if shared.receivers > 1 {
                        return Status::Ok;
                    }
                    log::info!("refusing exit for the last applier thread");
                }
                Ok(false) => {}
            }
            shared = self.lock();
        }
    }

    /// Waits until everything up to `after` is committed here and a pause (FTWRL, donor)
    /// does not hold `seqno` back; false if the connection ended meanwhile.
    pub(super) fn wait_turn(&self, generation: u64, after: Seqno, seqno: Seqno) -> bool {
        let shared = self.lock();
        let (shared, _) = self.wait_until(shared, None, |s| {
            !s.is_current(generation)
                || s.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Failed)
                || (s.has_state()
                    && s.connection.as_ref().is_some_and(|c| c.app_ready && c.catch_up.settled())
                    && s.committed.last_contiguous() >= after
                    && s.paused_at.is_none_or(|at| seqno <= at))
        });
        shared.is_current(generation) && shared.connection.as_ref().is_some_and(|c| c.catch_up != CatchUp::Failed)
    }

    fn deliver_view(&self, ctx: RecvCtx, generation: u64, view: &View, first: bool) -> Result<bool, Status> {
        let app_ready = self.lock().connection.as_ref().is_some_and(|c| c.app_ready);
        if !app_ready {
            if first {
                self.app.connected(view).map_err(|e| self.callback_failed(e.0))?;
            }
            self.receive_state(generation, view)?;
            // Back to its place in the order, after the writesets that precede it (those
            // before the received state, if any, are finished already).
            let mut shared = self.lock();
            let seqno = view.state_id.seqno;
            let at = shared.events.iter().position(|e| e.seqno().is_some_and(|s| s > seqno));
            let event = Event::View { view: view.clone(), first_in_connection: false };
            match at {
                Some(i) => shared.events.insert(i, event),
                None => shared.events.push_back(event),
            }
            drop(shared);
            self.notify();
            return Ok(false);
        }
        let seqno = view.state_id.seqno;
        // A configuration change is processed alone: everything before it committed first.
        if !self.wait_turn(generation, seqno - 1, seqno) || self.lock().committed.is_finished(seqno) {
            return Ok(false);
        }
        if first {
            self.app.connected(view).map_err(|e| self.callback_failed(e.0))?;
        }
        self.app.view(ctx, view).map_err(|e| self.callback_failed(e.0))?;
        let node = {
            let mut shared = self.lock();
            shared.commit_order.finish(seqno);
            shared.committed.finish(seqno);
            if shared.member_state == MemberState::Initialized || shared.member_state == MemberState::Joining {
                shared.member_state = MemberState::Joined;
            }
            shared.group_node()
        };
        self.notify();
        if let Some(node) = node {
            // Synced once this announcement comes back through the order (and all before it applied).
            drop(node.send_message(Control::Synced.encode()));
        }
        Ok(false)
    }

    /// Joiner: asks the group for a donor and blocks this applier until the application
    /// reports the transfer (`sst_received`), as MariaDB expects.
    fn receive_state(&self, generation: u64, view: &View) -> Result<(), Status> {
        let request = self.app.sst_request().map_err(|e| self.callback_failed(e.0))?;
        if request.is_empty() {
            // A running server that reconnects cannot take a snapshot (rsync, mysqldump...):
            // it continues from what it holds, or cannot join at all.
            return self.continue_without_transfer(generation);
        }
        loop {
            let (node, position, has_state, ist_addr, donors, id) = {
                let mut shared = self.lock();
                shared.member_state = MemberState::Joining;
                let has_state = shared.has_state();
                // Without the order from our position, our data may still be in this history:
                // a donor that holds the gap sends it incrementally.
                let in_history = shared.position.uuid == shared.group() && shared.position.seqno >= 0;
                let position = match (has_state, in_history) {
                    (true, _) => shared.last_committed(),
                    (false, true) => shared.position,
                    (false, false) => Gtid::UNDEFINED,
                };
                let Some(c) = shared.connection.as_mut().filter(|c| c.generation == generation) else {
                    return Ok(());
                };
                c.transfer = Transfer::Requested;
                c.request_id = new_request_id();
                (c.node.clone(), position, has_state, c.ist_addr.clone(), c.donors.clone(), c.request_id)
            };
            let message =
                Control::StateRequest { sst_request: request.clone(), position, donors, has_state, ist_addr, id };
            log::info!("requesting state transfer at view {} (local position {position})", view.state_id);
            let sent = node.send_message(message.encode()).recv_timeout(Duration::from_secs(30));
            if !matches!(sent, Ok(Ok(_))) {
                log::warn!("state transfer request was not ordered ({sent:?}); retrying");
                std::thread::sleep(DONOR_RETRY);
                continue;
            }
            let shared = self.lock();
            let (mut shared, _) = self.wait_until(shared, None, |s| {
                !s.is_current(generation) || s.connection.as_ref().is_some_and(|c| c.transfer != Transfer::Requested)
            });
            let Some(c) = shared.connection.as_mut().filter(|c| c.generation == generation) else {
                return Ok(());
            };
            match c.transfer {
                Transfer::NoDonor => {
                    drop(shared);
                    std::thread::sleep(DONOR_RETRY);
                }
                Transfer::Received { position, rcode } => {
                    if rcode < 0 || position.uuid != c.group || position.seqno < 0 {
                        log::error!(
                            "state transfer failed (rcode {rcode}, position {position}, group {}): \
                             this node cannot continue without the group's state",
                            c.group
                        );
                        return Err(Status::Fatal);
                    }
                    c.transfer = Transfer::None;
                    c.app_ready = true;
                    let node = c.node.clone();
                    if c.has_state {
                        // Only the handshake: the writesets after our position come in order.
                        // The server may report where it stopped: the seqnos we finished since
                        // then were views without us, which it never saw.
                        let ours = shared.last_committed();
                        let stopped_at = shared.position;
                        let known = position.uuid == ours.uuid
                            && (stopped_at.seqno.min(ours.seqno)..=ours.seqno).contains(&position.seqno);
                        if !known {
                            log::error!("state transfer reported {position}, but this node is at {ours}");
                            return Err(Status::Fatal);
                        }
                        drop(shared);
                        self.notify();
                        log::info!("state confirmed at {position}; catching up with the group");
                        return Ok(());
                    }
                    c.has_state = true;
                    shared.install_position(position);
                    shared.member_state = MemberState::Joined;
                    drop(shared);
                    self.notify();
                    log::info!("state transfer complete at {position}; catching up with the group");
                    drop(node.send_message(Control::Synced.encode()));
                    return Ok(());
                }
                Transfer::None | Transfer::Requested => return Ok(()),
            }
        }
    }

    /// The application asked for no state transfer: our own state must continue the group's.
    fn continue_without_transfer(&self, generation: u64) -> Result<(), Status> {
        let mut shared = self.lock();
        let has_state = shared.has_state();
        let position = shared.last_committed();
        let Some(c) = shared.connection.as_mut().filter(|c| c.generation == generation) else {
            return Ok(());
        };
        if !has_state {
            log::error!(
                "this node needs a state transfer (its position {position} does not continue the group's \
                 history) but the server requested none: restart it to receive a full transfer"
            );
            return Err(Status::Fatal);
        }
        c.app_ready = true;
        c.catch_up = CatchUp::Done;
        drop(shared);
        self.notify();
        log::info!("no state transfer requested; continuing from {position} with the group's order");
        Ok(())
    }

    fn apply_remote(
        &self,
        ctx: RecvCtx,
        generation: u64,
        seqno: Seqno,
        ws: &Writeset,
        depends_on: Seqno,
        failed: bool,
    ) -> Result<bool, Status> {
        if !self.wait_turn(generation, depends_on, seqno) {
            return Ok(false);
        }
        if self.lock().committed.is_finished(seqno) {
            // Already part of the state we received.
            return Ok(false);
        }
        let group = self.lock().group();
        let meta = TrxMeta { gtid: Gtid::new(group, seqno), source: ws.source, depends_on };
        let ws_flags = if failed { ws.flags | flags::ROLLBACK } else { ws.flags };
        let request = ApplyRequest {
            handle: WsHandle { trx_id: ws.source.trx_id, opaque: REMOTE_HANDLE | seqno as u64 },
            flags: ws_flags,
            data: &ws.data,
            meta,
        };
        let result = self.app.apply(ctx, &request);
        let mut shared = self.lock();
        // Keep the order moving even if the application did not leave commit order.
        shared.commit_order.finish(seqno);
        shared.committed.finish(seqno);
        let failed_here = shared.connection.as_ref().and_then(|c| c.apply_failed);
        if failed_here.is_some() {
            // Galera's answer without a vote: this node's data may differ, so it leaves
            // and needs a full state transfer next time.
            shared.save_state(Gtid::UNDEFINED);
        }
        drop(shared);
        self.notify();
        if let Some(failed) = failed_here {
            log::error!(
                "writeset at seqno {failed} failed to apply on this node; its data may now differ from the                  group's: leaving the cluster (a restart will do a full state transfer)"
            );
            return Err(Status::Fatal);
        }
        match result {
            Ok(applied) => Ok(applied.exit_loop),
            Err(e) => {
                log::error!(
                    "failed to apply writeset at seqno {seqno} (trx {} from {}): {}; this node's data may \
                     now differ from the group's",
                    ws.source.trx_id,
                    ws.source.node,
                    e.0
                );
                Err(Status::Fatal)
            }
        }
    }

    /// Donates once everything up to the request is committed here: the incremental part
    /// first, then the server's script (which only confirms the joiner's position when the
    /// joiner needs no snapshot).
    fn donate(&self, ctx: RecvCtx, generation: u64, d: &Donation) -> Result<(), Status> {
        if !self.wait_turn(generation, d.after, d.after) {
            return Ok(());
        }
        let bypass = self.send_transfer(d);
        let state_id = {
            let mut shared = self.lock();
            shared.desync_count += 1;
            if bypass {
                d.position
            } else {
                shared.last_committed()
            }
        };
        log::info!("donating state {state_id} to a joiner{}", if bypass { " (position only)" } else { "" });
        if let Err(e) = self.app.sst_donate(ctx, &d.request, state_id, bypass) {
            log::error!("the application refused to donate state: {}", e.0);
            self.sst_sent(state_id, -1);
        }
        Ok(())
    }

    fn become_synced(&self, generation: u64, after: Seqno) -> Result<(), Status> {
        if !self.wait_turn(generation, after, after) {
            return Ok(());
        }
        let mut shared = self.lock();
        let primary = shared.connection.as_ref().is_some_and(|c| c.primary);
        let joined = matches!(shared.member_state, MemberState::Joined | MemberState::Synced);
        if !primary || !joined || shared.desync_count > 0 {
            return Ok(());
        }
        shared.member_state = MemberState::Synced;
        drop(shared);
        self.notify();
        self.app.synced().map_err(|e| self.callback_failed(e.0))?;
        log::info!("synced with group at {}", self.last_committed_id());
        Ok(())
    }

    /// Joiner side of a state transfer: the application has the state at `position`.
    pub fn sst_received(&self, position: Gtid, rcode: i32) -> Status {
        let mut shared = self.lock();
        let Some(c) = shared.connection.as_mut() else {
            log::warn!("state transfer result {position} (rcode {rcode}) arrived while not connected");
            return Status::ConnFail;
        };
        if c.transfer != Transfer::Requested {
            log::warn!("state transfer result {position} (rcode {rcode}) arrived but none was requested");
        }
        c.transfer = Transfer::Received { position, rcode };
        drop(shared);
        self.notify();
        Status::Ok
    }

    /// Donor side: the transfer the application started has ended.
    pub fn sst_sent(&self, position: Gtid, rcode: i32) -> Status {
        let node = {
            let mut shared = self.lock();
            if shared.desync_count > 0 {
                shared.desync_count -= 1;
            }
            shared.group_node()
        };
        if rcode < 0 {
            log::error!("state transfer from this node failed (rcode {rcode}, position {position})");
        } else {
            log::info!("state transfer of {position} sent");
        }
        self.notify();
        if let Some(node) = node {
            drop(node.send_message(Control::Synced.encode()));
        }
        Status::Ok
    }
}

impl Event {
    pub(super) fn seqno(&self) -> Option<Seqno> {
        match self {
            Event::View { view, .. } => Some(view.state_id.seqno),
            Event::Apply { seqno, .. } | Event::Skipped { seqno } => Some(*seqno),
            _ => None,
        }
    }
}

impl Shared {
    /// The next event an applier may take. Until the application is ready (its state-transfer
    /// handshake not done) only membership events are taken: a writeset taken earlier would
    /// hold an applier waiting for a readiness that the view behind it brings.
    fn next_event(&mut self) -> Option<Event> {
        if self.connection.as_ref().is_none_or(|c| c.app_ready) {
            return self.events.pop_front();
        }
        let at = self
            .events
            .iter()
            .position(|e| matches!(e, Event::View { .. } | Event::NonPrimary { .. } | Event::Final { .. }))?;
        self.events.remove(at)
    }

    /// After a state transfer: our history now starts at `position`.
    fn install_position(&mut self, position: Gtid) {
        self.position = position;
        self.restart_windows(position.seqno);
        self.save_state(Gtid::new(position.uuid, crate::types::SEQNO_UNDEFINED));
    }
}

/// Random and non-zero, so that no earlier request of this member matches it.
fn new_request_id() -> u64 {
    let bytes = crate::types::Uuid::random().0;
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) | 1
}
