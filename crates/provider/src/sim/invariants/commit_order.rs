//! Commits happen in seqno order on every node: a database never commits a seqno at or below
//! one it already committed (it would apply out of the global order, or twice).

use super::Invariant;

pub struct CommitOrder;

impl Invariant for CommitOrder {
    fn name(&self) -> &'static str {
        "commits in seqno order"
    }

    fn committed(&mut self, node: usize, outcome: &Result<(), String>) -> Result<(), String> {
        outcome.as_ref().map_err(|e| format!("node {}: {e}", node + 1)).copied()
    }
}
