//! Views in the same place of the order everywhere: view n is delivered at the same seqno
//! with the same members by every member that delivers it, and view ids follow 1, 2, 3 …
//! on each member (except across a declared state gap).

use super::Invariant;
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno, View};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct ViewOrder {
    /// View id -> (seqno, view).
    views: BTreeMap<u64, (Seqno, View)>,
    last_view: BTreeMap<MemberId, u64>,
}

impl Invariant for ViewOrder {
    fn name(&self) -> &'static str {
        "views at the same point of the order"
    }

    fn on_deliver(&mut self, member: MemberId, d: &Delivered) -> Result<(), String> {
        match &d.kind {
            DeliveredKind::StateGap | DeliveredKind::ViewsMissed | DeliveredKind::HistoryForked => {
                self.last_view.remove(&member);
                Ok(())
            }
            DeliveredKind::Writeset { .. } | DeliveredKind::Message { .. } => Ok(()),
            DeliveredKind::View(view) => {
                if let Some(&last) = self.last_view.get(&member) {
                    if view.view_id != last + 1 {
                        return Err(format!("{member} went from view {last} to view {}", view.view_id));
                    }
                }
                self.last_view.insert(member, view.view_id);
                match self.views.get(&view.view_id) {
                    Some((seqno, known)) if *seqno != d.seqno || known != view => Err(format!(
                        "view {} at seqno {} with {:?} on {member}, but at seqno {seqno} with {:?} before",
                        view.view_id, d.seqno, view.members, known.members
                    )),
                    Some(_) => Ok(()),
                    None => {
                        self.views.insert(view.view_id, (d.seqno, view.clone()));
                        Ok(())
                    }
                }
            }
        }
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.views.retain(|_, (seqno, _)| *seqno <= boundary);
    }

    fn on_restart(&mut self, member: MemberId, _resume_after: Seqno) -> Result<(), String> {
        // Views before the resume point are not delivered again.
        self.last_view.remove(&member);
        Ok(())
    }
}
