//! An arbitrator hands the lead over: it may lead to bring a member with data up to date
//! (when it alone has the latest entries), but once faults stop the group is led by a member
//! with data (`MemberInfo::arbitrator`; docs/design/arbitrator.md).

use super::{EndState, Invariant};

pub struct ArbitratorHandsOver;

impl Invariant for ArbitratorHandsOver {
    fn name(&self) -> &'static str {
        "arbitrator hands the lead over"
    }

    fn at_end(&mut self, end: &EndState) -> Result<(), String> {
        for status in &end.live {
            let leader = status.leader.and_then(|id| status.view.members.iter().find(|m| m.id == id));
            if let Some(leader) = leader.filter(|m| m.arbitrator) {
                return Err(format!("{} is still led by arbitrator {} after the heal", status.id, leader.id));
            }
        }
        Ok(())
    }
}
