//! Handing the lead to another member: to the member that writes most (so its commits wait
//! for the nearest majority, not for a round trip to a leader at another site), or away from
//! a leader that should not lead (an arbitrator, a voter whose weight no longer makes it one).
//! See docs/design/group-lead-follows-writes.md.
//!
//! Raft's leadership transfer: the leader stops appending, waits until the heir has its whole
//! log, then asks it to campaign at once (no pre-vote: the followers, still hearing the
//! leader, would refuse one). Every voter's log is then at most the heir's, so the heir wins.
//! What is submitted meanwhile waits: our own writesets as when no leader is known, those
//! forwarded to us in `Handover::held`. If the heir takes over, those forwarded are dropped and
//! their members send them again to the new leader once its first entry applies
//! (`forwarded_lost_before`); if it does not in time, we order them and lead on.

use super::Member;
use crate::cache::LogStore;
use crate::message::Body;
use crate::raft::Role;
use crate::state::Op;
use crate::types::MemberId;
use std::collections::BTreeMap;

/// How often the leader compares who wrote what since the last review.
const REVIEW_MS: u64 = 2_000;
/// Fewer writesets than this in a review period never move the lead: an idle cluster keeps
/// its leader.
const REVIEW_MIN_WRITES: u64 = 20;

/// Leader: writesets ordered since `since_ms`, by origin.
#[derive(Default)]
pub(super) struct WriteTally {
    since_ms: u64,
    by_origin: BTreeMap<MemberId, u64>,
    /// A part of a big writeset was ordered: a hand-over would fail its upload.
    parts: bool,
}

impl WriteTally {
    pub(super) fn starting(now_ms: u64) -> Self {
        Self { since_ms: now_ms, ..Self::default() }
    }

    pub(super) fn count(&mut self, op: &Op) {
        match op {
            Op::Writeset { origin, .. } | Op::Assembled { origin, .. } => {
                *self.by_origin.entry(*origin).or_default() += 1;
            }
            Op::Part(_) => self.parts = true,
            _ => {}
        }
    }

    /// The member that wrote more than half of the period's writesets and more than twice
    /// what `leader` wrote, if there were enough of them to say.
    fn dominant_writer(&self, leader: MemberId) -> Option<MemberId> {
        let total: u64 = self.by_origin.values().sum();
        let own = self.by_origin.get(&leader).copied().unwrap_or(0);
        let (&writer, &wrote) = self.by_origin.iter().max_by_key(|&(_, &n)| n)?;
        let dominant = total >= REVIEW_MIN_WRITES && 2 * wrote > total && wrote > 2 * own;
        (dominant && writer != leader && !self.parts).then_some(writer)
    }
}

/// Leader: a hand-over under way.
pub(super) struct Handover {
    heir: MemberId,
    /// Our term when it began: a later one means we no longer lead.
    term: u64,
    /// Given up after this if the heir has not taken over.
    until_ms: u64,
    /// `Campaign` went to the heir.
    asked: bool,
    /// Forwarded to us meanwhile: (member, its term, request, op).
    held: Vec<(MemberId, u64, u64, Op)>,
}

impl<S: LogStore> Member<S> {
    /// Leader, once per review period: the lead goes to the member that writes most.
    pub(super) fn follow_the_writes(&mut self) {
        if self.now_ms < self.writes.since_ms + REVIEW_MS {
            return;
        }
        let tally = std::mem::replace(&mut self.writes, WriteTally::starting(self.now_ms));
        let Some(heir) = tally.dominant_writer(self.info.id) else { return };
        let eligible = self.uploads.is_empty() && self.raft.is_voter(heir) && self.may_lead(heir);
        if eligible && self.begin_handover(heir) {
            log::info!(
                "{}: {heir} wrote {} of the last {} writesets: handing it the lead",
                self.info.id,
                tally.by_origin[&heir],
                tally.by_origin.values().sum::<u64>()
            );
        }
    }

    /// Stops appending and hands the lead to `heir` once it has the whole log; false if a
    /// hand-over cannot begin now.
    pub(super) fn begin_handover(&mut self, heir: MemberId) -> bool {
        let (min, max) = (self.config.election_timeout_min_ms, self.config.election_timeout_max_ms);
        // A membership change under way (a voter set the heir's election would be counted in).
        let latest = self.raft.latest_membership();
        let changing = latest.is_joint() || *latest != self.applied.membership;
        let lately = self.now_ms < self.handover_began_ms + max && self.handover_began_ms > 0;
        if self.handover.is_some() || lately || changing || !self.heard_within(heir, min) {
            return false;
        }
        self.handover_began_ms = self.now_ms;
        self.handover = Some(Handover {
            heir,
            term: self.raft.term(),
            until_ms: self.now_ms + min,
            asked: false,
            held: Vec::new(),
        });
        true
    }

    pub(super) fn handing_over(&self) -> bool {
        self.handover.is_some() && self.raft.role() == Role::Leader
    }

    /// Our leader's `Campaign`: the heir starts an election at once (no pre-vote, which
    /// followers still hearing the leader would refuse); the others grant the heir their vote
    /// for a minimum election timeout though they still hear the leader. The heir's vote
    /// request may come before the leader's word: then it wins with the votes of those that
    /// heard it first, or at its next try.
    pub(super) fn receive_campaign(&mut self, from: MemberId, heir: MemberId) {
        if self.leader != Some(from) || self.raft.role() != Role::Follower {
            return;
        }
        if heir != self.info.id {
            self.endorsed = Some((heir, self.now_ms + self.config.election_timeout_min_ms));
        } else if self.raft.is_voter(self.info.id) && !self.info.arbitrator {
            self.pre_vote = None;
            self.leader = None;
            self.raft.handle_election_timeout();
            self.reset_election_timer();
        }
    }

    /// The leader we follow endorsed `id` as its heir lately.
    pub(super) fn endorsed(&self, id: MemberId) -> bool {
        self.endorsed.is_some_and(|(heir, until_ms)| heir == id && self.now_ms < until_ms)
    }

    /// Our followers may grant an heir their vote though they hear us (a hand-over under way,
    /// or given up less than a minimum election timeout after their endorsement expires): we
    /// hold no read lease meanwhile.
    pub(super) fn lease_lent(&self) -> bool {
        let min = self.config.election_timeout_min_ms;
        self.handover.is_some() || (self.handover_began_ms > 0 && self.now_ms < self.handover_began_ms + 3 * min)
    }

    /// We lead and asked the heir to campaign.
    pub(super) fn asked_heir(&self) -> bool {
        self.leader == Some(self.info.id) && self.handover.as_ref().is_some_and(|h| h.asked)
    }

    /// A forward that arrived during a hand-over, kept until it ends.
    pub(super) fn hold_forwarded(&mut self, from: MemberId, term: u64, request: u64, op: Op) {
        if let Some(h) = self.handover.as_mut() {
            h.held.push((from, term, request, op));
        }
    }

    /// Asks the heir to campaign once it has our whole log; ends the hand-over when the heir
    /// took over or when it is given up (then orders what was held, and we lead on).
    pub(super) fn settle_handover(&mut self) {
        let Some(h) = self.handover.as_mut() else { return };
        if self.raft.role() != Role::Leader || self.raft.term() != h.term {
            // The held forwards are sent again by their members to the new leader.
            self.handover = None;
            return;
        }
        let heir = h.heir;
        if self.now_ms >= h.until_ms {
            let h = self.handover.take().expect("checked above");
            log::info!("{}: {heir} did not take the lead over in time; leading on", self.info.id);
            for (from, term, request, op) in h.held {
                self.order_forwarded(from, term, request, op);
            }
            return;
        }
        if !h.asked && self.raft.follower_match_index(heir) == Some(self.raft.last_index()) {
            h.asked = true;
            for &voter in &self.raft.latest_membership().voters {
                if voter != self.info.id {
                    self.send(voter, Body::Campaign { heir });
                }
            }
        }
    }

    /// When `tick` must run for the hand-over: when it is given up.
    pub(super) fn handover_deadline_ms(&self) -> Option<u64> {
        self.handover.as_ref().map(|h| h.until_ms)
    }
}
