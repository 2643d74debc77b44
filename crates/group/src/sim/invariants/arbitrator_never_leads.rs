//! An arbitrator never leads: it only votes (`MemberInfo::arbitrator`), so the order always
//! comes from a member with data, and a component left with only an arbitrator stays
//! non-primary.

use super::Invariant;
use crate::types::MemberInfo;

pub struct ArbitratorNeverLeads;

impl Invariant for ArbitratorNeverLeads {
    fn name(&self) -> &'static str {
        "arbitrator never leads"
    }

    fn on_leader(&mut self, member: &MemberInfo) -> Result<(), String> {
        match member.arbitrator {
            true => Err(format!("arbitrator {} leads", member.id)),
            false => Ok(()),
        }
    }
}
