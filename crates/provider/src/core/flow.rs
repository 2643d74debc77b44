//! Flow control with Galera's options (`gcs.fc_limit`, `gcs.fc_factor`,
//! `gcs.fc_single_primary`): a member whose apply queue stays past its limit asks, through
//! the order, that the group's writers keep to a pace its appliers can follow (set from the
//! rate it measured on them), then that they stop; writers on every member keep to the
//! slowest pace in force and wait while any member's stop is; the member asks to resume once
//! its queue is at or below `factor` times the limit. Requests are ordered, so every member
//! holds the same stops and paces at the same point of the order. Pure: the core feeds it its
//! queue, what it applied, the ordered writesets and requests, views and the time
//! (docs/design/flow-control.md).

use crate::types::Seqno;
use lockstep_group::{FollowerBehind, MemberId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The tag our requests are sent with: a refused one comes back with it.
pub(super) const FLOW_TAG: u64 = u64::MAX - 1;

/// A member past its limit paces the writers before it stops them: the budget is time, not
/// events. A burst its appliers drain at once (a Raft batch of a few dozen small writesets,
/// several appliers) is no backlog, and stopping every writer of the cluster for it cost
/// more than it saved: with 4 appliers under 16 sysbench clients, 86 stops a second held the
/// writers 13 % of the time (docs/design/flow-control.md). Past the limit for this long, it
/// asks for a pace.
pub const OVER_LIMIT_GRACE_MS: u64 = 10;
/// The pace asked is the apply rate less what drains the queue's excess over the lower limit
/// in this time.
const DRAIN_MS: f64 = 50.0;
/// Past the limit this long, the pace did not drain the queue: the member stops the writers.
/// Meanwhile the pace asked falls, down to `LAST_PACE_SHARE` of itself.
const STOP_AFTER_MS: u64 = 150;
const LAST_PACE_SHARE: f64 = 0.5;
/// The slowest pace asked before that fall, as a share of the apply rate: a pace is a
/// correction; a backlog it cannot drain in time is the stop's. Slower paces held every
/// writer, a big transaction's streaming fragments included, for most of the time before the
/// stop (docs/design/flow-control.md).
const SLOWEST_PACE_SHARE: f64 = 0.5;
/// Appliers that get fewer writesets a second than this done are held by something no pace
/// helps (a lock): a stop at once.
const STUCK_APPLY_RATE: f64 = 16.0;
/// A new pace is asked only when at most this share of the one in force: one request per
/// trip through the order while the queue stays high, not one per event.
const STRONGER_PACE: f64 = 0.85;
/// Past this many times its limit a member stops the writers at once: a bound on its lag
/// and on what it holds.
const AT_ONCE_FACTOR: f64 = 4.0;
/// The apply rate is measured over windows at least this long in which the apply queue never
/// emptied (the appliers had work all along, so what they did is what they can do).
const RATE_WINDOW_MS: u64 = 25;
/// A writer never waits longer than this for its turn under a pace: a pace slower than that
/// is a stop's job.
const LONGEST_WRITER_INTERVAL: Duration = Duration::from_millis(50);
/// A request waits for the one before it to come back through the order, unless that one
/// has been on its way this long: a member that receives the order slowly (a slow link) would
/// otherwise hold its stop for as long as it takes to receive it, behind everything it lacks,
/// with the writers of every member waiting (`bench/slow-follower.sh`: 43 s without a commit
/// in 60). Requests are numbered, so one ordered after a later one changes nothing.
const OVERTAKE_AFTER_MS: u64 = 100;
/// Each ordered writeset moves a member's share of the group's writesets by
/// `1 / SHARE_WEIGHT` of the difference.
const SHARE_WEIGHT: f64 = 64.0;

/// A writeset at least this big may take a second or more to apply by itself, and stopping
/// the writers would not make it faster: from the moment it is queued until it is applied,
/// what queues behind it does not count against the limit (up to `big_backlog_room`), and
/// once it is applied the member counts only what it queues beyond that backlog, which
/// shrinks as it drains (as a member that just joined). Above streaming fragments of 1 MB:
/// those come one after another, and a member that let its queue grow behind each would hold
/// its own clients' commits longer.
const BIG_APPLY_BYTES: usize = 4 << 20;
/// The backlog behind a big writeset may grow to what the appliers drain in this long at
/// their measured rate: the lag the member is left with once the big one is applied.
const BIG_BACKLOG_BUDGET_MS: f64 = 5_000.0;
/// Whatever the rate (or unknown), the backlog stays within three quarters of the core's apply
/// queue bound, so the limit can count again beyond it before deliveries stop being taken.
const BIG_BACKLOG_CAP: usize = super::APPLY_QUEUE_LIMIT / 4 * 3;
/// A big writeset that has been applying for a time is expected to need about as long again:
/// past half its room, the member paces the writers so that what is left of the room lasts
/// that long (never less than this).
const BIG_PACE_HORIZON_MS: f64 = 1_000.0;

/// Galera's flow-control options, as the core uses them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSettings {
    /// `gcs.fc_limit`: queued events past which a member asks for a pace, then a stop.
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
    /// The group's writers keep to this many writesets a second between them; ends a stop.
    Pace(u32),
    /// Neither stop nor pace.
    Resume,
}

const RESUME: u8 = 0;
const PACE: u8 = 1;
const STOP: u8 = u8::MAX;

impl Ask {
    /// On the wire (`Control::Flow`): a code and a rate.
    pub fn to_wire(self) -> (u8, u32) {
        match self {
            Ask::Resume => (RESUME, 0),
            Ask::Pace(rate) => (PACE, rate),
            Ask::Stop => (STOP, 0),
        }
    }

    /// An unknown code, or a pace of nothing (an earlier version's slow-down, which carried
    /// no rate), asks for nothing.
    pub fn from_wire(code: u8, rate: u32) -> Self {
        match code {
            STOP => Ask::Stop,
            PACE if rate > 0 => Ask::Pace(rate),
            _ => Ask::Resume,
        }
    }
}

/// How many writesets a second this member's appliers get through when they have work all
/// along: measured over windows of at least `RATE_WINDOW_MS` in which the apply queue never
/// emptied, the member applied the order as a synced member does (not exempt: a joiner's
/// queue waits for its state) and no big writeset was being applied (that one would show a
/// rate of nothing while it lasts). The figure is over the last `RATE_SPAN_MS` to twice that
/// of such time: one window may see no writeset finish (one that takes longer than a window
/// to apply, or that waits for a lock), the span does.
///
/// Beside it, the commits a second over the last `STEADY_SPAN_MS` to twice that of
/// measurable time, whether the queue emptied or not (`steady_per_s`): what the member
/// demonstrably got through. Saturated windows are few and unrepresentative on a member that
/// keeps up (an applier waiting for a lock a local client holds, a starved CPU): on
/// 2026-11-28 one such figure was about 150 a second on a member that committed 1 850, and
/// the room behind a big writeset measured from it (778 events) stopped the origin for 10 s.
#[derive(Debug, Default)]
struct ApplyRate {
    /// Writesets applied since the connection began.
    applied: u64,
    window: Option<RateWindow>,
    /// Time spent saturated, and what was applied in it (both halved past twice the span).
    busy: Span,
    /// Measurable time, saturated or not, and what was committed in it (the same way).
    steady: Span,
}

/// The time over which the apply rate is measured, and the throughput.
const RATE_SPAN_MS: f64 = 200.0;
const STEADY_SPAN_MS: f64 = 1_000.0;

#[derive(Debug, Clone, Copy)]
struct RateWindow {
    since_ms: u64,
    applied: u64,
    measurable: bool,
    saturated: bool,
}

/// Time and what was applied in it, both halved once past twice a span: a recent figure.
#[derive(Debug, Default, Clone, Copy)]
struct Span {
    ms: f64,
    applied: f64,
}

impl Span {
    fn add(&mut self, ms: f64, applied: f64, span_ms: f64) {
        self.ms += ms;
        self.applied += applied;
        while self.ms > 2.0 * span_ms {
            self.ms /= 2.0;
            self.applied /= 2.0;
        }
    }

    /// Per second, once a window's worth was measured.
    fn per_s(&self) -> Option<f64> {
        (self.ms >= RATE_WINDOW_MS as f64).then(|| self.applied * 1000.0 / self.ms)
    }
}

impl ApplyRate {
    fn observe(&mut self, queue: usize, measurable: bool, now_ms: u64) {
        let saturated = queue > 0 && measurable;
        let window =
            self.window.get_or_insert(RateWindow { since_ms: now_ms, applied: self.applied, measurable, saturated });
        window.measurable &= measurable;
        window.saturated &= saturated;
        let elapsed = now_ms.saturating_sub(window.since_ms);
        if elapsed < RATE_WINDOW_MS {
            return;
        }
        let applied = (self.applied - window.applied) as f64;
        if window.saturated {
            self.busy.add(elapsed as f64, applied, RATE_SPAN_MS);
        }
        if window.measurable {
            self.steady.add(elapsed as f64, applied, STEADY_SPAN_MS);
        }
        *window = RateWindow { since_ms: now_ms, applied: self.applied, measurable, saturated };
    }

    /// Writesets a second with work all along, once a window's worth was measured.
    fn per_s(&self) -> Option<f64> {
        self.busy.per_s()
    }

    /// Commits a second, the queue empty or not, once a window's worth was measured.
    fn steady_per_s(&self) -> Option<f64> {
        self.steady.per_s()
    }
}

#[derive(Debug)]
pub struct FlowControl {
    /// Members whose stop is in force, as ordered.
    stopping: BTreeSet<MemberId>,
    /// Members whose pace is in force, with its rate, as ordered.
    pacing: BTreeMap<MemberId, u32>,
    /// Our latest request sent and not yet ordered nor refused, with its number and when it
    /// was sent.
    in_flight: Option<(Ask, u64, u64)>,
    /// The number of our next request: they only grow, so that one ordered after a later one
    /// (a resume that overtook its stop) changes nothing.
    next_number: u64,
    /// Per member, the number of its latest request in force (since the last view).
    numbers: BTreeMap<MemberId, u64>,
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
    /// Our pace or stop in force, from the first until our resume: to log the episode.
    episode: Option<Episode>,
    /// Big writesets queued or being applied here, and since when one is.
    big_applies: BTreeSet<Seqno>,
    big_since_ms: Option<u64>,
    apply_rate: ApplyRate,
    /// This member's share of the writesets ordered lately: its writers' part of a pace.
    share: f64,
    /// When the next of our writers may submit under the pace in force.
    next_turn: Option<Duration>,
    /// As the group's leader: a follower that lacks more than the cache of its log. The
    /// writers keep to the pace the group gives for it (stop without one), whatever our queue,
    /// until it no longer does.
    follower_behind: Option<FollowerBehind>,
}

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl {
            stopping: BTreeSet::new(),
            pacing: BTreeMap::new(),
            in_flight: None,
            next_number: 1,
            numbers: BTreeMap::new(),
            over_since_ms: None,
            paused_since_ms: None,
            paused_ms: 0,
            reset_at_ms: 0,
            stops_sent: 0,
            stops_received: 0,
            offset: 0,
            episode: None,
            big_applies: BTreeSet::new(),
            big_since_ms: None,
            apply_rate: ApplyRate::default(),
            share: 0.5,
            next_turn: None,
            follower_behind: None,
        }
    }
}

/// One episode of this member holding the writers back, from its first pace or stop ordered
/// to its resume.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    pub since_ms: u64,
    /// How long our stops were in force, and since when the current one is.
    pub stopped_ms: u64,
    stop_since_ms: Option<u64>,
    /// The slowest pace we asked for, in writesets a second.
    pub slowest_pace: Option<u32>,
    /// Our apply queue at its longest while the episode lasted (past the Joined offset and
    /// what waited behind a big writeset being applied).
    pub longest_queue: usize,
    /// The most events that waited behind a big writeset being applied meanwhile (0: none was).
    pub longest_big_backlog: usize,
    /// A follower the writers waited for meanwhile, and the most bytes of the log it lacked.
    pub follower_behind: Option<(MemberId, u64)>,
}

impl Episode {
    fn ordered(&mut self, ask: Ask, now_ms: u64) {
        if let Some(since) = self.stop_since_ms.take() {
            self.stopped_ms += now_ms.saturating_sub(since);
        }
        match ask {
            Ask::Stop => self.stop_since_ms = Some(now_ms),
            Ask::Pace(rate) => self.slowest_pace = Some(self.slowest_pace.map_or(rate, |slowest| slowest.min(rate))),
            Ask::Resume => {}
        }
    }
}

/// The pace to ask, in writesets a second for the whole group, or `None` for a stop: what our
/// appliers get through (`apply_rate`), less what drains the `excess` over the lower limit
/// in `DRAIN_MS`, but not below `SLOWEST_PACE_SHARE` of the apply rate, then falling with the
/// time past the limit; scaled up by the writesets that do not reach our queue (our own,
/// `share` of them), since the pace holds every writer. Appliers that got next to nothing
/// done (`STUCK_APPLY_RATE`) are held by something no pace helps: a stop.
fn pace(apply_rate: f64, excess: f64, share: f64, over_ms: u64) -> Option<u32> {
    if apply_rate < STUCK_APPLY_RATE {
        return None;
    }
    let drained = (apply_rate - excess * 1000.0 / DRAIN_MS).max(apply_rate * SLOWEST_PACE_SHARE);
    let late = over_ms.saturating_sub(OVER_LIMIT_GRACE_MS) as f64 / (STOP_AFTER_MS - OVER_LIMIT_GRACE_MS) as f64;
    let paced = drained * (1.0 - (1.0 - LAST_PACE_SHARE) * late.min(1.0));
    let group = paced / (1.0 - share).max(0.1);
    Some(group.min(f64::from(u32::MAX)) as u32)
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

    /// The members whose pace is in force.
    pub fn pacing(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.pacing.keys().copied()
    }

    /// The slowest pace in force, in writesets a second for the whole group.
    pub fn pace(&self) -> Option<u32> {
        self.pacing.values().copied().min()
    }

    /// How far apart this member's writers submit their writesets: its share of the slowest
    /// pace in force (at least half an even share, so a member that starts writing under a
    /// pace is not shut out), and never more than `LONGEST_WRITER_INTERVAL`.
    pub fn writer_interval(&self, members: usize) -> Duration {
        let Some(rate) = self.pace() else { return Duration::ZERO };
        let share = self.share.max(0.5 / members.max(1) as f64);
        Duration::from_secs_f64(1.0 / (f64::from(rate) * share)).min(LONGEST_WRITER_INTERVAL)
    }

    /// How long a writer that is about to submit at `now` (any monotonic clock) waits for its
    /// turn: one `writer_interval` after the turn before it, or at once if that is past (time
    /// without writes earns no burst). Without a pace, at once.
    pub fn writer_turn(&mut self, members: usize, now: Duration) -> Duration {
        let interval = self.writer_interval(members);
        if interval.is_zero() {
            self.next_turn = None;
            return Duration::ZERO;
        }
        let turn = self.next_turn.map_or(now, |next| next.max(now));
        self.next_turn = Some(turn + interval);
        turn - now
    }

    /// Our appliers' measured rate, in writesets a second (0 before it is known).
    pub fn apply_rate(&self) -> f64 {
        self.apply_rate.per_s().unwrap_or(0.0)
    }

    /// A writeset was ordered (and certified here); `ours`: this member sent it.
    pub fn ordered_writeset(&mut self, ours: bool) {
        self.share += (f64::from(u8::from(ours)) - self.share) / SHARE_WEIGHT;
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
        self.apply_rate.applied += 1;
        // Called at every commit: nothing more to do unless a big one is counted.
        if !self.big_applies.is_empty() {
            self.big_applies.retain(|&big| big > seqno);
        }
    }

    pub fn applying_big(&self) -> bool {
        !self.big_applies.is_empty()
    }

    /// How many events may queue behind a big writeset without counting against the limit:
    /// what the appliers drain in `BIG_BACKLOG_BUDGET_MS`, within `BIG_BACKLOG_CAP` (the cap
    /// itself while nothing is measured). They drain at least as fast as their measured rate,
    /// and as the writesets of others were committed here lately (own ones never queue).
    fn big_backlog_room(&self) -> usize {
        let others = self.apply_rate.steady_per_s().map(|rate| rate * (1.0 - self.share));
        let Some(drain) = self.apply_rate.per_s().into_iter().chain(others).reduce(f64::max) else {
            return BIG_BACKLOG_CAP;
        };
        ((drain * BIG_BACKLOG_BUDGET_MS / 1000.0) as usize).min(BIG_BACKLOG_CAP)
    }

    /// The pace that makes the room left behind a big writeset last as long again as it has
    /// been applying, once past half the room: `None` before (or without a big writeset).
    fn big_pace(&self, queue: usize, now_ms: u64) -> Option<u32> {
        let since_ms = self.big_since_ms?;
        let room = self.big_backlog_room();
        if queue <= room / 2 {
            return None;
        }
        let left = room.saturating_sub(queue) as f64;
        let horizon_ms = (now_ms.saturating_sub(since_ms) as f64).max(BIG_PACE_HORIZON_MS);
        let ours = left * 1000.0 / horizon_ms;
        Some((ours / (1.0 - self.share).max(0.1)).clamp(1.0, f64::from(u32::MAX)) as u32)
    }

    /// What to ask now, given our apply queue, the members of the view, whether this member
    /// is exempt (desynced, a donor, not synced) and the time: once past the upper limit for
    /// `OVER_LIMIT_GRACE_MS`, a pace its appliers can follow (`pace`), slower as the time
    /// past it grows, then a stop after `STOP_AFTER_MS` (at once past `AT_ONCE_FACTOR` times
    /// the limit, or while the apply rate is unknown); a resume at or below the lower limit
    /// (or once exempt), unless the backlog behind a big writeset calls for a pace
    /// (`big_pace`). Nothing while a request is in flight.
    pub fn decide(
        &mut self,
        me: MemberId,
        queue: usize,
        members: usize,
        exempt: bool,
        settings: &FlowSettings,
        now_ms: u64,
    ) -> Option<Ask> {
        self.apply_rate.observe(queue, !exempt && !self.applying_big(), now_ms);
        self.offset = self.offset.min(queue);
        if self.applying_big() {
            self.big_since_ms.get_or_insert(now_ms);
            self.offset = self.offset.max(queue.min(self.big_backlog_room()));
        } else {
            self.big_since_ms = None;
        }
        let applying_big = self.applying_big();
        if let Some(episode) = self.episode.as_mut() {
            episode.longest_queue = episode.longest_queue.max(queue - self.offset);
            if applying_big {
                episode.longest_big_backlog = episode.longest_big_backlog.max(queue);
            }
        }
        let queued = (queue - self.offset) as f64;
        let upper = settings.upper(members);
        if queued > upper {
            self.over_since_ms.get_or_insert(now_ms);
        } else {
            self.over_since_ms = None;
        }
        if self.in_flight.is_some_and(|(_, _, sent_ms)| now_ms < sent_ms + OVERTAKE_AFTER_MS) {
            return None;
        }
        let over_ms = self.over_since_ms.map_or(0, |since| now_ms.saturating_sub(since));
        let lower = settings.lower(members);
        // What we asked last, ordered or not (`OVERTAKE_AFTER_MS`).
        let current = match self.in_flight {
            Some((ask, _, _)) => ask,
            None if self.requested(me) => Ask::Stop,
            None => self.pacing.get(&me).map_or(Ask::Resume, |&rate| Ask::Pace(rate)),
        };
        if let Some(behind) = self.follower_behind {
            // Faster or slower, as the follower receives.
            let ask = behind.pace.map_or(Ask::Stop, Ask::Pace);
            let near = |a: u32, b: u32| f64::from(a.min(b)) > f64::from(a.max(b)) * STRONGER_PACE;
            return match (ask, current) {
                (Ask::Pace(wanted), Ask::Pace(now)) if near(wanted, now) => None,
                (ask, current) if ask == current => None,
                (ask, _) => Some(self.request(ask, now_ms)),
            };
        }
        let wanted = if exempt {
            Ask::Resume
        } else if queued <= lower {
            // Behind a big writeset, the room left is spread over the time it may still take.
            self.big_pace(queue, now_ms).map_or(Ask::Resume, Ask::Pace)
        } else if queued > AT_ONCE_FACTOR * upper || over_ms >= STOP_AFTER_MS {
            Ask::Stop
        } else if over_ms >= OVER_LIMIT_GRACE_MS {
            let paced = self.apply_rate.per_s().map(|rate| pace(rate, queued - lower, self.share, over_ms));
            match paced {
                Some(Some(rate)) => Ask::Pace(rate),
                // Unknown yet: the stop comes in time.
                None => return None,
                Some(None) => Ask::Stop,
            }
        } else {
            // Between the limits, or past the upper one for a moment: as it is.
            return None;
        };
        // Only ever stronger while past the limit; all clear at the lower one.
        let ask = match (wanted, current) {
            (Ask::Resume, Ask::Resume) => return None,
            (Ask::Resume, _) => Ask::Resume,
            (_, Ask::Stop) => return None,
            (Ask::Stop, _) => Ask::Stop,
            (Ask::Pace(rate), Ask::Pace(now)) if f64::from(rate) > f64::from(now) * STRONGER_PACE => return None,
            (wanted, _) => wanted,
        };
        Some(self.request(ask, now_ms))
    }

    /// `ask` goes, numbered.
    fn request(&mut self, ask: Ask, now_ms: u64) -> Ask {
        if ask == Ask::Stop {
            self.stops_sent += 1;
        }
        self.in_flight = Some((ask, self.next_number, now_ms));
        self.next_number += 1;
        ask
    }

    /// The number to send with the request `decide` just returned.
    pub fn request_number(&self) -> u64 {
        self.in_flight.map_or(0, |(_, number, _)| number)
    }

    /// The group's word on a follower behind (`lockstep_group::Status::follower_behind`), given
    /// with each status of the group.
    pub fn set_follower_behind(&mut self, behind: Option<FollowerBehind>) {
        self.follower_behind = behind;
        if let (Some(FollowerBehind { id, lacking_bytes: lacking, .. }), Some(episode)) =
            (behind, self.episode.as_mut())
        {
            let most = episode.follower_behind.filter(|&(was, _)| was == id).map_or(0, |(_, most)| most);
            episode.follower_behind = Some((id, lacking.max(most)));
        }
    }

    /// A request of `origin` came through the order, with its number (0: an earlier version's,
    /// unnumbered). One numbered below the member's latest in force is stale and changes
    /// nothing. Returns, for our own resume, the episode it ends (one log line per episode).
    pub fn ordered(&mut self, me: MemberId, origin: MemberId, ask: Ask, number: u64, now_ms: u64) -> Option<Episode> {
        if number > 0 {
            if self.numbers.get(&origin).is_some_and(|&latest| number <= latest) {
                return None;
            }
            self.numbers.insert(origin, number);
        }
        let mut ended = None;
        if origin == me {
            if self.in_flight.is_none_or(|(_, sent, _)| number == 0 || sent <= number) {
                self.in_flight = None;
            }
            if ask != Ask::Resume && self.episode.is_none() {
                self.episode = Some(Episode {
                    since_ms: now_ms,
                    stopped_ms: 0,
                    stop_since_ms: None,
                    slowest_pace: None,
                    longest_queue: 0,
                    longest_big_backlog: 0,
                    follower_behind: self.follower_behind.map(|b| (b.id, b.lacking_bytes)),
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
                self.pacing.remove(&origin);
            }
            Ask::Pace(rate) => {
                self.stopping.remove(&origin);
                self.pacing.insert(origin, rate);
            }
            Ask::Resume => {
                self.stopping.remove(&origin);
                self.pacing.remove(&origin);
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
        self.pacing.clear();
        self.numbers.clear();
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
        self.follower_behind = None;
        self.big_applies.clear();
        self.big_since_ms = None;
        self.apply_rate = ApplyRate::default();
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

    /// Our appliers get through `per_s` writesets a second with work all along, for the
    /// 100 ms from `from_ms` (the queue at 1, below any limit).
    fn measure(fc: &mut FlowControl, per_s: u64, s: &FlowSettings, from_ms: u64) {
        assert_eq!(fc.decide(ME, 1, 3, false, s, from_ms), None);
        applied(fc, per_s / 10);
        assert_eq!(fc.decide(ME, 1, 3, false, s, from_ms + 100), None);
    }

    fn applied(fc: &mut FlowControl, count: u64) {
        for seqno in 0..count {
            fc.applied(seqno as Seqno);
        }
    }

    #[test]
    fn the_pace_is_the_apply_rate_less_what_drains_the_excess_and_slower_with_time() {
        // 10 events over the lower limit drain in DRAIN_MS (50 ms) at 200 a second less.
        assert_eq!(pace(2_000.0, 10.0, 0.0, GRACE), Some(1_800));
        // Half the writesets are ours and never reach our queue: the group may send twice as many.
        assert_eq!(pace(2_000.0, 10.0, 0.5, GRACE), Some(3_600));
        // Down to half at the stop's deadline, linearly from the grace.
        assert_eq!(pace(2_000.0, 10.0, 0.0, (GRACE + STOP_AFTER_MS) / 2), Some(1_350));
        assert_eq!(pace(2_000.0, 10.0, 0.0, STOP_AFTER_MS), Some(900));
        // Never below half the apply rate before that: a backlog the pace cannot drain in
        // time is the stop's, when it comes.
        assert_eq!(pace(2_000.0, 95.0, 0.0, GRACE), Some(1_000));
        assert_eq!(pace(2_000.0, 1_000.0, 0.0, STOP_AFTER_MS), Some(500));
        // Appliers that get next to nothing done: a stop at once.
        assert_eq!(pace(10.0, 1.0, 0.0, GRACE), None);
        assert_eq!(pace(0.0, 1.0, 0.0, GRACE), None);
    }

    #[test]
    fn the_apply_rate_is_measured_only_while_the_appliers_have_work_all_along() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.apply_rate(), 0.0, "unknown yet");
        measure(&mut fc, 2_000, &s, 0);
        assert_eq!(fc.apply_rate(), 2_000.0);
        // A window in which the queue emptied, a big writeset was being applied or the
        // member was exempt (a joiner's queue waits for its state) says nothing of what the
        // appliers can do.
        applied(&mut fc, 5);
        fc.decide(ME, 0, 3, false, &s, 110);
        fc.decide(ME, 3, 3, false, &s, 200);
        fc.decide(ME, 3, 3, true, &s, 300);
        fc.queued(1_000, 100 << 20);
        fc.decide(ME, 3, 3, false, &s, 400);
        fc.decide(ME, 3, 3, false, &s, 500);
        assert_eq!(fc.apply_rate(), 2_000.0);
        fc.applied(1_000);
        fc.decide(ME, 3, 3, false, &s, 600);
        // Over the span: 25 more in 25 ms, then 50 ms without one (a slow writeset).
        applied(&mut fc, 25);
        fc.decide(ME, 3, 3, false, &s, 625);
        assert_eq!(fc.apply_rate(), 1_800.0);
        fc.decide(ME, 3, 3, false, &s, 675);
        assert_eq!(fc.apply_rate(), 225.0 * 1_000.0 / 175.0);
        // The span is the recent past (halved past twice its length): half a second at
        // 3 000 a second leaves little of what came before.
        for now in (700..=1_200).step_by(25) {
            applied(&mut fc, 75);
            fc.decide(ME, 3, 3, false, &s, now);
        }
        assert!((2_500.0..3_000.0).contains(&fc.apply_rate()), "{}", fc.apply_rate());
    }

    #[test]
    fn a_member_past_its_limit_paces_then_stops_everyone_until_it_drains_below_factor_times_limit() {
        let s = settings(16, 0.5);
        let mut fc = FlowControl::default();
        measure(&mut fc, 2_000, &s, 0);
        assert_eq!(fc.decide(ME, 16, 3, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 100), None, "past the limit, not for long yet");
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 100 + GRACE - 1), None);
        let first = pace(2_000.0, 9.0, 0.5, GRACE).expect("a pace");
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 100 + GRACE), Some(Ask::Pace(first)));
        // One request at a time.
        assert_eq!(fc.decide(ME, 40, 3, false, &s, 100 + GRACE), None);
        fc.ordered(ME, ME, Ask::Pace(first), 0, 100 + GRACE);
        assert!(!fc.paused());
        assert_eq!(fc.pace(), Some(first));
        // Slower with the time past the limit, the appliers keeping their rate; asked again
        // only once it is markedly slower.
        applied(&mut fc, 50);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 125), None, "not slower by enough yet");
        applied(&mut fc, 110);
        let second = pace(2_000.0, 9.0, 0.5, 80).expect("a pace");
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 180), Some(Ask::Pace(second)));
        fc.ordered(ME, ME, Ask::Pace(second), 0, 180);
        assert_eq!(fc.decide(ME, 17, 3, false, &s, 100 + STOP_AFTER_MS), Some(Ask::Stop));
        fc.ordered(ME, ME, Ask::Stop, 0, 1_000);
        assert!(fc.paused() && fc.requested(ME));
        assert_eq!(fc.pace(), None, "a stop replaces the pace");
        assert_eq!(fc.decide(ME, 12, 3, false, &s, 1_050), None, "past the limit again: nothing weaker");
        assert_eq!(fc.decide(ME, 9, 3, false, &s, 1_100), None, "above factor × limit");
        assert_eq!(fc.decide(ME, 8, 3, false, &s, 1_200), Some(Ask::Resume));
        // The episode: from the first pace ordered (at 110 ms) to the resume, stopped from
        // 1 000 ms.
        let episode = fc.ordered(ME, ME, Ask::Resume, 0, 1_250).expect("our resume ends the episode");
        assert_eq!(episode.since_ms, 100 + GRACE);
        assert_eq!(episode.stopped_ms, 250);
        assert_eq!(episode.slowest_pace, Some(second));
        assert_eq!(episode.longest_queue, 17, "queues seen once the episode began");
        assert_eq!(fc.ordered(ME, ME, Ask::Resume, 0, 1_300), None, "no episode without a pace or stop");
        assert!(!fc.paused());
        assert_eq!(fc.writer_interval(3), Duration::ZERO);
        assert_eq!(fc.paused_ms(5_000), 250);
        assert_eq!(fc.stops_sent(), 1);
        assert_eq!(fc.stops_received(), 1);
    }

    #[test]
    fn appliers_that_get_nothing_done_stop_the_writers_after_the_grace() {
        // A locked table holds the applier (MariaDB's galera_gcs_fc_limit): no pace helps.
        let s = settings(1, 1.0);
        let mut fc = FlowControl::default();
        measure(&mut fc, 0, &s, 0);
        assert_eq!(fc.decide(ME, 2, 3, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 2, 3, false, &s, 100 + GRACE), Some(Ask::Stop));
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
    fn past_half_its_room_a_big_writeset_paces_the_writers_so_that_the_room_lasts() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        measure(&mut fc, 2_000, &s, 0);
        // 5 s of the measured 2 000 a second.
        assert_eq!(fc.big_backlog_room(), 10_000);
        fc.queued(9, 100 << 20);
        assert_eq!(fc.decide(ME, 5_000, 3, false, &s, 200), None, "half the room");
        // 4 000 left, spread over at least a second; half the writesets are ours.
        assert_eq!(fc.decide(ME, 6_000, 3, false, &s, 700), Some(Ask::Pace(8_000)));
        fc.ordered(ME, ME, Ask::Pace(8_000), 0, 700);
        // Applying for 4 s: what is left should last 4 s more.
        assert_eq!(fc.decide(ME, 8_000, 3, false, &s, 4_200), Some(Ask::Pace(1_000)));
        fc.ordered(ME, ME, Ask::Pace(1_000), 0, 4_200);
        assert_eq!(fc.decide(ME, 8_100, 3, false, &s, 4_300), None, "not slower by enough yet");
        // Past the room the limit counts again, beyond it: a stop in time.
        assert_eq!(fc.decide(ME, 10_017, 3, false, &s, 5_000), None);
        assert_eq!(fc.decide(ME, 10_017, 3, false, &s, 5_000 + GRACE), None, "the pace in force is slower");
        assert_eq!(fc.decide(ME, 10_017, 3, false, &s, 5_000 + STOP_AFTER_MS), Some(Ask::Stop));
        fc.ordered(ME, ME, Ask::Stop, 0, 5_200);
        // Applied: its backlog drains without holding anyone.
        fc.applied(9);
        assert_eq!(fc.decide(ME, 5_000, 3, false, &s, 6_000), Some(Ask::Resume));
        // The episode names the backlog behind the big writeset apart from the queue counted.
        let episode = fc.ordered(ME, ME, Ask::Resume, 0, 6_000).expect("our resume ends the episode");
        assert_eq!((episode.longest_big_backlog, episode.longest_queue), (10_017, 17));
        assert_eq!(episode.slowest_pace, Some(1_000));
        // With no rate measured yet, the room is the cap.
        let mut fc = FlowControl::default();
        fc.queued(9, 100 << 20);
        assert_eq!(fc.big_backlog_room(), BIG_BACKLOG_CAP);
        assert_eq!(fc.decide(ME, BIG_BACKLOG_CAP / 2, 3, false, &s, 0), None);
        assert_eq!(fc.decide(ME, BIG_BACKLOG_CAP, 3, false, &s, 100), Some(Ask::Pace(1)), "none left");
    }

    #[test]
    fn the_room_behind_a_big_writeset_is_at_least_what_others_writesets_committed_lately() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        // A second in which the queue kept emptying: 2 000 commits, half of them of others.
        assert_eq!(fc.decide(ME, 0, 3, false, &s, 0), None);
        applied(&mut fc, 2_000);
        assert_eq!(fc.decide(ME, 1, 3, false, &s, 1_000), None);
        // Then 100 ms with work all along, in which the appliers waited for a lock: 10 done.
        applied(&mut fc, 10);
        assert_eq!(fc.decide(ME, 1, 3, false, &s, 1_100), None);
        assert_eq!(fc.apply_rate(), 100.0);
        // 5 s of the others' 2 010 / 2 commits in 1.1 s, not of 100 a second.
        assert_eq!(fc.big_backlog_room(), 4_568);
        fc.queued(9, 100 << 20);
        assert_eq!(fc.decide(ME, 2_000, 3, false, &s, 1_200), None, "within half the room");
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
    fn writers_take_turns_at_their_share_of_the_slowest_pace_until_a_view_ends_it() {
        let ms = Duration::from_millis;
        let mut fc = FlowControl::default();
        fc.ordered(ME, OTHER, Ask::Pace(4_000), 0, 0);
        fc.ordered(ME, MemberId(3), Ask::Pace(1_000), 0, 0);
        assert_eq!(fc.pace(), Some(1_000));
        assert_eq!(fc.pacing().collect::<Vec<_>>(), [OTHER, MemberId(3)]);
        // Half the writesets lately were ours: one every 2 ms of 1 000 a second.
        assert_eq!(fc.writer_interval(3), ms(2));
        assert_eq!(fc.writer_turn(3, ms(10)), Duration::ZERO);
        assert_eq!(fc.writer_turn(3, ms(10)), ms(2));
        assert_eq!(fc.writer_turn(3, ms(11)), ms(3));
        assert_eq!(fc.writer_turn(3, ms(100)), Duration::ZERO, "time without writes earns no burst");
        // A member that did not write lately still gets half an even share.
        for _ in 0..1_000 {
            fc.ordered_writeset(false);
        }
        assert!((fc.writer_interval(3).as_secs_f64() - 0.006).abs() < 1e-6);
        // A pace slower than a writer should wait is a stop's job.
        fc.ordered(ME, MemberId(3), Ask::Pace(1), 0, 10);
        assert_eq!(fc.writer_interval(3), LONGEST_WRITER_INTERVAL);
        fc.ordered(ME, MemberId(3), Ask::Resume, 0, 10);
        assert_eq!(fc.pace(), Some(4_000));
        fc.view(20);
        assert_eq!(fc.pace(), None);
        assert_eq!(fc.writer_turn(3, ms(200)), Duration::ZERO);
        for ask in [Ask::Stop, Ask::Pace(2_500), Ask::Resume] {
            let (code, rate) = ask.to_wire();
            assert_eq!(Ask::from_wire(code, rate), ask);
        }
        // An earlier version's slow-down (no rate) and unknown codes ask for nothing.
        assert_eq!(Ask::from_wire(1, 0), Ask::Resume);
        assert_eq!(Ask::from_wire(7, 9), Ask::Resume);
    }

    /// A member that receives the order slowly sees its stop come back late: after
    /// `OVERTAKE_AFTER_MS` its resume goes anyway, and the stop ordered after it (a lower
    /// number) changes nothing anywhere.
    #[test]
    fn a_resume_overtakes_a_stop_still_on_its_way_and_the_late_stop_changes_nothing() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.decide(ME, 500, 3, false, &s, 0), Some(Ask::Stop), "past four times the limit");
        let stop = fc.request_number();
        assert_eq!(fc.decide(ME, 0, 3, false, &s, OVERTAKE_AFTER_MS - 1), None, "the stop may still come back");
        assert_eq!(fc.decide(ME, 0, 3, false, &s, OVERTAKE_AFTER_MS), Some(Ask::Resume));
        let resume = fc.request_number();
        assert!(resume > stop);
        // Elsewhere the resume is ordered first (it went a faster way), then the stop.
        let mut other = FlowControl::default();
        other.ordered(OTHER, ME, Ask::Resume, resume, 200);
        other.ordered(OTHER, ME, Ask::Stop, stop, 210);
        assert!(!other.paused(), "a late stop is stale");
        // Here the stop comes first, then the resume lifts it.
        fc.ordered(ME, ME, Ask::Stop, stop, 300);
        assert!(fc.paused());
        assert_eq!(fc.decide(ME, 0, 3, false, &s, 310), None, "our resume is on its way");
        fc.ordered(ME, ME, Ask::Resume, resume, 400);
        assert!(!fc.paused());
        assert_eq!(fc.decide(ME, 0, 3, false, &s, 500), None, "nothing more to ask");
    }

    /// As the group's leader, a follower named behind stops the writers whatever our queue
    /// (desynced too) until the group gives a pace, then they keep to it, faster or slower as
    /// it changes; the episode names the follower with the most it lacked.
    #[test]
    fn a_follower_behind_paces_the_writers_until_the_group_no_longer_names_it() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        let behind = |lacking_bytes, pace| Some(FollowerBehind { id: OTHER, lacking_bytes, pace });
        fc.set_follower_behind(behind(200 << 20, None));
        assert_eq!(fc.decide(ME, 0, 3, true, &s, 100), Some(Ask::Stop));
        fc.ordered(ME, ME, Ask::Stop, 0, 110);
        assert!(fc.paused());
        fc.set_follower_behind(behind(300 << 20, None));
        assert_eq!(fc.decide(ME, 0, 3, true, &s, 200), None, "stopped already");
        fc.set_follower_behind(behind(250 << 20, Some(80)));
        assert_eq!(fc.decide(ME, 0, 3, true, &s, 300), Some(Ask::Pace(80)), "a pace once measured");
        fc.ordered(ME, ME, Ask::Pace(80), 0, 310);
        assert!(!fc.paused());
        fc.set_follower_behind(behind(200 << 20, Some(90)));
        assert_eq!(fc.decide(ME, 0, 3, true, &s, 400), None, "near the pace in force");
        fc.set_follower_behind(behind(200 << 20, Some(120)));
        assert_eq!(fc.decide(ME, 0, 3, true, &s, 500), Some(Ask::Pace(120)), "faster too");
        fc.ordered(ME, ME, Ask::Pace(120), 0, 510);
        fc.set_follower_behind(None);
        assert_eq!(fc.decide(ME, 0, 3, false, &s, 600), Some(Ask::Resume));
        let episode = fc.ordered(ME, ME, Ask::Resume, 0, 610).expect("the episode ends");
        assert_eq!(episode.follower_behind, Some((OTHER, 300 << 20)));
        assert_eq!(episode.slowest_pace, Some(80));
        assert!(!fc.paused());
    }

    #[test]
    fn another_members_stop_pauses_us_until_its_resume_or_until_the_next_view() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        fc.ordered(ME, OTHER, Ask::Stop, 0, 100);
        assert!(fc.paused() && !fc.requested(ME));
        assert_eq!(fc.decide(ME, 0, 2, false, &s, 200), None, "nothing of ours to resume");
        fc.ordered(ME, OTHER, Ask::Resume, 0, 300);
        assert!(!fc.paused());
        fc.ordered(ME, OTHER, Ask::Stop, 0, 400);
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
        fc.ordered(ME, ME, Ask::Stop, 0, 0);
        assert_eq!(fc.decide(ME, 100, 2, true, &s, 0), Some(Ask::Resume));
    }

    #[test]
    fn a_member_that_just_joined_counts_only_what_it_queues_beyond_its_backlog() {
        let s = settings(16, 1.0);
        let mut fc = FlowControl::default();
        measure(&mut fc, 2_000, &s, 0);
        fc.joined(700);
        assert_eq!(fc.decide(ME, 710, 2, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 710, 2, false, &s, 100 + 4 * GRACE), None);
        // It drained to 100: the offset follows, and 100 + 17 is past the limit again.
        applied(&mut fc, 210);
        assert_eq!(fc.decide(ME, 100, 2, false, &s, 200), None);
        assert_eq!(fc.decide(ME, 117, 2, false, &s, 200), None);
        let paced = fc.decide(ME, 117, 2, false, &s, 200 + GRACE);
        assert!(matches!(paced, Some(Ask::Pace(_))), "{paced:?}");
    }

    #[test]
    fn a_refused_request_is_decided_again_and_the_limit_grows_with_the_members() {
        let s = FlowSettings { limit: 16, factor: 1.0, single_primary: false };
        let mut fc = FlowControl::default();
        measure(&mut fc, 2_000, &s, 0);
        // 16 × √4 = 32.
        assert_eq!(fc.decide(ME, 32, 4, false, &s, 100), None);
        assert_eq!(fc.decide(ME, 33, 4, false, &s, 100), None);
        let paced = |over| Some(Ask::Pace(pace(2_000.0, 1.0, 0.5, over).expect("a pace")));
        assert_eq!(fc.decide(ME, 33, 4, false, &s, 100 + GRACE), paced(GRACE));
        fc.refused();
        assert_eq!(fc.decide(ME, 33, 4, false, &s, 100 + GRACE + 1), paced(GRACE + 1));
    }
}
