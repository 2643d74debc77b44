//! In-memory cache for the simulator and tests. It models a disk: writes are volatile
//! until `sync`, and `crash` loses a random part of what was not synced.

use super::{count_until, Entry, LogStore};
use crate::raft::HardState;
use crate::rng::Rng;
use crate::state::AppliedState;
use std::collections::VecDeque;
use std::io;

#[derive(Debug)]
enum Undo {
    HardState(HardState),
    /// Entries after `after` were replaced; `removed` were there before.
    Append {
        after: u64,
        removed: Vec<Entry>,
    },
}

#[derive(Debug, Default)]
pub struct MemoryStore {
    hard: HardState,
    boundary: AppliedState,
    entries: VecDeque<Entry>,
    bytes: u64,
    /// Writes since the last sync, oldest first.
    unsynced: Vec<Undo>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A crash: unsynced writes are lost from a random point on (a torn tail).
    pub fn crash(&mut self, rng: &mut Rng) {
        let keep = rng.range(0, self.unsynced.len() as u64 + 1) as usize;
        while self.unsynced.len() > keep {
            match self.unsynced.pop().expect("len checked") {
                Undo::HardState(h) => self.hard = h,
                Undo::Append { after, removed } => {
                    self.truncate_after(after);
                    for e in removed {
                        self.bytes += e.size_bytes();
                        self.entries.push_back(e);
                    }
                }
            }
        }
        self.unsynced.clear();
    }

    fn offset(&self, index: u64) -> Option<usize> {
        index.checked_sub(self.boundary.position.index + 1).map(|o| o as usize).filter(|&o| o < self.entries.len())
    }

    fn truncate_after(&mut self, after: u64) -> Vec<Entry> {
        let keep = after.saturating_sub(self.boundary.position.index) as usize;
        let removed: Vec<Entry> = self.entries.drain(keep.min(self.entries.len())..).collect();
        self.bytes -= removed.iter().map(Entry::size_bytes).sum::<u64>();
        removed
    }
}

impl LogStore for MemoryStore {
    fn hard_state(&self) -> HardState {
        self.hard
    }

    fn save_hard_state(&mut self, hard: HardState) -> io::Result<()> {
        self.unsynced.push(Undo::HardState(self.hard));
        self.hard = hard;
        Ok(())
    }

    fn boundary(&self) -> &AppliedState {
        &self.boundary
    }

    fn last_index(&self) -> u64 {
        self.boundary.position.index + self.entries.len() as u64
    }

    fn entry(&self, index: u64) -> Option<Entry> {
        self.offset(index).map(|o| self.entries[o].clone())
    }

    fn append(&mut self, after: u64, entries: Vec<Entry>) -> io::Result<()> {
        if after < self.boundary.position.index || after > self.last_index() {
            return Err(io::Error::other(format!(
                "append after {after} outside retained log {}..={}",
                self.boundary.position.index,
                self.last_index()
            )));
        }
        let removed = self.truncate_after(after);
        self.unsynced.push(Undo::Append { after, removed });
        for e in entries {
            self.bytes += e.size_bytes();
            self.entries.push_back(e);
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.unsynced.clear();
        Ok(())
    }

    fn purge(&mut self, boundary: AppliedState) -> io::Result<()> {
        // Purging is modelled as durable at once (meta written before entries dropped).
        self.sync()?;
        while self.entries.front().is_some_and(|e| e.position.index <= boundary.position.index) {
            let e = self.entries.pop_front().expect("front checked");
            self.bytes -= e.size_bytes();
        }
        self.boundary = boundary;
        Ok(())
    }

    fn retained_bytes(&self) -> u64 {
        self.bytes
    }

    fn bytes_after(&self, index: u64, cap: u64) -> u64 {
        let newer = self.entries.iter().rev().take_while(|e| e.position.index > index);
        count_until(newer.map(Entry::size_bytes), cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Payload;
    use crate::raft::Position;

    fn e(index: u64, term: u64) -> Entry {
        Entry { position: Position { term, index }, payload: Payload::Command(vec![index as u8]) }
    }

    #[test]
    fn crash_keeps_synced_entries_and_may_lose_the_rest() {
        let mut s = MemoryStore::new();
        s.append(0, vec![e(1, 1), e(2, 1)]).unwrap();
        s.sync().unwrap();
        s.append(1, vec![e(2, 2), e(3, 2)]).unwrap();
        let mut rng = Rng::new(1);
        s.crash(&mut rng);
        assert!(s.last_index() >= 2);
        let survivor = s.entry(2).unwrap();
        assert!(survivor == e(2, 1) || survivor == e(2, 2));
        assert_eq!(s.entry(1), Some(e(1, 1)));
    }

    #[test]
    fn purge_moves_the_boundary() {
        let mut s = MemoryStore::new();
        s.append(0, (1..=5).map(|i| e(i, 1)).collect()).unwrap();
        let boundary = AppliedState { position: Position { term: 1, index: 3 }, ..Default::default() };
        s.purge(boundary).unwrap();
        assert_eq!((s.first_index(), s.last_index()), (4, 5));
        assert_eq!(s.entry(3), None);
        assert!(s.append(2, vec![]).is_err());
    }
}
