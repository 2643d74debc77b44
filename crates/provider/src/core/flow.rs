//! Flow control with Galera's options (`gcs.fc_limit`, `gcs.fc_factor`,
//! `gcs.fc_single_primary`): a member whose apply queue stays past its limit asks, through
//! the order, that the group's writers slow down, then that they stop; writers on every
//! member pace themselves by the strongest slow-down in force and wait while any member's
//! stop is; the member asks to resume once its queue is at or below `factor` times the limit.
//! Requests are ordered, so every member holds the same stops and slow-downs at the same
//! point of the order. Pure: the core feeds it its queue, the ordered requests, views and the
//! time (docs/design/flow-control.md).

use crate::types::Seqno;
use lockstep_group::MemberId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The tag our requests are sent with: a refused one comes back with it.
pub(super) const FLOW_TAG: u64 = u64::MAX - 1;

/// A member past its limit slows the writers before it stops them: the budget is time, not
/// events. A burst its appliers drain at once (a Raft batch of a few dozen small writesets,
/// several appliers) is no backlog, and stopping every writer of the cluster for it cost
/// more than it saved: with 4 appliers under 16 sysbench clients, 86 stops a second held the
/// writers 13 % of the time (docs/design/flow-control.md). Past the limit for this long, it
/// asks that every writeset wait before it is ordered, `SLOW_STEP` per level, the level set
/// by how far past the limit its queue is and how long it has been past it.
pub const OVER_LIMIT_GRACE_MS: u64 = 10;
/// What each writeset waits per slow level.
pub const SLOW_STEP: Duration = Duration::from_micros(125);
/// The strongest slow-down: `SLOW_STEP` times this (2 ms per writeset).
pub const SLOW_LEVELS: u8 = 16;
/// Past the limit this much longer than the grace, a member's level rises by one.
const LEVEL_EVERY_MS: u64 = 5;
/// Past the limit this long, the slow-down did not drain the queue: the member stops the
/// writers.
const STOP_AFTER_MS: u64 = 100;
/// Past this many times its limit a member stops the writers at once: a bound on its lag
/// and on what it holds. Below it, each `(AT_ONCE_FACTOR - 1) / SLOW_LEVELS` of the limit
/// past it is a level.
const AT_ONCE_FACTOR: f64 = 4.0;

/// A writeset at least this big may take a second or more to apply by itself, and stopping
/// the writers would not make it faster: from the moment it is queued until it is applied,
/// what queues behind it does not count against the limit (up to `BIG_APPLY_QUEUE_CAP`
/// events), and once it is applied the member counts only what it queues beyond that
/// backlog, which shrinks as it drains (as a member that just joined). Above streaming
/// fragments of 1 MB: those come one after another, and a member that let its queue grow
/// behind each would hold its own clients' commits longer.
const BIG_APPLY_BYTES: usize = 4 << 20;
/// Past this many events queued behind a big writeset, the limit counts again: a bound on
/// the member's lag (half the core's apply queue bound, beyond which deliveries wait in the
/// group's log anyway; a few seconds of small writes).
const BIG_APPLY_QUEUE_CAP: usize = super::APPLY_QUEUE_LIMIT / 2;

/// Galera's flow-control options, as the core uses them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSettings {
    /// `gcs.fc_limit`: queued events past which a member asks for a stop.
    pub limit: u64,
    /// `gcs.fc_factor`: it asks to resume at or below this fraction of its limit.
    pub factor: f64,
    /// `gcs.fc_single_primary` (or the older `gcs.fc_master_slave`): the limit stays as
    /// set; otherwise, as Galera's, it grows with the square root of the members (more
    /// writers, more in flight).
    pub single_primary: bool,
}

impl Default for FlowSettings {
    fn default() -> Self {
        FlowSettings { limit: 16, factor: 1.0, single_primary: false }
    }
}

impl FlowSettings {
    /// Galera logs `[16, 16]` for one node and `[23, 23]` for two: rounded.
    fn upper(&self, members: usize) -> f64 {
        let limit = self.limit as f64;
        if self.single_primary {
            limit
        } else {
            (limit * (members.max(1) as f64).sqrt()).round()
        }
    }

    fn lower(&self, members: usize) -> f64 {
        self.upper(members) * self.factor.clamp(0.0, 1.0)
    }
}

/// What this member asks the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Stop,
    /// Writesets wait `SLOW_DELAYS[level - 1]` before they are ordered; ends a stop.
    Slow(u8),
    /// Neither stop nor slow.
    Resume,
}

impl Ask {
    /// On the wire: 0 resume, 255 stop, a slow level otherwise.
    pub fn code(self) -> u8 {
        match self {
            Ask::Resume => 0,
            Ask::Slow(level) => level,
            Ask::Stop => u8::MAX,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code {
            0 => Ask::Resume,
            u8::MAX => Ask::Stop,
            level => Ask::Slow(level),
        }
    }
}

#[derive(Debug, Default)]
pub struct FlowControl {
    /// Members whose stop is in force, as ordered.
    stopping: BTreeSet<MemberId>,
    /// Members whose slow-down is in force, with its level, as ordered.
    slowing: BTreeMap<MemberId, u8>,
    /// Our request sent and not yet ordered nor refused: one at a time.
    in_flight: Option<Ask>,
    /// Since when our queue is past the upper limit (without a break).
    over_since_ms: Option<u64>,
    /// Since when writers wait (the core's clock, ms).
    paused_since_ms: Option<u64>,
    /// Time paused before `paused_since_ms`, since the last reset.
    paused_ms: u64,
    reset_at_ms: u64,
    /// Stops this member asked for, and stops ordered (its own included), since the reset.
    stops_sent: u64,
    stops_received: u64,
    /// The backlog a member had when it became Joined, as Galera's: a member catching up
    /// counts only what it queues beyond it, so it does not stop everyone at once. It shrinks
    /// with the queue.
    offset: usize,
    /// Our slow-down or stop in force, from the first until our resume: to log the episode.
    episode: Option<Episode>,
    /// Big writesets queued or being applied here.
    big_applies: BTreeSet<Seqno>,
}

/// One episode of this member holding the writers back, from its first slow-down or stop
/// ordered to its resume.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    pub since_ms: u64,
    /// How long our stops were in force, and since when the current one is.
    pub stopped_ms: u64,
    stop_since_ms: Option<u64>,
    /// The longest delay our slow-downs put on each writeset.
    pub strongest_delay: Duration,
    /// Our apply queue at its longest while the episode lasted (past the Joined offset).
    pub longest_queue: usize,
}

impl Episode {
    fn ordered(&mut self, ask: Ask, now_ms: u64) {
        if let Some(since) = self.stop_since_ms.take() {
            self.stopped_ms += now_ms.saturating_sub(since);
        }
        match ask {
            Ask::Stop => self.stop_since_ms = Some(now_ms),
            Ask::Slow(level) => self.strongest_delay = self.strongest_delay.max(slow_delay(level)),
            Ask::Resume => {}
        }
    }
}

/// What each writeset waits under slow level `level` (0: none).
fn slow_delay(level: u8) -> Duration {
    SLOW_STEP * u32::from(level.min(SLOW_LEVELS))
}

/// The slow level for `queued` events past `upper` for `over_ms`: the stronger of the
/// backlog's (a level per sixteenth of three limits past it) and the time's (a level per
/// `LEVEL_EVERY_MS` past the grace).
fn slow_level(queued: f64, upper: f64, over_ms: u64) -> u8 {
    let by_backlog = 1.0 + (queued - upper) * f64::from(SLOW_LEVELS - 1) / ((AT_ONCE_FACTOR - 1.0) * upper);
    let by_time = 1 + over_ms.saturating_sub(OVER_LIMIT_GRACE_MS) / LEVEL_EVERY_MS;
    let level = (by_backlog.max(1.0) as u64).max(by_time);
    level.min(u64::from(SLOW_LEVELS)) as u8
}

impl FlowControl {
    /// Writers wait: some member's stop is in force.
    pub fn paused(&self) -> bool {
        !self.stopping.is_empty()
    }

    /// The members whose stop is in force.
    pub fn stopping(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.stopping.iter().copied()
    }

    /// Our stop is in force.
    pub fn requested(&self, me: MemberId) -> bool {
        self.stopping.contains(&me)
    }

    /// The members whose slow-down is in force.
    pub fn slowing(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.slowing.keys().copied()
    }

    /// What a writeset waits before it is ordered: the strongest slow-down in force.
    pub fn writer_delay(&self) -> Duration {
        slow_delay(self.slowing.values().copied().max().unwrap_or(0))
    }

    /// The writeset at `seqno`, of `bytes` bytes, joined the apply queue.
    pub fn queued(&mut self, seqno: Seqno, bytes: usize) {
        if bytes >= BIG_APPLY_BYTES {
            self.big_applies.insert(seqno);
        }
    }

    /// The writeset at `seqno` is applied (or rolled back) and committed in order: so is
    /// every one before it.
    pub fn applied(&mut self, seqno: Seqno) {
        // Called at every commit: nothing to do unless a big one is counted.
        if !self.big_applies.is_empty() {
            self.big_applies.retain(|&big| big > seqno);
        }
    }

    fn applying_big(&self) -> bool {
        !self.big_applies.is_empty()
    }

    /// What to ask now, given our apply queue, the members of the view, whether this member
    /// is exempt (desynced, a donor, not synced) and the time: once past the upper limit for
    /// `OVER_LIMIT_GRACE_MS`, a slow-down in proportion to the backlog and stronger with time
    /// (`slow_level`), then a stop after `STOP_AFTER_MS` (at once past `AT_ONCE_FACTOR` times
    /// the limit); a resume at or below the lower limit (or once exempt). Nothing while a
    /// request is in flight.
    pub fn decide(
        &mut self,
        me: MemberId,
        queue: usize,
        members: usize,
        exempt: bool,
        settings: &FlowSettings,
        now_ms: u64,
    ) -> Option<Ask> {
        self.offset = self.offset.min(queue);
        if self.applying_big() {
            self.offset = self.offset.max(queue.min(BIG_APPLY_QUEUE_CAP));
        }
        if let Some(episode) = self.episode.as_mut() {
            episode.longest_queue = episode.longest_queue.max(queue - self.offset);
        }
        let queued = (queue - self.offset) as f64;
        let upper = settings.upper(members);
        if queued > upper {
            self.over_since_ms.get_or_insert(now_ms);
        } else {
            self.over_since_ms = None;
        }
        if self.in_flight.is_some() {
            return None;
        }
        let over_ms = self.over_since_ms.map_or(0, |since| now_ms.saturating_sub(since));
        let wanted = if exempt || queued <= settings.lower(members) {
            Ask::Resume
        } else if queued > AT_ONCE_FACTOR * upper || over_ms >= STOP_AFTER_MS {
            Ask::Stop
        } else if over_ms >= OVER_LIMIT_GRACE_MS {
            Ask::Slow(slow_level(queued, upper, over_ms))
        } else {
            // Between the limits, or past the upper one for a moment: as it is.
            return None;
        };
        let current = if self.requested(me) {
            Ask::Stop
        } else {
            self.slowing.get(&me).map_or(Ask::Resume, |&level| Ask::Slow(level))
        };
        // Only ever stronger while past the limit; all clear at the lower one.
        let ask = match (wanted, current) {
            (Ask::Resume, Ask::Resume) => return None,
            (Ask::Resume, _) => Ask::Resume,
            (wanted, current) if wanted.code() > current.code() => wanted,
            _ => return None,
        };
        if ask == Ask::Stop {
            self.stops_sent += 1;
        }
        self.in_flight = Some(ask);
        Some(ask)
    }

    /// A request of `origin` came through the order. Returns, for our own resume, the
    /// episode it ends (one log line per episode).
    pub fn ordered(&mut self, me: MemberId, origin: MemberId, ask: Ask, now_ms: u64) -> Option<Episode> {
        let mut ended = None;
        if origin == me {
            self.in_flight = None;
            if ask != Ask::Resume && self.episode.is_none() {
                self.episode = Some(Episode {
                    since_ms: now_ms,
                    stopped_ms: 0,
                    stop_since_ms: None,
                    strongest_delay: Duration::ZERO,
                    longest_queue: 0,
                });
            }
            if let Some(episode) = self.episode.as_mut() {
                episode.ordered(ask, now_ms);
            }
            if ask == Ask::Resume {
                ended = self.episode.take();
            }
        }
        match ask {
            Ask::Stop => {
                self.stops_received += 1;
                self.stopping.insert(origin);
                self.slowing.remove(&origin);
            }
            Ask::Slow(level) => {
                self.stopping.remove(&origin);
                self.slowing.insert(origin, level);
            }
            Ask::Resume => {
                self.stopping.remove(&origin);
                self.slowing.remove(&origin);
            }
        }
        self.track(now_ms);
        ended
    }

    /// Our request was not ordered (no primary component, a full queue): decide again.
    pub fn refused(&mut self) {
        self.in_flight = None;
    }

    /// This member just became Joined with `queue` events to apply.
    pub fn joined(&mut self, queue: usize) {
        self.offset = queue;
    }

    /// A new view ends every stop, as Galera's configuration change does: a member still past
    /// its limit asks again. (Keeping the stops of members still in the view would keep, forever,
    /// the stop of a member that restarted quickly: its new connection knows nothing of it.)
    pub fn view(&mut self, now_ms: u64) {
        self.stopping.clear();
        self.slowing.clear();
        self.episode = None;
        self.track(now_ms);
    }

    /// A new connection: nothing of the old one is in force, and a request it sent will
    /// never be answered.
    pub fn reset_connection(&mut self, now_ms: u64) {
        self.view(now_ms);
        self.in_flight = None;
        self.offset = 0;
        self.over_since_ms = None;
        self.big_applies.clear();
    }

    fn track(&mut self, now_ms: u64) {
        match (self.paused(), self.paused_since_ms) {
            (true, None) => self.paused_since_ms = Some(now_ms),
            (false, Some(since)) => {
                self.paused_ms += now_ms.saturating_sub(since);
                self.paused_since_ms = None;
            }
            _ => {}
        }
    }

    /// Time paused since the last reset.
    pub fn paused_ms(&self, now_ms: u64) -> u64 {
        self.paused_ms + self.paused_since_ms.map_or(0, |since| now_ms.saturating_sub(since))
    }

    /// Galera's `wsrep_flow_control_paused`: the share of time paused since the last reset.
    pub fn paused_share(&self, now_ms: u64) -> f64 {
        let span = now_ms.saturating_sub(self.reset_at_ms);
        if span == 0 {
            return if self.paused() { 1.0 } else { 0.0 };
        }
        (self.paused_ms(now_ms) as f64 / span as f64).min(1.0)
    }

    pub fn stops_sent(&self) -> u64 {
        self.stops_sent
    }

    pub fn stops_received(&self) -> u64 {
        self.stops_received
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&mut self, now_ms: u64) {
        self.paused_ms = 0;
        if let Some(since) = self.paused_since_ms.as_mut() {
            *since = now_ms;
        }
        self.reset_at_ms = now_ms;
        self.stops_sent = 0;
        self.stops_received = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: MemberId = MemberId(1);
    const OTHER: MemberId = MemberId(2);

    fn settings(limit: u64, factor: f64) -> FlowSettings {
        FlowSettings { limit, factor, single_primary: true }
    }

    const GRACE: u64 = OVER_LIMIT_GRACE_MS;

    #[test]
    fn a_member_past_its_limit_slows_then_stops_everyone_until_it_drains_below_factor_times_limit() {
        let s = settings(16, 0.5);
        let mut fc = FlowControl::default();
        assert_eq!(fc.decide(ME, 16, 3, false, &s, 0), None);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 0), None, "past the limit, not for long yet");
        assert_eq!(fc.decide(ME, 17, 3, false, &s, GRACE - 1), None);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, GRACE), Some(Ask::Slow(1)));
        // One request at a time.
        assert_eq!(fc.decide(ME, 40, 3, false, &s, 2 * GRACE), None);
        fc.ordered(ME, ME, Ask::Slow(1), 2 * GRACE);
        assert!(!fc.paused());
        assert_eq!(fc.writer_delay(), SLOW_STEP);
        // Stronger with time past the limit: a level per LEVEL_EVERY_MS.
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 2 * GRACE), Some(Ask::Slow(3)));
        fc.ordered(ME, ME, Ask::Slow(3), 2 * GRACE);
        assert_eq!(fc.writer_delay(), 3 * SLOW_STEP);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 2 * GRACE + 1), None, "no stronger level yet");
        assert_eq!(fc.decide(ME, 17, 3, false, &s, STOP_AFTER_MS - 1), Some(Ask::Slow(SLOW_LEVELS)));
        fc.ordered(ME, ME, Ask::Slow(SLOW_LEVELS), STOP_AFTER_MS - 1);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, STOP_AFTER_MS), Some(Ask::Stop));
        fc.ordered(ME, ME, Ask::Stop, 1_000);
        assert!(fc.paused() && fc.requested(ME));
        assert_eq!(fc.writer_delay(), Duration::ZERO, "a stop replaces the slow-down");
        assert_eq!(fc.decide(ME, 12, 3, false, &s, 1_050), None, "past the limit again: nothing weaker");
        assert_eq!(fc.decide(ME, 9, 3, false, &s, 1_100), None, "above factor × limit");
        assert_eq!(fc.decide(ME, 8, 3, false, &s, 1_200), Some(Ask::Resume));
        // The episode: from the first slow-down ordered (at 20 ms) to the resume, stopped from
        // 1 000 ms.
        let episode = fc.ordered(ME, ME, Ask::Resume, 1_250).expect("our resume ends the episode");
        assert_eq!(episode.since_ms, 2 * GRACE);
        assert_eq!(episode.stopped_ms, 250);
        assert_eq!(episode.strongest_delay, SLOW_STEP * u32::from(SLOW_LEVELS));
        assert_eq!(episode.longest_queue, 17, "queues seen once the episode began");
        assert_eq!(fc.ordered(ME, ME, Ask::Resume, 1_300), None, "no episode without a slow-down or stop");
        assert!(!fc.paused());
        assert_eq!(fc.writer_delay(), Duration::ZERO);
        assert_eq!(fc.paused_ms(5_000), 250);
        assert_eq!(fc.stops_sent(), 1);
        assert_eq!(fc.stops_received(), 1);
    }

    #[test]
    fn a_big_writeset_being_applied_stops_nobody_and_its_backlog_drains() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        fc.queued(7, 100 << 20);
        for (queue, now) in [(50, 100), (400, 1_000), (2_000, 5_000)] {
            assert_eq!(fc.decide(ME, queue, 3, false, &s, now), None, "{queue} queued behind it at {now} ms");
        }
        // Applied: what queued behind it drains without stopping anyone...
        fc.applied(7);
        assert_eq!(fc.decide(ME, 1_500, 3, false, &s, 6_100), None);
        assert_eq!(fc.decide(ME, 600, 3, false, &s, 6_500), None);
        // ...but what queues beyond it counts: 600 + 17 past the limit 16 for long enough.
        assert_eq!(fc.decide(ME, 617, 3, false, &s, 6_600), None);
        assert_eq!(fc.decide(ME, 617, 3, false, &s, 6_600 + STOP_AFTER_MS), Some(Ask::Stop));
        // Past the cap the limit counts again, beyond the cap.
        let mut fc = FlowControl::default();
        fc.queued(9, 100 << 20);
        let cap = BIG_APPLY_QUEUE_CAP;
        assert_eq!(fc.decide(ME, cap, 3, false, &s, 0), None);
        assert_eq!(fc.decide(ME, cap + 17, 3, false, &s, 0), None);
        assert_eq!(fc.decide(ME, cap + 17, 3, false, &s, STOP_AFTER_MS), Some(Ask::Stop));
        // A later seqno applied means this one was too (commit order): it counts no more.
        let mut fc = FlowControl::default();
        fc.queued(3, 100 << 20);
        fc.applied(5);
        assert!(!fc.applying_big());
        // A smaller one (a streaming fragment, say) is no reason to let the queue grow.
        fc.queued(6, 2 << 20);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 0), None);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, STOP_AFTER_MS), Some(Ask::Stop));
    }

    #[test]
    fn the_slow_down_follows_how_far_past_the_limit_the_queue_is() {
        let s = settings(16, 1.0);
        for (queue, level) in [(17, 1), (32, 6), (48, 11), (64, 16)] {
            let mut fc = FlowControl::default();
            assert_eq!(fc.decide(ME, queue, 3, false, &s, 0), None);
            assert_eq!(fc.decide(ME, queue, 3, false, &s, GRACE), Some(Ask::Slow(level)), "{queue} queued");
        }
    }

    #[test]
    fn a_burst_drained_within_the_grace_slows_nobody_and_a_flood_stops_at_once() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.decide(ME, 30, 3, false, &s, 0), None);
        // Drained below the limit in time: the next burst starts a new count.
        assert_eq!(fc.decide(ME, 10, 3, false, &s, 5), None);
        assert_eq!(fc.decide(ME, 30, 3, false, &s, 6), None);
        assert_eq!(fc.decide(ME, 30, 3, false, &s, 6 + GRACE - 1), None);
        // Four times the limit: at once.
        assert_eq!(fc.decide(ME, 65, 3, false, &s, 6 + GRACE - 1), Some(Ask::Stop));
    }

    #[test]
    fn the_strongest_slow_down_in_force_sets_the_writers_pace_and_a_view_ends_them_all() {
        let mut fc = FlowControl::default();
        fc.ordered(ME, OTHER, Ask::Slow(1), 0);
        fc.ordered(ME, MemberId(3), Ask::Slow(2), 0);
        assert_eq!(fc.writer_delay(), 2 * SLOW_STEP);
        assert_eq!(fc.slowing().collect::<Vec<_>>(), [OTHER, MemberId(3)]);
        fc.ordered(ME, MemberId(3), Ask::Resume, 10);
        assert_eq!(fc.writer_delay(), SLOW_STEP);
        // A level past the strongest (a newer member's) counts as the strongest.
        fc.ordered(ME, MemberId(3), Ask::Slow(200), 10);
        assert_eq!(fc.writer_delay(), SLOW_STEP * u32::from(SLOW_LEVELS));
        fc.view(20);
        assert_eq!(fc.writer_delay(), Duration::ZERO);
        for ask in [Ask::Stop, Ask::Slow(2), Ask::Resume] {
            assert_eq!(Ask::from_code(ask.code()), ask);
        }
    }

    #[test]
    fn another_members_stop_pauses_us_until_its_resume_or_until_the_next_view() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        fc.ordered(ME, OTHER, Ask::Stop, 100);
        assert!(fc.paused() && !fc.requested(ME));
        assert_eq!(fc.decide(ME, 0, 2, false, &s, 200), None, "nothing of ours to resume");
        fc.ordered(ME, OTHER, Ask::Resume, 300);
        assert!(!fc.paused());
        fc.ordered(ME, OTHER, Ask::Stop, 400);
        fc.view(1_400);
        assert!(!fc.paused());
        assert_eq!(fc.paused_ms(2_000), 1_200);
        assert!((fc.paused_share(2_000) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn an_exempt_member_never_stops_and_withdraws_a_stop_in_force() {
        let s = settings(1, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.decide(ME, 100, 2, true, &s, 0), None);
        assert_eq!(fc.decide(ME, 100, 2, false, &s, 0), Some(Ask::Stop));
        fc.ordered(ME, ME, Ask::Stop, 0);
        assert_eq!(fc.decide(ME, 100, 2, true, &s, 0), Some(Ask::Resume));
    }

    #[test]
    fn a_member_that_just_joined_counts_only_what_it_queues_beyond_its_backlog() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        fc.joined(700);
        assert_eq!(fc.decide(ME, 710, 2, false, &s, 0), None);
        assert_eq!(fc.decide(ME, 710, 2, false, &s, 4 * GRACE), None);
        // It drained to 100: the offset follows, and 100 + 17 is past the limit again.
        assert_eq!(fc.decide(ME, 100, 2, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 117, 2, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 117, 2, false, &s, 100 + GRACE), Some(Ask::Slow(1)));
    }

    #[test]
    fn a_refused_request_is_decided_again_and_the_limit_grows_with_the_members() {
        let s = FlowSettings { limit: 16, factor: 1.0, single_primary: false };
        let mut fc = FlowControl::default();
        // 16 × √4 = 32.
        assert_eq!(fc.decide(ME, 32, 4, false, &s, 0), None);
        assert_eq!(fc.decide(ME, 33, 4, false, &s, 0), None);
        assert_eq!(fc.decide(ME, 33, 4, false, &s, GRACE), Some(Ask::Slow(1)));
        fc.refused();
        assert_eq!(fc.decide(ME, 33, 4, false, &s, GRACE + 1), Some(Ask::Slow(1)));
    }
}
