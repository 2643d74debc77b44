//! Galera's apply and commit monitors: which seqnos have finished a stage, and who waits for
//! a seqno to be reached. Finishing a seqno wakes only the waiters it lets proceed.
use crate::seqno_window::SeqnoWindow;
use crate::types::Seqno;
use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Monitor<W> {
    window: SeqnoWindow,
    /// Waiters by the seqno they need `last_contiguous` to reach.
    waiters: BTreeMap<Seqno, Vec<W>>,
}

impl<W> Monitor<W> {
    pub fn starting_at(position: Seqno) -> Self {
        Monitor { window: SeqnoWindow::starting_at(position), waiters: BTreeMap::new() }
    }

    pub fn last_contiguous(&self) -> Seqno {
        self.window.last_contiguous()
    }

    pub fn reached(&self, seqno: Seqno) -> bool {
        self.window.last_contiguous() >= seqno
    }

    pub fn is_finished(&self, seqno: Seqno) -> bool {
        self.window.is_finished(seqno)
    }

    /// Marks `seqno` finished; the waiters it releases go to `wake`.
    pub fn finish(&mut self, seqno: Seqno, wake: &mut Vec<W>) {
        if self.window.finish(seqno) {
            let still_waiting = self.waiters.split_off(&(self.window.last_contiguous() + 1));
            for (_, ws) in std::mem::replace(&mut self.waiters, still_waiting) {
                wake.extend(ws);
            }
        }
    }

    /// `waiter` is woken once every seqno up to `seqno` has finished.
    pub fn wait_for(&mut self, seqno: Seqno, waiter: W) {
        debug_assert!(!self.reached(seqno), "a waiter for a seqno already reached would never be woken");
        self.waiters.entry(seqno).or_default().push(waiter);
    }

    /// Starts over with everything up to `position` finished (and what was finished beyond
    /// it); every waiter is woken to look again.
    pub fn restart_at(&mut self, position: Seqno, wake: &mut Vec<W>) {
        self.window.rebase(position);
        wake.extend(std::mem::take(&mut self.waiters).into_values().flatten());
    }

    /// Every waiter, for when the node stops serving (the connection ended or failed).
    pub fn wake_all(&mut self, wake: &mut Vec<W>) {
        wake.extend(std::mem::take(&mut self.waiters).into_values().flatten());
    }

    /// A waiter that gave up (timed out).
    pub fn forget(&mut self, waiter: &W)
    where
        W: PartialEq,
    {
        for ws in self.waiters.values_mut() {
            ws.retain(|w| w != waiter);
        }
        self.waiters.retain(|_, ws| !ws.is_empty());
    }

    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiters.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishing_wakes_only_the_waiters_reached() {
        let mut m = Monitor::starting_at(10);
        m.wait_for(11, "a");
        m.wait_for(12, "b");
        m.wait_for(12, "c");
        m.wait_for(14, "d");
        let mut wake = Vec::new();
        m.finish(12, &mut wake);
        assert!(wake.is_empty(), "12 is ahead of 11: nothing contiguous moved");
        m.finish(11, &mut wake);
        assert_eq!(wake, ["a", "b", "c"]);
        assert_eq!((m.last_contiguous(), m.waiting()), (12, 1));
        wake.clear();
        m.restart_at(3, &mut wake);
        assert_eq!((wake, m.last_contiguous()), (vec!["d"], 3));
    }
}
