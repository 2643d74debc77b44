//! After the heal every node is back, synced, with the same data, no server thread left
//! waiting (a wait nobody ended), and new commits acknowledged.

use super::{End, Invariant};

pub struct Converged;

impl Invariant for Converged {
    fn name(&self) -> &'static str {
        "converged after heal"
    }

    fn at_end(&mut self, end: &End<'_>) -> Result<(), String> {
        if end.state_lost {
            return Ok(());
        }
        if end.acked_after_heal == 0 {
            return Err("no commit acknowledged after the heal".into());
        }
        let first = end.live.first().ok_or("no node running")?;
        for live in &end.live {
            if live.phase != "Synced" {
                return Err(format!("node {} is {} after the heal", live.node + 1, live.phase));
            }
            if !live.busy.is_empty() {
                return Err(format!("node {} has threads still waiting: {:?}", live.node + 1, live.busy));
            }
            // The same commits, in the same places (a snapshot may stand at a later view's
            // seqno: positions alone may differ).
            if live.db.log != first.db.log {
                return Err(format!(
                    "node {} at seqno {} and node {} at seqno {} hold different commits",
                    first.node + 1,
                    first.db.committed,
                    live.node + 1,
                    live.db.committed
                ));
            }
        }
        Ok(())
    }
}
