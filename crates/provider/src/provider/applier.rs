//! The applier threads MariaDB runs in `recv`: they take ordered events from the core and
//! hand them to the application, applying in parallel where certification allows and
//! committing in seqno order. A joiner's first view also runs its state-transfer handshake
//! here, and a donor's donation.
use super::Provider;
use crate::application::{ApplyRequest, RecvCtx, View, WsHandle};
use crate::core::{Donation, Event, HandshakeStep, RequestStart, Task, Turn, REMOTE_HANDLE};
use crate::state_transfer::{errno_text, DONATION_REFUSED};
use crate::types::{flags, Gtid, Seqno, Status, TrxMeta};
use crate::writeset::{Control, StateRequest, Writeset};
use std::time::Duration;

/// A joiner whose request found no donor (or was not ordered) asks again after this long.
const DONOR_RETRY: Duration = Duration::from_secs(1);
/// How long a state request may take to be ordered before it is sent again.
const REQUEST_ORDER_TIMEOUT: Duration = Duration::from_secs(30);
/// The runtime's own bound on a restarted node's choice (the core decides within
/// `RESTART_CHOICE_MS` of the group driver's clock; this holds if that clock stops).
const RESTART_CHOICE_LIMIT: Duration = Duration::from_secs(10);

impl Provider {
    /// The applier loop of one MariaDB applier thread.
    pub fn recv(&self, ctx: RecvCtx) -> Status {
        let Some(generation) = self.with_core(|core| core.enter_recv()) else {
            log::error!("recv called while not connected");
            return Status::Fatal;
        };
        let result = self.receive_loop(ctx, generation);
        if result != Status::Fatal {
            self.with_core(|core| core.leave_recv(&super::Parked::current()));
            return result;
        }
        self.leave_after_failure();
        if self.lock_core().restart_needed() {
            // Its saved state already names no position: restarted, it takes a full transfer.
            self.end_process(
                "this node needs a full state transfer, which its running server cannot take",
                "State transfer impossible for a running server. Restart required.",
            );
        }
        if self.with_core(|core| core.last_receiver_stays()) {
            // The last applier delivers the final view now, as Galera's self-leave does: the
            // server sees a cluster of 0 and is disconnected (mtr galera_gra_log); a server
            // still starting aborts its start rather than wait for a first view.
            self.with_core(|core| core.push_final_view());
            let view = self.wait_for(None, |core, me| core.final_view(generation, me)).expect("no deadline");
            if let Some(view) = view {
                let _ = self.deliver_final_view(ctx, &view);
            }
            self.with_core(|core| core.leave_recv(&super::Parked::current()));
        }
        result
    }

    fn receive_loop(&self, ctx: RecvCtx, generation: u64) -> Status {
        loop {
            let task = self.wait_for(None, |core, me| core.next_task(generation, me)).expect("no deadline");
            let event = match task {
                Task::Exit(status) => return status,
                Task::Run(event) => event,
            };
            let outcome = match event {
                Event::View { view, first_in_connection } => {
                    self.deliver_view(ctx, generation, view, first_in_connection)
                }
                Event::NonPrimary { view } => self.show_view(ctx, &view).map(|_| false),
                Event::Apply { seqno, writeset, depends_on, failed } => {
                    self.apply_remote(ctx, generation, seqno, &writeset, depends_on, failed)
                }
                Event::Donate(donation) => self.donate(ctx, generation, &donation).map(|_| false),
                Event::Skipped { seqno } => {
                    if self.turn(generation, seqno - 1, seqno) == Turn::Go {
                        self.with_core(|core| core.finished(seqno));
                    }
                    Ok(false)
                }
                Event::Excluded { view } => self.show_excluded(ctx, generation, &view).map(|()| false),
                Event::Synced { after } => self.become_synced(generation, after).map(|_| false),
                Event::Final { view } => self.deliver_final_view(ctx, &view).map(|_| false),
            };
            match outcome {
                Err(status) => return status,
                Ok(true) => {
                    if self.lock_core().other_receivers() {
                        return Status::Ok;
                    }
                    log::info!("refusing exit for the last applier thread");
                }
                Ok(false) => {}
            }
        }
    }

    /// Waits until an event at `seqno` that needs everything up to `after` committed may run.
    fn turn(&self, generation: u64, after: Seqno, seqno: Seqno) -> Turn {
        self.wait_for(None, |core, me| core.turn(generation, after, seqno, me)).expect("no deadline")
    }

    fn deliver_view(&self, ctx: RecvCtx, generation: u64, view: View, first: bool) -> Result<bool, Status> {
        if !self.lock_core().phase().app_ready() {
            if first {
                // A restarted node that could catch up alone first looks for a member that
                // stayed up and synced (docs/design/restart-from-own-log.md).
                let deadline = std::time::Instant::now() + RESTART_CHOICE_LIMIT;
                let chosen = self.wait_for(Some(deadline), |core, me| core.restart_choice(generation, me));
                if chosen.is_none() {
                    self.with_core(|core| core.restart_alone_now(generation));
                }
            }
            let own_log_position = self.lock_core().own_log_position(generation).filter(|_| first);
            if let Some(position) = own_log_position {
                self.start_from_own_state(ctx, generation, &view, position)?;
            } else {
                if first {
                    self.app.connected(&view).map_err(|e| self.callback_failed(e.0))?;
                }
                self.receive_state(generation, &view)?;
            }
            self.with_core(|core| core.requeue_view(view));
            return Ok(false);
        }
        let seqno = view.state_id.seqno;
        // A configuration change is processed alone: everything before it committed first.
        if self.turn(generation, seqno - 1, seqno) != Turn::Go {
            return Ok(false);
        }
        if first {
            self.app.connected(&view).map_err(|e| self.callback_failed(e.0))?;
        }
        self.show_view(ctx, &view)?;
        // Synced once this announcement comes back through the order (and all before it
        // applied), or at once when the node only regained the primary component.
        if self.with_core(|core| core.view_applied(seqno)) {
            self.app.synced().map_err(|e| self.callback_failed(e.0))?;
            log::info!("synced with group at {} (primary component regained)", self.last_committed_id());
        }
        Ok(false)
    }

    /// A primary view without us, in its place in the order (`Event::Excluded`).
    fn show_excluded(&self, ctx: RecvCtx, generation: u64, view: &View) -> Result<(), Status> {
        let seqno = view.state_id.seqno;
        if self.turn(generation, seqno - 1, seqno) == Turn::Go {
            self.show_view(ctx, view)?;
            self.with_core(|core| core.finished(seqno));
        }
        Ok(())
    }

    /// Hands a view to the server, unless it is a primary view with the members of the last
    /// one it saw and no loss of the primary component came between (see
    /// `Core::view_reaches_server`).
    fn show_view(&self, ctx: RecvCtx, view: &View) -> Result<(), Status> {
        if self.with_core(|core| core.view_reaches_server(view)) {
            self.app.view(ctx, view).map_err(|e| self.callback_failed(e.0))
        } else {
            log::info!(
                "view at seqno {} has the members of the last one: not shown to the server",
                view.state_id.seqno
            );
            Ok(())
        }
    }

    /// A restarted node that holds the order after its position: the server starts on a view
    /// at that position, and takes it as its checkpoint (`Core::last_committed_reported`).
    /// The order's own view then follows in its place.
    fn start_from_own_state(&self, ctx: RecvCtx, generation: u64, view: &View, position: Gtid) -> Result<(), Status> {
        let at_position = View { state_id: position, ..view.clone() };
        self.with_core(|core| core.showing_view_at_own_position(Some(position.seqno)));
        let shown = self
            .app
            .connected(&at_position)
            .map_err(|e| self.callback_failed(e.0))
            .and_then(|()| self.show_view(ctx, &at_position));
        self.with_core(|core| core.showing_view_at_own_position(None));
        shown?;
        self.with_core(|core| core.catch_up_from_own_log(generation, position))
    }

    /// Joiner: asks the group for a donor and blocks this applier until the application
    /// reports the transfer (`sst_received`), as MariaDB expects.
    fn receive_state(&self, generation: u64, view: &View) -> Result<(), Status> {
        let mut request = self.server_sst_request();
        if request.is_empty() {
            // A running server that reconnects cannot take a snapshot (rsync, mysqldump...):
            // it continues from what it holds, or cannot join at all.
            return self.with_core(|core| core.continue_without_transfer(generation));
        }
        loop {
            let id = new_request_id();
            match self.with_core(|core| core.begin_state_request(generation, id)) {
                RequestStart::Ended => return Ok(()),
                RequestStart::AlreadyReceived => {}
                RequestStart::Send(state_request) => {
                    let (position, ist_address) = (state_request.position, state_request.ist_addr.clone());
                    let Some(link) = self.node_of(generation) else { return Ok(()) };
                    let message = Control::StateRequest(StateRequest { sst_request: request.clone(), ..state_request });
                    log::info!("requesting state transfer at view {} (local position {position})", view.state_id);
                    // Galera's words: operators' and MariaDB's tests look for these lines. Every
                    // joiner receives a stream, if only of the certification state.
                    let in_history = position.uuid == view.state_id.uuid && position.seqno >= 0;
                    let (first, last) = (if in_history { position.seqno + 1 } else { 0 }, view.state_id.seqno);
                    let url = super::catch_up::ist_url(&ist_address, link.node.tls().is_some());
                    log::info!("IST receiver addr using {url}");
                    log::info!("Prepared IST receiver for {first}-{last}, listening at: {url}");
                    let sent = link.node.send_message(message.encode()).recv_timeout(REQUEST_ORDER_TIMEOUT);
                    drop(link);
                    if !matches!(sent, Ok(Ok(_))) {
                        log::info!("the state transfer request was not ordered ({sent:?}); asking again");
                        std::thread::sleep(DONOR_RETRY);
                        continue;
                    }
                }
            }
            let step = self.wait_for(None, |core, me| core.handshake_step(generation, me)).expect("no deadline");
            match step {
                HandshakeStep::Ended => return Ok(()),
                HandshakeStep::NoDonor => std::thread::sleep(DONOR_RETRY),
                HandshakeStep::NewScript => {
                    request = self.server_sst_request();
                    if request.is_empty() {
                        // A running server takes no snapshot: it never comes here, as a
                        // reconnect asks for none.
                        self.end_process(
                            "the server started no new state transfer script after the first one failed",
                            "Will never receive state. Need to abort.",
                        );
                    }
                }
                HandshakeStep::Received { .. } => {
                    return self.with_core(|core| core.install_transfer(generation)).map(|_| ());
                }
                HandshakeStep::Failed { rcode } => self.never_receive_state(rcode),
            }
        }
    }

    /// The server's state-transfer request: its script starts and listens for a donor.
    fn server_sst_request(&self) -> Vec<u8> {
        match self.app.sst_request() {
            Ok(request) => request,
            // The joiner's SST script could not start (it logged why): no state will arrive.
            Err(e) => self.end_process(
                &format!("the application's {} callback failed: this node cannot receive the group's state", e.0),
                "SST request callback failed. This is unrecoverable, restart required.",
            ),
        }
    }

    /// The transfer this joiner waits for failed (its donor's failure came through the order,
    /// or the server's `sst_received` reported one): it will never receive the state.
    fn never_receive_state(&self, rcode: i32) -> ! {
        let why = format!("the state transfer this node waited for failed: {rcode} ({})", errno_text(rcode));
        self.end_process(&why, "Will never receive state. Need to abort.")
    }

    /// Ends the process as Galera does where a joiner cannot go on (`abort`): the server
    /// must not start without the group's state, nor wait minutes for a transfer that will
    /// not come. `why` goes to a Note, then `last_words` (Galera's, which MariaDB's tests
    /// suppress) to an error. Only the first caller speaks; another one waits for the end.
    fn end_process(&self, why: &str, last_words: &str) -> ! {
        if self.ending.swap(true, std::sync::atomic::Ordering::SeqCst) {
            loop {
                std::thread::park();
            }
        }
        log::info!("{why}");
        log::error!("{last_words}");
        let program = std::env::args().next().unwrap_or_else(|| "the server".into());
        log::info!("{program}: Terminated.");
        self.app.abort_process()
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
        if self.turn(generation, depends_on, seqno) != Turn::Go {
            return Ok(false);
        }
        let (group, boost) = {
            let core = self.lock_core();
            (core.group(), if ws.holds_commit_order_long() { core.settings().applier_boost } else { 0 })
        };
        let meta = TrxMeta { gtid: Gtid::new(group, seqno), source: ws.source, depends_on };
        let ws_flags = if failed { ws.flags | flags::ROLLBACK } else { ws.flags };
        let request = ApplyRequest {
            handle: WsHandle { trx_id: ws.source.trx_id, opaque: REMOTE_HANDLE | seqno as u64 },
            flags: ws_flags,
            data: &ws.data,
            meta,
            boost,
        };
        let result = self.app.apply(ctx, &request);
        // Keep the order moving even if the application did not leave commit order.
        if let Err(failed) = self.with_core(|core| core.remote_applied(seqno)) {
            // The vote on it said why, in one error line.
            log::info!("leaving the cluster after the vote on seqno {failed}");
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
        if self.turn(generation, d.after, d.after) == Turn::Ended {
            return Ok(());
        }
        let bypass = self.send_transfer(generation, d);
        if d.stream_only() {
            // The joiner's server took its state from a donor that left: no script runs.
            if !bypass {
                // Only a snapshot would do: the joiner refuses the stream and stops.
                log::warn!(
                    "state transfer stream to {}: the writesets after its position {} are not here",
                    d.ist_addr,
                    d.position
                );
            }
            self.with_core(|core| core.donated_stream_only(generation, d));
            return Ok(());
        }
        // The stream may have taken long: a connection that ended meanwhile donates no more.
        let started =
            self.with_core(|core| (core.generation() == generation).then(|| core.donation_started(d, bypass)));
        let Some(state_id) = started else { return Ok(()) };
        log::info!("donating state {state_id} to a joiner{}", if bypass { " (position only)" } else { "" });
        if let Err(e) = self.app.sst_donate(ctx, &d.request, state_id, bypass) {
            // Galera's words ("SST failed: "), which MariaDB's tests suppress; the server
            // logged why it refused. The group is told, and the joiner stops.
            log::error!("SST failed: the server refused to donate state {state_id} ({} callback failed)", e.0);
            self.with_core(|core| core.donation_refused(d, DONATION_REFUSED));
        }
        Ok(())
    }

    fn become_synced(&self, generation: u64, after: Seqno) -> Result<(), Status> {
        if self.turn(generation, after, after) == Turn::Ended {
            return Ok(());
        }
        if self.with_core(|core| core.become_synced(after)) {
            self.app.synced().map_err(|e| self.callback_failed(e.0))?;
            log::info!("synced with group at {}", self.last_committed_id());
        }
        Ok(())
    }

    fn deliver_final_view(&self, ctx: RecvCtx, view: &View) -> Result<(), Status> {
        if let Err(e) = self.app.view(ctx, view) {
            log::warn!("{} callback failed for the final view", e.0);
        }
        self.close_connection("closed");
        Ok(())
    }

    /// Joiner side of a state transfer: the application has the state at `position`, or
    /// (`rcode` < 0) it failed, and this node will never receive the state: the process
    /// ends here, before the server goes on to report errors of its own.
    pub fn sst_received(&self, position: Gtid, rcode: i32) -> Status {
        let (status, failed) = self.with_core(|core| (core.sst_received(position, rcode), core.transfer_failed()));
        if let Some(rcode) = failed {
            self.never_receive_state(rcode);
        }
        status
    }

    /// Donor side: the transfer the application started has ended. A failure is told to
    /// the group (the joiner stops).
    pub fn sst_sent(&self, position: Gtid, rcode: i32) -> Status {
        if rcode < 0 {
            // Galera's words ("SST failed: "), which MariaDB's tests suppress.
            log::error!(
                "SST failed: the state transfer of {position} from this node ended with {rcode} ({})",
                errno_text(rcode)
            );
        } else {
            log::info!("state transfer of {position} sent");
        }
        self.with_core(|core| core.donation_ended(position, rcode));
        Status::Ok
    }
}

/// Random and non-zero, so that no earlier request of this member matches it.
fn new_request_id() -> u64 {
    let bytes = crate::types::Uuid::random().0;
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) | 1
}
