//! Nothing applies before its dependencies: when a writeset starts applying on a node, the
//! writesets it depends on (every seqno up to its `depends_on`) have committed there.

use super::Invariant;
use crate::certification::Verdict;
use crate::sim::db::Db;
use crate::types::Seqno;
use std::collections::BTreeSet;

/// How far below `depends_on` each application is checked (the window bounds the cost).
const WINDOW: Seqno = 64;

#[derive(Default)]
pub struct Dependencies {
    /// Seqnos that hold writesets (any verdict: a failed one is rolled back in its place).
    writesets: BTreeSet<Seqno>,
}

impl Invariant for Dependencies {
    fn name(&self) -> &'static str {
        "nothing applies before its dependencies"
    }

    fn certified(&mut self, _node: usize, seqno: Seqno, _verdict: Verdict, _: bool) -> Result<(), String> {
        self.writesets.insert(seqno);
        Ok(())
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.writesets.split_off(&(boundary + 1));
    }

    fn applying(&mut self, node: usize, seqno: Seqno, depends_on: Seqno, db: &Db) -> Result<(), String> {
        if depends_on >= seqno {
            return Err(format!("seqno {seqno} depends on {depends_on}, not an earlier seqno"));
        }
        for &w in self.writesets.range(depends_on - WINDOW..=depends_on) {
            if !db.holds(w) {
                let held: Vec<Seqno> = db.log.keys().copied().collect();
                return Err(format!(
                    "node {} applies seqno {seqno} (depends on {depends_on}) before seqno {w} committed (its \
                     database is at {} and holds {held:?})",
                    node + 1,
                    db.committed
                ));
            }
        }
        Ok(())
    }
}
