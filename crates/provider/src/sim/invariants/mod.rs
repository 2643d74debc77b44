//! Invariant checkers of the provider simulator, one per guarantee. Each sees what happens
//! as it happens (certifications, commits, acknowledgements, transfers, causal reads) and
//! judges the end state after the heal.
mod acked_present;
mod causal_reads;
mod commit_order;
mod converged;
mod dependencies;
mod joiner_index;
mod one_donation_at_a_time;
mod same_donor;
mod same_verdict;

use super::db::Db;
use crate::certification::Verdict;
use crate::types::Seqno;
use lockstep_group::MemberId;
use std::collections::BTreeSet;

/// One running node at the end of a run.
pub struct LiveNode<'a> {
    pub node: usize,
    pub db: &'a Db,
    /// Its phase, `Synced` expected.
    pub phase: String,
    /// Server threads still busy (none expected once the run is quiet).
    pub busy: Vec<String>,
}

pub struct End<'a> {
    pub live: Vec<LiveNode<'a>>,
    /// Commits acknowledged after the heal.
    pub acked_after_heal: u64,
    /// No running node held the group's state at some point: the cluster cannot come back
    /// by itself yet, so only safety is judged.
    pub state_lost: bool,
}

pub trait Invariant {
    fn name(&self) -> &'static str;
    /// `with_group_state`: the node certified with the group's state, not a fresh index.
    fn certified(
        &mut self,
        _node: usize,
        _seqno: Seqno,
        _verdict: Verdict,
        _with_group_state: bool,
    ) -> Result<(), String> {
        Ok(())
    }
    /// A database commit (or its refusal for breaking the order).
    fn committed(&mut self, _node: usize, _outcome: &Result<(), String>) -> Result<(), String> {
        Ok(())
    }
    /// A remote writeset starts applying on `db`.
    fn applying(&mut self, _node: usize, _seqno: Seqno, _depends_on: Seqno, _db: &Db) -> Result<(), String> {
        Ok(())
    }
    fn acked(&mut self, _node: usize, _seqno: Seqno, _hash: u64) -> Result<(), String> {
        Ok(())
    }
    /// A donor's stream for the order after `at` reached `node`, with the digest of the
    /// donor's certification index.
    fn transfer_sent(&mut self, _node: usize, _at: Seqno, _donor_digest: u64) {}
    fn index_installed(&mut self, _node: usize, _at: Seqno, _digest: u64) -> Result<(), String> {
        Ok(())
    }
    /// `node` took `donor` as the group's donor for `joiner`'s state request `id`, ordered
    /// after seqno `after` (it knows who is synced, or a member that knows told it).
    fn donor_taken(
        &mut self,
        _node: usize,
        _joiner: MemberId,
        _id: u64,
        _after: Seqno,
        _donor: Option<MemberId>,
    ) -> Result<(), String> {
        Ok(())
    }
    /// `node`'s server is asked to donate; `already_donating`: a donation of its connection
    /// is under way (started, its `sst_sent` not yet called).
    fn donation_starts(&mut self, _node: usize, _already_donating: bool) -> Result<(), String> {
        Ok(())
    }
    /// A causal read on `node` started when `acked_before` was the newest acknowledged commit.
    fn causal_read(&mut self, _node: usize, _acked_before: Seqno, _db: &Db) -> Result<(), String> {
        Ok(())
    }
    fn at_end(&mut self, _end: &End<'_>) -> Result<(), String> {
        Ok(())
    }
    /// An operator forced a component whose order goes on after `boundary`: what the
    /// abandoned side ordered past it is lost (the operator's choice), and the forced side
    /// numbers its own events from there.
    fn on_fork(&mut self, _boundary: Seqno) {}
    /// Seqnos at or below the boundary that the forcing member's server failed to apply and
    /// rolled back: its vote on them, still open, was decided in the forced component by it
    /// alone, so they are rolled back there (the operator forced from that member).
    fn rolled_back_at_fork(&mut self, _seqnos: &[Seqno]) {}
}

/// The order forked after `boundary`; the nodes `apart` are not yet shown to be on the
/// forced side (the group simulator tells which), so what they do past the boundary is the
/// abandoned side's, not judged.
struct Fork {
    boundary: Seqno,
    apart: BTreeSet<usize>,
}

/// Every checker; the first violation wins, named after its checker.
pub struct Checks {
    checkers: Vec<Box<dyn Invariant>>,
    acked: u64,
    fork: Option<Fork>,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            checkers: vec![
                Box::new(same_verdict::SameVerdict::default()),
                Box::new(commit_order::CommitOrder),
                Box::new(acked_present::AckedPresent::default()),
                Box::new(joiner_index::JoinerIndex::default()),
                Box::new(same_donor::SameDonor::default()),
                Box::new(one_donation_at_a_time::OneDonationAtATime),
                Box::new(dependencies::Dependencies::default()),
                Box::new(causal_reads::CausalReads),
                Box::new(converged::Converged),
            ],
            acked: 0,
            fork: None,
        }
    }
}

impl Checks {
    fn each(&mut self, mut f: impl FnMut(&mut dyn Invariant) -> Result<(), String>) -> Result<(), String> {
        for checker in &mut self.checkers {
            f(checker.as_mut()).map_err(|e| format!("invariant '{}' violated: {e}", checker.name()))?;
        }
        Ok(())
    }

    /// The group's fork, if a component was forced, and who is still apart from its side.
    /// The first time, every checker forgets what was ordered past the boundary.
    /// `rolled_back`: see [`Invariant::rolled_back_at_fork`].
    pub fn follow_fork(&mut self, boundary: Seqno, apart: impl Iterator<Item = usize>, rolled_back: &[Seqno]) {
        if self.fork.is_none() {
            self.checkers.iter_mut().for_each(|c| c.on_fork(boundary));
            self.checkers.iter_mut().for_each(|c| c.rolled_back_at_fork(rolled_back));
        }
        self.fork = Some(Fork { boundary, apart: apart.collect() });
    }

    /// What `node` does at `seqno` is the abandoned side's.
    pub fn abandoned(&self, node: usize, seqno: Seqno) -> bool {
        self.fork.as_ref().is_some_and(|f| seqno > f.boundary && f.apart.contains(&node))
    }

    pub fn certified(
        &mut self,
        node: usize,
        seqno: Seqno,
        verdict: Verdict,
        with_group_state: bool,
    ) -> Result<(), String> {
        if self.abandoned(node, seqno) {
            return Ok(());
        }
        self.each(|c| c.certified(node, seqno, verdict, with_group_state))
    }

    pub fn committed(&mut self, node: usize, outcome: Result<(), String>) -> Result<(), String> {
        self.each(|c| c.committed(node, &outcome))
    }

    pub fn applying(&mut self, node: usize, seqno: Seqno, depends_on: Seqno, db: &Db) -> Result<(), String> {
        if self.abandoned(node, seqno) {
            return Ok(());
        }
        self.each(|c| c.applying(node, seqno, depends_on, db))
    }

    /// Whether the commit counts: not one of the side a forced component left.
    pub fn acked(&mut self, node: usize, seqno: Seqno, hash: u64) -> Result<bool, String> {
        self.acked += 1;
        if self.abandoned(node, seqno) {
            return Ok(false);
        }
        self.each(|c| c.acked(node, seqno, hash))?;
        Ok(true)
    }

    /// Commits acknowledged so far.
    pub fn acked_count(&self) -> u64 {
        self.acked
    }

    pub fn transfer_sent(&mut self, node: usize, at: Seqno, donor_digest: u64) {
        if self.abandoned(node, at) {
            return;
        }
        for c in &mut self.checkers {
            c.transfer_sent(node, at, donor_digest);
        }
    }

    pub fn index_installed(&mut self, node: usize, at: Seqno, digest: u64) -> Result<(), String> {
        if self.abandoned(node, at) {
            return Ok(());
        }
        self.each(|c| c.index_installed(node, at, digest))
    }

    pub fn donor_taken(
        &mut self,
        node: usize,
        joiner: MemberId,
        id: u64,
        after: Seqno,
        donor: Option<MemberId>,
    ) -> Result<(), String> {
        // Ordered after the boundary's seqno: past the boundary, unless the forcing member
        // had it (`SameDonor::on_fork`).
        if self.abandoned(node, after + 1) {
            return Ok(());
        }
        self.each(|c| c.donor_taken(node, joiner, id, after, donor))
    }

    pub fn donation_starts(&mut self, node: usize, already_donating: bool) -> Result<(), String> {
        self.each(|c| c.donation_starts(node, already_donating))
    }

    pub fn causal_read(&mut self, node: usize, acked_before: Seqno, db: &Db) -> Result<(), String> {
        if self.abandoned(node, acked_before) {
            return Ok(());
        }
        self.each(|c| c.causal_read(node, acked_before, db))
    }

    pub fn at_end(&mut self, end: &End<'_>) -> Result<(), String> {
        self.each(|c| c.at_end(end))
    }
}
