//! The total order as it reaches this node: certification in delivery order, on every member
//! alike (Galera's local monitor); views; control messages. What needs the server becomes an
//! [`Event`] in the apply queue; what one of our own client threads waits for (its verdict,
//! its barrier) goes straight to that thread.
use super::apply::{primary_view, Event};
use super::phase::{CatchUp, Component, Phase, Restart};
use super::{Core, InFlight};
use crate::application::{View, ViewStatus};
use crate::certification::{Candidate, CertificationIndex, Chains, Verdict};
use crate::checkpoint::Checkpoint;
use crate::state_transfer::transfer_failed_line;
use crate::types::{flags, Gtid, Seqno, Status, Uuid};
use crate::writeset::{Control, DonationEnd, Writeset};
use lockstep_group::{Delivered, DeliveredKind, MemberId, SubmitError};
use std::collections::BTreeMap;

/// The tag of our synced announcements: the group reports their failures with it (writesets
/// and barriers take their tags from the local ids, which start at 1).
pub const SYNCED_TAG: u64 = u64::MAX;
/// The tag of the synced announcement that ends a donation of ours.
pub(super) const DONATION_ENDED_TAG: u64 = u64::MAX - 3;
/// The tag of our donations' failures (see `Core::end_donation`).
pub(super) const TRANSFER_FAILED_TAG: u64 = u64::MAX - 2;

/// A queue whose byte count says full is counted again at most this often.
const RECOUNT_MS: u64 = 100;

/// A member reports its commit cut when it moved this far, or after `CUT_INTERVAL_MS`.
const CUT_STEP: Seqno = 256;
const CUT_INTERVAL_MS: u64 = 1000;
/// A certification checkpoint is kept when the order moved this far, or after
/// `CHECKPOINT_INTERVAL_MS`.
const CHECKPOINT_STEP: Seqno = 4096;
const CHECKPOINT_INTERVAL_MS: u64 = 10_000;
/// Past room for this many key chains in the index (a big writeset's rows, until the commit
/// cuts purge them and the index gives the memory back) a checkpoint waits: copying the index
/// under the core's lock would hold the lock and the group's thread for seconds (2.5 million
/// rows did, and elected a new leader), and the copy and its two encodings held 150 MB
/// beside a 2.5 million-row writeset on every node. The table's room, not its chains: a
/// copy copies the empty buckets too; and the chains of a big writeset kept out of the table.
const CHECKPOINT_INDEX_LIMIT: usize = 1 << 18;
/// How long a restarted node that could catch up alone waits, after its first view ordered
/// while it takes part, for a member synced since before that view to announce itself (every
/// member announces after each view it applies). A synced member applies the view as soon as
/// everything before it is applied (flow control keeps that short) and its announcement takes
/// one group round trip: milliseconds, tens on a loaded machine. Four heartbeats (250 ms
/// each) leave room for a slow applier; a member slower than that is as good as absent, and
/// the node catches up alone, as after a whole-cluster restart, which is what waiting costs.
pub const RESTART_CHOICE_MS: u64 = 1000;

/// Where a delivery comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryContext {
    /// The group's history.
    pub history: Uuid,
    /// It replays this node's own log from before a restart: history to learn from (the
    /// certification index, the synced set), not a request to act on now (a stale state
    /// request must not make a restarted member donate).
    pub replayed: bool,
}

/// A delivery, decoded before the core's lock is taken.
#[derive(Debug)]
pub enum Payload {
    Writeset(Box<Writeset>),
    Control {
        origin: MemberId,
        control: Control,
    },
    View(lockstep_group::View),
    /// The group no longer holds seqnos up to this delivery's.
    Gap,
    /// Nor these, but they held no writeset: views, and messages that are lost with them.
    ViewsMissed,
    /// Nor these, and what we applied there is another history's (`DeliveredKind::HistoryForked`).
    HistoryForked,
    /// Ordered everywhere alike, so skipped everywhere alike.
    Undecodable {
        origin: MemberId,
        error: String,
        numbered: bool,
    },
}

impl Payload {
    /// Decodes one delivery (no lock needed: this is the copying part).
    pub fn decode(d: Delivered) -> (Seqno, Payload) {
        let seqno = d.seqno as Seqno;
        let payload = match d.kind {
            DeliveredKind::Writeset { origin, .. } => match Writeset::decode(d.bytes) {
                Ok(delivered) => Payload::Writeset(Box::new(delivered)),
                Err(e) => Payload::Undecodable { origin, error: e.0.to_string(), numbered: true },
            },
            DeliveredKind::Message { origin, .. } => match Control::decode(&d.bytes) {
                Ok(control) => Payload::Control { origin, control },
                Err(e) => Payload::Undecodable { origin, error: e.0.to_string(), numbered: false },
            },
            DeliveredKind::View(view) => Payload::View(view),
            DeliveredKind::StateGap => Payload::Gap,
            DeliveredKind::ViewsMissed => Payload::ViewsMissed,
            DeliveredKind::HistoryForked => Payload::HistoryForked,
        };
        (seqno, payload)
    }
}

impl<W: Clone + PartialEq> Core<W> {
    /// Takes one delivery of connection `generation`. Returns whether the node can take the
    /// next one now: if not (the apply queue is full, or delivery stops at our own state
    /// request), the group holds what follows until `Effects::resume_deliveries`. A delivery
    /// that arrives while the node cannot take it waits in the core.
    pub fn on_delivered(&mut self, generation: u64, seqno: Seqno, payload: Payload, context: DeliveryContext) -> bool {
        if !self.is_current(generation) || self.failed {
            // Nobody will take it: the connection is ending.
            return true;
        }
        if self.awaits_donor_choice() {
            self.read_on_for_choice(seqno, payload, context);
        } else if !self.held_deliveries.is_empty() || !self.may_take_deliveries() {
            // The group hands over nothing more once `on_delivered` said to hold; a hold that
            // began between deliveries (a donor choice decided by its bound, on a tick) shows
            // here first.
            self.held_deliveries.push_back((seqno, payload, context));
        } else {
            self.take_delivery(seqno, payload, context);
        }
        self.release_held_delivery();
        let more = self.reads_on();
        self.deliveries_held |= !more;
        more
    }

    /// Whether the group may hand over the next delivery: the core takes it, or reads on for
    /// the donor choice our request awaits.
    fn reads_on(&mut self) -> bool {
        self.awaits_donor_choice() || self.held_deliveries.is_empty() && self.may_take_deliveries()
    }

    fn awaits_donor_choice(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| c.awaited_choice.is_some())
    }

    /// Whether the group may hand over deliveries (the driver asks after each round).
    pub fn accepting_deliveries(&self) -> bool {
        !self.deliveries_held
    }

    /// Room again (an applier took an event, the donor's stream is in, our request's donor
    /// choice is known): the deliveries that waited in the core go in, in order, and the group
    /// is told to go on.
    pub(super) fn release_held_delivery(&mut self) {
        while !self.awaits_donor_choice() && self.may_take_deliveries() {
            let Some((seqno, payload, context)) = self.held_deliveries.pop_front() else { break };
            self.take_delivery(seqno, payload, context);
        }
        let reads_on = self.reads_on();
        if self.deliveries_held && reads_on {
            self.deliveries_held = false;
            self.effects.resume_deliveries = true;
        }
        // Our request's donor choice came with a tick (its bound): the group is told at its
        // next delivery, or by `accepting_deliveries` after its round.
        self.deliveries_held |= !reads_on;
    }

    fn take_delivery(&mut self, seqno: Seqno, payload: Payload, context: DeliveryContext) {
        if matches!(payload, Payload::HistoryForked) {
            self.history_forked();
        }
        let gap = matches!(payload, Payload::Gap | Payload::ViewsMissed | Payload::HistoryForked);
        self.learn_history(seqno, gap, context.history);
        let numbered = !matches!(payload, Payload::Control { .. } | Payload::Undecodable { numbered: false, .. });
        if numbered {
            self.ordering.controls_after = 0;
        } else {
            self.ordering.controls_after += 1;
        }
        match payload {
            Payload::Writeset(ws) => self.on_writeset(seqno, *ws),
            Payload::View(view) => self.on_view(seqno, view, context.replayed),
            Payload::Control { origin, control } => self.on_control(seqno, origin, control, !context.replayed),
            Payload::Gap => self.on_gap(seqno, context.replayed),
            Payload::ViewsMissed => self.on_views_missed(seqno, context.replayed),
            Payload::HistoryForked => self.on_history_forked(seqno, context.replayed),
            Payload::Undecodable { origin, error, numbered } => {
                log::error!("skipping an undecodable delivery from {origin} at seqno {seqno}: {error}");
                if numbered {
                    self.finish_unused(seqno);
                }
            }
        }
    }

    fn may_take_deliveries(&mut self) -> bool {
        let Some(c) = self.connection.as_ref() else { return false };
        // At our own state request, what follows is certified with the donor's state.
        if matches!(c.catch_up, CatchUp::AtRequest(_)) {
            return false;
        }
        // An applier waiting for the members' vote on a seqno that failed here holds every
        // commit after it, so the queue cannot drain before the votes are read (provider
        // simulator, seed 20018 with a small byte limit): read on, whatever the queue holds.
        if !self.failures.is_empty() {
            return true;
        }
        // While the donor's gap is handed over, what follows it waits behind it.
        let queued = match c.catch_up {
            CatchUp::Feeding(_) => c.gap.kept.len(),
            _ => self.events.len(),
        };
        // Holding back is for the appliers to catch up. While they cannot take from the queue
        // (the server not ready, or a joiner waiting for its transfer), what lets them comes
        // through the order (the view that makes it ready, its request's donor): read on,
        // however far behind (provider simulator, seed 20069 with a small byte limit).
        let appliers_drain = self.phase.app_ready() && c.catch_up.applies();
        if !appliers_drain || queued < super::APPLY_QUEUE_LIMIT && self.queue_bytes_within_limit() {
            return true;
        }
        // Full. A local transaction brute-force aborted while its writeset is being ordered
        // waits for that delivery to learn its fate, holding its rows, and the applier that
        // aborted it may wait for those rows: read on until it knows (a review found it).
        self.trxs.values().any(|t| t.state == super::TrxState::Ordering && t.must_abort)
    }

    /// Whether the writesets queued to apply hold less than `apply_queue_bytes`. The count
    /// kept as events are queued and taken is checked first; only when it says full are they
    /// counted again (O(queue), then corrected, at most every `RECOUNT_MS`; the driver's
    /// rounds try again): a way out of the queue that it missed must not stop deliveries for
    /// good. A joiner's fed gap is counted by the recount only (its batches are bounded on
    /// their own: docs/design/joiner-gap-on-disk.md).
    fn queue_bytes_within_limit(&mut self) -> bool {
        let limit = self.settings.apply_queue_bytes;
        if self.queued_bytes < limit {
            return true;
        }
        if self.clock_ms < self.next_recount_ms {
            return false;
        }
        self.next_recount_ms = self.clock_ms + RECOUNT_MS;
        let kept = self.connection.as_ref().map(|c| &c.gap.kept);
        self.queued_bytes = self.events.iter().chain(kept.into_iter().flatten()).map(Event::writeset_bytes).sum();
        self.queued_bytes < limit
    }

    /// The group's primary-component status after a round of its driver, at `now_ms` (any
    /// monotonic clock): reports a loss, and sends our commit cut when due.
    pub fn on_group_status(&mut self, generation: u64, status: &lockstep_group::Status, now_ms: u64) {
        if !self.is_current(generation) || self.failed {
            return;
        }
        self.clock_ms = self.clock_ms.max(now_ms);
        // A queue counted full is counted again now and then (`queue_bytes_within_limit`).
        self.release_held_delivery();
        let primary = status.primary;
        self.flow.set_follower_behind(status.follower_behind);
        let c = self.connection.as_mut().expect("current");
        c.leader = status.leader;
        c.cached = (status.cached_from <= status.last_seqno).then_some(status.cached_from as Seqno);
        // Delivery stops at our request until the donor's stream is in, and the server's
        // handshake waits for the donor's script: a donor that left the group (crashed) will
        // never send them, so another is asked.
        let handshake_waits = matches!(
            self.phase,
            Phase::Joining(super::phase::Handshake::Requested | super::phase::Handshake::ScriptFailed { .. })
        );
        let waits = matches!(c.catch_up, CatchUp::AtRequest(_)) || handshake_waits;
        let donor_gone =
            |(id, incarnation): (MemberId, u64)| incarnation_in(&status.view.members, id) != Some(incarnation);
        if c.donor.is_some_and(|donor| waits && primary && donor_gone(donor)) {
            self.donor_left(generation, now_ms);
        }
        self.script_verdict_due(now_ms, None);
        self.track_primary(primary, &status.in_contact);
        if primary {
            self.view_after_gap(status);
        }
        self.restart_choice_due(now_ms);
        self.choice_wait_due(now_ms, primary);
        self.release_held_delivery();
        if primary {
            self.ask_again_due(now_ms);
        }
        if primary {
            if let Some(ends_donation) = self.ordering.announce_synced_again.take() {
                self.announce_synced(ends_donation);
            }
        }
        if primary && std::mem::take(&mut self.ordering.report_failures_again) {
            for &(joiner, id, rcode) in &self.ordering.unordered_failures {
                self.effects.send.push((Control::TransferFailed { joiner, id, rcode }, TRANSFER_FAILED_TAG));
            }
        }
        if primary {
            self.resend_rollbacks();
        }
        if let Some(cut) = self.commit_cut_due(now_ms) {
            self.effects.send.push((Control::CommitCut { seqno: cut }, 0));
        }
        self.cast_due_votes();
        if primary {
            self.flow_check();
        }
        if self.phase.app_ready() {
            self.schedule_appliers();
        }
        // Purged writesets leave memory a slice at a time, between deliveries as well.
        self.certification.reclaim();
        if let Some(checkpoint) = self.checkpoint_due(now_ms) {
            self.effects.checkpoint = Some(Box::new(checkpoint));
        }
    }

    /// A submission of ours (writeset or message, by its local id) will not be ordered.
    pub fn on_submit_failed(&mut self, generation: u64, local_id: u64, error: SubmitError) {
        if !self.is_current(generation) {
            return;
        }
        if local_id == SYNCED_TAG || local_id == DONATION_ENDED_TAG {
            // Nothing else makes this member synced: say it again once primary.
            let lost_end = (local_id == DONATION_ENDED_TAG)
                .then(|| self.ordering.last_donation_end.unwrap_or(DonationEnd::Unnamed));
            let ended = self.ordering.announce_synced_again.flatten().or(lost_end);
            self.ordering.announce_synced_again = Some(ended);
            return;
        }
        if local_id == TRANSFER_FAILED_TAG {
            // Found by the provider simulator (seed 8869 of 10 000): a failure lost in a
            // leader change left its joiner waiting with the stream in and no result.
            self.ordering.report_failures_again = true;
            return;
        }
        if local_id == super::flow::FLOW_TAG {
            // Decided again at the driver's next round.
            self.flow.refused();
            return;
        }
        if local_id & super::vote::VOTE_TAG != 0 {
            self.vote_lost_in_transit(local_id);
            return;
        }
        if let Some((writeset, refused)) = self.ordering.rollbacks.get_mut(&local_id) {
            if error == SubmitError::TooLarge {
                log::error!("the rollback fragment of trx {} is larger than the group carries", writeset.source.trx_id);
                self.ordering.rollbacks.remove(&local_id);
            } else {
                log::info!(
                    "the rollback fragment of trx {} was not replicated ({error}): sent again once primary",
                    writeset.source.trx_id
                );
                *refused = true;
            }
            return;
        }
        let status = match error {
            SubmitError::TooLarge => Status::SizeExceeded,
            _ => Status::ConnFail,
        };
        if let Some(flight) = self.ordering.in_flight.get_mut(&local_id).filter(|f| f.outcome.is_none()) {
            // A Note: its client gets the error, and losing the primary component (the usual
            // cause) is logged on its own.
            log::info!("a writeset of this node was not replicated, its client gets an error: {error}");
            flight.outcome = Some(Err(status));
            self.wake_in_flight(local_id);
        }
        if let Some(barrier) = self.ordering.barriers.get_mut(&local_id).filter(|b| b.at.is_none()) {
            if matches!(error, SubmitError::NoLease | SubmitError::Retry) {
                // The leader cannot vouch for its commit index, or leadership moved while the
                // read index was asked: order the barrier instead.
                self.effects.send.push((Control::Barrier { id: local_id }, local_id));
                return;
            }
            log::info!("a causal read failed: {error}");
            barrier.failed = true;
            self.effects.wake.extend(barrier.waiter.take());
        }
    }

    /// A read barrier's point arrived (the group's read index): the causal read waits for it.
    pub fn on_read_barrier(&mut self, generation: u64, id: u64, seqno: Seqno) {
        if self.is_current(generation) {
            self.barrier_ordered(id, seqno);
        }
    }

    /// The group member started over because its history forked from the group's
    /// (docs/design/group-forked-history.md): before the first delivery tells the history,
    /// our position stops counting as a place in it, whatever its seqno, so the state
    /// transfer is a full one. The saved state says so at once, and until that transfer is
    /// installed: a restart in between must not trust the server's own position either.
    ///
    /// A running node whose member started over so (its primary component met one of
    /// another history and yielded to it: docs/design/group-forced-primary.md, "Two primary
    /// components meet") holds data of the side that ended: it stops, its saved state asks
    /// for a full transfer, and its process ends to take one
    /// ([`Core::fail_needing_full_transfer`]); so does a node already joining from its
    /// position.
    pub fn history_forked(&mut self) {
        if self.forked || self.inconsistent {
            return;
        }
        if self.phase.app_ready() {
            self.fail_needing_full_transfer(
                "this node's primary component met another of this cluster with a different history and ended (a \
                 component forced without a quorum, pc.npvo): its data is not the cluster's and it needs a full state \
                 transfer",
            );
            return;
        }
        if matches!(self.phase, Phase::Joining(_)) {
            // Joining already from our position, which counted as a place in the group's
            // history: our certification state and our state request went by it (provider
            // simulator, seed 95635: such a joiner was refused as ahead of the group, which
            // keeps the saved position, and restarted from it onto the other history).
            self.fail_needing_full_transfer(&format!(
                "this node's data at {} is not the group's past the point where its history forked (a component \
                 forced without a quorum), and it was joining from that position: it needs a full state transfer",
                self.position
            ));
            return;
        }
        if self.phase != Phase::Opening {
            return;
        }
        // Without a position (a full transfer already due) there is nothing to give up.
        if self.position != Gtid::UNDEFINED {
            log::info!(
                "this node's data at {} is not the group's past the point where its history forked: it takes a \
                 full state transfer",
                self.position
            );
        }
        self.forked = true;
        self.position = Gtid::UNDEFINED;
        self.save_state(Gtid::UNDEFINED);
    }

    /// The first delivery tells which history the group is in and whether what we hold
    /// continues it; if not, we need a state transfer.
    fn learn_history(&mut self, seqno: Seqno, gap: bool, history: Uuid) {
        if self.phase != Phase::Opening {
            return;
        }
        let position = self.position;
        let c = self.connection.as_mut().expect("connected while opening");
        c.group = history;
        let first = seqno - if gap { 0 } else { 1 };
        c.has_state = position.uuid == history && position.seqno >= first;
        let (has_state, bootstrapped) = (c.has_state, c.bootstrapped);
        let start = if has_state { position.seqno } else { first };
        log::info!(
            "group history {history}, first delivery at seqno {seqno}; local position {position}: {}",
            if has_state { "continuing from it" } else { "state transfer needed" }
        );
        let mut index = CertificationIndex::new(first);
        index.set_optimistic_pa(self.settings.optimistic_pa);
        self.certification = index;
        // A joiner knows the group's verdicts and donors only from its donor.
        if bootstrapped {
            self.ordering.verdicts.known_from(first + 1, []);
        }
        self.ordering.synced_unknown = !bootstrapped;
        self.ordering.synced_guessed = false;
        self.ordering.index_from_group = bootstrapped;
        self.ordering.delivered = first;
        self.ordering.barrier = first;
        let checkpoint = self.connection.as_mut().and_then(|c| c.checkpoint.take());
        if let Some(checkpoint) = checkpoint.filter(|_| has_state && !bootstrapped) {
            self.restore_checkpoint(*checkpoint, first, history);
        }
        self.restart_windows(start);
        self.set_phase(if bootstrapped { Phase::Joined } else { Phase::Joining(super::phase::Handshake::Pending) });
    }

    /// A node restarted with a checkpoint of the group's certification state at `at` that
    /// its log's replay (from after `first`) reaches, and data at least at the checkpoint's
    /// committed seqno (so every verdict it will apply is in it), certifies with the group's
    /// state from there (docs/design/certification-checkpoint.md).
    fn restore_checkpoint(&mut self, checkpoint: Checkpoint, first: Seqno, history: Uuid) {
        let position = self.position;
        let fits = checkpoint.history == history && first <= checkpoint.at && checkpoint.committed <= position.seqno;
        if !fits {
            log::info!(
                "certification checkpoint at seqno {} (committed {}) does not fit: the log starts after seqno {first}, \
                 this node is at {position}",
                checkpoint.at,
                checkpoint.committed
            );
            return;
        }
        let Checkpoint { at, controls, committed, failed, members, preload, incarnations, .. } = checkpoint;
        self.ordering.restored_incarnations = Some(members.iter().copied().zip(incarnations).collect());
        self.ordering.members = members;
        self.certification = preload.index;
        self.certification.set_optimistic_pa(self.settings.optimistic_pa);
        self.ordering.cuts = preload.cuts.into_iter().collect();
        self.ordering.synced = preload.synced.into_iter().collect();
        self.ordering.donors = preload.donors.into_iter().collect();
        self.ordering.donor_requests = preload.donor_requests.into_iter().map(|(d, j, id)| (d, (j, id))).collect();
        self.ordering.barrier = preload.barrier;
        self.ordering.verdicts.known_from(committed + 1, failed);
        self.ordering.synced_unknown = false;
        self.ordering.synced_guessed = preload.synced_guessed;
        self.take_votes(preload.votes, true);
        self.ordering.index_from_group = true;
        self.ordering.restored = Some((at, controls));
        log::info!("certification state restored from this node's checkpoint at seqno {at}");
    }

    /// Whether the restored checkpoint already holds this numbered delivery's effect.
    fn restored_covers(&self, seqno: Seqno) -> bool {
        self.ordering.restored.is_some_and(|(at, _)| seqno <= at)
    }

    /// Whether it holds this control message's (ordered after `after`).
    fn restored_covers_control(&self, after: Seqno) -> bool {
        self.ordering
            .restored
            .is_some_and(|(at, controls)| after < at || (after == at && self.ordering.controls_after <= controls))
    }

    /// Each member's incarnation in the last view our ordering state reflects: the last one
    /// delivered here, or with none since a restored checkpoint, the one it kept.
    fn previous_incarnations(&self) -> Option<BTreeMap<MemberId, u64>> {
        let delivered = self.connection.as_ref().map_or(&[][..], |c| &c.view.members[..]);
        if delivered.is_empty() {
            return self.ordering.restored_incarnations.clone();
        }
        Some(delivered.iter().map(|m| (m.id, m.incarnation)).collect())
    }

    /// Our certification checkpoint, when due: this node certifies with the group's state and
    /// knows every verdict after its committed seqno.
    fn checkpoint_due(&mut self, now_ms: u64) -> Option<Checkpoint> {
        let at = self.ordering.delivered;
        if !self.ordering.index_from_group || !self.has_state() || self.restored_covers(at) {
            return None;
        }
        if self.certification.copy_cost() > CHECKPOINT_INDEX_LIMIT {
            return None;
        }
        let due = match self.ordering.last_checkpoint {
            None => true,
            Some((last, at_ms)) => {
                at >= last + CHECKPOINT_STEP
                    || self.ordering.bytes_since_checkpoint >= self.settings.checkpoint_bytes
                    || (at > last && now_ms >= at_ms + CHECKPOINT_INTERVAL_MS)
            }
        };
        if !due {
            return None;
        }
        let committed = self.committed.last_contiguous().min(at);
        let failed = self.ordering.verdicts.failed_in(committed + 1, at)?;
        // A checkpoint taken while replaying our log before any view of this connection keeps
        // the incarnations of the checkpoint we restored, not none (provider simulator, seed
        // 3428: a member restored from such a checkpoint dropped every member from its synced
        // set at the next view, as if all had restarted, and took another donor).
        let previous = self.previous_incarnations()?;
        self.ordering.last_checkpoint = Some((at, now_ms));
        self.ordering.bytes_since_checkpoint = 0;
        Some(Checkpoint {
            history: self.group(),
            at,
            controls: self.ordering.controls_after,
            committed,
            failed: failed.into_iter().collect(),
            members: self.ordering.members.clone(),
            preload: self.preload(),
            incarnations: self.ordering.members.iter().map(|id| previous.get(id).copied().unwrap_or(0)).collect(),
        })
    }

    /// The group no longer holds seqnos up to `seqno`. Below our position that changes
    /// nothing; above it our data misses them: before the server's handshake we ask for a
    /// full snapshot instead, after it this node cannot go on (its process ends to take one).
    /// `replayed`: the start of a restarted member's own log, whose views follow.
    fn on_gap(&mut self, seqno: Seqno, replayed: bool) {
        log::info!("the group no longer holds seqnos up to {seqno}");
        if let Some(c) = self.connection.as_mut().filter(|c| c.joined_at.is_none() && !replayed) {
            c.gap_before_first_view = true;
        }
        if seqno > self.ordering.delivered {
            // Seqnos this node never certified: its index is no longer the group's (a donor's
            // preload makes it so again), nor its synced set (the next view takes a guess).
            self.ordering.index_from_group = false;
            self.ordering.verdicts = Default::default();
            self.ordering.restored = None;
            self.ordering.synced_unknown = true;
            self.ordering.synced_guessed = false;
            if let Some(c) = self.connection.as_mut().filter(|c| !c.has_state) {
                c.skipped_without_state = c.skipped_without_state.max(Some(seqno));
            }
        }
        self.ordering.delivered = self.ordering.delivered.max(seqno);
        let committed = self.committed.last_contiguous();
        if !self.has_state() || seqno <= committed {
            return;
        }
        if self.phase.app_ready() {
            self.fail_needing_full_transfer(&format!(
                "this node is at seqno {committed} and the group no longer holds the seqnos after it, up to {seqno} \
                 (gcache.size too small for the time it was behind): it needs a full state transfer"
            ));
            return;
        }
        log::info!("seqnos {}..={seqno} are missing here: this node asks for a full state transfer", committed + 1);
        self.connection.as_mut().expect("has state").has_state = false;
        self.restart_windows(seqno);
    }

    /// We applied past a fork of the order on the side the group's history left
    /// (docs/design/group-forced-primary.md). Before the first delivery our position stops
    /// counting (`history_forked`), and this is a gap like any other; a running node, whose
    /// data holds the other side's commits, stops for a full transfer.
    fn on_history_forked(&mut self, seqno: Seqno, replayed: bool) {
        if !self.has_state() {
            self.on_gap(seqno, replayed);
            return;
        }
        self.fail_needing_full_transfer(&format!(
            "this node's data is past the point where the group's history forked from this node's (a component \
             forced without a quorum), and the group goes on after seqno {seqno}: it needs a full state transfer"
        ));
    }

    /// Seqnos after ours up to `seqno` held views only, which the group no longer holds (a
    /// member cut off while the others forced a component: docs/design/group-views-only-gap.md):
    /// no data changed and nothing was certified there, so a node with state finishes them
    /// unused and goes on with the view that follows, the group's current one, without a
    /// state transfer. The control messages ordered meanwhile are lost with them: the synced
    /// set becomes a guess, which the members that know correct when a donor is chosen
    /// (docs/design/donor-choice-of-a-guessing-joiner.md). It also comes right after the view
    /// at that view's seqno, when messages after it were skipped: no seqno to finish then.
    /// Without state it is a gap like any other.
    fn on_views_missed(&mut self, seqno: Seqno, replayed: bool) {
        if !self.has_state() {
            self.on_gap(seqno, replayed);
            return;
        }
        let first = self.ordering.delivered + 1;
        if first <= seqno {
            log::info!("seqnos {first}..={seqno} held views only: nothing to apply from them");
        }
        for missed in first..=seqno {
            self.finish_unused(missed);
        }
        if !self.ordering.synced_unknown {
            self.ordering.synced_guessed = true;
        }
    }

    /// The view that adds this member to the group, and would start the server's handshake,
    /// was in a gap of the group's log (the leader's log had moved past it before this member
    /// read it: a restarted member cut off right after its join). Without a view the server
    /// would wait for its handshake for good (provider simulator, seed 2435 of a 10 000-seed
    /// run: a node `Joining` for 86 s, to the end of the run). Once everything the group
    /// applied is delivered and its view is still newer than the last one delivered here, that
    /// view was in the gap: it stands in, at the last seqno delivered; a view ordered later
    /// follows as usual. Only for a gap past what a restarted member replays from its own log:
    /// one at the start of that log is followed by the views it replays and its live join.
    fn view_after_gap(&mut self, status: &lockstep_group::Status) {
        let me = self.me();
        let delivered = self.ordering.delivered;
        let Some(c) = self.connection.as_mut() else { return };
        let swallowed = c.gap_before_first_view
            && c.joined_at.is_none()
            && status.last_seqno as Seqno <= delivered
            && status.view.view_id > c.view.view_id
            && status.view.contains(me);
        if !swallowed {
            return;
        }
        c.gap_before_first_view = false;
        log::info!("the view that added this node came in a gap of the group's log: taking the group's current view");
        self.on_view(delivered, status.view.clone(), false);
    }

    /// A seqno that needs no applier (already in our state, or a view we were not in). Also
    /// without state: a snapshot that lands below it keeps it finished (found by the
    /// simulator: views without us between a snapshot and the next view left a gap).
    fn finish_unused(&mut self, seqno: Seqno) {
        self.ordering.delivered = seqno;
        self.finish_both(seqno);
    }

    fn on_writeset(&mut self, seqno: Seqno, mut ws: Writeset) {
        // Certification takes the chains or, below, nothing does: applying needs none.
        let chains = std::mem::take(&mut ws.chains);
        if self.restored_covers(seqno) {
            // Certified before the checkpoint: its verdict is kept there.
            let failed = self.ordering.verdicts.failed_in(seqno, seqno).is_some_and(|f| !f.is_empty());
            self.ordering.delivered = seqno;
            if !(self.has_state() && seqno <= self.committed.last_contiguous()) {
                let event = Event::Apply { seqno, writeset: Box::new(ws), depends_on: seqno - 1, failed };
                self.push_event(event);
            }
            return;
        }
        self.certify_writeset(seqno, ws, chains);
    }

    fn certify_writeset(&mut self, seqno: Seqno, mut ws: Writeset, chains: Chains) {
        let isolation = ws.flags & flags::ISOLATION != 0;
        let pa_unsafe = ws.flags & flags::PA_UNSAFE != 0;
        let candidate = Candidate {
            seqno,
            last_seen: ws.last_seen,
            source: ws.source.node,
            chains,
            isolation,
            pa_unsafe,
            implicit_deps: ws.flags & flags::IMPLICIT_DEPS != 0,
            continues_stream: ws.flags & (flags::TRX_START | flags::ISOLATION) == 0,
        };
        let verdict = match self.certification.certify(candidate) {
            Verdict::Pass { depends_on } => Verdict::Pass { depends_on: depends_on.max(self.ordering.barrier) },
            Verdict::Fail => Verdict::Fail,
        };
        self.flow.ordered_writeset(ws.source.node == self.member());
        let with_group_state = self.ordering.index_from_group;
        self.observed(|| super::Observation::Certified { seqno, verdict, with_group_state });
        self.ordering.delivered = seqno;
        self.ordering.verdicts.record(seqno, verdict == Verdict::Fail);
        if isolation || pa_unsafe {
            self.ordering.barrier = seqno;
        }
        let bytes = ws.byte_len() as i64;
        self.ordering.bytes_since_checkpoint += bytes as u64;
        let c = &mut self.counters;
        c.received += 1;
        c.received_bytes += bytes;
        if bytes >= super::LARGE_WRITESET_BYTES {
            c.received_large_bytes += bytes;
        }
        if let Verdict::Pass { depends_on } = verdict {
            c.certified += 1;
            c.deps_distance_sum += seqno - depends_on;
            // `last_seen` comes from the origin's writeset: a hostile one skews a figure, no more.
            let interval = seqno.saturating_sub(ws.last_seen.min(seqno)).saturating_sub(1).max(0);
            c.interval_sum = c.interval_sum.saturating_add(interval);
        }
        let local_id = ws.local_id;
        if ws.source.node == self.member() && ws.flags & flags::ROLLBACK != 0 {
            // Our rollback fragment is back: applied here as everywhere.
            self.ordering.rollbacks.remove(&local_id);
        }
        let waiting = ws.source.node == self.member()
            && self.ordering.in_flight.get(&local_id).is_some_and(|f: &InFlight<W>| f.outcome.is_none());
        if waiting {
            let flight = self.ordering.in_flight.get_mut(&local_id).expect("checked above");
            flight.outcome = Some(Ok((seqno, verdict)));
            // Kept for a replay: the data travelled in the writeset.
            if let Some(trx) = flight.trx.and_then(|token| self.trxs.get_mut(&token)) {
                trx.data = std::mem::take(&mut ws.data);
            }
            self.wake_in_flight(local_id);
            return;
        }
        if self.has_state() && seqno <= self.committed.last_contiguous() {
            return;
        }
        if self.keeps_nothing_before_its_request() {
            return;
        }
        let (depends_on, failed) = match verdict {
            Verdict::Pass { depends_on } => (depends_on, false),
            Verdict::Fail => (seqno - 1, true),
        };
        if failed && self.settings.log_conflicts {
            log::info!(
                "writeset of trx {} from {} failed certification at seqno {seqno}",
                ws.source.trx_id,
                ws.source.node
            );
        }
        self.push_event(Event::Apply { seqno, writeset: Box::new(ws), depends_on, failed });
    }

    /// A joiner without the group's state, whose request is not ordered yet and none of whose
    /// requests was given a donor, takes everything that precedes its request from the donor
    /// it will get: the writesets it reads meanwhile are not kept. Kept, they would fill its
    /// memory while it waits for a donor on a busy cluster (every other member donating or
    /// desynced). Once a donor was chosen, they are: that donor's script may still hand the
    /// server a snapshot older than a later request, completed from them (provider simulator,
    /// seed 50213).
    fn keeps_nothing_before_its_request(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Waiting && !c.has_state && !c.had_donor)
    }

    fn on_view(&mut self, seqno: Seqno, view: lockstep_group::View, replayed: bool) {
        let me = self.me();
        if view.view_id == 1 && !self.ordering.index_from_group {
            self.history_starts_here(seqno);
        }
        if !self.restored_covers(seqno) {
            self.ordering.members = view.members.iter().filter(|m| !m.arbitrator).map(|m| m.id).collect();
            self.ordering.barrier = seqno;
            self.ordering.cuts.retain(|id, _| view.contains(*id));
            // A member that connected again in between (a new incarnation, back within the
            // eviction timeout) starts over: what it announced before is not true of it now.
            let previous = self.previous_incarnations();
            self.ordering.restored_incarnations = None;
            if previous.is_none() && view.view_id != 1 && !self.ordering.synced_unknown {
                // A restart since cannot be told: the set becomes a guess.
                self.ordering.synced_guessed = true;
            }
            let same_incarnation = |id: MemberId| {
                let before = previous.as_ref().and_then(|p| p.get(&id).copied());
                before.is_none_or(|before| incarnation_in(&view.members, id) == Some(before))
            };
            self.ordering.synced.retain(|id| view.contains(*id) && same_incarnation(*id));
            // A donor out of this view keeps donating (it may come back with the same
            // incarnation, its script still running); one back as a new incarnation does not.
            self.ordering
                .donors
                .retain(|id, incarnation| incarnation_in(&view.members, *id).is_none_or(|now| now == *incarnation));
            let donors = &self.ordering.donors;
            self.ordering.donor_requests.retain(|id, _| donors.contains_key(id));
            self.ordering.snapshot_joiners.retain(|id, _| view.contains(*id));
            // Members that left no longer vote: what they said or would say does not count.
            self.tally_all();
            self.flow.view(self.clock_ms);
            self.release_writers();
        }
        if self.ordering.synced_unknown && view.contains(me) {
            // Announcements before our first delivery are lost to us: take the others as
            // synced until a donor's state says otherwise.
            // An arbitrator holds no data: never synced, never a donor.
            self.ordering.synced = view.members.iter().filter(|m| !m.arbitrator && m.id != me).map(|m| m.id).collect();
            self.ordering.donors.clear();
            self.ordering.donor_requests.clear();
            self.ordering.synced_unknown = false;
            self.ordering.synced_guessed = true;
        }
        let closing = matches!(self.phase, Phase::Closing { .. });
        let Some(c) = self.connection.as_mut() else { return };
        c.view = view.clone();
        // A joiner gone needs no donor.
        c.possible_donations.retain(|(joiner, _), _| view.contains(*joiner));
        if !view.contains(me) {
            if closing {
                // The view that removes us after we left: the server never sees it, so
                // our saved position must not include it.
                return;
            }
            let joined = c.joined_at.is_some();
            if joined && !replayed && self.has_state() && seqno > self.committed.last_contiguous() {
                // The group went on without us from here while we were cut off; its members
                // rolled back our streaming transactions then, and so must our server (mtr
                // galera_3nodes_sr.galera_sr_threeway_split).
                self.ordering.delivered = seqno;
                let c = self.connection.as_ref().expect("checked above");
                let wsrep_view = primary_view(c.group, seqno, &view, me, c.member);
                self.push_event(Event::Excluded { view: wsrep_view });
                return;
            }
            self.finish_unused(seqno);
            return;
        }
        let committed = self.committed.last_contiguous();
        if c.joined_at.is_none() && !replayed && self.has_state() && seqno <= committed {
            // The group orders now what this node's data already holds at those seqnos:
            // it went on without this node from an earlier point (a bootstrap from a node
            // that was behind). Merging would fork the history. Refused before this view
            // counts as our last primary component: our state stays safe to bootstrap from.
            self.fail(&format!(
                "this node's data is at seqno {committed} of history {}, ahead of the group, which \
                 orders a view at seqno {seqno} of the same history: it holds commits the group does not \
                 have. Join it with a full state transfer (remove its grastate.dat), or, if the group was \
                 bootstrapped from the wrong node, bootstrap the cluster again from this one",
                self.group()
            ));
            return;
        }
        let c = self.connection.as_mut().expect("checked above");
        // Back in a primary component, even if our state already covers this view's seqno
        // (found by the simulator: a node whose snapshot covered its way back stayed
        // non-primary for good).
        c.component = Component::Primary;
        // As Galera: only a node whose last primary component was itself alone may start a
        // new cluster from its state; a node that left others running may not (they went
        // on without it). Written at once, as Galera does, so that it holds after a crash
        // too (mtr galera_gcache_recover: the survivor, killed, bootstraps again); only for
        // views ordered now, not old ones replayed from our log at a restart.
        let alone = view.members.len() == 1;
        let others: Vec<String> =
            view.members.iter().filter(|m| m.id != me && !m.arbitrator).map(|m| m.name.clone()).collect();
        if others != self.last_primary_others && !replayed {
            self.last_primary_others = others.clone();
            self.save_version += 1;
            self.effects.last_primary = Some((self.save_version, others));
        }
        if alone != self.safe_to_bootstrap && !replayed {
            self.safe_to_bootstrap = alone;
            // Not while a DDL, a pause or a vote on our own failure holds the saved state at
            // "unsafe": those write the running state back themselves when they end.
            if self.isolation_by_conn.is_empty() && self.paused_at.is_none() && self.failures.is_empty() {
                self.save_state(Gtid::new(self.group(), crate::types::SEQNO_UNDEFINED));
            }
        }
        let committed = self.committed.last_contiguous();
        if self.has_state() && seqno <= committed {
            self.ordering.delivered = seqno;
            return;
        }
        self.ordering.delivered = seqno;
        let can_catch_up_alone = self.can_catch_up_alone();
        // A connection after another in this process: the server kept running.
        let reconnected = self.generation > 1;
        let c = self.connection.as_mut().expect("checked above");
        // The server's first view is one ordered while this node takes part, as a Galera
        // joiner's is its own join. An older one replayed from its log (a restarted member
        // keeps its id) may be followed by a gap in the group's log (the leader's snapshot),
        // and a state request sent at it may be ordered before this member's join: the donor
        // then donates with the join view queued behind its transfer, and a mysqldump
        // transfer, run on the donor's applier, waits in causal reads for that view until
        // they time out (mtr galera_sr_mysqldump_sst, one run in two).
        let first_in_connection = c.joined_at.is_none() && !replayed;
        if first_in_connection {
            c.joined_at = Some(seqno);
            if can_catch_up_alone && c.restart == Restart::Undecided {
                // Alone in the view: nobody can have stayed up. A running server that
                // reconnects runs no script (it asks for no transfer), and must see its first
                // view at its own position, before the rest of the order: that view is where
                // it recovers its open streaming transactions, whose later fragments follow
                // (mtr galera_sr_cc_slave).
                let others = view.members.iter().any(|m| m.id != me && !m.arbitrator);
                let stopped_at = self.position.seqno;
                c.restart = if others && !reconnected {
                    Restart::Choosing { joined_at: seqno, stopped_at, until_ms: None }
                } else {
                    Restart::Alone
                };
            }
        }
        // A joining server must see this view before anything is applied: it starts its
        // storage engines only after the state-transfer handshake the view triggers.
        let handshake = first_in_connection && !c.bootstrapped;
        let wsrep_view = primary_view(c.group, seqno, &view, me, c.member);
        log::info!(
            "view {} at seqno {seqno}: {} member(s) [{}]",
            view.view_id,
            view.members.len(),
            view.members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        let event = Event::View { view: wsrep_view, first_in_connection };
        if handshake {
            self.push_event_front(event);
        } else {
            self.push_event(event);
        }
    }

    /// The group's first view: nothing was certified before it anywhere, so a member that
    /// receives the order from here (a restarted member whose log starts at the genesis, or a
    /// new member of a young group) certifies with the group's state from the start, as its
    /// bootstrapper does, and knows every verdict and every synced announcement.
    fn history_starts_here(&mut self, seqno: Seqno) {
        self.ordering.index_from_group = true;
        self.ordering.verdicts.known_from(seqno, []);
        self.ordering.synced_unknown = false;
        self.ordering.synced_guessed = false;
    }

    /// A restarted node whose data continues the order it received, certified with the
    /// group's state, needs no donor: it applies the rest of the order from its own log.
    pub(super) fn can_catch_up_alone(&self) -> bool {
        self.has_state()
            && self.ordering.index_from_group
            && self.connection.as_ref().is_some_and(|c| !c.bootstrapped && c.catch_up == CatchUp::Waiting)
    }

    /// `live`: ordered while this member takes part (not replayed from its log after a
    /// restart): bookkeeping always, actions only then.
    fn on_control(&mut self, after: Seqno, origin: MemberId, control: Control, live: bool) {
        if self.restored_covers_control(after) {
            return;
        }
        let me = self.me();
        match control {
            Control::Barrier { id } => {
                if origin == me {
                    self.barrier_ordered(id, after);
                }
            }
            Control::CommitCut { seqno } => {
                self.ordering.cuts.insert(origin, seqno);
                let members = &self.ordering.members;
                let horizon = members.iter().map(|id| self.ordering.cuts.get(id).copied()).min().flatten();
                if let Some(horizon) = horizon {
                    self.certification.purge_upto(horizon);
                }
                self.ordering.verdicts.forget_before(self.ordering.delivered);
            }
            Control::Vote { seqno, outcome } => self.on_vote(origin, seqno, outcome, live),
            Control::Flow { ask, rate, number } => {
                // Replayed ones (from before a restart) are of a past connection.
                if live {
                    self.flow_ordered(origin, ask, rate, number);
                }
            }
            Control::Synced { since, ends_donation, stateless } => {
                // While a member donates, only its donation's end says it no longer does: an
                // announcement it made to a view, sent before it read the request or before
                // its donation started, says nothing of it now; nor does the late end of an
                // earlier donation, ordered after the request that chose it again (provider
                // simulator, seed 29764: the end of a donation made in a minority partition
                // was ordered once the member was back and chosen for another joiner, which
                // then chose it a second time).
                let ends_this = match (ends_donation, self.ordering.donor_requests.get(&origin)) {
                    (Some(DonationEnd::Of { joiner, id }), Some(&request)) => request == (joiner, id),
                    (end, _) => end.is_some(),
                };
                let donating = self.ordering.donors.contains_key(&origin) && !ends_this;
                if !donating {
                    self.ordering.donors.remove(&origin);
                    self.ordering.donor_requests.remove(&origin);
                    // `gcs.stateless`: synced, never a donor candidate.
                    if !stateless {
                        self.ordering.synced.insert(origin);
                    }
                }
                self.ordering.snapshot_joiners.remove(&origin);
                if origin == me && live {
                    self.push_event(Event::Synced { after });
                }
                if origin != me && live {
                    self.synced_member_seen(origin, since);
                    // Only what ends a donation says something of a transfer the member
                    // donated: an announcement to a view, sent before it took our request or
                    // while its donation runs, does not.
                    if !donating {
                        self.script_verdict_due(self.clock_ms, Some(origin));
                    }
                }
            }
            Control::StateRequest(request) => self.state_request_ordered(after, origin, request, live),
            // Taken as it arrives by the member whose request awaits it (`read_on_for_choice`);
            // here by a member that guessed whether it donates.
            Control::DonorChoice { joiner, id, donor } => self.donor_choice_ordered(joiner, id, donor, live),
            Control::TransferFailed { joiner, id, rcode } => {
                // Replayed ones (from before a restart) are of a past connection.
                if !live {
                    return;
                }
                let Some(c) = self.connection.as_ref() else { return };
                if origin == me {
                    self.ordering.unordered_failures.retain(|f| (f.0, f.1) != (joiner, id));
                }
                // Galera's words, on every member: operators and MariaDB's tests know them.
                log::warn!("{}", transfer_failed_line(&c.view.members, origin, joiner, rcode));
                self.donor_failed(joiner, id, rcode);
            }
        }
    }

    /// Non-primary is reported to the application at once; the way back is a new view.
    /// `in_contact`: the members this node hears from, its component when not primary.
    fn track_primary(&mut self, primary: bool, in_contact: &[MemberId]) {
        let closing = matches!(self.phase, Phase::Closing { .. });
        let Some(c) = self.connection.as_mut() else { return };
        // Only a loss counts: a member that just joined may not see the primary component
        // confirmed yet, and the group delivers a new view only after a real loss.
        let lost = c.group_primary && !primary;
        c.group_primary = primary;
        if !lost || c.component == Component::NonPrimary || closing {
            return;
        }
        c.component = Component::NonPrimary;
        let (group, me, member) = (c.group, c.me, c.member);
        // Galera's non-primary view lists the members of this node's component: those of the
        // last primary view it still hears from (mtr galera_3nodes.galera_pc_weight).
        let mut component = c.view.clone();
        component.members.retain(|m| m.id == me || in_contact.contains(&m.id));
        if !component.contains(me) {
            // No primary view with us yet (a joiner): we are all we know of.
            component.members.push(lockstep_group::MemberInfo::with_id(me));
        }
        if self.phase == Phase::Synced {
            self.set_phase(Phase::Joined);
            self.synced_before_loss = true;
        }
        if self.desync_count > 0 {
            // As Galera: leaving the primary component ends the donor or desynced state, and
            // the node comes back synced (mtr GAL-401).
            log::info!("desync (count {}) cleared: this node left the primary component", self.desync_count);
            self.desync_count = 0;
        }
        // A Note, as Galera logs its non-primary view: partitions are an operating condition.
        log::info!("lost the primary component: this node refuses writes until it rejoins one");
        let seqno = self.committed.last_contiguous();
        let view = View {
            conf_id: -1,
            status: ViewStatus::NonPrimary,
            ..super::apply::primary_view(group, seqno, &component, me, member)
        };
        self.push_event(Event::NonPrimary { view });
    }

    /// Our commit cut: nothing we will still replicate saw less than this.
    fn commit_cut_due(&mut self, now_ms: u64) -> Option<Seqno> {
        if !self.has_state() {
            return None;
        }
        let committed = self.committed.last_contiguous();
        let oldest_in_flight = self.ordering.in_flight.values().map(|f| f.last_seen).min();
        let cut = oldest_in_flight.map_or(committed, |s| s.min(committed));
        let due = match self.ordering.last_cut {
            None => true,
            Some((last, at_ms)) => cut >= last + CUT_STEP || (cut > last && now_ms >= at_ms + CUT_INTERVAL_MS),
        };
        if !due {
            return None;
        }
        self.ordering.last_cut = Some((cut, now_ms));
        Some(cut)
    }

    /// Announces this member synced: once its announcement comes back through the order and
    /// everything before it is applied, it is (see `become_synced`). `ends_donation`: as a
    /// donation of ours ends, that one.
    pub(super) fn announce_synced(&mut self, ends_donation: Option<DonationEnd>) {
        let since = if self.phase == Phase::Synced { self.synced_since } else { None };
        let tag = if ends_donation.is_some() { DONATION_ENDED_TAG } else { SYNCED_TAG };
        if ends_donation.is_some() {
            self.ordering.last_donation_end = ends_donation;
        }
        let stateless = self.settings.stateless;
        self.effects.send.push((Control::Synced { since, ends_donation, stateless }, tag));
    }

    /// A live announcement of another member, ordered after our first live view: if that
    /// member has been synced since a point at or before this node's own position when it
    /// went down, it stayed up while this node was away and is live now, and this node,
    /// choosing, takes a state transfer as a restarted Galera node does. A restart cannot
    /// fake it: a member's `since` belongs to its current connection (a restarted member is
    /// synced only once the announcement it sends after its first live view of that
    /// connection comes back), and after a whole-cluster restart every such view is ordered
    /// after everything this node held. Synced since our first live view is not enough: a
    /// member restarted a second before us (whole-cluster restart, nodes started one by
    /// one) is synced by then (found by `whole_cluster.rs`, clean stop of every node).
    fn synced_member_seen(&mut self, origin: MemberId, since: Option<Seqno>) {
        let Some(c) = self.connection.as_mut() else { return };
        let Restart::Choosing { stopped_at, .. } = c.restart else { return };
        if since.is_none_or(|since| since > stopped_at) {
            return;
        }
        let name = c.view.members.iter().find(|m| m.id == origin).map_or("?", |m| m.name.as_str()).to_string();
        c.restart = Restart::Transfer;
        log::info!(
            "member {name} has been synced since seqno {} and is live: this node asks for a state transfer \
             (confirmed by the donor) instead of catching up from its own log alone",
            since.unwrap_or_default()
        );
        self.effects.wake.append(&mut self.phase_waiters);
    }

    /// The wait for a synced member ends at its deadline: nobody synced is live, the node
    /// catches up alone.
    fn restart_choice_due(&mut self, now_ms: u64) {
        let Some(c) = self.connection.as_mut() else { return };
        let Restart::Choosing { joined_at, stopped_at, until_ms } = c.restart else { return };
        match until_ms {
            None => c.restart = Restart::Choosing { joined_at, stopped_at, until_ms: Some(now_ms + RESTART_CHOICE_MS) },
            Some(until) if now_ms >= until => {
                c.restart = Restart::Alone;
                log::info!(
                    "no member synced since before this node stopped at seqno {stopped_at} announced itself \
                     after its view at seqno {joined_at} within {RESTART_CHOICE_MS} ms: catching up from this \
                     node's own log"
                );
                self.effects.wake.append(&mut self.phase_waiters);
            }
            Some(_) => {}
        }
    }

    fn wake_in_flight(&mut self, local_id: u64) {
        if let Some(w) = self.ordering.in_flight.get_mut(&local_id).and_then(|f| f.waiter.take()) {
            self.effects.wake.push(w);
        }
    }
}

/// `id`'s incarnation among `members`.
pub(super) fn incarnation_in(members: &[lockstep_group::MemberInfo], id: MemberId) -> Option<u64> {
    members.iter().find(|m| m.id == id).map(|m| m.incarnation)
}
