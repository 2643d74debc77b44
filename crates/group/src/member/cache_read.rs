//! Reading the cache for a catching-up member (Galera's IST donor side), a batch at a time.
//!
//! The cache is replayed from its purge boundary so seqnos and bytes are those delivered. A
//! gap can be gigabytes: read whole under the member's lock it held the member (its
//! heartbeats, its replies) for seconds and took the whole gap into memory. A reader
//! (`CacheRead`) keeps its place between batches, and the member keeps what it still has to
//! read: the cache is not purged past a reader's place until it is closed
//! (docs/design/group-cache-read-in-batches.md).

use super::Member;
use crate::cache::{LogStore, Payload};
use crate::parts::Assembly;
use crate::state::{Applied, AppliedState};
use crate::types::{Delivered, DeliveredKind, Seqno};

/// One reader's place in the cache: the state replayed so far and the parts of writesets
/// not yet whole.
pub struct CacheRead {
    id: u64,
    from: Seqno,
    to: Seqno,
    state: AppliedState,
    assembly: Assembly,
    /// Everything up to `to` was read.
    pub done: bool,
}

impl<S: LogStore> Member<S> {
    /// Starts reading writesets and views with seqnos in `from..=to`; `Err(oldest)` if
    /// `from` was purged. Until `close_cache_read`, the cache keeps what the reader has not
    /// read yet, past `gcache.size` if need be.
    pub fn open_cache_read(&mut self, from: Seqno, to: Seqno) -> Result<CacheRead, Seqno> {
        let mut read = self.start_read(from, to)?;
        read.id = self.next_cache_read;
        self.next_cache_read += 1;
        self.cache_reads.insert(read.id, read.state.position.index + 1);
        Ok(read)
    }

    fn start_read(&self, from: Seqno, to: Seqno) -> Result<CacheRead, Seqno> {
        let state = self.store.boundary().clone();
        if from <= state.seqno {
            return Err(state.seqno + 1);
        }
        Ok(CacheRead { id: 0, from, to, state, assembly: Assembly::default(), done: false })
    }

    /// The next writesets and views of `read`, entries of about `max_bytes` at most (at least
    /// one, however big). Messages are not state and are left out. `Err(seqno)`: the cache no
    /// longer holds what follows `seqno` (a forced primary component, or the leader's snapshot
    /// after this member fell behind its log, purged it), or it was never ordered by this
    /// cluster.
    pub fn read_cache(&mut self, read: &mut CacheRead, max_bytes: usize) -> Result<Vec<Delivered>, Seqno> {
        let batch = self.read_batch(read, max_bytes);
        self.cache_reads.insert(read.id, read.state.position.index + 1);
        batch
    }

    fn read_batch(&self, read: &mut CacheRead, max_bytes: usize) -> Result<Vec<Delivered>, Seqno> {
        let mut out = Vec::new();
        let mut bytes = 0;
        let state = &mut read.state;
        while !read.done && bytes < max_bytes {
            let index = state.position.index + 1;
            if index > self.applied.position.index {
                // All this member holds (a range may end past it: `cached_range` in the
                // simulators). A donor's range ends at most here; a stream that comes out short
                // (its state went back under it) is refused by its joiner.
                read.done = true;
                break;
            }
            let Some(entry) = self.store.entry(index) else { return Err(state.seqno) };
            if let Payload::Command(command) = &entry.payload {
                bytes += command.len();
            }
            let numbered = state.seqno;
            let delivered = match state.apply(&entry) {
                Applied::Delivered(d) => Some(d),
                Applied::Part { part, accepted } => {
                    if accepted {
                        read.assembly.add(part.origin, part.upload, part.part == 0, part.data);
                    }
                    None
                }
                Applied::Assembled { mut delivered, bytes } => {
                    let DeliveredKind::Writeset { origin, request } = delivered.kind else { unreachable!() };
                    let tail = std::mem::take(&mut delivered.bytes);
                    // Not held whole (a failed cache read): the caller falls back to a transfer.
                    delivered.bytes = read.assembly.finish(origin, request, bytes, tail).ok_or(state.seqno - 1)?;
                    Some(delivered)
                }
                Applied::Refused { .. } | Applied::Nothing => None,
            };
            read.assembly.retain(&state.uploads);
            if delivered.is_none() && state.seqno > numbered && state.seqno >= read.from {
                // Seqnos up to the genesis' base were never ordered by this cluster.
                return Err(state.seqno + 1);
            }
            match delivered {
                Some(d) if matches!(d.kind, DeliveredKind::Message { .. }) => {}
                Some(d) if d.seqno > read.to => read.done = true,
                Some(d) => {
                    read.done = d.seqno == read.to;
                    if d.seqno >= read.from {
                        out.push(d);
                    }
                }
                None => {}
            }
        }
        Ok(out)
    }

    /// The reader is done (or gave up): the cache may be purged past its place again.
    pub fn close_cache_read(&mut self, id: u64) {
        self.cache_reads.remove(&id);
    }

    /// The first index a reader still needs: no purge may reach it.
    pub(super) fn cache_read_holds(&self) -> u64 {
        self.cache_reads.values().copied().min().unwrap_or(u64::MAX)
    }

    /// Writesets and views with seqnos in `from..=to`, read at once (tests and the
    /// simulator, where gaps are small).
    pub fn cached_range(&self, from: Seqno, to: Seqno) -> Result<Vec<Delivered>, Seqno> {
        let mut read = self.start_read(from, to)?;
        let mut out = Vec::new();
        while !read.done {
            out.extend(self.read_batch(&mut read, usize::MAX)?);
        }
        Ok(out)
    }
}

impl CacheRead {
    pub fn id(&self) -> u64 {
        self.id
    }
}
