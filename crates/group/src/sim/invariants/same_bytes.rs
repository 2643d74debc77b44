//! Same seqno → same bytes (and same kind) on every member: the total order is one.
//! (Unnumbered messages are checked by `MessageOrder`.)

use super::{delivered_hash, is_numbered, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct SameBytes {
    /// Seqno -> (hash, first member that delivered it).
    pub(crate) by_seqno: BTreeMap<Seqno, (u64, MemberId)>,
}

impl Invariant for SameBytes {
    fn name(&self) -> &'static str {
        "same seqno, same bytes"
    }

    fn on_deliver(&mut self, member: MemberId, d: &Delivered) -> Result<(), String> {
        if matches!(d.kind, DeliveredKind::StateGap | DeliveredKind::ViewsMissed | DeliveredKind::HistoryForked)
            || !is_numbered(d)
        {
            return Ok(());
        }
        let hash = delivered_hash(d);
        match self.by_seqno.get(&d.seqno) {
            Some(&(h, first)) if h != hash => {
                Err(format!("seqno {} delivered with different contents by {first} and {member}", d.seqno))
            }
            Some(_) => Ok(()),
            None => {
                self.by_seqno.insert(d.seqno, (hash, member));
                Ok(())
            }
        }
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.by_seqno.split_off(&(boundary + 1));
    }
}
