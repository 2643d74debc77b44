//! The writeset cache (Galera's gcache) is the Raft log itself: every ordered entry is
//! kept once, serves catch-up of lagging members, survives restart and is purged from
//! the front when it exceeds `gcache_bytes`. The purge boundary keeps the applied group
//! state so numbering continues after it.

mod file;
mod memory;

pub use file::{load_or_create_member_id, FileStore};
pub use memory::MemoryStore;

use crate::codec::{DecodeError, Reader, Writer};
use crate::raft::{HardState, Membership, Position};
use crate::state::AppliedState;
use crate::types::MemberId;
use std::io;

/// What an entry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    LeaderChange,
    Membership(Membership),
    /// An encoded `state::Op`.
    Command(Vec<u8>),
}

/// One log entry as stored and as replicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub position: Position,
    pub payload: Payload,
}

const PAYLOAD_LEADER_CHANGE: u8 = 0;
const PAYLOAD_MEMBERSHIP: u8 = 1;
const PAYLOAD_COMMAND: u8 = 2;

impl Entry {
    /// Bytes this entry accounts for in the cache size.
    pub fn size_bytes(&self) -> u64 {
        let payload = match &self.payload {
            Payload::Command(b) => b.len(),
            _ => 0,
        };
        (crate::record::HEADER_BYTES + 32 + payload) as u64
    }

    pub fn encode(&self, w: &mut Writer) {
        self.position.encode(w);
        match &self.payload {
            Payload::LeaderChange => {
                w.u8(PAYLOAD_LEADER_CHANGE);
            }
            Payload::Membership(m) => {
                w.u8(PAYLOAD_MEMBERSHIP);
                m.encode(w);
            }
            Payload::Command(b) => {
                w.u8(PAYLOAD_COMMAND).bytes(b);
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let position = Position::decode(r)?;
        let payload = match r.u8()? {
            PAYLOAD_LEADER_CHANGE => Payload::LeaderChange,
            PAYLOAD_MEMBERSHIP => Payload::Membership(Membership::decode(r)?),
            PAYLOAD_COMMAND => Payload::Command(r.bytes()?),
            _ => return Err(DecodeError("unknown entry payload")),
        };
        Ok(Self { position, payload })
    }
}

impl HardState {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.term).u64(self.voted_for.map_or(0, |m| m.0 + 1));
    }
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let term = r.u64()?;
        let voted = r.u64()?;
        Ok(Self { term, voted_for: voted.checked_sub(1).map(MemberId) })
    }
}

/// Sums `sizes` until the sum passes `cap` (for [`LogStore::bytes_after`]).
fn count_until(sizes: impl Iterator<Item = u64>, cap: u64) -> u64 {
    let mut sum = 0u64;
    for size in sizes {
        sum = sum.saturating_add(size);
        if sum > cap {
            break;
        }
    }
    sum
}

/// Durable storage of one member's log, vote and purge boundary.
///
/// Writes may stay volatile until `sync`; a member syncs before any message that could
/// expose them leaves, which is what Raft's safety needs.
pub trait LogStore {
    fn hard_state(&self) -> HardState;
    fn save_hard_state(&mut self, hard: HardState) -> io::Result<()>;
    /// Group state at the purge boundary (the default state if nothing was purged).
    fn boundary(&self) -> &AppliedState;
    /// Index of the newest entry (the boundary index if none is retained).
    fn last_index(&self) -> u64;
    fn entry(&self, index: u64) -> Option<Entry>;
    /// Replaces every entry after `after` by `entries` (consecutive from `after + 1`).
    fn append(&mut self, after: u64, entries: Vec<Entry>) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
    /// Drops entries up to `boundary.position.index`, which must be applied.
    fn purge(&mut self, boundary: AppliedState) -> io::Result<()>;
    /// Bytes of retained entries, compared with `gcache_bytes`.
    fn retained_bytes(&self) -> u64;
    /// Bytes of the retained entries after `index`, counted from the newest back and only
    /// until they pass `cap`: the cost stays that of the entries counted.
    fn bytes_after(&self, index: u64, cap: u64) -> u64;
    /// The oldest retained entry's size, to know how far a purge must go.
    fn first_index(&self) -> u64 {
        self.boundary().position.index + 1
    }
}
