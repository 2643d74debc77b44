//! A `ViewsMissed` skips views only: every seqno a member skipped that some member delivered
//! was a view, not a writeset (docs/design/group-views-only-gap.md). Checked at the end,
//! since the others may deliver those seqnos later than the skip.

use super::{is_numbered, EndState, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct ViewsOnlyMissed {
    /// Each member's last numbered delivery.
    last: BTreeMap<MemberId, Seqno>,
    /// Skipped stretches: (member, first, last seqno).
    skipped: Vec<(MemberId, Seqno, Seqno)>,
    /// Seqno -> whether what some member delivered there was a view.
    numbered: BTreeMap<Seqno, bool>,
}

impl Invariant for ViewsOnlyMissed {
    fn name(&self) -> &'static str {
        "a views-only gap skips views only"
    }

    fn on_deliver(&mut self, member: MemberId, d: &Delivered) -> Result<(), String> {
        match d.kind {
            DeliveredKind::ViewsMissed => {
                // After a view, at its seqno, it skipped messages only.
                let from = self.last.get(&member).map_or(1, |last| last + 1);
                if from <= d.seqno {
                    self.skipped.push((member, from, d.seqno));
                }
            }
            DeliveredKind::View(_) | DeliveredKind::Writeset { .. } => {
                // A writeset delivered there by anyone counts, whoever came first.
                let view = matches!(d.kind, DeliveredKind::View(_));
                self.numbered.entry(d.seqno).and_modify(|v| *v &= view).or_insert(view);
            }
            DeliveredKind::StateGap | DeliveredKind::HistoryForked | DeliveredKind::Message { .. } => {}
        }
        if is_numbered(d) {
            self.last.insert(member, d.seqno);
        }
        Ok(())
    }

    fn on_restart(&mut self, member: MemberId, resume_after: Seqno) -> Result<(), String> {
        self.last.insert(member, resume_after);
        Ok(())
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.numbered.split_off(&(boundary + 1));
    }

    fn at_end(&mut self, _end: &EndState) -> Result<(), String> {
        for &(member, first, last) in &self.skipped {
            if let Some((seqno, _)) = self.numbered.range(first..=last).find(|(_, &view)| !view) {
                return Err(format!("{member} skipped seqnos {first}..={last} as views only; {seqno} was a writeset"));
            }
        }
        Ok(())
    }
}
