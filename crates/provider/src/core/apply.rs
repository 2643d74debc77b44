//! The apply queue and the appliers' turns: events wait for the server's applier threads in
//! `recv`, an idle applier is woken for an event when it may take it (beside those in flight
//! under the width `parallelism.rs` measured, or behind one that holds the queue), and an
//! event runs once everything it depends on has committed. Also the joiner's handshake and
//! the donor's part of a state transfer, which run on applier threads too.
use super::parallelism::Width;
use super::phase::{CatchUp, Handshake, Phase, Restart};
use super::{Core, APPLICATION_PROTOCOL, CAPABILITIES};
use crate::application::{Member, View, ViewStatus};
use crate::ist::Preload;
use crate::types::{Gtid, Seqno, Status, Uuid, SEQNO_UNDEFINED};
use crate::writeset::{Control, DonationEnd, StateRequest, Writeset};
use lockstep_group::MemberId;
use std::collections::{BTreeSet, VecDeque};

/// Failed verdicts kept for donating: this many seqnos back from the newest.
const VERDICT_HISTORY: Seqno = 1 << 22;

/// An applier in flight for this long holds the queue (a long writeset, a donation, a
/// lock): whatever the width in force, the others may take what follows, to apply it
/// meanwhile and commit it right after.
const HELD_QUEUE_MS: u64 = 5;

/// Whether an applier may take one of `queued` events while `others` are in flight, under
/// `width`; `held`: one in flight holds the queue.
fn may_take(queued: usize, others: usize, width: Width, held: bool) -> bool {
    queued > 0 && (width == Width::All || others == 0 || held)
}

/// Ordered work for an applier thread.
#[derive(Debug)]
pub enum Event {
    /// A primary view that includes us.
    View { view: View, first_in_connection: bool },
    /// We lost the primary component: delivered at once, nothing to wait for.
    NonPrimary { view: View },
    /// A primary view of the group without us, which the group ordered while we were cut
    /// off and which we now receive with the rest of what we missed. The server sees it, as
    /// Galera's incremental transfer shows it, and so rolls back our streaming transactions
    /// as the group did when we left (`own_index` -1).
    Excluded { view: View },
    /// A writeset from another member (or one of ours whose client gave up waiting).
    Apply { seqno: Seqno, writeset: Box<Writeset>, depends_on: Seqno, failed: bool },
    /// We were chosen to donate state to a joiner, once everything up to `after` is committed.
    Donate(Box<Donation>),
    /// A seqno received by state transfer that changes no data (a configuration change).
    Skipped { seqno: Seqno },
    /// Our own announcement came back: synced once everything up to `after` is committed.
    Synced { after: Seqno },
    /// The last view of a connection; after it every `recv` returns.
    Final { view: View },
}

impl Event {
    pub fn seqno(&self) -> Option<Seqno> {
        match self {
            Event::View { view, .. } | Event::Excluded { view } => Some(view.state_id.seqno),
            Event::Apply { seqno, .. } | Event::Skipped { seqno } => Some(*seqno),
            _ => None,
        }
    }

    /// Where it stands in the order (controls are ordered after a seqno).
    fn place(&self) -> Option<Seqno> {
        match self {
            Event::Synced { after } => Some(*after),
            Event::Donate(d) => Some(d.after),
            other => other.seqno(),
        }
    }

    /// What an applier may take before the server's handshake is done: the view that starts
    /// the handshake (later views wait in order: each would start a handshake of its own),
    /// and what ends the connection.
    fn before_handshake(&self) -> bool {
        matches!(self, Event::View { first_in_connection: true, .. } | Event::NonPrimary { .. } | Event::Final { .. })
    }

    pub(super) fn writeset_bytes(&self) -> u64 {
        match self {
            Event::Apply { writeset, .. } => writeset.data.len() as u64,
            _ => 0,
        }
    }
}

/// What an applier gets from `next_task`.
#[derive(Debug)]
pub enum Task {
    Run(Event),
    /// Leave `recv` with this status (the connection ended, or this node cannot go on).
    Exit(Status),
}

/// What a donor needs, captured when the request was delivered.
#[derive(Debug)]
pub struct Donation {
    /// The member that asked, and its request's id: a failure is reported for them.
    pub joiner: MemberId,
    pub request_id: u64,
    pub request: Vec<u8>,
    pub after: Seqno,
    /// Where the joiner's data stands (undefined: not in this history).
    pub position: Gtid,
    pub joiner_has_state: bool,
    pub ist_addr: String,
    pub preload: Preload,
    /// Failed seqnos after `position` up to `after`, if all verdicts there are known.
    pub failed: Option<BTreeSet<Seqno>>,
    /// The joiner certified the order from its position with the group's certification
    /// state itself (a restarted member that could catch up alone).
    pub joiner_own_order: bool,
}

impl Donation {
    /// The joiner's server holds its state already (its first donor left before the stream
    /// was in): only the stream is wanted, no script runs.
    pub fn stream_only(&self) -> bool {
        self.request.is_empty()
    }

    /// Whether the server only confirms the joiner's position (`bypass`: the script runs in
    /// bypass mode, no snapshot): when the gap travels with the group's verdicts (`gap_sent`),
    /// or when the joiner holds that order with the group's verdicts already. Not otherwise: a
    /// joiner that holds the order itself but certified it from a fresh index must not apply
    /// its own verdicts (found by the simulator: a commit rolled back on the joiner).
    pub fn position_only(&self, gap_sent: bool) -> bool {
        gap_sent || self.joiner_own_order
    }
}

/// How often a joiner asks again for the stream alone (its donor left, or no request of ours
/// waits in the order), while no member can donate (as the server's handshake asks again
/// after "no donor").
const ASK_AGAIN_MS: u64 = 1000;
/// A joiner whose server took its state while no request of ours waits at its point in the
/// order asks for the stream alone after this long: a request of ours may still be on its
/// way through the order (the donor's script can end before the joiner reads the request).
const REQUEST_LAG_MS: u64 = 5000;
/// How long it asks before it gives up (the runtime's wait for a donor's connection once a
/// request is ordered is as long).
pub const DONOR_SEARCH_MS: u64 = 300_000;

/// How long a joiner whose server's script failed while its donor was still in the group
/// waits for the group's word on that donor: a crashed donor is dropped after
/// `evs.suspect_timeout` (5 s by default) and an election; one that stays and reports
/// nothing leaves the failure to the joiner's side. As long as the stream receiver's wait
/// for a new donor.
pub const SCRIPT_VERDICT_MS: u64 = 60_000;
/// How many times one connection starts the server's script again after a donor left
/// with it: each try costs a donor's snapshot.
pub const NEW_SCRIPTS_MAX: u32 = 3;

/// A joiner that asks for the stream alone (its donor left, or no request of ours waits in
/// the order): since when it asks, and when it asks next (never while the server's handshake
/// asks with the server's own request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DonorSearch {
    pub since_ms: u64,
    pub next_ms: u64,
}

/// A donation this node's server runs: the state it donates, and the request it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Donating {
    pub state_id: Gtid,
    pub joiner: MemberId,
    pub request_id: u64,
}

/// One event of an incremental transfer, decoded.
#[derive(Debug)]
pub enum Transferred {
    Writeset { seqno: Seqno, writeset: Box<Writeset>, failed: bool },
    Skipped { seqno: Seqno },
}

impl Transferred {
    /// An event of the donor's stream, decoded.
    pub fn decode(item: crate::ist::Item) -> Result<Transferred, String> {
        match item {
            crate::ist::Item::Writeset { seqno, bytes, failed } => {
                let writeset = Writeset::decode(bytes).map_err(|e| format!("writeset at seqno {seqno}: {}", e.0))?;
                Ok(Transferred::Writeset { seqno, writeset: Box::new(writeset), failed })
            }
            crate::ist::Item::Skipped { seqno } => Ok(Transferred::Skipped { seqno }),
        }
    }

    fn seqno(&self) -> Seqno {
        match self {
            Transferred::Writeset { seqno, .. } | Transferred::Skipped { seqno } => *seqno,
        }
    }
}

/// A donor's stream as it is installed (`Core::install_stream`).
#[derive(Debug)]
pub struct StreamStart {
    /// Our request was ordered after this seqno.
    pub at: Seqno,
    /// The gap's first seqno, or `None`: no gap came, only the certification state.
    pub from: Option<Seqno>,
    /// The gap's first events, or all of them.
    pub gap: Vec<Transferred>,
    /// The gap's seqnos that failed certification, all of them.
    pub failed: Vec<Seqno>,
    /// How many events the whole gap holds (for the log).
    pub events: usize,
    /// The rest of the gap follows (`Core::feed_stream`).
    pub more: bool,
}

/// The donor's gap while it is handed over in batches (`CatchUp::Feeding`).
#[derive(Debug, Default)]
pub struct GapMerge {
    /// What was queued besides our own writesets of the gap (views, donations,
    /// announcements), and what is queued meanwhile: each goes in before the first of the
    /// gap's events that follows it, the rest after the gap.
    pub kept: VecDeque<Event>,
    /// The last seqno of the gap handed over so far.
    pub fed_to: Seqno,
}

/// What the joiner's handshake poll reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeStep {
    /// The connection ended meanwhile.
    Ended,
    /// No member could donate: ask again after a while.
    NoDonor,
    /// The server's script failed as its donor left: ask the server for a new request (its
    /// script starts again), then ask the group with it.
    NewScript,
    Received {
        position: Gtid,
        rcode: i32,
    },
    /// The transfer failed (its donor reported so through the order, or the server's
    /// `sst_received` did): this node will never receive the state. Galera aborts the
    /// process here; the runtime does the same.
    Failed {
        rcode: i32,
    },
}

/// What a joiner's applier does about its state request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestStart {
    /// The connection ended meanwhile.
    Ended,
    /// The transfer's outcome (the state, or its failure) arrived while the applier waited
    /// to ask again after a "no donor" answer (a donor that other members chose may still
    /// act on the request), or an earlier request of ours was ordered with a donor: nothing
    /// to ask, wait for it.
    AlreadyReceived,
    /// Send this request, with the server's own request (`sst_request`) added.
    Send(StateRequest),
}

/// Whether an applier may run an event now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    Go,
    /// Already part of the state this node holds.
    Skip,
    /// The connection ended or cannot go on.
    Ended,
}

/// Which seqnos this member saw fail certification, from `known_from` on.
#[derive(Debug)]
pub struct Verdicts {
    known_from: Seqno,
    failed: BTreeSet<Seqno>,
}

impl Default for Verdicts {
    fn default() -> Self {
        Verdicts { known_from: Seqno::MAX, failed: BTreeSet::new() }
    }
}

impl Verdicts {
    /// Verdicts are known from `seqno` on (this member certifies from there with the group's state).
    pub fn known_from(&mut self, seqno: Seqno, failed: impl IntoIterator<Item = Seqno>) {
        self.known_from = seqno;
        self.failed = failed.into_iter().filter(|s| *s >= seqno).collect();
    }

    pub fn record(&mut self, seqno: Seqno, failed: bool) {
        if failed && seqno >= self.known_from {
            self.failed.insert(seqno);
        }
    }

    pub fn forget_before(&mut self, newest: Seqno) {
        let floor = newest - VERDICT_HISTORY;
        if self.known_from != Seqno::MAX && self.known_from < floor {
            self.known_from = floor;
            self.failed = self.failed.split_off(&floor);
        }
    }

    /// The failed seqnos in `from..=to`, if every verdict there is known.
    pub(super) fn failed_in(&self, from: Seqno, to: Seqno) -> Option<BTreeSet<Seqno>> {
        let known = from >= self.known_from;
        known.then(|| if from > to { BTreeSet::new() } else { self.failed.range(from..=to).copied().collect() })
    }
}

/// A member's UUID as the server sees it: its group member id (stable, for the group's log)
/// with the incarnation of its current connection, so that, as with Galera, a node that
/// reconnects is a new member to the server. wsrep-lib reads two consecutive primary views
/// with the same member UUIDs as a lost and re-formed primary component and rolls back the
/// streaming transactions it applies (docs/design/streaming-replication.md).
pub fn member_uuid(id: MemberId, incarnation: u64) -> Uuid {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&id.0.to_be_bytes());
    bytes[8..].copy_from_slice(&incarnation.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid(bytes)
}

/// The view of the group as MariaDB sees it. This member (`me`, its UUID `my_uuid`) always
/// appears as its current incarnation: the group's directory may still hold its previous one
/// (a restarted voter whose new join is not applied yet).
pub fn primary_view(group: Uuid, seqno: Seqno, view: &lockstep_group::View, me: MemberId, my_uuid: Uuid) -> View {
    let members: Vec<Member> = view
        .members
        .iter()
        .map(|m| Member {
            id: if m.id == me { my_uuid } else { member_uuid(m.id, m.incarnation) },
            name: m.name.clone(),
            incoming: m.incoming_address.clone(),
        })
        .collect();
    View {
        state_id: Gtid::new(group, seqno),
        conf_id: view.view_id as i64,
        status: ViewStatus::Primary,
        capabilities: CAPABILITIES,
        my_index: view.members.iter().position(|m| m.id == me).map_or(-1, |i| i as i32),
        members,
        proto_ver: APPLICATION_PROTOCOL,
    }
}

impl<W: Clone + PartialEq> Core<W> {
    pub(super) fn push_event(&mut self, event: Event) {
        if let Event::Apply { seqno, writeset, .. } = &event {
            self.flow.queued(*seqno, writeset.data.len());
            self.queued_bytes += writeset.data.len() as u64;
        }
        // While the gap is handed over, what comes after it waits behind it, as it did when
        // the gap was queued at once. The connection's end stays in reach (its last applier
        // waits for it among the queued events, and nothing may apply the rest of the gap
        // then: a failed node ends so), and so does, before the server's handshake is done,
        // what appliers take out of turn (a lost primary component).
        let in_reach = matches!(event, Event::Final { .. }) || !self.phase.app_ready() && event.before_handshake();
        if let Some(c) = self.connection.as_mut().filter(|c| !in_reach && matches!(c.catch_up, CatchUp::Feeding(_))) {
            c.gap.kept.push_back(event);
            return;
        }
        self.events.push_back(event);
        self.counters.recv_queue.sample(self.events.len());
        self.schedule_appliers();
        self.flow_check();
    }

    pub(super) fn push_event_front(&mut self, event: Event) {
        self.queued_bytes += event.writeset_bytes();
        self.events.push_front(event);
        self.counters.recv_queue.sample(self.events.len());
        self.wake_one_applier();
        self.flow_check();
    }

    fn wake_one_applier(&mut self) {
        if let Some(w) = self.idle_appliers.pop_front() {
            self.effects.wake.push(w);
        }
    }

    /// Wakes an idle applier if it may take an event beside those in flight (`may_take`);
    /// otherwise one in flight takes the next event when it is done, without a hand-off.
    pub(super) fn schedule_appliers(&mut self) {
        let held = self.queue_held();
        let appliers = self.appliers_in_flight.len() + self.idle_appliers.len();
        self.parallelism.observe(self.events.len(), appliers, held || self.flow.applying_big(), self.clock_ms);
        if may_take(self.events.len(), self.appliers_in_flight.len(), self.parallelism.width(), held) {
            self.wake_one_applier();
        }
    }

    /// An applier in flight has been for `HELD_QUEUE_MS` or more.
    fn queue_held(&self) -> bool {
        let now = self.clock_ms;
        self.appliers_in_flight.iter().any(|(_, taken_ms)| now.saturating_sub(*taken_ms) >= HELD_QUEUE_MS)
    }

    /// Events waiting for appliers.
    /// Events queued for the appliers, with those waiting behind a gap being handed over.
    pub fn queued_events(&self) -> usize {
        self.events.len() + self.connection.as_ref().map_or(0, |c| c.gap.kept.len())
    }

    /// The first `count` queued events, by kind and place (for diagnostics).
    pub fn queue_head(&self, count: usize) -> Vec<String> {
        self.events
            .iter()
            .take(count)
            .map(|e| match e {
                Event::View { view, first_in_connection } => {
                    format!("View({}, first {first_in_connection})", view.state_id.seqno)
                }
                Event::NonPrimary { .. } => "NonPrimary".into(),
                Event::Excluded { view } => format!("Excluded({})", view.state_id.seqno),
                Event::Apply { seqno, depends_on, failed, .. } => {
                    format!("Apply({seqno} after {depends_on}, failed {failed})")
                }
                Event::Donate(d) => format!("Donate(after {})", d.after),
                Event::Skipped { seqno } => format!("Skipped({seqno})"),
                Event::Synced { after } => format!("Synced(after {after})"),
                Event::Final { .. } => "Final".into(),
            })
            .collect()
    }

    pub fn enter_recv(&mut self) -> Option<u64> {
        let generation = self.connection.as_ref()?.generation;
        self.receivers += 1;
        Some(generation)
    }

    pub fn leave_recv(&mut self, waiter: &W) {
        self.receivers -= 1;
        self.applier_done(waiter);
    }

    /// `waiter` is done with the event it took, if any: it no longer holds the queue.
    fn applier_done(&mut self, waiter: &W) {
        self.appliers_in_flight.retain(|(w, _)| w != waiter);
    }

    /// An applier leaves `recv` after this node failed: all but the last go now. The last one
    /// stays for the final view, which the server's shutdown waits for (returns true).
    pub fn last_receiver_stays(&mut self) -> bool {
        if self.receivers > 1 {
            self.receivers -= 1;
            return false;
        }
        true
    }

    /// The final view, for the applier that stayed after a failure; `None` after registering
    /// `waiter`. `Some(None)`: the connection ended without one.
    pub fn final_view(&mut self, generation: u64, waiter: &W) -> Option<Option<View>> {
        if !self.is_current(generation) {
            return Some(None);
        }
        if let Some(at) = self.events.iter().position(|e| matches!(e, Event::Final { .. })) {
            if let Some(Event::Final { view }) = self.events.remove(at) {
                return Some(Some(view));
            }
        }
        if !self.idle_appliers.contains(waiter) {
            self.idle_appliers.push_back(waiter.clone());
        }
        None
    }

    /// More than one applier is in `recv` (the last one never leaves on `exit_loop`).
    pub fn other_receivers(&self) -> bool {
        self.receivers > 1
    }

    /// The next event for an applier of connection `generation`, or `None` after registering
    /// `waiter` as idle.
    pub fn next_task(&mut self, generation: u64, waiter: &W) -> Option<Task> {
        self.applier_done(waiter);
        if !self.is_current(generation) {
            return Some(Task::Exit(Status::Ok));
        }
        if self.failed || self.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Failed) {
            return Some(Task::Exit(Status::Fatal));
        }
        // Until the server is ready (its handshake not done) and the donor's stream is in,
        // only the handshake's view and the end of the connection are taken: a writeset
        // taken earlier would hold an applier waiting for a readiness that the view behind
        // it brings, or would be applied besides the donor's copy that replaces it.
        let applies = self.connection.as_ref().is_some_and(|c| c.catch_up.applies());
        let event = if self.phase.app_ready() && applies {
            let others = self.appliers_in_flight.len();
            let takes = may_take(self.events.len(), others, self.parallelism.width(), self.queue_held());
            takes.then(|| self.events.pop_front()).flatten()
        } else {
            self.events.iter().position(Event::before_handshake).and_then(|at| self.events.remove(at))
        };
        match event {
            Some(event) => {
                self.queued_bytes = self.queued_bytes.saturating_sub(event.writeset_bytes());
                self.appliers_in_flight.push((waiter.clone(), self.clock_ms));
                self.parallelism.taken();
                self.release_held_delivery();
                self.flow_check();
                // Parallel applying: the next event may run beside this one.
                self.schedule_appliers();
                Some(Task::Run(event))
            }
            None => {
                if !self.idle_appliers.contains(waiter) {
                    self.idle_appliers.push_back(waiter.clone());
                }
                None
            }
        }
    }

    /// Whether an event at `seqno` that needs everything up to `after` committed may run;
    /// `None` after registering `waiter` with what it waits for.
    pub fn turn(&mut self, generation: u64, after: Seqno, seqno: Seqno, waiter: &W) -> Option<Turn> {
        // An inconsistent node is ending: what waited behind the seqno that made it so (a
        // donation, found by the provider simulator) must not run on its data.
        if !self.is_current(generation) || self.failed || self.inconsistent {
            return Some(Turn::Ended);
        }
        let c = self.connection.as_ref().expect("current");
        if c.catch_up == CatchUp::Failed {
            return Some(Turn::Ended);
        }
        let held = self.paused_at.is_some_and(|at| seqno > at);
        if !(c.has_state && self.phase.app_ready() && c.catch_up.applies()) {
            self.phase_waiters.push(waiter.clone());
            return None;
        }
        if !self.committed.reached(after) {
            self.committed.wait_for(after, waiter.clone());
            self.counters.apply_monitor.wait();
            return None;
        }
        if held {
            self.unpause_waiters.push(waiter.clone());
            return None;
        }
        if self.committed.is_finished(seqno) {
            return Some(Turn::Skip);
        }
        self.counters.apply_monitor.enter(seqno, self.committed.last_contiguous());
        Some(Turn::Go)
    }

    /// `seqno` needs nothing more here (a view delivered, a transferred configuration change).
    pub fn finished(&mut self, seqno: Seqno) {
        self.finish_both(seqno);
    }

    /// A remote writeset at `seqno` was applied (or rolled back). `Err`: applying failed
    /// here, so this node's data may differ from the group's and it must leave.
    pub fn remote_applied(&mut self, seqno: Seqno) -> Result<(), Seqno> {
        self.finish_both(seqno);
        match self.connection.as_ref().and_then(|c| c.apply_failed) {
            Some(failed) => {
                // Leave, and take a full transfer next time.
                self.mark_inconsistent();
                Err(failed)
            }
            None => Ok(()),
        }
    }

    /// Whether the server is shown `view`. Not a primary view with the same members as the
    /// last primary view it saw, with no non-primary one in between: wsrep-lib reads two
    /// consecutive primary views with equal membership as a primary component lost and
    /// re-formed, and rolls back every streaming transaction of every member. Our group
    /// makes such views without a loss here (a member's return after a restart, the view
    /// that a restarted node first sees at its own position and then at its seqno); after a
    /// real loss the server sees the non-primary view and then the new one, as with Galera
    /// (docs/design/streaming-replication.md).
    pub fn view_reaches_server(&mut self, view: &View) -> bool {
        if view.status != ViewStatus::Primary {
            self.server_view = None;
            return true;
        }
        let members: Vec<Uuid> = view.members.iter().map(|m| m.id).collect();
        if self.server_view.as_ref() == Some(&members) {
            return false;
        }
        self.server_view = Some(members);
        true
    }

    /// The server has seen the view at `seqno`: its seqno is finished, and this member
    /// announces itself synced once the announcement comes back through the order. Returns
    /// whether the server is to be told synced at once: a member that was synced when it lost
    /// the primary component and kept its state all along (Galera's remerge: the server is
    /// ready again with the view, not an announcement's round trip later).
    pub fn view_applied(&mut self, seqno: Seqno) -> bool {
        self.finish_both(seqno);
        // Not while donating (or desynced): the request took the donor out of the synced
        // set, and its announcement at the transfer's end puts it back
        // (docs/design/donor-chosen-twice.md).
        if self.desync_count == 0 {
            self.announce_synced(None);
        }
        let resync = std::mem::take(&mut self.synced_before_loss)
            && self.phase == Phase::Joined
            && self.committed.last_contiguous() == seqno
            && self.ordering.index_from_group;
        resync && self.become_synced(seqno)
    }

    /// Our announcement came back (ordered after `at`) and everything before it is applied:
    /// returns whether the server must be told it is synced.
    pub fn become_synced(&mut self, at: Seqno) -> bool {
        let primary = self.connection.as_ref().is_some_and(|c| c.component == super::phase::Component::Primary);
        let joined = matches!(self.phase, Phase::Joined | Phase::Synced);
        if !primary || !joined || self.desync_count > 0 {
            return false;
        }
        if self.phase == Phase::Joined {
            self.set_phase(Phase::Synced);
            self.synced_since = Some(at);
        }
        true
    }

    /// A view that came before the server's handshake goes back to its place in the order,
    /// after the events that precede it (those before the received state, if any, are
    /// finished already).
    pub fn requeue_view(&mut self, view: View) {
        let seqno = view.state_id.seqno;
        // Before what follows it in the order, messages ordered right after it included.
        let event = Event::View { view, first_in_connection: false };
        // A gap being handed over that has not come this far: the view waits with what else
        // we kept, and is merged in at its place (queued behind the gap's first batches, an
        // applier would hold it waiting for seqnos handed over after it).
        if let Some(c) = self.connection.as_mut().filter(|c| matches!(c.catch_up, CatchUp::Feeding(_))) {
            if c.gap.fed_to < seqno {
                let at = c.gap.kept.iter().position(|e| e.place().is_some_and(|s| s >= seqno));
                c.gap.kept.insert(at.unwrap_or(c.gap.kept.len()), event);
                return;
            }
        }
        let at = self.events.iter().position(|e| e.place().is_some_and(|s| s >= seqno));
        match at {
            Some(i) => self.events.insert(i, event),
            None => self.events.push_back(event),
        }
        self.wake_one_applier();
    }

    // ---- joiner: the server's handshake ------------------------------------------------

    /// Starts (or repeats) our state request with id `request_id`.
    pub fn begin_state_request(&mut self, generation: u64, request_id: u64) -> RequestStart {
        if !self.is_current(generation) || !matches!(self.phase, Phase::Joining(_)) {
            return RequestStart::Ended;
        }
        if matches!(self.phase, Phase::Joining(Handshake::Received { .. } | Handshake::Failed { .. })) {
            return RequestStart::AlreadyReceived;
        }
        let has_state = self.has_state();
        let own_order = self.can_catch_up_alone();
        // Without the order from our position, our data may still be in this history: a
        // donor that holds the gap sends it incrementally.
        let in_history = self.position.uuid == self.group() && self.position.seqno >= 0;
        let position = match (has_state, in_history) {
            (true, _) => self.last_committed(),
            (false, true) => self.position,
            (false, false) => Gtid::UNDEFINED,
        };
        if self.connection.as_ref().is_some_and(|c| matches!(c.catch_up, CatchUp::AtRequest(_))) {
            // An earlier request of ours was ordered late, with a donor (see `adopt_request`).
            return RequestStart::AlreadyReceived;
        }
        let new_script = self.phase == Phase::Joining(Handshake::NewScript);
        if self.phase != Phase::Joining(Handshake::Requested) {
            self.set_phase(Phase::Joining(Handshake::Requested));
        }
        let guessing = self.guesses_who_is_synced();
        let c = self.connection.as_mut().expect("current");
        c.new_request_id(request_id);
        if new_script {
            // Their SST address was the failed script's: a donor acting on one of them finds
            // nobody listening, and its failure must not end this request.
            c.earlier_requests.clear();
        }
        RequestStart::Send(StateRequest {
            sst_request: Vec::new(),
            position,
            donors: c.donors.clone(),
            has_state,
            ist_addr: c.ist_addr.clone(),
            id: request_id,
            own_order,
            guessing,
        })
    }

    /// How our request stands; `None` after registering `waiter`.
    pub fn handshake_step(&mut self, generation: u64, waiter: &W) -> Option<HandshakeStep> {
        let stream_failed = self.catch_up(generation) == Some(CatchUp::Failed);
        if !self.is_current(generation) || stream_failed {
            return Some(HandshakeStep::Ended);
        }
        if self.failed {
            // Mid-handshake, the failure ended the transfer too (`Core::fail`).
            return Some(match self.phase {
                Phase::Joining(Handshake::Failed { rcode }) => HandshakeStep::Failed { rcode },
                _ => HandshakeStep::Ended,
            });
        }
        match self.phase {
            Phase::Joining(Handshake::NoDonor) => Some(HandshakeStep::NoDonor),
            Phase::Joining(Handshake::NewScript) => Some(HandshakeStep::NewScript),
            Phase::Joining(Handshake::Received { position, rcode }) => {
                Some(HandshakeStep::Received { position, rcode })
            }
            Phase::Joining(Handshake::Failed { rcode }) => Some(HandshakeStep::Failed { rcode }),
            Phase::Joining(_) => {
                self.phase_waiters.push(waiter.clone());
                None
            }
            _ => Some(HandshakeStep::Ended),
        }
    }

    /// The server's `sst_received`. With `rcode` < 0 its transfer failed: this node will
    /// never receive that state (see [`Core::transfer_failed`]), unless the failure is its
    /// donor's crash (see [`Core::script_failed`]).
    pub fn sst_received(&mut self, position: Gtid, rcode: i32) -> Status {
        let waiting = matches!(self.phase, Phase::Joining(Handshake::Requested | Handshake::NoDonor));
        if waiting && rcode < 0 && self.script_failed(rcode) {
            return Status::Ok;
        }
        match self.phase {
            Phase::Joining(Handshake::Failed { .. }) => {
                log::info!("state transfer result {position} (rcode {rcode}) arrived after the transfer failed");
                Status::Ok
            }
            Phase::Joining(Handshake::ScriptFailed { .. } | Handshake::NewScript) => {
                log::warn!("state transfer result {position} (rcode {rcode}) arrived after the server's script failed: ignored");
                Status::Ok
            }
            Phase::Joining(h @ (Handshake::Pending | Handshake::Requested | Handshake::NoDonor)) if rcode < 0 => {
                if h != Handshake::Requested {
                    log::info!("state transfer failure (rcode {rcode}) arrived while the request was {h:?}");
                }
                self.set_phase(Phase::Joining(Handshake::Failed { rcode }));
                Status::Ok
            }
            Phase::Joining(Handshake::NoDonor) => {
                // Only a joiner that guessed which members are synced and was told no donor
                // choice within its bound (docs/design/donor-choice-of-a-guessing-joiner.md)
                // can find no donor where the others chose one. That donor's state came, but
                // this node refused its stream: it cannot continue from it, and stops rather
                // than wait forever.
                log::error!(
                    "state transfer result {position} (rcode {rcode}) arrived after this node found no donor \
                     for its request: it cannot tell where that state ends; restart it to rejoin"
                );
                self.set_phase(Phase::Joining(Handshake::Received { position, rcode: -1 }));
                Status::Ok
            }
            Phase::Joining(Handshake::Received { position: taken, .. }) => {
                // The server runs one script per request; a second result is not its own.
                log::warn!(
                    "state transfer result {position} (rcode {rcode}) arrived after this node took {taken}: ignored"
                );
                Status::Ok
            }
            Phase::Joining(h) => {
                if h != Handshake::Requested {
                    log::warn!("state transfer result {position} (rcode {rcode}) arrived before it was requested");
                }
                self.set_phase(Phase::Joining(Handshake::Received { position, rcode }));
                Status::Ok
            }
            Phase::Closed => {
                log::warn!("state transfer result {position} (rcode {rcode}) arrived while not connected");
                Status::ConnFail
            }
            _ => {
                log::warn!("state transfer result {position} (rcode {rcode}) arrived but none was requested");
                Status::Ok
            }
        }
    }

    /// The server received the state it reports: this node continues from it. `Err` if
    /// it cannot (the transfer failed or does not fit this node's history).
    pub fn install_transfer(&mut self, generation: u64) -> Result<Gtid, Status> {
        let Phase::Joining(Handshake::Received { position, rcode }) = self.phase else {
            return Err(Status::ConnFail);
        };
        if !self.is_current(generation) {
            return Err(Status::ConnFail);
        }
        let group = self.group();
        // A failure reported by `sst_received` ends in `Handshake::Failed` instead; this is
        // a state that does not fit (or a result that came after no donor was found).
        if rcode < 0 || position.uuid != group || position.seqno < 0 {
            log::error!(
                "state transfer failed (rcode {rcode}, position {position}, group {group}): \
                 this node cannot continue without the group's state"
            );
            return Err(Status::Fatal);
        }
        let ours = self.last_committed();
        if self.has_state() && position.seqno <= ours.seqno {
            // Only the handshake: the writesets after our position come in order. The server
            // reports where its storage stopped (an incremental transfer's script reads it):
            // the seqnos we finished after that, before or since our restart, were views it
            // was not shown. Every writeset we count committed, it committed (a clean
            // shutdown flushed them; after a crash it gave us its own position to start at).
            if position.uuid != ours.uuid {
                log::error!("state transfer reported {position}, but this node is at {ours}");
                return Err(Status::Fatal);
            }
            self.set_phase(Phase::Joined);
            log::info!("state confirmed at {position}; catching up with the group");
            self.expect_stream();
            self.snapshot_reaches_stream();
            return if self.failed { Err(Status::Fatal) } else { Ok(position) };
        }
        // A snapshot: newer than anything we held, it replaces our data and what we queued
        // up to it.
        let c = self.connection.as_mut().expect("current");
        c.has_state = true;
        c.snapshot_at = Some(position.seqno);
        self.position = position;
        self.forked = false;
        self.restart_windows(position.seqno);
        self.save_state(Gtid::new(position.uuid, SEQNO_UNDEFINED));
        self.set_phase(Phase::Joined);
        self.announce_synced(None);
        log::info!("state transfer complete at {position}; catching up with the group");
        self.expect_stream();
        self.snapshot_reaches_stream();
        self.snapshot_covers_gap();
        if self.failed {
            return Err(Status::Fatal);
        }
        Ok(position)
    }

    /// The server took its state, but no request of ours waits at its point in the order for
    /// the donor's stream: unless a request of ours is ordered first, the stream is asked for
    /// alone (see [`Core::ask_again_due`]). The request may have been lost: asked again after
    /// a donor left, with the script of the donor that left ending after all; or ordered
    /// only past the point where a component this member then forced forked from the order
    /// (provider simulator, seed 64032).
    fn expect_stream(&mut self) {
        let now_ms = self.clock_ms;
        let Some(c) = self.connection.as_mut().filter(|c| c.catch_up == CatchUp::Waiting) else { return };
        c.donor_search = Some(DonorSearch { since_ms: now_ms, next_ms: now_ms + REQUEST_LAG_MS });
    }

    /// The server asked for no transfer (a running server reconnecting): our own state must
    /// continue the group's.
    pub fn continue_without_transfer(&mut self, generation: u64) -> Result<(), Status> {
        if !self.is_current(generation) {
            return Ok(());
        }
        let position = self.last_committed();
        if !self.has_state() {
            self.fail_needing_full_transfer(&format!(
                "this node needs a state transfer (its position {position} does not continue the group's \
                 history) but the server requested none (a running server takes no snapshot)"
            ));
            return Err(Status::Fatal);
        }
        self.join_from_own_state();
        log::info!("no state transfer requested; continuing from {position} with the group's order");
        Ok(())
    }

    /// Where a restarted node that can catch up from its own log stands (`None`: it needs a
    /// donor). Its server's first view reports this position, so the server starts from its
    /// own data with no transfer, and the rest of the order is applied after it.
    pub fn own_log_position(&self, generation: u64) -> Option<Gtid> {
        let pending = self.phase == Phase::Joining(Handshake::Pending);
        let alone = self.connection.as_ref().is_some_and(|c| c.restart == Restart::Alone);
        (self.is_current(generation) && pending && alone && self.can_catch_up_alone()).then(|| self.last_committed())
    }

    /// For the first view of a restarted node that could catch up alone: whether it does
    /// (`Some(true)`: then [`Core::own_log_position`] tells where it starts) or takes a state
    /// transfer (`Some(false)`, as every other joiner); `None` after registering `waiter`
    /// while it still waits for a synced member's announcement (bounded by
    /// `RESTART_CHOICE_MS` of the driver's clock).
    pub fn restart_choice(&mut self, generation: u64, waiter: &W) -> Option<bool> {
        let pending = self.phase == Phase::Joining(Handshake::Pending);
        if !self.is_current(generation) || self.failed || !pending || !self.can_catch_up_alone() {
            return Some(false);
        }
        match self.connection.as_ref().map(|c| c.restart) {
            Some(Restart::Choosing { .. }) => {
                self.phase_waiters.push(waiter.clone());
                None
            }
            Some(Restart::Alone) => Some(true),
            _ => Some(false),
        }
    }

    /// The runtime's own bound on [`Core::restart_choice`] passed (the driver's clock
    /// stopped): the node catches up alone, as it did before it waited.
    pub fn restart_alone_now(&mut self, generation: u64) {
        if let Some(c) = self.connection.as_mut().filter(|c| c.generation == generation) {
            if matches!(c.restart, Restart::Choosing { .. }) {
                c.restart = Restart::Alone;
            }
        }
    }

    /// The server took its first view at `position` (from [`Core::own_log_position`]).
    pub fn catch_up_from_own_log(&mut self, generation: u64, position: Gtid) -> Result<(), Status> {
        if !self.is_current(generation) {
            return Ok(());
        }
        // Only a gap in the group's log, delivered meanwhile, takes the state away.
        if self.own_log_position(generation) != Some(position) {
            log::error!(
                "this node lost the order after its position {position} while its server started: \
                 restart it to receive a state transfer"
            );
            return Err(Status::Fatal);
        }
        self.join_from_own_state();
        log::info!("no state transfer needed: applying the order after {position} from this node's own log");
        Ok(())
    }

    fn join_from_own_state(&mut self) {
        self.set_phase(Phase::Joined);
        if self.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Waiting) {
            self.set_catch_up(CatchUp::Done);
        }
    }

    // ---- joiner: the donor's stream ----------------------------------------------------

    pub fn catch_up(&self, generation: u64) -> Option<CatchUp> {
        self.connection.as_ref().filter(|c| c.generation == generation).map(|c| c.catch_up)
    }

    /// Where our request was ordered, once it was; `None` after registering `waiter`.
    /// `Some(None)`: the connection ended or the stream is no longer awaited.
    pub fn request_point(&mut self, generation: u64, waiter: &W) -> Option<Option<Seqno>> {
        match self.catch_up(generation) {
            Some(CatchUp::AtRequest(at)) => Some(Some(at)),
            Some(CatchUp::Waiting) => {
                self.phase_waiters.push(waiter.clone());
                None
            }
            _ => Some(None),
        }
    }

    /// The donor's stream is in: the gap's events (when it sent them) replace the ones we
    /// certified ourselves, and its certification state replaces ours. `gap` holds the first
    /// of the gap's events, or all of them; `failed`, the seqnos of the whole gap that failed
    /// certification. With `more` the rest follows through [`Core::feed_stream`]: what is
    /// delivered after the request meanwhile is certified with the donor's state and queued
    /// behind the gap (its control messages act at once: a failed transfer ends the
    /// handshake that the gap's commits wait for). Nothing changes on an error.
    pub fn install_stream(&mut self, generation: u64, stream: StreamStart, preload: Preload) -> Result<(), String> {
        let StreamStart { at, from, gap, failed, events, more } = stream;
        if self.catch_up(generation) != Some(CatchUp::AtRequest(at)) {
            return Err(format!(
                "the stream is for seqno {at}, but this node waits for {:?}",
                self.catch_up(generation)
            ));
        }
        if let Some(from) = from {
            self.start_gap(at, from);
            self.merge_gap(gap);
        }
        // A joiner that certified the order with the group's state itself (the donor only
        // confirmed its position) keeps the verdicts it knows.
        let own_verdicts = from.is_none() && self.ordering.index_from_group;
        if !own_verdicts {
            self.ordering.verdicts.known_from(from.unwrap_or(at + 1), failed);
        }
        self.certification = preload.index;
        self.certification.set_optimistic_pa(self.settings.optimistic_pa);
        self.ordering.cuts = preload.cuts.into_iter().collect();
        self.ordering.synced = preload.synced.into_iter().collect();
        self.ordering.donors = preload.donors.into_iter().collect();
        self.ordering.donor_requests = preload.donor_requests.into_iter().map(|(d, j, id)| (d, (j, id))).collect();
        self.guesses_settled_by_state(at, preload.controls);
        self.ordering.synced_unknown = false;
        // A state made for another of our requests ordered after the same seqno (a later one
        // holds effects we will take again, an earlier one lacks some we took): its synced
        // set is no longer the group's once what we hold is taken (provider simulator, seed
        // 1275 of the donor-choice invariant).
        let other_request = preload.controls != self.ordering.controls_after;
        self.ordering.synced_guessed = preload.synced_guessed || other_request;
        // Dependencies after `at` are computed from the donor's barrier, as everywhere.
        self.ordering.barrier = preload.barrier;
        self.take_votes(preload.votes, !other_request);
        self.ordering.index_from_group = true;
        let digest = self.certification.digest();
        self.observed(|| super::Observation::IndexInstalled { at, digest });
        let c = self.connection.as_mut().expect("current");
        c.donor_search = None;
        if !own_verdicts && from.is_none() {
            c.index_only_at = Some(at);
        }
        match from {
            Some(from) => log::info!("incremental state transfer received: seqnos {from}..={at} ({events} events)"),
            None => log::info!("certification state received at seqno {at}; the data comes by snapshot"),
        }
        if more && from.is_some() {
            self.set_catch_up(CatchUp::Feeding(at));
            self.release_held_delivery();
        } else {
            self.end_gap();
        }
        self.snapshot_reaches_stream();
        Ok(())
    }

    /// More of the gap's events, in order, after those installed or fed before; `last`: the
    /// gap ends with them, and what was queued behind it follows.
    pub fn feed_stream(&mut self, generation: u64, gap: Vec<Transferred>, last: bool) -> Result<(), String> {
        if !matches!(self.catch_up(generation), Some(CatchUp::Feeding(_))) {
            return Err(format!("the gap is not being fed: {:?}", self.catch_up(generation)));
        }
        self.merge_gap(gap);
        if last {
            self.end_gap();
        } else {
            // What the gap passed left what was kept: there may be room to read on.
            self.release_held_delivery();
        }
        self.wake_one_applier();
        Ok(())
    }

    /// Whether the gap's events fed so far are committed up to `seqno`, so the next batch
    /// may follow (the apply queue holds a bounded part of the gap); `None` after
    /// registering `waiter`; `Some(false)`: feeding ended (the connection ended or failed).
    pub fn feed_turn(&mut self, generation: u64, seqno: Seqno, waiter: &W) -> Option<bool> {
        if self.failed || !matches!(self.catch_up(generation), Some(CatchUp::Feeding(_))) {
            return Some(false);
        }
        if self.committed.reached(seqno) {
            return Some(true);
        }
        self.committed.wait_for(seqno, waiter.clone());
        None
    }

    /// A donor's certification state that came with no gap, for a joiner that does not keep
    /// its own verdicts, needs the server's snapshot at or past its point: the writesets
    /// between would be certified by this node alone. A donor's snapshot is taken once
    /// everything up to the request is committed, so only a stream asked again after its
    /// donor left can miss it (a late snapshot of the donor that left, or a stream alone that
    /// could not carry the gap): the node stops. Judged once the server's handshake is done.
    fn snapshot_reaches_stream(&mut self) {
        let Some(c) = self.connection.as_ref().filter(|_| self.phase.app_ready()) else { return };
        let Some(at) = c.index_only_at else { return };
        if c.snapshot_at.is_some_and(|snapshot| snapshot >= at) {
            return;
        }
        let snapshot = c.snapshot_at.map_or("none".to_string(), |s| format!("seqno {s}"));
        self.fail(&format!(
            "the donor's certification state at seqno {at} came without the writesets before it, and the \
             server's snapshot ({snapshot}) does not reach it (the donor chosen first left the group)"
        ));
    }

    /// The group skipped seqnos of its log (a gap: its leader no longer held them when this
    /// member read them) while this node waited for its snapshot, past the point the
    /// snapshot reached: the data of those seqnos is in neither, and this node cannot go on
    /// (provider simulator, seed 53974: a joiner waited for good at the first seqno the gap
    /// skipped). A gap before the request's point needs nothing: the snapshot is newer.
    fn snapshot_covers_gap(&mut self) {
        let Some(c) = self.connection.as_mut() else { return };
        let Some(skipped) = c.skipped_without_state.take() else { return };
        let Some(snapshot) = c.snapshot_at.filter(|&at| at < skipped) else { return };
        self.fail_needing_full_transfer(&format!(
            "the state transfer ended at seqno {snapshot}, and the group no longer holds seqnos after it, up to \
             {skipped} (they left the group's log while this node waited for the transfer): it needs a full \
             state transfer"
        ));
    }

    /// The donor chosen for our request left the group before its stream was in or before
    /// its script ended: it will never send them, and another member is asked. While the
    /// server's script still waits (the handshake is not done), the handshake asks again with
    /// the server's own request (the same SST address); once the server holds its state, the
    /// core asks for the stream alone (docs/design/donor-left-mid-transfer.md).
    pub(super) fn donor_left(&mut self, generation: u64, now_ms: u64) {
        let c = self.connection.as_mut().expect("current");
        // The view that dropped it may be the current one already: its name as chosen.
        let name = std::mem::take(&mut c.donor_name);
        c.donor = None;
        let handshake = match self.phase {
            Phase::Joining(Handshake::Requested | Handshake::NoDonor | Handshake::ScriptFailed { .. }) => true,
            Phase::Joining(Handshake::Received { .. }) | Phase::Joined => false,
            _ => {
                self.fail_stream(generation, &format!("the donor {name} chosen for our request left the group"));
                return;
            }
        };
        let search = c.donor_search.get_or_insert(DonorSearch { since_ms: now_ms, next_ms: u64::MAX });
        if !handshake {
            search.next_ms = now_ms;
        }
        // The server's script may hold that donor's broken stream (see `script_failed`).
        c.donor_lost = handshake;
        let stream = matches!(c.catch_up, CatchUp::AtRequest(_));
        let script_failed = matches!(self.phase, Phase::Joining(Handshake::ScriptFailed { .. }));
        log::info!(
            "the donor {name} chosen for our state request left the group before {}: asking another member{}",
            match (stream, handshake) {
                (true, true) => "its stream and its state transfer were in",
                (true, false) => "its stream was in",
                _ => "its state transfer was in",
            },
            match (script_failed, handshake) {
                (true, _) =>
                    " with a new state transfer script of the server's (the one that failed took that donor's stream)",
                (false, true) => " with the server's state transfer request",
                (false, false) => " for the stream alone",
            }
        );
        if stream {
            if !handshake {
                // What this node reads until the next donor's stream comes is certified with
                // its own state, then replaced by the stream: a writeset of ours among it is
                // applied from there, its client told the outcome is unknown.
                self.fail_in_flight(Status::ConnFail);
            }
            self.set_catch_up(CatchUp::Waiting);
            // What follows the request is read on, until our next request.
            self.release_held_delivery();
        }
        if self.phase == Phase::Joining(Handshake::Requested) {
            self.set_phase(Phase::Joining(Handshake::NoDonor));
        }
        if script_failed {
            self.start_new_script();
        }
        self.ask_again_due(now_ms);
    }

    /// The server's script failed (`sst_received` < 0) while our request waited. A script may
    /// take one stream only (mariabackup's listens for one connection), so a donor that
    /// crashed mid-transfer breaks it for good; then the server starts a new script and another
    /// member is asked, at most `NEW_SCRIPTS_MAX` times a connection. That is the failure's
    /// cause when a donor of ours left while the handshake waited; while the donor chosen is
    /// still in the group (the group drops a crashed member seconds after its stream broke),
    /// the handshake waits for the group's word on it (`ScriptFailed`). Returns whether it
    /// took the failure either way; otherwise the transfer failed.
    fn script_failed(&mut self, rcode: i32) -> bool {
        let now_ms = self.clock_ms;
        let requested = self.phase == Phase::Joining(Handshake::Requested);
        let Some(c) = self.connection.as_mut() else { return false };
        if c.new_scripts >= NEW_SCRIPTS_MAX {
            return false;
        }
        if c.donor_lost {
            log::info!("the server's state transfer script failed ({rcode}) after our donor left the group");
            self.start_new_script();
            return true;
        }
        if c.donor.is_none() || !requested {
            return false;
        }
        c.script_failed_ms = Some(now_ms);
        let name = &c.donor_name;
        log::info!(
            "the server's state transfer script failed ({rcode}) while its donor {name} is in the group: \
             if {name} leaves within {} s (it crashed), another member is asked",
            SCRIPT_VERDICT_MS / 1000
        );
        self.set_phase(Phase::Joining(Handshake::ScriptFailed { rcode }));
        true
    }

    /// The server is asked for a new script, then another member for the state.
    fn start_new_script(&mut self) {
        let c = self.connection.as_mut().expect("current");
        // Whatever that donor still sends goes to the failed script: the next request's
        // donor is awaited.
        c.donor = None;
        c.donor_lost = false;
        c.script_failed_ms = None;
        c.new_scripts += 1;
        log::info!(
            "asking the server to start its state transfer script again (try {} of {NEW_SCRIPTS_MAX})",
            c.new_scripts
        );
        self.set_phase(Phase::Joining(Handshake::NewScript));
    }

    /// Decides a `ScriptFailed` handshake the group has said nothing about: its donor announced
    /// itself synced again after donating (its script ended, so ours failed on its own), or
    /// `SCRIPT_VERDICT_MS` passed with the donor still in the group.
    pub(super) fn script_verdict_due(&mut self, now_ms: u64, synced_again: Option<MemberId>) {
        let Phase::Joining(Handshake::ScriptFailed { rcode }) = self.phase else { return };
        let Some(c) = self.connection.as_ref() else { return };
        let donor_synced = synced_again.is_some_and(|m| c.donor.is_some_and(|(donor, _)| donor == m));
        let waited_out = c.script_failed_ms.is_some_and(|since| now_ms >= since + SCRIPT_VERDICT_MS);
        if donor_synced || waited_out {
            log::info!(
                "the donor of our state transfer {}: the server's script failed on its own",
                if donor_synced { "finished its side" } else { "stayed in the group" }
            );
            self.set_phase(Phase::Joining(Handshake::Failed { rcode }));
        }
    }

    /// Asks for the donor's stream again (see [`Core::donor_left`]) when due: a request with
    /// no SST request of the server's, from the position the server holds. Gives up after
    /// `DONOR_SEARCH_MS`.
    pub(super) fn ask_again_due(&mut self, now_ms: u64) {
        let generation = self.generation;
        let Some(c) = self.connection.as_mut() else { return };
        // A request of ours awaiting its donor choice is not asked again meanwhile.
        let due = |s: &DonorSearch| now_ms >= s.next_ms && c.catch_up == CatchUp::Waiting && c.awaited_choice.is_none();
        let Some(search) = c.donor_search.filter(due) else {
            return;
        };
        if now_ms >= search.since_ms + DONOR_SEARCH_MS {
            c.donor_search = None;
            let secs = DONOR_SEARCH_MS / 1000;
            self.fail_stream(
                generation,
                &format!("no member sent the state transfer stream within {secs} s of our asking for it again"),
            );
            return;
        }
        c.donor_search = Some(DonorSearch { next_ms: now_ms + ASK_AGAIN_MS, ..search });
        let id = c.next_own_request_id();
        c.new_request_id(id);
        let (ist_addr, donors) = (c.ist_addr.clone(), c.donors.clone());
        let position = match self.phase {
            Phase::Joining(Handshake::Received { position, .. }) => position,
            _ => self.last_committed(),
        };
        let own_order = self.can_catch_up_alone();
        log::info!("requesting the state transfer stream again from position {position}");
        let guessing = self.guesses_who_is_synced();
        let request = Control::StateRequest(StateRequest {
            sst_request: Vec::new(),
            position,
            donors,
            has_state: true,
            ist_addr,
            id,
            own_order,
            guessing,
        });
        self.effects.send.push((request, 0));
    }

    /// The donor's stream failed: this node cannot continue.
    pub fn fail_stream(&mut self, generation: u64, message: &str) {
        if !self.is_current(generation) {
            return;
        }
        log::error!("{message}: this node cannot continue without the group's state");
        if self.connection.as_ref().is_some_and(|c| !c.catch_up.settled()) {
            self.set_catch_up(CatchUp::Failed);
        }
        self.wake_everyone();
    }

    /// The gap's events from the donor replace the writesets we certified ourselves up to
    /// `at`; what else is queued (views, donations, announcements) is merged in seqno order
    /// among them as they come (`merge_gap`).
    fn start_gap(&mut self, at: Seqno, from: Seqno) {
        let kept = std::mem::take(&mut self.events)
            .into_iter()
            .filter(|e| !matches!(e, Event::Apply { seqno, .. } if *seqno <= at))
            .collect();
        self.connection.as_mut().expect("current").gap = GapMerge { kept, fed_to: from - 1 };
    }

    fn merge_gap(&mut self, gap: Vec<Transferred>) {
        let last = gap.last().map_or(Seqno::MIN, Transferred::seqno);
        let c = self.connection.as_mut().expect("current");
        let joined_at = c.joined_at.unwrap_or(Seqno::MAX);
        let incoming = gap.into_iter().filter_map(|t| match t {
            Transferred::Writeset { seqno, writeset, failed } => {
                Some(Event::Apply { seqno, writeset, depends_on: seqno - 1, failed })
            }
            // Our own views reach the application as views, in order.
            Transferred::Skipped { seqno } if seqno >= joined_at => None,
            Transferred::Skipped { seqno } => Some(Event::Skipped { seqno }),
        });
        for event in incoming {
            let seqno = event.seqno().expect("transferred events have seqnos");
            while c.gap.kept.front().is_some_and(|e| e.place().is_none_or(|s| s < seqno)) {
                self.events.extend(c.gap.kept.pop_front());
            }
            self.events.push_back(event);
        }
        c.gap.fed_to = c.gap.fed_to.max(last);
    }

    /// The whole gap is queued: what we kept follows it.
    fn end_gap(&mut self) {
        let c = self.connection.as_mut().expect("current");
        self.events.extend(std::mem::take(&mut c.gap.kept));
        self.set_catch_up(CatchUp::Done);
        self.release_held_delivery();
    }

    // ---- donor ---------------------------------------------------------------------------

    /// The donor's half at delivery time: its ordering state at `after`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn donation(
        &self,
        joiner: MemberId,
        request_id: u64,
        request: Vec<u8>,
        after: Seqno,
        position: Gtid,
        joiner_has_state: bool,
        ist_addr: String,
        joiner_own_order: bool,
    ) -> Donation {
        let in_history = position.uuid == self.group() && position.seqno >= 0;
        let failed = if in_history { self.ordering.verdicts.failed_in(position.seqno + 1, after) } else { None };
        // Only a joiner that continues our history can hold its order.
        let joiner_own_order = joiner_own_order && in_history && joiner_has_state;
        Donation {
            joiner,
            request_id,
            request,
            after,
            position,
            joiner_has_state,
            ist_addr,
            preload: self.preload(),
            failed,
            joiner_own_order,
        }
    }

    /// The ordering state a joiner (or a restart, from a checkpoint) certifies on from.
    pub(super) fn preload(&self) -> Preload {
        Preload {
            index: self.certification.clone(),
            cuts: self.ordering.cuts.iter().map(|(id, cut)| (*id, *cut)).collect(),
            synced: self.ordering.synced.iter().copied().collect(),
            synced_guessed: self.guesses_who_is_synced(),
            donors: self.ordering.donors.iter().map(|(id, incarnation)| (*id, *incarnation)).collect(),
            donor_requests: self.ordering.donor_requests.iter().map(|(d, (j, id))| (*d, *j, *id)).collect(),
            controls: self.ordering.controls_after,
            barrier: self.ordering.barrier,
            votes: self.votes(),
        }
    }

    /// The server starts donating: the node is desynced until `sst_sent`. Returns the
    /// state id to donate.
    pub fn donation_started(&mut self, donation: &Donation, bypass: bool) -> Gtid {
        self.desync_count += 1;
        let state_id = if bypass { donation.position } else { self.last_committed() };
        if let Some(c) = self.connection.as_mut() {
            c.donations.push(Donating { state_id, joiner: donation.joiner, request_id: donation.request_id });
        }
        state_id
    }

    /// The server refused to start `donation` (its `sst_donate` failed): it ends, and the
    /// group is told (see [`Core::donation_ended`]).
    pub fn donation_refused(&mut self, donation: &Donation, rcode: i32) {
        let record = self.connection.as_mut().and_then(|c| {
            let at =
                c.donations.iter().position(|r| (r.joiner, r.request_id) == (donation.joiner, donation.request_id));
            at.map(|at| c.donations.remove(at))
        });
        // Not a donation of this connection: nothing to end here (see `donation_ended`). It
        // was started before this connection's close counted it, and will send no `sst_sent`.
        if record.is_some() {
            self.end_donation(record, rcode);
        } else {
            self.earlier_donations = self.earlier_donations.saturating_sub(1);
        }
    }

    /// The server's transfer of `state_id` ended (`sst_sent`). `rcode` < 0: it failed, and
    /// the group is told through the order, so that the joiner, which will never receive
    /// that state, stops (Galera's JOIN with a negative code). The server names the state it
    /// sent (after a failure only its history), not the joiner: with several donations under
    /// way (a script of an earlier connection still running beside this one's), a failure
    /// that matches none of their states exactly is not reported, rather than stop a joiner
    /// whose transfer may be going well; that joiner's own SST script fails in the end.
    pub fn donation_ended(&mut self, state_id: Gtid, rcode: i32) {
        // Every donation of this connection is listed until it ends. One that is not, or
        // that names none of them while a script of an earlier connection still runs (the
        // oldest is taken to end first), began in an earlier connection of this process:
        // it has nothing to tell this one's group, nor a desync of this one to end.
        let exact = self.connection.as_ref().and_then(|c| c.donations.iter().position(|r| r.state_id == state_id));
        let listed = self.connection.as_ref().is_some_and(|c| !c.donations.is_empty());
        if !listed || (exact.is_none() && self.earlier_donations > 0) {
            self.earlier_donations = self.earlier_donations.saturating_sub(1);
            log::info!("a state transfer of an earlier connection ended (rcode {rcode}): nothing to tell the group");
            return;
        }
        let record = self.connection.as_mut().and_then(|c| {
            let only = (c.donations.len() == 1).then_some(0);
            match exact.or(only) {
                Some(at) => Some(c.donations.remove(at)),
                None => {
                    // Which one ended is unknown: the oldest leaves the list, unreported.
                    if !c.donations.is_empty() {
                        let oldest = c.donations.remove(0);
                        if rcode < 0 {
                            log::info!(
                                "a state transfer from this node failed (rcode {rcode}), but {} were under way: the \
                                 joiner's own script reports it (not told to member {})",
                                c.donations.len() + 1,
                                oldest.joiner
                            );
                        }
                    }
                    None
                }
            }
        });
        let unattributed = record.is_none() && rcode < 0;
        self.end_donation(record, if unattributed { 0 } else { rcode });
    }

    fn end_donation(&mut self, record: Option<Donating>, rcode: i32) {
        if self.desync_count > 0 {
            self.desync_count -= 1;
        }
        if self.connection.is_none() {
            return;
        }
        if let (Some(r), true) = (record, rcode < 0) {
            let failure = Control::TransferFailed { joiner: r.joiner, id: r.request_id, rcode };
            // A report that is not ordered (a leader change, or this node left the primary
            // component meanwhile) is sent again once primary: the joiner's own script may
            // never give up. One ordered twice finds the joiner's request already ended.
            self.ordering.unordered_failures.push((r.joiner, r.request_id, rcode));
            self.effects.send.push((failure, super::ordering::TRANSFER_FAILED_TAG));
        }
        let end = record.map_or(DonationEnd::Unnamed, |r| DonationEnd::Of { joiner: r.joiner, id: r.request_id });
        self.announce_synced(Some(end));
    }

    /// The transfer this joiner waits for failed: it will never receive the state (the
    /// runtime then ends the process, as Galera does). Returns the failure's code.
    pub fn transfer_failed(&self) -> Option<i32> {
        match self.phase {
            Phase::Joining(Handshake::Failed { rcode }) => Some(rcode),
            _ => None,
        }
    }

    /// A donor's failure, ordered: the joiner it was for, if it is us waiting for that
    /// request, can never receive the state. A state already received stays (the donor's
    /// side may fail after the joiner's side finished).
    pub(super) fn donor_failed(&mut self, joiner: MemberId, id: u64, rcode: i32) {
        let ours = self.connection.as_ref().is_some_and(|c| c.me == joiner && c.request_id == id && id != 0);
        let waiting = matches!(
            self.phase,
            Phase::Joining(Handshake::Requested | Handshake::NoDonor | Handshake::ScriptFailed { .. })
        );
        if ours && waiting {
            self.set_phase(Phase::Joining(Handshake::Failed { rcode }));
        }
    }

    /// A request for the stream alone (see [`Donation::stream_only`]) was served: no script
    /// ran, and this member is back in the synced set. A stream without the gap the joiner
    /// needs (only a snapshot would do) is refused by the joiner, which then stops
    /// (`Core::snapshot_reaches_stream`). Nothing if the connection `generation` ended meanwhile.
    pub fn donated_stream_only(&mut self, generation: u64, donation: &Donation) {
        if self.is_current(generation) {
            self.announce_synced(Some(DonationEnd::Of { joiner: donation.joiner, id: donation.request_id }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{may_take, Width};

    #[test]
    fn under_a_width_of_one_a_second_applier_takes_only_from_a_held_queue() {
        assert!(!may_take(0, 0, Width::All, false), "nothing queued");
        assert!(may_take(1, 0, Width::One, false), "no other applier in flight");
        assert!(!may_take(15, 1, Width::One, false), "the one in flight takes it when done");
        assert!(may_take(1, 1, Width::One, true), "one in flight for long: held");
        assert!(may_take(1, 3, Width::All, false), "every applier may take under a width of all");
    }
}
