//! A member donates one state at a time: no joiner is given a member as its donor while that
//! member still donates to another (MariaDB logs "unallowed state transition: donor ->
//! donor"; docs/design/donor-chosen-twice.md).

use super::Invariant;

pub struct OneDonationAtATime;

impl Invariant for OneDonationAtATime {
    fn name(&self) -> &'static str {
        "a member donates one state at a time"
    }

    fn donation_starts(&mut self, node: usize, already_donating: bool) -> Result<(), String> {
        if already_donating {
            return Err(format!("node {} was asked to donate while it still donated", node + 1));
        }
        Ok(())
    }
}
