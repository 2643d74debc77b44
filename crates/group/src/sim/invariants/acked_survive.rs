//! Every writeset acknowledged to its sender survives while a majority survives: its
//! seqno holds its bytes, and every member left in the final primary component has it.

use super::{hash_bytes, EndState, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct AckedSurvive {
    acked: BTreeMap<Seqno, (u64, MemberId)>,
    delivered: BTreeMap<Seqno, u64>,
}

impl Invariant for AckedSurvive {
    fn name(&self) -> &'static str {
        "acknowledged writesets survive"
    }

    fn on_deliver(&mut self, _member: MemberId, d: &Delivered) -> Result<(), String> {
        if let DeliveredKind::Writeset { .. } = d.kind {
            self.delivered.insert(d.seqno, hash_bytes(1, &d.bytes));
        }
        Ok(())
    }

    fn on_ack(&mut self, member: MemberId, seqno: Seqno, hash: u64) -> Result<(), String> {
        if self.delivered.get(&seqno) != Some(&hash) {
            return Err(format!("{member} was acknowledged seqno {seqno} for bytes not ordered there"));
        }
        if let Some((_, other)) = self.acked.insert(seqno, (hash, member)) {
            return Err(format!("seqno {seqno} acknowledged to {other} and {member}"));
        }
        Ok(())
    }

    fn at_end(&mut self, end: &EndState) -> Result<(), String> {
        let Some(&newest) = self.acked.keys().next_back() else {
            return Ok(());
        };
        for status in end.live.iter().filter(|s| s.primary) {
            if status.last_seqno < newest {
                return Err(format!(
                    "{} is primary at seqno {} but seqno {newest} was acknowledged",
                    status.id, status.last_seqno
                ));
            }
        }
        Ok(())
    }
}
