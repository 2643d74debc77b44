//! Every member that knows who is synced takes the same donor for a state request, delivered
//! live or replayed from its log, and a joiner that guessed takes the one it is told
//! (docs/design/donor-choice-of-a-guessing-joiner.md).

use super::Invariant;
use lockstep_group::MemberId;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct SameDonor {
    /// (joiner, request id) -> the donor the first member that knew took, and that member.
    taken: BTreeMap<(MemberId, u64), (Option<MemberId>, usize)>,
}

impl Invariant for SameDonor {
    fn name(&self) -> &'static str {
        "every member that knows takes the same donor"
    }

    fn donor_taken(&mut self, node: usize, joiner: MemberId, id: u64, donor: Option<MemberId>) -> Result<(), String> {
        match self.taken.get(&(joiner, id)) {
            None => {
                self.taken.insert((joiner, id), (donor, node));
                Ok(())
            }
            Some(&(first, _)) if first == donor => Ok(()),
            Some(&(first, by)) => Err(format!(
                "node {} took donor {donor:?} for {joiner}'s request {id:x}, node {} took {first:?}",
                node + 1,
                by + 1
            )),
        }
    }
}
