//! Unnumbered messages sit at one place of the total order: every member delivers the
//! messages ordered after seqno S at that S, in the same order, with the same bytes, none
//! skipped and none ordered twice, and the sender is told that S. After a restart or a
//! state gap a member may resume partway through the messages at its resume seqno (they
//! are at-least-once), never elsewhere.

use super::{delivered_hash, EndState, Invariant};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::BTreeMap;

/// A message: (origin, request).
type Key = (MemberId, u64);

#[derive(Default)]
pub struct MessageOrder {
    /// Seqno -> the messages ordered after it, in order, with their hashes.
    after: BTreeMap<Seqno, Vec<(Key, u64)>>,
    /// Message -> the seqno it was ordered after, and its hash.
    placed: BTreeMap<Key, (Seqno, u64)>,
    /// Seqno -> how many messages follow it, known once a member went on past them.
    closed: BTreeMap<Seqno, usize>,
    /// Senders told where their message was ordered before any member delivered it (a
    /// restarted member applies before its cache is confirmed, and delivers only then):
    /// message -> (seqno, hash), checked when it is delivered and at the end.
    told: BTreeMap<Key, (Seqno, u64)>,
    /// Per member: its seqno and how many of the messages after it it delivered (`None`
    /// after a restart or gap, where it may resume partway through them).
    cursor: BTreeMap<MemberId, (Seqno, Option<usize>)>,
}

impl Invariant for MessageOrder {
    fn name(&self) -> &'static str {
        "messages at the same point of the order"
    }

    fn on_deliver(&mut self, member: MemberId, d: &Delivered) -> Result<(), String> {
        let DeliveredKind::Message { origin, request } = d.kind else {
            if matches!(d.kind, DeliveredKind::StateGap | DeliveredKind::ViewsMissed | DeliveredKind::HistoryForked) {
                self.cursor.insert(member, (d.seqno, None));
                return Ok(());
            }
            if let Some(&(seqno, Some(k))) = self.cursor.get(&member) {
                if seqno + 1 == d.seqno {
                    let total = self.after.get(&seqno).map_or(0, Vec::len);
                    if k < total {
                        return Err(format!("{member} went on to seqno {} after {k} of {total} messages", d.seqno));
                    }
                    self.closed.insert(seqno, total);
                }
            }
            self.cursor.insert(member, (d.seqno, Some(0)));
            return Ok(());
        };
        let key = (origin, request);
        let hash = delivered_hash(d);
        if let Some(&(seqno, h)) = self.placed.get(&key) {
            if (seqno, h) != (d.seqno, hash) {
                return Err(format!(
                    "{member} delivered message {key:?} at seqno {} (was {seqno}) or other bytes",
                    d.seqno
                ));
            }
        }
        let (at, done) = self.cursor.get(&member).copied().unwrap_or((d.seqno, None));
        if at != d.seqno {
            return Err(format!("{member} delivered a message of seqno {} at seqno {at}", d.seqno));
        }
        let list = self.after.entry(at).or_default();
        // Resuming: anywhere in the list (what precedes was taken before the restart).
        let k = done.or_else(|| list.iter().position(|(k, _)| *k == key)).unwrap_or(list.len());
        if k < list.len() {
            if list[k] != (key, hash) {
                return Err(format!(
                    "{member} delivered {key:?} as message {k} after seqno {at}, others {:?}",
                    list[k]
                ));
            }
        } else {
            if self.placed.contains_key(&key) {
                return Err(format!("{member} delivered {key:?} out of its place after seqno {at}"));
            }
            if self.closed.get(&at).is_some_and(|&total| total <= k) {
                return Err(format!("{member} delivered {key:?} after seqno {at}, which others passed without it"));
            }
            list.push((key, hash));
            self.placed.insert(key, (at, hash));
            if let Some(told) = self.told.remove(&key).filter(|&told| told != (at, hash)) {
                return Err(format!("{key:?} was told it follows seqno {} but {member} delivered it at {at}", told.0));
            }
        }
        self.cursor.insert(member, (at, Some(k + 1)));
        Ok(())
    }

    fn on_message_ack(&mut self, member: MemberId, request: u64, seqno: Seqno, hash: u64) -> Result<(), String> {
        match self.placed.get(&(member, request)) {
            Some(&placed) if placed == (seqno, hash) => Ok(()),
            None => {
                self.told.insert((member, request), (seqno, hash));
                Ok(())
            }
            other => {
                Err(format!("{member} was told its message {request} follows seqno {seqno}; delivered: {other:?}"))
            }
        }
    }

    fn on_restart(&mut self, member: MemberId, resume_after: Seqno) -> Result<(), String> {
        self.cursor.insert(member, (resume_after, None));
        Ok(())
    }

    fn at_end(&mut self, _end: &EndState) -> Result<(), String> {
        match self.told.first_key_value() {
            Some((key, (seqno, _))) => {
                Err(format!("{key:?} was told it follows seqno {seqno}, and nobody delivered it"))
            }
            None => Ok(()),
        }
    }

    /// The messages after the boundary itself may differ too: the forced side orders its
    /// own after its view.
    fn on_fork(&mut self, boundary: Seqno) {
        self.after.split_off(&boundary);
        self.closed.split_off(&boundary);
        self.placed.retain(|_, (seqno, _)| *seqno < boundary);
        self.told.retain(|_, (seqno, _)| *seqno < boundary);
        for (seqno, done) in self.cursor.values_mut() {
            if *seqno >= boundary {
                *done = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seqno: Seqno, request: u64) -> Delivered {
        let kind = DeliveredKind::Message { origin: MemberId(1), request };
        Delivered { seqno, kind, bytes: vec![request as u8] }
    }

    fn end() -> EndState {
        EndState { genesis: Default::default(), live: Vec::new(), probes_acked: 0, cached: Vec::new() }
    }

    fn writeset(seqno: Seqno) -> Delivered {
        Delivered { seqno, kind: DeliveredKind::Writeset { origin: MemberId(1), request: 0 }, bytes: vec![] }
    }

    #[test]
    fn catches_reordered_skipped_and_misplaced_messages() {
        let (a, b) = (MemberId(1), MemberId(2));
        let mut good = MessageOrder::default();
        for m in [a, b] {
            good.on_deliver(m, &writeset(1)).unwrap();
            good.on_deliver(m, &message(1, 10)).unwrap();
            good.on_deliver(m, &message(1, 11)).unwrap();
            good.on_deliver(m, &writeset(2)).unwrap();
        }
        good.on_message_ack(a, 11, 1, delivered_hash(&message(1, 11))).unwrap();
        assert!(good.on_message_ack(a, 10, 2, delivered_hash(&message(1, 10))).is_err());
        // After a restart at seqno 1, a member may resume at the second message.
        good.on_restart(b, 1).unwrap();
        good.on_deliver(b, &message(1, 11)).unwrap();
        good.on_deliver(b, &writeset(2)).unwrap();

        // Told before anyone delivered it (a restarted member applies before it delivers):
        // judged when it is delivered, and at the end.
        let mut early = MessageOrder::default();
        early.on_message_ack(a, 13, 1, delivered_hash(&message(1, 13))).unwrap();
        assert!(early.at_end(&end()).is_err());
        early.on_deliver(b, &writeset(1)).unwrap();
        early.on_deliver(b, &message(1, 13)).unwrap();
        early.at_end(&end()).unwrap();
        let mut elsewhere = MessageOrder::default();
        elsewhere.on_message_ack(a, 14, 2, delivered_hash(&message(2, 14))).unwrap();
        elsewhere.on_deliver(b, &writeset(1)).unwrap();
        assert!(elsewhere.on_deliver(b, &message(1, 14)).is_err());

        let mut reordered = MessageOrder::default();
        reordered.on_deliver(a, &writeset(1)).unwrap();
        reordered.on_deliver(a, &message(1, 10)).unwrap();
        reordered.on_deliver(a, &message(1, 11)).unwrap();
        reordered.on_deliver(b, &writeset(1)).unwrap();
        assert!(reordered.on_deliver(b, &message(1, 11)).is_err());

        let mut skipped = MessageOrder::default();
        skipped.on_deliver(a, &writeset(1)).unwrap();
        skipped.on_deliver(a, &message(1, 10)).unwrap();
        skipped.on_deliver(b, &writeset(1)).unwrap();
        assert!(skipped.on_deliver(b, &writeset(2)).is_err());

        let mut late = MessageOrder::default();
        late.on_deliver(a, &writeset(1)).unwrap();
        late.on_deliver(a, &writeset(2)).unwrap();
        late.on_deliver(b, &writeset(1)).unwrap();
        assert!(late.on_deliver(b, &message(1, 10)).is_err(), "a passed seqno 1 without it");
        assert!(late.on_deliver(a, &message(1, 12)).is_err(), "a is at seqno 2");
    }
}
