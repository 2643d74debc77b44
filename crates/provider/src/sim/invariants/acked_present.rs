//! Every commit acknowledged to a client is present on every node after the heal: at its
//! seqno, with its content.

use super::{End, Invariant};
use crate::types::Seqno;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct AckedPresent {
    acked: BTreeMap<Seqno, (u64, usize)>,
}

impl Invariant for AckedPresent {
    fn name(&self) -> &'static str {
        "acknowledged commits present everywhere"
    }

    fn acked(&mut self, node: usize, seqno: Seqno, hash: u64) -> Result<(), String> {
        if let Some((_, other)) = self.acked.insert(seqno, (hash, node)) {
            return Err(format!("seqno {seqno} acknowledged on node {} and node {}", other + 1, node + 1));
        }
        Ok(())
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.acked.split_off(&(boundary + 1));
    }

    fn rolled_back_at_fork(&mut self, seqnos: &[Seqno]) {
        for seqno in seqnos {
            self.acked.remove(seqno);
        }
    }

    fn at_end(&mut self, end: &End<'_>) -> Result<(), String> {
        if end.state_lost {
            return Ok(());
        }
        for live in &end.live {
            for (seqno, (hash, origin)) in &self.acked {
                let held = live.db.log.get(seqno).map(|c| c.hash);
                if held != Some(*hash) {
                    return Err(format!(
                        "seqno {seqno} acknowledged on node {} but node {} holds {held:?}",
                        origin + 1,
                        live.node + 1
                    ));
                }
            }
        }
        Ok(())
    }
}
