//! Inconsistency voting (Galera 4's rule, our own messages): when committing a seqno fails
//! on some member, every member says through the order how that seqno ended there (success,
//! or a hash of the error), and the same tally on every member decides: the outcome of a
//! majority of the view (or, once everyone voted, the most common one, success on a tie)
//! is the group's, and every member whose outcome differs leaves, its state marked for a
//! full transfer. A failure that a majority shares is skipped everywhere alike. See
//! docs/design/inconsistency-vote.md.
use super::Core;
use crate::ist::Votes;
use crate::types::{Gtid, Seqno, SEQNO_UNDEFINED};
use crate::writeset::Control;
use lockstep_group::MemberId;
use std::collections::BTreeMap;

/// The outcome of a seqno that committed.
pub const SUCCESS: u64 = 0;
/// The tags of our votes: this bit and the seqno (local ids, the other tags, stay far below).
pub(super) const VOTE_TAG: u64 = 1 << 62;
/// Decided seqnos remembered, so that votes arriving after the decision change nothing.
const DECIDED_KEPT: usize = 1024;

/// A vote on one seqno.
#[derive(Debug)]
pub(super) struct Ballot<W> {
    cast: BTreeMap<MemberId, u64>,
    /// This member's vote, once sent.
    voted: bool,
    /// The applier whose failure started it, waiting for the result.
    waiter: Option<W>,
    decided: Option<u64>,
}

impl<W: PartialEq> Ballot<W> {
    pub(super) fn forget(&mut self, waiter: &W) {
        if self.waiter.as_ref() == Some(waiter) {
            self.waiter = None;
        }
    }
}

impl<W> Default for Ballot<W> {
    fn default() -> Self {
        Ballot { cast: BTreeMap::new(), voted: false, waiter: None, decided: None }
    }
}

/// What a failed applier learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteResult {
    /// The group failed the same way: the seqno counts as done, the node goes on.
    Continue,
    /// The group's outcome differs: this node's data is not the group's; it leaves.
    Inconsistent,
}

/// Outcome of an error report: a stable non-zero hash of its bytes (FNV-1a), so that the same
/// error on two members is the same vote.
pub fn outcome_of(error: &[u8]) -> u64 {
    let text = error.strip_suffix(b"\0").unwrap_or(error);
    let hash = text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    hash.max(1)
}

/// The tally: the outcome a strict majority of `electorate` voted, or, once all of it voted,
/// the most common outcome (success among tied ones, else the lowest).
fn decide(cast: &BTreeMap<MemberId, u64>, electorate: &[MemberId]) -> Option<u64> {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for id in electorate {
        if let Some(outcome) = cast.get(id) {
            *counts.entry(*outcome).or_default() += 1;
        }
    }
    if let Some((outcome, _)) = counts.iter().find(|(_, n)| **n * 2 > electorate.len()) {
        return Some(*outcome);
    }
    let everyone = electorate.iter().all(|id| cast.contains_key(id));
    let most = counts.values().copied().max()?;
    everyone.then(|| counts.iter().find(|(_, n)| **n == most).map(|(o, _)| *o)).flatten()
}

/// `cast` with a success vote for each member that waits for a snapshot taken after `seqno`
/// (`joiners`: the seqno each one's request was ordered after). Such a member votes success
/// once it holds the snapshot (`cast_due_votes`), whatever it waits for; waiting for its vote
/// instead is waiting for its donor, who may be the member whose failure is voted on and
/// applies nothing until the vote is decided (provider simulator, seed 2143 of a 10 000-seed
/// run: 23 s without a commit). Galera leaves joiners out of its count.
fn with_snapshot_joiners(
    cast: &BTreeMap<MemberId, u64>,
    joiners: &BTreeMap<MemberId, Seqno>,
    seqno: Seqno,
) -> BTreeMap<MemberId, u64> {
    let mut cast = cast.clone();
    for (member, _) in joiners.iter().filter(|(_, after)| **after >= seqno) {
        cast.entry(*member).or_insert(SUCCESS);
    }
    cast
}

impl<W: Clone + PartialEq> Core<W> {
    /// Committing `seqno` failed here with `outcome`: our vote goes out, and the applier
    /// waits for the result (`vote_result`).
    pub(super) fn vote_failed(&mut self, seqno: Seqno, outcome: u64) {
        // Until the vote says otherwise this node's data may not be the group's, and the
        // server already committed what follows: a crash now must force a full transfer
        // (as during a DDL).
        self.save_state(Gtid::UNDEFINED);
        self.failures.insert(seqno, outcome);
        if let Some(&decided) = self.decided_votes.get(&seqno) {
            // The others' votes came before our applier got there (a restarted member reads
            // them from its log ahead of applying): no vote of ours would be counted again,
            // and waiting for one waited for good (provider simulator, seed 97933). An
            // outcome we did not tally ourselves is unknown: without a ballot the result is
            // inconsistent.
            log::info!("committing seqno {seqno} failed on this node, whose vote the members already decided");
            self.ballots.remove(&seqno);
            if let Some(decided) = decided {
                self.ballots.entry(seqno).or_default().decided = Some(decided);
            }
            return;
        }
        log::info!("committing seqno {seqno} failed on this node: the members vote on it");
        self.ballots.entry(seqno).or_default();
        self.cast_due_votes();
        // The votes come through the order: a full queue must not hold them back.
        self.release_held_delivery();
    }

    /// Our vote on `tag`'s seqno was not ordered: it is cast again.
    pub(super) fn vote_lost_in_transit(&mut self, tag: u64) {
        if let Some(ballot) = self.ballots.get_mut(&((tag & !VOTE_TAG) as Seqno)) {
            ballot.voted = false;
        }
    }

    /// The result of the vote on our failure at `seqno`; `None` after registering `waiter`.
    pub fn vote_result(&mut self, generation: u64, seqno: Seqno, waiter: &W) -> Option<VoteResult> {
        if !self.is_current(generation) || self.failed {
            return Some(VoteResult::Inconsistent);
        }
        let ours = self.failures.get(&seqno).copied();
        match self.ballots.get_mut(&seqno) {
            Some(ballot) if ballot.decided.is_none() => {
                ballot.waiter = Some(waiter.clone());
                None
            }
            Some(ballot) => Some(if ballot.decided == ours { VoteResult::Continue } else { VoteResult::Inconsistent }),
            None => Some(VoteResult::Inconsistent),
        }
    }

    /// The vote on our failure at `seqno` went against us, or did not end in time: this node's
    /// data differs from the group's. An applier's failure ends the node in `remote_applied`
    /// (after the server finished the writeset); a failure of our own commit ends it now.
    /// An applier of an earlier connection (its vote ended unfinished) marks the current
    /// one too, on purpose: `remote_applied` then counts that seqno done in the monitors the
    /// next connection shares, so without a full transfer the writeset would be skipped.
    pub fn vote_lost(&mut self, seqno: Seqno, remote: bool) {
        self.ballots.remove(&seqno);
        self.failures.remove(&seqno);
        if remote {
            if let Some(c) = self.connection.as_mut() {
                c.apply_failed = Some(seqno);
            }
            return;
        }
        self.fail_inconsistent(&format!(
            "Inconsistency detected: Inconsistent by consensus on {}: this node's own statement or transaction \
             failed here and committed on the group (vote); its data differs from the group's and it needs a full \
             state transfer",
            Gtid::new(self.group(), seqno)
        ));
    }

    /// A vote arrived through the order. `live`: ordered while we take part (a restarted
    /// member's replay only counts).
    pub(super) fn on_vote(&mut self, origin: MemberId, seqno: Seqno, outcome: u64, live: bool) {
        if self.decided_votes.contains_key(&seqno) {
            return;
        }
        self.ballots.entry(seqno).or_default().cast.insert(origin, outcome);
        if live {
            self.cast_due_votes();
        }
        self.tally(seqno);
    }

    /// `member` voted a failure of its own on a seqno still undecided: it waits for the
    /// others' votes before it applies anything after it, so it can donate nothing (a joiner
    /// that waited for it could never vote: found by the simulator, a joiner whose donor left
    /// asked again and got the member whose vote waited for that joiner).
    pub(super) fn failure_vote_open(&self, member: MemberId) -> bool {
        self.ballots.values().any(|b| b.decided.is_none() && b.cast.get(&member).is_some_and(|o| *o != SUCCESS))
    }

    /// Votes we owe: our failure, and our outcome on every open ballot whose seqno we
    /// finished. Tagged: one that is not ordered comes back (`vote_lost_in_transit`) and is
    /// cast again, or a vote could wait forever.
    pub(super) fn cast_due_votes(&mut self) {
        if !self.has_state() {
            return;
        }
        let committed = self.committed.last_contiguous();
        for (seqno, ballot) in self.ballots.iter_mut() {
            let ours = self.failures.get(seqno).copied();
            let due = ours.is_some() || *seqno <= committed;
            if due && !ballot.voted && ballot.decided.is_none() {
                ballot.voted = true;
                let outcome = ours.unwrap_or(SUCCESS);
                self.effects.send.push((Control::Vote { seqno: *seqno, outcome }, VOTE_TAG | *seqno as u64));
            }
        }
    }

    /// Decides the ballots that can be after a vote or a view (the electorate is the view).
    pub(super) fn tally_all(&mut self) {
        let open: Vec<Seqno> = self.ballots.iter().filter(|(_, b)| b.decided.is_none()).map(|(s, _)| *s).collect();
        for seqno in open {
            self.tally(seqno);
        }
    }

    fn tally(&mut self, seqno: Seqno) {
        let Some(ballot) = self.ballots.get_mut(&seqno) else { return };
        if ballot.decided.is_some() {
            return;
        }
        let cast = with_snapshot_joiners(&ballot.cast, &self.ordering.snapshot_joiners, seqno);
        let Some(outcome) = decide(&cast, &self.ordering.members) else { return };
        ballot.decided = Some(outcome);
        self.effects.wake.extend(ballot.waiter.take());
        let dissenters = ballot.cast.values().filter(|o| **o != outcome).count();
        // Our own outcome counts only if we voted in this connection: a restarted member
        // reads its earlier life's votes again from its log or its checkpoint.
        let ours = ballot.voted.then(|| self.failures.get(&seqno).copied().unwrap_or(SUCCESS));
        log::info!(
            "vote on seqno {seqno} decided: {} ({} member(s) differ)",
            if outcome == SUCCESS { "committed".to_string() } else { format!("failed alike (error {outcome:x})") },
            dissenters
        );
        self.note_decided(seqno, Some(outcome));
        let waiting = self.failures.contains_key(&seqno);
        if !waiting {
            self.ballots.remove(&seqno);
        }
        // A member whose commit succeeded where the group's failed: its data differs too.
        if !waiting && ours.is_some_and(|o| o != outcome) {
            // Galera's words first, which MariaDB's tests suppress (galera_3nodes.galera_toi_vote).
            self.fail_inconsistent(&format!(
                "Vote 0 (success) on {} is inconsistent with group. Leaving cluster. It committed on this node and \
                 failed on a majority of the members: this node's data differs from the group's and it needs a full \
                 state transfer",
                Gtid::new(self.group(), seqno)
            ));
        }
    }

    fn note_decided(&mut self, seqno: Seqno, outcome: Option<u64>) {
        let known = self.decided_votes.entry(seqno).or_default();
        *known = known.or(outcome);
        if self.decided_votes.len() > DECIDED_KEPT {
            self.decided_votes.pop_first();
        }
    }

    /// The votes taken so far, for a state another member starts from (a joiner's preload,
    /// a checkpoint).
    pub(super) fn votes(&self) -> Votes {
        Votes {
            // A ballot opened here for our own failure before our vote is ordered is not the
            // group's yet.
            open: self
                .ballots
                .iter()
                .filter(|(_, b)| b.decided.is_none() && !b.cast.is_empty())
                .map(|(seqno, b)| (*seqno, b.cast.iter().map(|(m, o)| (*m, *o)).collect()))
                .collect(),
            decided: self.decided_votes.keys().copied().collect(),
            snapshot_joiners: self.ordering.snapshot_joiners.iter().map(|(m, s)| (*m, *s)).collect(),
        }
    }

    /// The votes of the state this member starts from (its donor's or its checkpoint's),
    /// with what it read of the order itself, then tallied: it decides and passes over
    /// donors with a failure vote open as the members that read every vote do.
    /// `same_point`: that state was made where this member stopped reading (else its
    /// snapshot joiners are of another point, and ours are kept).
    pub(super) fn take_votes(&mut self, votes: Votes, same_point: bool) {
        // Only a member without state starts from another's: it failed nothing it waits on
        // (a decided seqno below would leave such a waiter without an outcome).
        debug_assert!(self.failures.is_empty());
        let Votes { open, decided, snapshot_joiners } = votes;
        for seqno in decided {
            self.note_decided(seqno, None);
            if !self.failures.contains_key(&seqno) {
                self.ballots.remove(&seqno);
            }
        }
        for (seqno, cast) in open.into_iter().filter(|(seqno, _)| !self.decided_votes.contains_key(seqno)) {
            let ballot = self.ballots.entry(seqno).or_default();
            for (member, outcome) in cast {
                ballot.cast.entry(member).or_insert(outcome);
            }
        }
        if same_point {
            self.ordering.snapshot_joiners = snapshot_joiners.into_iter().collect();
        }
        self.tally_all();
    }

    /// The failed applier took its result: the ballot is done with.
    pub fn vote_taken(&mut self, seqno: Seqno) {
        self.ballots.remove(&seqno);
        self.failures.remove(&seqno);
        if self.failures.is_empty() {
            self.save_state(Gtid::new(self.group(), SEQNO_UNDEFINED));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> Vec<MemberId> {
        (1..=n).map(MemberId).collect()
    }

    #[test]
    fn a_majority_decides_and_a_full_tie_goes_to_success() {
        let cast = |votes: &[(u64, u64)]| votes.iter().map(|(id, o)| (MemberId(*id), *o)).collect();
        // One of three failed: the two others decide as soon as they voted.
        assert_eq!(decide(&cast(&[(2, 7)]), &ids(3)), None);
        assert_eq!(decide(&cast(&[(2, 7), (1, SUCCESS)]), &ids(3)), None);
        assert_eq!(decide(&cast(&[(2, 7), (1, SUCCESS), (3, SUCCESS)]), &ids(3)), Some(SUCCESS));
        // Two of three failed alike: the failure is the group's.
        assert_eq!(decide(&cast(&[(2, 7), (3, 7)]), &ids(3)), Some(7));
        // Two members, one failed: a tie, success wins once both voted.
        assert_eq!(decide(&cast(&[(2, 7)]), &ids(2)), None);
        assert_eq!(decide(&cast(&[(2, 7), (1, SUCCESS)]), &ids(2)), Some(SUCCESS));
        // Votes of members outside the view do not count.
        assert_eq!(decide(&cast(&[(9, 7), (1, 7)]), &ids(2)), None);
        assert_ne!(outcome_of(b"Duplicate entry '1'\0"), SUCCESS);
        assert_eq!(outcome_of(b"Duplicate entry '1'\0"), outcome_of(b"Duplicate entry '1'"));
    }

    #[test]
    fn a_member_waiting_for_a_snapshot_taken_after_the_seqno_counts_as_success() {
        let cast: BTreeMap<MemberId, u64> = [(MemberId(1), 7), (MemberId(2), SUCCESS)].into_iter().collect();
        // Member 3 asked for a snapshot after seqno 10: its state will hold seqno 10's outcome.
        let joiners: BTreeMap<MemberId, Seqno> = [(MemberId(3), 10)].into_iter().collect();
        assert_eq!(decide(&cast, &ids(3)), None, "without it the vote waits for member 3");
        assert_eq!(decide(&with_snapshot_joiners(&cast, &joiners, 10), &ids(3)), Some(SUCCESS));
        // Asked before seqno 11: it applies seqno 11 itself, and its own vote is awaited.
        assert_eq!(decide(&with_snapshot_joiners(&cast, &joiners, 11), &ids(3)), None);
        // A vote it cast stands.
        let voted: BTreeMap<MemberId, u64> = [(MemberId(1), 7), (MemberId(3), 7)].into_iter().collect();
        assert_eq!(decide(&with_snapshot_joiners(&voted, &joiners, 10), &ids(3)), Some(7));
    }

    /// A member restored from a checkpoint, or a joiner, starts from another member's votes:
    /// it passes over the same donors and decides the same (provider simulator, seed 2752: a
    /// restored member without a ballot its checkpoint was taken inside chose another donor).
    #[test]
    fn a_member_that_starts_from_another_members_votes_decides_and_passes_over_donors_alike() {
        let mut taken: Core<u32> = Core::new(super::super::test_settings(), Gtid::UNDEFINED, false);
        taken.ordering.members = ids(3);
        let (one, two, three) = (MemberId(1), MemberId(2), MemberId(3));
        let votes = Votes { open: vec![(5, vec![(two, 7)])], decided: vec![3], snapshot_joiners: vec![(three, 5)] };
        taken.take_votes(votes.clone(), true);
        assert_eq!(taken.votes(), votes, "given on as taken");
        assert!(taken.failure_vote_open(two), "member 2 waits for the vote on its failure: no donor");
        // A late failure vote on a seqno decided before opens nothing.
        taken.on_vote(one, 3, 9, false);
        assert!(!taken.failure_vote_open(one));
        // Member 3 waits for a snapshot taken after seqno 5: with member 1's success, a majority.
        taken.on_vote(one, 5, SUCCESS, false);
        assert!(!taken.failure_vote_open(two), "decided: success");
        assert!(taken.votes().decided.contains(&5));
    }
}
