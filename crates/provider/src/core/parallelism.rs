//! How many appliers take events at once: one, or every applier thread the server runs
//! (`wsrep_slave_threads`), whichever took more events a second when last measured with a
//! backlog that nothing held (docs/design/provider-core.md, "Parallel applying"). Parallel
//! applying pays on a machine with cores to spare; on a busy one each extra applier only
//! adds a wake-up and a commit-order hand-off per writeset. Pure: the core feeds it its
//! queue, the events its appliers take and the time.

/// A measurement counts windows at least this long in which the queue never emptied (the
/// appliers had work all along, so what they did is what they can do).
const WINDOW_MS: u64 = 25;
/// The chosen width runs for this much such time before the other is tried again.
const STAY_MS: u64 = 1_000;
/// The other width is tried for this much such time.
const PROBE_MS: u64 = 100;
/// Every applier is kept only if it takes this much more than one: more threads cost CPU
/// that the machine's other work could use.
const WIDE_MARGIN: f64 = 1.05;

/// One applier, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    One,
    All,
}

impl Width {
    fn other(self) -> Width {
        match self {
            Width::One => Width::All,
            Width::All => Width::One,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, Copy)]
struct Window {
    since_ms: u64,
    taken: u64,
    saturated: bool,
}

#[derive(Debug)]
pub struct Parallelism {
    chosen: Width,
    /// The other width, while it is tried.
    probing: bool,
    /// Events taken by appliers since the connection began.
    taken: u64,
    window: Option<Window>,
    /// Per width: saturated time measured (ms) and events taken in it, since that width was
    /// last chosen or tried.
    measured: [(u64, u64); 2],
    /// Saturated time in the current run of the chosen width or the probe.
    run_ms: u64,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism { chosen: Width::One, probing: false, taken: 0, window: None, measured: [(0, 0); 2], run_ms: 0 }
    }
}

impl Parallelism {
    /// The width in force.
    pub fn width(&self) -> Width {
        if self.probing {
            self.chosen.other()
        } else {
            self.chosen
        }
    }

    /// An applier took an event.
    pub fn taken(&mut self) {
        self.taken += 1;
    }

    /// The queue holds `queue` events at `now_ms`; `appliers`: threads in `recv`; `held`:
    /// what is in flight holds the queue (a big writeset, a lock), which says nothing of how
    /// fast either width applies.
    pub fn observe(&mut self, queue: usize, appliers: usize, held: bool, now_ms: u64) {
        let saturated = queue > 0 && appliers > 1 && !held;
        let taken = self.taken;
        let window = self.window.get_or_insert(Window { since_ms: now_ms, taken, saturated });
        window.saturated &= saturated;
        let elapsed = now_ms.saturating_sub(window.since_ms);
        if elapsed < WINDOW_MS {
            return;
        }
        let done = *window;
        *window = Window { since_ms: now_ms, taken, saturated };
        if !done.saturated {
            return;
        }
        let width = self.width();
        let measured = &mut self.measured[width.index()];
        measured.0 += elapsed;
        measured.1 += taken - done.taken;
        self.run_ms += elapsed;
        match (self.probing, self.run_ms) {
            (false, ms) if ms >= STAY_MS => self.start_run(true),
            (true, ms) if ms >= PROBE_MS => {
                if self.faster(self.chosen.other()) {
                    self.chosen = self.chosen.other();
                }
                self.start_run(false);
            }
            _ => {}
        }
    }

    /// Whether `width` took more events a second than the other, `All` by the margin.
    fn faster(&self, width: Width) -> bool {
        let rate = |w: Width| {
            let (ms, taken) = self.measured[w.index()];
            (ms > 0).then(|| taken as f64 / ms as f64)
        };
        let (Some(one), Some(all)) = (rate(Width::One), rate(Width::All)) else { return false };
        match width {
            Width::All => all > one * WIDE_MARGIN,
            Width::One => all <= one * WIDE_MARGIN,
        }
    }

    /// A run of the chosen width, or a probe of the other: its measure starts afresh.
    fn start_run(&mut self, probe: bool) {
        self.probing = probe;
        self.run_ms = 0;
        self.measured[self.width().index()] = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` of saturated time in windows, `per_ms` events taken a millisecond.
    fn run(p: &mut Parallelism, clock: &mut u64, ms: u64, per_ms: u64) {
        for _ in 0..ms / WINDOW_MS {
            for _ in 0..WINDOW_MS * per_ms {
                p.taken();
            }
            *clock += WINDOW_MS;
            p.observe(5, 4, false, *clock);
        }
    }

    #[test]
    fn every_applier_is_kept_only_while_it_takes_more_than_one() {
        let (mut p, mut clock) = (Parallelism::default(), 0);
        p.observe(5, 4, false, clock);
        assert_eq!(p.width(), Width::One, "one applier to begin with");
        run(&mut p, &mut clock, STAY_MS, 10);
        assert_eq!(p.width(), Width::All, "then every applier is tried");
        run(&mut p, &mut clock, PROBE_MS, 10);
        assert_eq!(p.width(), Width::One, "no faster: back to one");
        run(&mut p, &mut clock, STAY_MS, 10);
        run(&mut p, &mut clock, PROBE_MS, 20);
        assert_eq!(p.width(), Width::All, "twice as fast: kept");
        run(&mut p, &mut clock, STAY_MS, 20);
        assert_eq!(p.width(), Width::One, "one is tried again");
        run(&mut p, &mut clock, PROBE_MS, 21);
        assert_eq!(p.width(), Width::One, "and kept when all is not faster by the margin");
    }

    #[test]
    fn only_time_with_a_backlog_that_is_not_held_and_several_appliers_counts() {
        let (mut p, mut clock) = (Parallelism::default(), 0);
        for (queue, appliers, held) in [(0, 4, false), (5, 1, false), (5, 4, true)] {
            for _ in 0..2 * STAY_MS / WINDOW_MS {
                clock += WINDOW_MS;
                p.observe(queue, appliers, held, clock);
            }
        }
        assert_eq!((p.width(), p.run_ms), (Width::One, 0));
    }
}
