//! `lockstep sim`: run the deterministic group-layer simulator over many seeds.

use clap::Args;
use lockstep_group::sim;
use std::process;
use std::time::Instant;

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
    /// Print faults and views as they happen.
    #[arg(long)]
    trace: bool,
}

/// Exits with status 1 on the first violation, 2 on bad arguments.
pub fn run(args: SimArgs) {
    let seeds = match (args.seed, args.seeds) {
        (Some(seed), _) => seed..seed + 1,
        (None, Some(n)) => args.first_seed..args.first_seed + n,
        (None, None) => {
            eprintln!("lockstep sim: give --seeds N or --seed S");
            process::exit(2);
        }
    };
    let started = Instant::now();
    let (mut runs, mut acked, mut messages, mut crashes, mut partitions, mut gaps) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for seed in seeds {
        match sim::run_seed(seed, args.trace) {
            Ok(outcome) => {
                runs += 1;
                acked += outcome.acked;
                messages += outcome.messages_acked;
                crashes += outcome.crashes;
                partitions += outcome.partitions;
                gaps += outcome.state_gaps;
                if args.seed.is_some() {
                    println!("{outcome:?}");
                }
            }
            Err(violation) => {
                println!("FAILED {violation}");
                println!("replay: lockstep sim --seed {} --trace", violation.seed);
                process::exit(1);
            }
        }
    }
    println!(
        "{runs} seeds passed in {:.1} s: {acked} writesets and {messages} messages acknowledged, {crashes} crashes, {partitions} partitions, {gaps} state gaps",
        started.elapsed().as_secs_f64()
    );
}
