//! Tracks which seqnos have finished a stage (commit order, full commit) when they finish
//! out of order, and the highest contiguous one: Galera's apply and commit monitors reduce
//! to this bookkeeping once the waiting is done by the caller.
use crate::types::Seqno;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub struct SeqnoWindow {
    last_contiguous: Seqno,
    finished_ahead: BTreeSet<Seqno>,
}

impl SeqnoWindow {
    /// A window where everything up to and including `position` is finished.
    pub fn starting_at(position: Seqno) -> SeqnoWindow {
        SeqnoWindow { last_contiguous: position, finished_ahead: BTreeSet::new() }
    }

    /// Highest seqno such that it and every seqno below it have finished.
    pub fn last_contiguous(&self) -> Seqno {
        self.last_contiguous
    }

    pub fn is_finished(&self, seqno: Seqno) -> bool {
        seqno <= self.last_contiguous || self.finished_ahead.contains(&seqno)
    }

    /// Everything up to `position` is finished now; seqnos already finished beyond it stay
    /// so (a state transfer that lands behind them must not undo them).
    pub fn rebase(&mut self, position: Seqno) {
        self.finished_ahead.retain(|s| *s > position);
        self.last_contiguous = position;
        self.absorb_finished_ahead();
    }

    /// Marks `seqno` finished; returns true when the contiguous point moved.
    pub fn finish(&mut self, seqno: Seqno) -> bool {
        if seqno <= self.last_contiguous {
            return false;
        }
        if seqno != self.last_contiguous + 1 {
            self.finished_ahead.insert(seqno);
            return false;
        }
        self.last_contiguous = seqno;
        self.absorb_finished_ahead();
        true
    }

    /// Moves the contiguous point over seqnos that finished ahead of it.
    fn absorb_finished_ahead(&mut self) {
        while self.finished_ahead.remove(&(self.last_contiguous + 1)) {
            self.last_contiguous += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_only_over_contiguous_seqnos() {
        let mut w = SeqnoWindow::starting_at(4);
        assert!(!w.finish(6));
        assert_eq!(w.last_contiguous(), 4);
        assert!(w.is_finished(6) && !w.is_finished(5));
        assert!(w.finish(5));
        assert_eq!(w.last_contiguous(), 6);
        assert!(!w.finish(3), "already finished seqnos are ignored");
        assert_eq!(w.last_contiguous(), 6);
        w.finish(12);
        w.finish(9);
        w.rebase(10);
        assert_eq!(w.last_contiguous(), 10, "9 is behind the new position, 11 is not finished");
        w.finish(11);
        assert_eq!(w.last_contiguous(), 12, "12 was finished before the rebase");
    }
}
