//! A follower that receives the order more slowly than the group writes it (a slow link, a
//! busy machine) falls behind the leader's log. Past twice `gcache.size` the leader purges
//! what it lacks and it needs a full state transfer (`purge_cache`), after which it falls
//! behind again. So the leader names such a follower in its status once it lacks more than
//! the cache of what the leader holds, and the provider's flow control stops the writers
//! until it lacks half that (docs/design/flow-control.md, "A follower that cannot receive").
//!
//! Only a follower that had caught up counts: one that returns from away (a restart, a
//! partition) catches up from further back without stopping anyone, as before. Only one that
//! still answers counts: a silent one is a crash or a partition, for the suspect timeout to
//! judge. And one holds the writers at most `LONGEST_HOLD_MS` at a time: past that it is left
//! to catch up on its own, as a follower that never caught up.

use super::Member;
use crate::cache::LogStore;
use crate::raft::Role;
use crate::types::MemberId;

/// A follower holds the writers at most this long at a time.
pub(super) const LONGEST_HOLD_MS: u64 = 30_000;

/// The follower the writers wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Behind {
    pub id: MemberId,
    /// Bytes of the leader's log it has not received (counted up to twice the cache).
    pub lacking_bytes: u64,
    pub since_ms: u64,
}

impl<S: LogStore> Member<S> {
    /// Leader, at most every heartbeat: which follower, if any, the writers wait for.
    pub(super) fn track_followers_behind(&mut self) {
        if self.now_ms < self.next_behind_check_ms {
            return;
        }
        self.next_behind_check_ms = self.now_ms + self.config.heartbeat_interval_ms;
        if self.raft.role() != Role::Leader || !self.is_primary() {
            self.caught_up.clear();
            self.end_behind("it no longer leads the primary component");
            return;
        }
        let cache = self.config.gcache_bytes;
        let peers = self.raft.peers();
        self.caught_up.retain(|id| peers.contains(id));
        let mut slowest: Option<(MemberId, u64)> = None;
        for &peer in &peers {
            // Heard within the minimum election timeout: it answers.
            if !self.heard_within(peer, self.config.election_timeout_min_ms) {
                self.caught_up.remove(&peer);
                continue;
            }
            let holds = self.raft.follower_match_index(peer).unwrap_or(0);
            let lacking =
                if holds + 1 < self.store.first_index() { u64::MAX } else { self.store.bytes_after(holds, 2 * cache) };
            if lacking <= cache / 2 {
                self.caught_up.insert(peer);
            }
            if self.caught_up.contains(&peer) && slowest.is_none_or(|(_, most)| lacking > most) {
                slowest = Some((peer, lacking));
            }
        }
        match (self.behind, slowest) {
            (None, Some((id, lacking))) if lacking > cache => {
                log::warn!(
                    "{}: member {id} has not received {} MiB of the order (gcache.size {} MiB): the writers wait \
                     for it (flow control), at most {} s",
                    self.info.id,
                    lacking >> 20,
                    cache >> 20,
                    LONGEST_HOLD_MS / 1000
                );
                self.behind = Some(Behind { id, lacking_bytes: lacking, since_ms: self.now_ms });
            }
            (Some(behind), Some((id, lacking))) if lacking > cache / 2 => {
                if self.now_ms.saturating_sub(behind.since_ms) >= LONGEST_HOLD_MS {
                    log::warn!(
                        "{}: member {id} still lacks {} MiB of the order after the writers waited {} s for it: \
                         they go on without it (past twice gcache.size it needs a full state transfer)",
                        self.info.id,
                        lacking >> 20,
                        LONGEST_HOLD_MS / 1000
                    );
                    self.caught_up.remove(&id);
                    self.behind = None;
                } else {
                    self.behind = Some(Behind { id, lacking_bytes: lacking, ..behind });
                }
            }
            (Some(behind), _) => {
                let why = if !peers.contains(&behind.id) {
                    "it left"
                } else if !self.heard_within(behind.id, self.config.election_timeout_min_ms) {
                    "it went silent"
                } else {
                    "it caught up to within half the cache"
                };
                self.end_behind(why);
            }
            (None, _) => {}
        }
    }

    fn end_behind(&mut self, why: &str) {
        if let Some(behind) = self.behind.take() {
            log::info!(
                "{}: the writers no longer wait for member {} ({why}), after {} ms",
                self.info.id,
                behind.id,
                self.now_ms.saturating_sub(behind.since_ms)
            );
        }
    }

    /// The follower the writers wait for and the bytes it lacks (`Status::follower_behind`).
    pub(super) fn follower_behind(&self) -> Option<(MemberId, u64)> {
        self.behind.map(|b| (b.id, b.lacking_bytes))
    }
}
