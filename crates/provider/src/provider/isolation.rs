//! Total order isolation (TOI): a DDL statement runs alone, at its place in the global order.
use super::Provider;
use crate::core::outcome_of;
use crate::types::{Status, TrxMeta};

impl Provider {
    /// Orders the statement, waits until everything before it has committed, and holds the
    /// commit order until [`Provider::to_execute_end`] for the same connection.
    pub fn to_execute_start(
        &self,
        conn_id: u64,
        key_parts: Vec<Vec<Vec<u8>>>,
        action: &[&[u8]],
        ws_flags: u32,
    ) -> (Status, TrxMeta) {
        let mut statement = Some((key_parts, action.concat()));
        let start = self.wait_for(None, |core, me| core.isolation_start(conn_id, &mut statement, ws_flags, me));
        let (writeset, local_id) = match start.expect("no deadline") {
            Ok(ordered) => ordered,
            Err(refused) => return refused,
        };
        self.submit(writeset.encode(), local_id);
        self.wait_for(None, |core, me| core.isolation_outcome(conn_id, local_id, me)).expect("no deadline")
    }

    /// A non-empty `error`: the statement failed here; the members vote on it (as on a failed
    /// commit), and a node whose failure the group did not share leaves.
    pub fn to_execute_end(&self, conn_id: u64, error: &[u8]) -> Status {
        let failed = (!error.is_empty()).then(|| outcome_of(error));
        match self.with_core(|core| core.isolation_end(conn_id, failed)) {
            Ok(status) => status,
            Err(seqno) => {
                // The statement's own client got its error from the server already.
                self.await_vote(seqno, error, false);
                Status::Ok
            }
        }
    }
}
