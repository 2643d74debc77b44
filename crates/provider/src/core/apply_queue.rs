//! The events waiting for appliers, with the bytes of writesets they hold, so that the queue
//! can be bounded in memory as well as in count (`gcs.recv_q_hard_limit`).

use super::apply::Event;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct ApplyQueue {
    /// Each event with the bytes it was counted at.
    events: VecDeque<(Event, usize)>,
    bytes: usize,
}

impl ApplyQueue {
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Writeset bytes held (data and keys).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn iter(&self) -> impl Iterator<Item = &Event> + '_ {
        self.events.iter().map(|(e, _)| e)
    }

    /// Where the first event that `wanted` picks stands.
    pub fn position(&self, wanted: impl Fn(&Event) -> bool) -> Option<usize> {
        self.events.iter().position(|(e, _)| wanted(e))
    }

    pub fn push_back(&mut self, event: Event) {
        let bytes = event.byte_len();
        self.bytes += bytes;
        self.events.push_back((event, bytes));
    }

    pub fn push_front(&mut self, event: Event) {
        let bytes = event.byte_len();
        self.bytes += bytes;
        self.events.push_front((event, bytes));
    }

    pub fn insert(&mut self, at: usize, event: Event) {
        let bytes = event.byte_len();
        self.bytes += bytes;
        self.events.insert(at, (event, bytes));
    }

    pub fn pop_front(&mut self) -> Option<Event> {
        self.remove(0)
    }

    pub fn remove(&mut self, at: usize) -> Option<Event> {
        let (event, bytes) = self.events.remove(at)?;
        self.bytes -= bytes;
        Some(event)
    }

    pub fn clear(&mut self) {
        self.events.clear();
        self.bytes = 0;
    }

    /// Empties the queue, returning what it held in order.
    pub fn take(&mut self) -> VecDeque<Event> {
        self.bytes = 0;
        std::mem::take(&mut self.events).into_iter().map(|(e, _)| e).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{SourceTrx, Uuid};
    use crate::writeset::Writeset;

    fn apply(seqno: i64, bytes: usize) -> Event {
        let source = SourceTrx { node: Uuid::NIL, trx_id: 1, conn_id: 1 };
        let writeset = Writeset { source, local_id: 1, last_seen: 0, flags: 0, keys: Vec::new(), data: vec![0; bytes] };
        Event::Apply { seqno, writeset: Box::new(writeset), depends_on: seqno - 1, failed: false }
    }

    #[test]
    fn bytes_follow_every_way_in_and_out() {
        let mut q = ApplyQueue::default();
        q.push_back(apply(2, 100));
        q.push_front(apply(1, 10));
        q.insert(1, Event::Skipped { seqno: 3 });
        assert_eq!((q.len(), q.bytes()), (3, 110));
        assert!(matches!(q.pop_front(), Some(Event::Apply { seqno: 1, .. })));
        assert_eq!(q.bytes(), 100);
        let at = q.position(|e| matches!(e, Event::Apply { .. })).unwrap();
        q.remove(at);
        assert_eq!((q.len(), q.bytes()), (1, 0));
        q.push_back(apply(4, 5));
        assert_eq!(q.take().len(), 2);
        assert_eq!((q.len(), q.bytes()), (0, 0));
    }
}
