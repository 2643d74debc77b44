//! Total order isolation (TOI): a DDL statement runs alone, at its place in the global order.
use super::Provider;
use crate::certification::{Key, KeyType, Verdict};
use crate::types::{flags, Gtid, SourceTrx, Status, TrxMeta, Uuid, SEQNO_UNDEFINED};

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
        let shared = self.lock();
        let source = SourceTrx { node: shared.member(), trx_id: conn_id, conn_id };
        let unordered = TrxMeta::unordered(source);
        let (mut shared, _) = self.wait_until(shared, None, |s| s.paused_at.is_none() || !s.can_replicate());
        if !shared.can_replicate() {
            return (Status::ConnFail, unordered);
        }
        if shared.isolation_by_conn.contains_key(&conn_id) {
            log::error!("connection {conn_id} started a second isolated statement before ending the first");
            return (Status::TrxFail, unordered);
        }
        let Some(node) = shared.group_node() else { return (Status::ConnFail, unordered) };
        // The v26 call carries no key types: every isolation key is exclusive.
        let keys: Vec<Key> = key_parts.into_iter().map(|parts| Key::new(parts, KeyType::Exclusive)).collect();
        let data = action.concat();
        let ws = shared.prepare_writeset(source, ws_flags | flags::ISOLATION, keys, data);
        drop(shared);
        let (seqno, verdict) = match self.replicate(&node, &ws) {
            Ok(ordered) => ordered,
            Err(status) => return (status, unordered),
        };
        debug_assert!(matches!(verdict, Verdict::Pass { .. }), "isolation writesets always pass");
        let mut shared = self.lock();
        shared.isolation_by_conn.insert(conn_id, seqno);
        let group = shared.group();
        // A crash while the statement runs must force a full state transfer.
        shared.save_state(Gtid::new(Uuid::NIL, SEQNO_UNDEFINED));
        let (shared, _) = self.wait_until(shared, None, |s| s.committed.last_contiguous() >= seqno - 1);
        drop(shared);
        let meta = TrxMeta { gtid: Gtid::new(group, seqno), depends_on: seqno - 1, ..unordered };
        (Status::Ok, meta)
    }

    pub fn to_execute_end(&self, conn_id: u64, error: &[u8]) -> Status {
        let mut shared = self.lock();
        let Some(seqno) = shared.isolation_by_conn.remove(&conn_id) else {
            return Status::ConnFail;
        };
        if !error.is_empty() {
            log::warn!(
                "isolated statement at seqno {seqno} failed on this node: {}",
                String::from_utf8_lossy(error).trim_end_matches('\0')
            );
        }
        shared.commit_order.finish(seqno);
        shared.committed.finish(seqno);
        if shared.isolation_by_conn.is_empty() {
            let running = Gtid::new(shared.group(), SEQNO_UNDEFINED);
            shared.save_state(running);
        }
        drop(shared);
        self.notify();
        Status::Ok
    }
}
