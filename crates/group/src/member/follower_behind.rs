//! A follower that receives the order more slowly than the group writes it (a slow link, a
//! busy machine) falls behind the leader's log. Past twice `gcache.size` the leader purges
//! what it lacks and it needs a full state transfer (`purge_cache`), after which it falls
//! behind again. So the leader names such a follower in its status once it lacks more than
//! the cache of what the leader holds, with a pace a little under what it receives (measured
//! while it had caught up), and the provider's flow control keeps the writers to that pace
//! until it lacks half the cache (docs/design/flow-control.md, "A follower that cannot
//! receive").
//!
//! Only a follower that had caught up counts: one that returns from away (a restart, a
//! partition) catches up from further back without stopping anyone, as before. Only one that
//! still answers counts: a silent one is a crash or a partition, for the suspect timeout to
//! judge. And one stops the writers at most `LONGEST_HOLD_MS` at a time: past that it is left
//! to catch up on its own, as a follower that never caught up.

use super::{FollowerBehind, Member};
use crate::cache::LogStore;
use crate::raft::Role;
use crate::types::MemberId;

/// A follower stops the writers at most this long at a time.
pub(super) const LONGEST_HOLD_MS: u64 = 30_000;
/// What a caught-up follower receives is measured over spans this long.
const RECEIVE_SPAN_MS: u64 = 1_000;
/// The writers keep to this share of what the follower behind received lately, so that it
/// catches up on the rest: half of an 8 MiB cache in about a minute on a link of 256 KiB/s.
const CATCH_UP_PACE: f64 = 0.75;

/// Entries a second a follower received, measured over spans of `RECEIVE_SPAN_MS`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Receiving {
    /// What it held, and when: the start of the span being measured.
    span_from: Option<(u64, u64)>,
    /// The last two spans averaged: one second's burst or pause moves it by half.
    per_s: Option<f64>,
}

impl Receiving {
    fn measure(&mut self, holds: u64, now_ms: u64) {
        let Some((from, start_ms)) = self.span_from else {
            self.span_from = Some((holds, now_ms));
            return;
        };
        let span_ms = now_ms.saturating_sub(start_ms);
        if span_ms >= RECEIVE_SPAN_MS {
            let rate = holds.saturating_sub(from) as f64 * 1_000.0 / span_ms as f64;
            self.per_s = Some(self.per_s.map_or(rate, |before| (before + rate) / 2.0));
            self.span_from = Some((holds, now_ms));
        }
    }
}

/// The follower the writers keep to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Behind {
    id: MemberId,
    /// Bytes of the leader's log it has not received (counted up to twice the cache).
    lacking_bytes: u64,
    since_ms: u64,
    /// Since when the writers have been stopped for it (no pace).
    stopped_since_ms: Option<u64>,
    /// The pace the writers keep to, entries a second; none: they stop.
    pace: Option<u32>,
}

/// The pace for a follower that receives `received` entries a second and lacks `lacking`
/// bytes: none (a stop) until what it receives is measured, while it receives nothing, and
/// past one and a half times the cache (halfway to the purge: the pace did not hold it).
fn pace_for(received: &Receiving, lacking: u64, cache: u64) -> Option<u32> {
    if lacking > cache / 2 * 3 {
        return None;
    }
    let paced = received.per_s? * CATCH_UP_PACE;
    (paced >= 1.0).then_some(paced as u32)
}

impl<S: LogStore> Member<S> {
    /// Leader, at most every heartbeat: which follower, if any, the writers keep to.
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
        self.caught_up.retain(|id, _| peers.contains(id));
        // The follower lacking most, what it lacks and its pace.
        let mut slowest: Option<(MemberId, u64, Option<u32>)> = None;
        for &peer in &peers {
            // Heard within the suspect timeout: it answers. A link that takes seconds to carry
            // one message of a MiB is heard from that seldom.
            if !self.heard_within(peer, self.config.suspect_timeout_ms) {
                self.caught_up.remove(&peer);
                continue;
            }
            let holds = self.raft.follower_match_index(peer).unwrap_or(0);
            let lacking =
                if holds + 1 < self.store.first_index() { u64::MAX } else { self.store.bytes_after(holds, 2 * cache) };
            if lacking <= cache / 2 {
                self.caught_up.entry(peer).or_default();
            }
            let Some(received) = self.caught_up.get_mut(&peer) else { continue };
            received.measure(holds, self.now_ms);
            if slowest.is_none_or(|(_, most, _)| lacking > most) {
                slowest = Some((peer, lacking, pace_for(received, lacking, cache)));
            }
        }
        let now_ms = self.now_ms;
        match (self.behind, slowest) {
            (None, Some((id, lacking, pace))) if lacking > cache => {
                let writers = match pace {
                    Some(p) => format!("keep to {p} entries a second, three quarters of what it receives"),
                    None => format!("stop for it, at most {} s at a time", LONGEST_HOLD_MS / 1000),
                };
                log::warn!(
                    "{}: member {id} has not received {} MiB of the order (gcache.size {} MiB): the writers \
                     {writers} (flow control)",
                    self.info.id,
                    lacking >> 20,
                    cache >> 20,
                );
                let stopped_since_ms = pace.is_none().then_some(now_ms);
                self.behind = Some(Behind { id, lacking_bytes: lacking, since_ms: now_ms, stopped_since_ms, pace });
            }
            (Some(behind), Some((id, lacking, pace))) if lacking > cache / 2 => {
                let stopped_since_ms = match (pace, behind.stopped_since_ms) {
                    (None, since) if id == behind.id => since.or(Some(now_ms)),
                    (None, _) => Some(now_ms),
                    (Some(_), _) => None,
                };
                if stopped_since_ms.is_some_and(|since| now_ms.saturating_sub(since) >= LONGEST_HOLD_MS) {
                    log::warn!(
                        "{}: member {id} still lacks {} MiB of the order after the writers stopped {} s for it: \
                         they go on without it (past twice gcache.size it needs a full state transfer)",
                        self.info.id,
                        lacking >> 20,
                        LONGEST_HOLD_MS / 1000
                    );
                    self.caught_up.remove(&id);
                    self.behind = None;
                } else {
                    self.behind = Some(Behind { id, lacking_bytes: lacking, stopped_since_ms, pace, ..behind });
                }
            }
            (Some(behind), _) => {
                let why = if !peers.contains(&behind.id) {
                    "it left"
                } else if !self.heard_within(behind.id, self.config.suspect_timeout_ms) {
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
                "{}: the writers no longer keep to member {} ({why}), after {} ms",
                self.info.id,
                behind.id,
                self.now_ms.saturating_sub(behind.since_ms)
            );
        }
    }

    /// The follower the writers keep to (`Status::follower_behind`).
    pub(super) fn follower_behind(&self) -> Option<FollowerBehind> {
        self.behind.map(|b| FollowerBehind { id: b.id, lacking_bytes: b.lacking_bytes, pace: b.pace })
    }
}
