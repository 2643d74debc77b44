//! Every writeset acknowledged to its sender survives while a majority survives: its
//! seqno holds its bytes, and every member left in the final primary component has it.

use super::{hash_bytes, EndState, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct AckedSurvive {
    acked: BTreeMap<Seqno, (u64, MemberId)>,
    delivered: BTreeMap<Seqno, u64>,
    /// Acknowledged before any member delivered them (a restarted member applies before its
    /// cache is confirmed, and delivers only then): judged when delivered, and at the end.
    early: BTreeMap<Seqno, (u64, MemberId)>,
}

impl Invariant for AckedSurvive {
    fn name(&self) -> &'static str {
        "acknowledged writesets survive"
    }

    fn on_deliver(&mut self, _member: MemberId, d: &Delivered) -> Result<(), String> {
        if let DeliveredKind::Writeset { .. } = d.kind {
            let hash = hash_bytes(1, &d.bytes);
            self.delivered.insert(d.seqno, hash);
            if let Some((_, member)) = self.early.remove(&d.seqno).filter(|&(h, _)| h != hash) {
                return Err(format!("{member} was acknowledged seqno {} for bytes not ordered there", d.seqno));
            }
        }
        Ok(())
    }

    fn on_ack(&mut self, member: MemberId, seqno: Seqno, hash: u64) -> Result<(), String> {
        match self.delivered.get(&seqno) {
            None => _ = self.early.insert(seqno, (hash, member)),
            Some(&delivered) if delivered != hash => {
                return Err(format!("{member} was acknowledged seqno {seqno} for bytes not ordered there"));
            }
            Some(_) => {}
        }
        if let Some((_, other)) = self.acked.insert(seqno, (hash, member)) {
            return Err(format!("seqno {seqno} acknowledged to {other} and {member}"));
        }
        Ok(())
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.acked.split_off(&(boundary + 1));
        self.delivered.split_off(&(boundary + 1));
        self.early.split_off(&(boundary + 1));
    }

    fn at_end(&mut self, end: &EndState) -> Result<(), String> {
        if let Some((seqno, (_, member))) = self.early.first_key_value() {
            return Err(format!("{member} was acknowledged seqno {seqno}, which nobody delivered"));
        }
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
