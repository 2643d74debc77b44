//! No gaps: each member delivers seqnos 1, 2, 3, … (from the genesis' base) with none
//! skipped or repeated, across restarts too. A declared `StateGap` (state transfer needed)
//! or `ViewsMissed` is the only jump, never backwards; an unnumbered message repeats the seqno before it.

use super::Invariant;
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct NoGaps {
    last: BTreeMap<MemberId, Seqno>,
}

impl Invariant for NoGaps {
    fn name(&self) -> &'static str {
        "no gaps"
    }

    fn on_deliver(&mut self, member: MemberId, d: &Delivered) -> Result<(), String> {
        let last = self.last.entry(member).or_insert(0);
        let ok = match d.kind {
            DeliveredKind::StateGap | DeliveredKind::ViewsMissed => d.seqno >= *last,
            // Only after the fork checker took the member as restarted (`sim::fork`).
            DeliveredKind::HistoryForked => d.seqno >= *last,
            DeliveredKind::Message { .. } => d.seqno == *last,
            _ => d.seqno == *last + 1,
        };
        if !ok {
            return Err(format!("{member} delivered seqno {} after {}", d.seqno, *last));
        }
        *last = d.seqno;
        Ok(())
    }

    fn on_restart(&mut self, member: MemberId, resume_after: Seqno) -> Result<(), String> {
        match self.last.insert(member, resume_after) {
            // 0: an application that keeps no position of its own reads the whole log again.
            Some(last) if last != resume_after && resume_after != 0 => {
                Err(format!("{member} restarts after seqno {resume_after} but delivered up to {last}"))
            }
            _ => Ok(()),
        }
    }
}
