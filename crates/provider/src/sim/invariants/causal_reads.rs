//! A causal read (`wsrep_sync_wait`) sees every commit acknowledged anywhere before it
//! started.

use super::Invariant;
use crate::sim::db::Db;
use crate::types::Seqno;

pub struct CausalReads;

impl Invariant for CausalReads {
    fn name(&self) -> &'static str {
        "causal reads see earlier commits"
    }

    fn causal_read(&mut self, node: usize, acked_before: Seqno, db: &Db) -> Result<(), String> {
        if acked_before > 0 && !db.holds(acked_before) {
            return Err(format!(
                "a causal read on node {} ended at seqno {} without seqno {acked_before}, acknowledged before it began",
                node + 1,
                db.committed
            ));
        }
        Ok(())
    }
}
