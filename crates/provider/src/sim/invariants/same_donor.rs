//! Every member that knows who is synced takes the same donor for a state request, delivered
//! live or replayed from its log, and a joiner that guessed takes the one it is told
//! (docs/design/donor-choice-of-a-guessing-joiner.md). Along one history: a request the
//! abandoned side of a fork ordered past the boundary may be ordered again on the forced
//! side, where other members are synced (provider simulator, seed 2032: the joiner, alone
//! after its donor and the others crashed, forced a component and found no donor there).
//! A request ordered after the boundary's own seqno may be on either side (seed 2997): it
//! is judged on neither.

use super::Invariant;
use crate::types::Seqno;
use lockstep_group::MemberId;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct SameDonor {
    /// (joiner, request id) -> the donor the first member that knew took, the seqno the
    /// request was ordered after, and that member.
    taken: BTreeMap<(MemberId, u64), (Option<MemberId>, Seqno, usize)>,
}

impl Invariant for SameDonor {
    fn name(&self) -> &'static str {
        "every member that knows takes the same donor"
    }

    fn donor_taken(
        &mut self,
        node: usize,
        joiner: MemberId,
        id: u64,
        after: Seqno,
        donor: Option<MemberId>,
    ) -> Result<(), String> {
        match self.taken.get(&(joiner, id)) {
            None => {
                self.taken.insert((joiner, id), (donor, after, node));
                Ok(())
            }
            Some(&(first, _, _)) if first == donor => Ok(()),
            Some(&(first, _, by)) => Err(format!(
                "node {} took donor {donor:?} for {joiner}'s request {id:x}, node {} took {first:?}",
                node + 1,
                by + 1
            )),
        }
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.taken.retain(|_, &mut (_, after, _)| after < boundary);
    }
}
