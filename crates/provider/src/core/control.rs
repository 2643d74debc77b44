//! The connection's life (open, leave, close), causal reads, pause/resume (FTWRL, donors)
//! and desync/resync.
use super::apply::Event;
use super::flow::{Ask, FLOW_TAG};
use super::phase::{CatchUp, Component, Phase};
use super::{BarrierWait, Connection, Core, APPLICATION_PROTOCOL, CAPABILITIES};
use crate::application::{View, ViewStatus};
use crate::checkpoint::Checkpoint;
use crate::types::{Gtid, Seqno, Status, Uuid, SEQNO_UNDEFINED};
use crate::writeset::Control;

/// A flow-control pause this long or longer is logged by the member that caused it.
const LOGGED_PAUSE_MS: u64 = 1_000;
use lockstep_group::MemberId;

/// What `open` needs to know about the new connection.
#[derive(Debug, Clone)]
pub struct Opening {
    pub me: MemberId,
    pub member: Uuid,
    /// `Some`: this connection starts a new cluster with this history.
    pub bootstrap_history: Option<Uuid>,
    pub ist_addr: String,
    pub donors: String,
    /// The certification checkpoint in the cache directory, if any.
    pub checkpoint: Option<Box<Checkpoint>>,
}

impl<W: Clone + PartialEq> Core<W> {
    /// Whether `connect` may go on: not connected yet, and a bootstrap only from a node that
    /// is safe to bootstrap from.
    pub fn may_connect(&self, bootstrap: bool) -> Result<(), Status> {
        // A node voted out as inconsistent may connect again, as with Galera (mtr
        // galera_3nodes.galera_vote_rejoin_mysqldump): its saved position is undefined, so it
        // takes a full transfer. Any other failure needs a restart.
        if self.connection.is_some() || self.failed && !self.inconsistent {
            log::error!("connect called while already connected");
            return Err(Status::NodeFail);
        }
        if bootstrap && !self.safe_to_bootstrap {
            log::error!("{}", self.unsafe_bootstrap_refusal());
            return Err(Status::NodeFail);
        }
        Ok(())
    }

    /// Galera's words (operators and MariaDB's tests know them), then who went on without this
    /// node, when that is known.
    pub(super) fn unsafe_bootstrap_refusal(&self) -> String {
        let candidates = match self.last_primary_others.as_slice() {
            [] => String::new(),
            others => format!(
                " Its last primary component went on with {}: bootstrap from the one of them that left last \
                 (safe_to_bootstrap: 1 in its grastate.dat), or start every node without --wsrep-new-cluster \
                 and they form the cluster again.",
                others.join(", ")
            ),
        };
        format!(
            "It may not be safe to bootstrap the cluster from this node. It was not the last one to leave the \
             cluster and may not contain all the updates. To force cluster bootstrap with this node, edit the \
             grastate.dat file manually and set safe_to_bootstrap to 1 .{candidates}"
        )
    }

    /// The other data members of our last primary component, as kept beside the saved state
    /// by an earlier run (see `Effects::last_primary`).
    pub fn remember_last_primary(&mut self, others: Vec<String>) {
        self.last_primary_others = others;
    }

    /// The group member is running: the connection starts. Returns its generation.
    pub fn open(&mut self, opening: Opening) -> u64 {
        let bootstrap = opening.bootstrap_history.is_some();
        if self.failed && self.inconsistent {
            // Voted out; `close` left the position undefined: a full transfer follows.
            self.failed = false;
            self.inconsistent = false;
            self.restart_needed = false;
        }
        if let Some(history) = opening.bootstrap_history {
            // The new cluster's history starts from what this node holds.
            self.position = Gtid::new(history, self.position.seqno.max(0));
            self.safe_to_bootstrap = true;
        }
        self.generation += 1;
        self.flow.reset_connection(self.clock_ms);
        // Appliers of an earlier connection that left after a failure never asked again.
        self.appliers_in_flight.clear();
        self.connection = Some(Connection {
            generation: self.generation,
            group: self.position.uuid,
            member: opening.member,
            me: opening.me,
            view: lockstep_group::View::default(),
            has_state: false,
            bootstrapped: bootstrap,
            apply_failed: None,
            component: Component::Primary,
            group_primary: false,
            joined_at: None,
            gap_before_first_view: false,
            catch_up: if bootstrap { CatchUp::Done } else { CatchUp::Waiting },
            gap: Default::default(),
            request_id: 0,
            earlier_requests: Vec::new(),
            asked_again_id: 0,
            ist_addr: opening.ist_addr,
            donors: opening.donors,
            leader: None,
            cached: None,
            donor: None,
            donor_name: String::new(),
            had_donor: false,
            donor_search: None,
            donor_lost: false,
            script_failed_ms: None,
            new_scripts: 0,
            index_only_at: None,
            snapshot_at: None,
            skipped_without_state: None,
            donations: Default::default(),
            restart: super::phase::Restart::Undecided,
            checkpoint: opening.checkpoint,
            awaited_choice: None,
            possible_donations: Default::default(),
        });
        self.set_phase(Phase::Opening);
        self.events.clear();
        self.deliveries_held = false;
        self.held_deliveries.clear();
        self.queued_bytes = 0;
        self.ordering.last_cut = None;
        self.ordering.last_checkpoint = None;
        self.ordering.restored = None;
        // Under a new member id they would never come back as ours: the server's view
        // handling rolls back what the old member left open.
        self.ordering.rollbacks.clear();
        // What the old member failed to get ordered is not the new one's to say: a synced
        // announcement sent again would make a joiner a donor candidate before its transfer.
        self.ordering.announce_synced_again = None;
        self.ordering.report_failures_again = false;
        self.ordering.unordered_failures.clear();
        // Votes are on the old connection's seqnos; its waiters were woken at its close.
        self.ballots.clear();
        self.failures.clear();
        self.decided_votes.clear();
        self.ordering.snapshot_joiners.clear();
        self.synced_before_loss = false;
        self.server_view = None;
        self.save_state(Gtid::new(self.position.uuid, SEQNO_UNDEFINED));
        self.generation
    }

    /// `disconnect`: leaving starts; returns whether we are alone in the view (then the group
    /// need not confirm). `None` if not connected or already leaving.
    pub fn begin_leave(&mut self) -> Option<bool> {
        if matches!(self.phase, Phase::Closed | Phase::Closing { .. }) {
            return None;
        }
        let alone = self.connection.as_ref()?.view.members.len() <= 1;
        log::info!("closing connection: last committed {}", self.last_committed());
        let app_ready = self.phase.app_ready();
        self.set_phase(Phase::Closing { app_ready });
        Some(alone)
    }

    /// The group confirmed (or did not in time): the final view goes to an applier, after
    /// which every `recv` returns.
    pub fn push_final_view(&mut self) {
        let view = View {
            state_id: self.last_committed(),
            conf_id: -1,
            status: ViewStatus::NonPrimary,
            capabilities: CAPABILITIES,
            my_index: -1,
            members: Vec::new(),
            proto_ver: APPLICATION_PROTOCOL,
        };
        self.push_event(Event::Final { view });
    }

    /// Ends the connection: where the history stands is saved, every waiter is released.
    /// Returns false if there was none.
    pub fn close(&mut self, why: &str) -> bool {
        let Some(c) = self.connection.take() else { return false };
        let position = match (self.inconsistent, c.has_state) {
            (true, _) => Gtid::UNDEFINED,
            (false, true) => Gtid::new(c.group, self.committed.last_contiguous()),
            (false, false) => self.position,
        };
        self.position = position;
        self.desync_count = 0;
        self.earlier_donations += c.donations.len();
        self.set_phase(Phase::Closed);
        self.fail_in_flight(Status::ConnFail);
        self.save_state(position);
        self.wake_everyone();
        log::info!("{why}; saved state {position}, safe_to_bootstrap: {}", u8::from(self.safe_to_bootstrap));
        true
    }

    // ---- causal reads --------------------------------------------------------------------

    /// Starts a causal read: the id of the barrier to order (its delivery position is the
    /// causal point), or `None` if this node cannot replicate.
    pub fn barrier_start(&mut self) -> Option<u64> {
        if !self.can_replicate() {
            return None;
        }
        let id = self.next_local_id;
        self.next_local_id += 1;
        self.ordering.barriers.insert(id, BarrierWait { at: None, failed: false, waiter: None });
        Some(id)
    }

    /// The causal point of barrier `id`, once it is ordered (`Err` if it will not be);
    /// `None` after registering `waiter`.
    pub fn barrier_point(&mut self, id: u64, waiter: &W) -> Option<Result<Seqno, ()>> {
        let barrier = self.ordering.barriers.get_mut(&id)?;
        let outcome = match (barrier.at, barrier.failed) {
            (Some(at), _) => Ok(at),
            (None, true) => Err(()),
            (None, false) => {
                barrier.waiter = Some(waiter.clone());
                return None;
            }
        };
        self.ordering.barriers.remove(&id);
        if outcome.is_ok() {
            self.counters.causal_reads += 1;
        }
        Some(outcome)
    }

    pub fn forget_barrier(&mut self, id: u64) {
        self.ordering.barriers.remove(&id);
    }

    pub(super) fn barrier_ordered(&mut self, id: u64, after: Seqno) {
        let Some(barrier) = self.ordering.barriers.get_mut(&id) else { return };
        barrier.at = Some(after);
        let Some(waiter) = barrier.waiter.take() else { return };
        // One wake: straight to the monitor if the reader must wait for commits anyway.
        if self.committed.reached(after) {
            self.effects.wake.push(waiter);
        } else {
            self.committed.wait_for(after, waiter);
        }
    }

    /// Whether everything up to `seqno` has committed here; if not, `waiter` is woken when it has.
    pub fn committed_up_to(&mut self, seqno: Seqno, waiter: &W) -> bool {
        if self.committed.reached(seqno) || self.failed {
            return true;
        }
        self.committed.wait_for(seqno, waiter.clone());
        false
    }

    /// A wait that timed out: its waiter leaves every list it may be in.
    pub fn abandon_wait(&mut self, waiter: &W) {
        self.committed.forget(waiter);
        self.commit_order.forget(waiter);
        self.unpause_waiters.retain(|w| w != waiter);
        self.phase_waiters.retain(|w| w != waiter);
        self.idle_appliers.retain(|w| w != waiter);
        for ballot in self.ballots.values_mut() {
            ballot.forget(waiter);
        }
    }

    // ---- pause, desync -------------------------------------------------------------------

    /// Stops ordering new writesets; returns the seqno to drain up to, or `None` if already
    /// paused.
    pub fn pause_start(&mut self) -> Option<Seqno> {
        if self.paused_at.is_some() {
            log::error!("pause requested while already paused");
            return None;
        }
        // Local writesets still being ordered are not waited for: they wait for `resume`
        // in commit order, which pausing blocks.
        let target = self.ordering.delivered;
        self.paused_at = Some(target);
        Some(target)
    }

    /// Once everything up to the pause's target committed: paused at that point, saved.
    pub fn pause_drained(&mut self) -> Seqno {
        let at = self.committed.last_contiguous();
        self.paused_at = Some(at);
        let group = self.group();
        self.save_state(Gtid::new(group, at));
        log::info!("provider paused at {group}:{at}");
        at
    }

    /// The pause could not drain in time: writes go on.
    pub fn pause_abandoned(&mut self) {
        self.paused_at = None;
        self.effects.wake.append(&mut self.unpause_waiters);
    }

    pub fn resume(&mut self) -> Status {
        if self.paused_at.take().is_none() {
            return Status::Ok;
        }
        let running = Gtid::new(self.group(), SEQNO_UNDEFINED);
        self.save_state(running);
        self.effects.wake.append(&mut self.unpause_waiters);
        log::info!("provider resumed");
        Status::Ok
    }

    // ---- flow control (core/flow.rs) -----------------------------------------------------

    /// Writers wait: the provider is paused (FTWRL, donor) or a member's flow-control stop
    /// is in force.
    pub(super) fn writers_held(&self) -> bool {
        self.paused_at.is_some() || self.flow.paused()
    }

    /// Writers waiting for a pause or a stop go on once neither holds.
    pub(super) fn release_writers(&mut self) {
        if !self.writers_held() {
            self.effects.wake.append(&mut self.unpause_waiters);
        }
    }

    /// Asks the group to pace, stop or resume, as our apply queue requires. A member that does
    /// not apply the order as a synced member does (desynced, a donor, a joiner) never holds
    /// others.
    pub(super) fn flow_check(&mut self) {
        let Some(c) = self.connection.as_ref() else { return };
        let (me, members) = (c.me, c.view.members.len());
        // Nor does a member whose appliers wait for its donor's stream: its queue cannot drain
        // before the stream is in, however the writers go.
        let exempt =
            self.desync_count > 0 || !matches!(self.phase, Phase::Joined | Phase::Synced) || !c.catch_up.settled();
        let (queue, flow, now) = (self.events.len(), &self.settings.flow, self.clock_ms);
        if let Some(ask) = self.flow.decide(me, queue, members, exempt, flow, now) {
            let (ask, rate) = ask.to_wire();
            let number = self.flow.request_number();
            self.effects.send.push((Control::Flow { ask, rate, number }, FLOW_TAG));
        }
    }

    /// A member's stop, pace or resume came through the order.
    pub(super) fn flow_ordered(&mut self, origin: MemberId, ask: u8, rate: u32, number: u64) {
        let me = self.me();
        let ask = Ask::from_wire(ask, rate);
        let ended = self.flow.ordered(me, origin, ask, number, self.clock_ms);
        let ended = ended.map(|episode| (self.clock_ms.saturating_sub(episode.since_ms), episode));
        if let Some((held_ms, episode)) = ended.filter(|(held_ms, _)| *held_ms >= LOGGED_PAUSE_MS) {
            // One line per episode an operator would notice: who held the cluster back, how
            // long, how hard, and why. Short ones (thousands a second under a tight limit) only
            // count.
            let mut how = Vec::new();
            if let Some(pace) = episode.slowest_pace {
                // Unknown while the queue never stayed full (a big writeset's backlog paces
                // without it).
                let rate = self.flow.apply_rate();
                let rate = if rate > 0.0 && episode.follower_behind.is_none() {
                    format!(", its appliers doing {rate:.0}/s")
                } else {
                    String::new()
                };
                how.push(format!("paced down to {pace} writesets/s{rate}"));
            }
            if episode.stopped_ms > 0 {
                how.push(format!("stopped for {} ms", episode.stopped_ms));
            }
            let limit = self.settings.flow.limit;
            let queue = if let Some((follower, lacking)) = episode.follower_behind {
                format!(
                    "as the group's leader, for member {follower}, which lacked up to {} MiB of the order, past \
                     gcache.size",
                    lacking >> 20
                )
            } else if episode.longest_big_backlog > 0 {
                format!(
                    "up to {} events waited behind a writeset of 4 MiB or more being applied, and its apply queue \
                     reached {} events past those (gcs.fc_limit {limit})",
                    episode.longest_big_backlog, episode.longest_queue
                )
            } else {
                format!("its apply queue reached {} events, past gcs.fc_limit {limit}", episode.longest_queue)
            };
            log::info!(
                "flow control: this node held the cluster's writers back for {held_ms} ms ({}); {queue}",
                how.join(", ")
            );
        }
        self.release_writers();
        if origin == me {
            self.flow_check();
        }
    }

    pub fn desync(&mut self) -> Status {
        if self.connection.is_none() || matches!(self.phase, Phase::Closing { .. }) {
            return Status::ConnFail;
        }
        self.desync_count += 1;
        log::info!("desynced from the group (desync count {})", self.desync_count);
        Status::Ok
    }

    pub fn resync(&mut self) -> Status {
        if self.desync_count == 0 {
            // A Note: the loss of the primary component ended the desync the server asks
            // to end (it still counts it).
            log::info!("resync requested but the node is not desynced");
            return Status::Ok;
        }
        self.desync_count -= 1;
        if self.desync_count == 0 && self.phase == Phase::Joined {
            // With one member there is nothing to catch up on.
            self.set_phase(Phase::Synced);
        }
        log::info!("resynced (desync count {})", self.desync_count);
        Status::Ok
    }
}
