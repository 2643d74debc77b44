//! The cache serves what was delivered: at the end, every running member's retained
//! range replays with the seqnos and bytes the group delivered (messages are not served).

use super::{delivered_hash, is_numbered, EndState, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct CacheServes {
    delivered: BTreeMap<Seqno, u64>,
}

impl Invariant for CacheServes {
    fn name(&self) -> &'static str {
        "cache serves retained ranges as delivered"
    }

    fn on_deliver(&mut self, _member: MemberId, d: &Delivered) -> Result<(), String> {
        if !matches!(d.kind, DeliveredKind::StateGap | DeliveredKind::ViewsMissed | DeliveredKind::HistoryForked)
            && is_numbered(d)
        {
            self.delivered.insert(d.seqno, delivered_hash(d));
        }
        Ok(())
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.delivered.split_off(&(boundary + 1));
    }

    fn at_end(&mut self, end: &EndState) -> Result<(), String> {
        for (member, served) in &end.cached {
            for d in served {
                if !is_numbered(d) || self.delivered.get(&d.seqno) != Some(&delivered_hash(d)) {
                    return Err(format!("{member}'s cache serves seqno {} unlike it was delivered", d.seqno));
                }
            }
            if served.windows(2).any(|w| w[1].seqno != w[0].seqno + 1) {
                return Err(format!("{member}'s cache serves a range with holes"));
            }
        }
        Ok(())
    }
}
