//! `lockstep sim`: the deterministic simulators over many seeds: the group layer alone, and
//! provider cores with simulated servers over it.

use clap::{Args, ValueEnum};
use lockstep_group::sim as group_sim;
use lockstep_provider::sim as provider_sim;
use std::ops::RangeInclusive;
use std::process;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Layer {
    /// The group layer alone (ordering, views, cache).
    Group,
    /// Provider cores with simulated servers over the simulated group.
    Provider,
    /// Both, one after the other.
    All,
}

#[derive(Args)]
pub struct SimArgs {
    /// Run this many seeds (from --first-seed); stop at the first violation.
    #[arg(long, conflicts_with = "seed")]
    seeds: Option<u64>,
    /// First seed of a --seeds run.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Replay one seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Which simulator.
    #[arg(long, value_enum, default_value_t = Layer::All)]
    layer: Layer,
    /// Print faults and views as they happen.
    #[arg(long)]
    trace: bool,
}

/// With `--trace`, the simulated members' and providers' own log lines go to stdout too.
struct TraceLogger;

impl log::Log for TraceLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            println!("  {} {}", record.level(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Exits with status 1 on the first violation, 2 on bad arguments.
pub fn run(args: SimArgs) {
    if args.trace {
        static LOGGER: TraceLogger = TraceLogger;
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
    }
    let seeds = seed_range(args.seed, args.seeds, args.first_seed).unwrap_or_else(|why| {
        eprintln!("lockstep sim: {why}");
        process::exit(2);
    });
    if matches!(args.layer, Layer::Group | Layer::All) {
        run_group(seeds.clone(), args.seed.is_some(), args.trace);
    }
    if matches!(args.layer, Layer::Provider | Layer::All) {
        run_provider(seeds, args.seed.is_some(), args.trace);
    }
}

/// The seeds to run: one (`--seed`), or `--seeds N` from `--first-seed`, the last of them
/// at most `u64::MAX` (an inclusive range, so that seed too can run).
fn seed_range(seed: Option<u64>, seeds: Option<u64>, first_seed: u64) -> Result<RangeInclusive<u64>, String> {
    match (seed, seeds) {
        (Some(seed), _) => Ok(seed..=seed),
        (None, Some(0)) => Err("--seeds 0: at least 1".into()),
        (None, Some(n)) => first_seed
            .checked_add(n - 1)
            .map(|last| first_seed..=last)
            .ok_or_else(|| format!("--first-seed {first_seed} --seeds {n}: the last seed would be past {}", u64::MAX)),
        (None, None) => Err("give --seeds N or --seed S".into()),
    }
}

fn fail(layer: &str, violation: impl std::fmt::Display, seed: u64) -> ! {
    println!("FAILED ({layer} layer) {violation}");
    println!("replay: lockstep sim --layer {layer} --seed {seed} --trace");
    process::exit(1);
}

fn run_group(seeds: RangeInclusive<u64>, one: bool, trace: bool) {
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for seed in seeds {
        match group_sim::run_seed(seed, trace) {
            Ok(outcome) => {
                if one {
                    println!("{outcome:?}");
                }
                outcomes.push(outcome);
            }
            Err(violation) => fail("group", &violation, violation.seed),
        }
    }
    let sum = |figure: fn(&group_sim::Outcome) -> u64| outcomes.iter().map(figure).sum::<u64>();
    println!(
        "group layer: {} seeds passed in {:.1} s: {} writesets and {} messages acknowledged, {} crashes, {} partitions, {} components forced, {} state gaps, {} skips of views only, {} leader changes",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        sum(|o| o.acked),
        sum(|o| o.messages_acked),
        sum(|o| o.crashes),
        sum(|o| o.partitions),
        sum(|o| o.forced),
        sum(|o| o.state_gaps),
        sum(|o| o.views_missed),
        sum(|o| o.leader_changes),
    );
}

fn run_provider(seeds: RangeInclusive<u64>, one: bool, trace: bool) {
    let started = Instant::now();
    let (mut runs, mut acked, mut crashes, mut transfers, mut lost) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut alone, mut with_transfer, mut lost_with_donor, mut new_scripts) = (0u64, 0u64, 0u64, 0u64);
    let (mut awaited, mut wrong, mut untold, mut forced) = (0u64, 0u64, 0u64, 0u64);
    for seed in seeds {
        // A panic is a violation too (the cores assert their state transitions).
        let run = std::panic::catch_unwind(|| provider_sim::run_seed(seed, trace));
        let Ok(result) = run else { fail("provider", format!("seed {seed}: a core panicked (see above)"), seed) };
        match result {
            Ok(outcome) => {
                runs += 1;
                acked += outcome.acked;
                crashes += outcome.node_crashes;
                transfers += outcome.transfers;
                lost_with_donor += outcome.transfers_lost_with_donor;
                new_scripts += outcome.new_scripts;
                alone += outcome.restarts_alone;
                with_transfer += outcome.restarts_with_transfer;
                awaited += outcome.choices_awaited;
                wrong += outcome.guesses_wrong;
                untold += outcome.choices_untold;
                lost += u64::from(outcome.state_lost);
                forced += u64::from(outcome.forced);
                if one {
                    println!("{outcome:?}");
                }
            }
            Err(violation) => fail("provider", &violation, violation.seed),
        }
    }
    println!(
        "provider layer: {runs} seeds passed in {:.1} s: {acked} commits acknowledged, {crashes} node crashes, \
         {forced} components forced, {transfers} state transfers ({lost_with_donor} more lost with a donor that died, the joiner asking another; \
         {new_scripts} joiner scripts started again after such a donor broke them); restarts that held their order: {alone} caught up alone, {with_transfer} took a \
         transfer from a member that stayed up synced; {awaited} requests awaited the group's donor choice on a \
         member that guessed who is synced (the joiner, or a possible donor) ({wrong} guesses the answer corrected, {untold} went by their guess, told nothing in time); {lost} runs lost every holder of the certification state for good (no node \
         had a usable checkpoint; safety judged, not convergence)",
        started.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_up_to_the_largest_runs_and_a_range_past_it_is_refused() {
        assert_eq!(seed_range(Some(u64::MAX), None, 1), Ok(u64::MAX..=u64::MAX));
        assert_eq!(seed_range(None, Some(3), u64::MAX - 2).map(Iterator::count), Ok(3));
        assert_eq!(seed_range(None, Some(500), 1), Ok(1..=500));
        let past = seed_range(None, Some(4), u64::MAX - 2).unwrap_err();
        assert_eq!(
            past,
            "--first-seed 18446744073709551613 --seeds 4: the last seed would be past 18446744073709551615"
        );
        assert_eq!(seed_range(None, Some(0), 1).unwrap_err(), "--seeds 0: at least 1");
        assert_eq!(seed_range(None, None, 1).unwrap_err(), "give --seeds N or --seed S");
    }
}
