//! `lockstep`: operate local Lockstep clusters, run the simulator and benchmarks.
use clap::{Parser, Subcommand};

mod arbitrator_cmd;
mod bench_cmd;
mod cluster_cmd;
mod sim_cmd;
mod top;

#[derive(Parser)]
#[command(name = "lockstep", version, about = "Synchronous multi-master replication for MariaDB")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build, start, inspect and stop local MariaDB clusters on loopback.
    #[command(subcommand)]
    Cluster(cluster_cmd::ClusterCommand),
    /// Run the deterministic simulators: the group layer, and provider cores with simulated
    /// servers over it (exits non-zero on a violation).
    Sim(sim_cmd::SimArgs),
    /// Group-layer benchmark: 3 members over loopback TCP (not a test).
    Bench(bench_cmd::BenchArgs),
    /// Join a cluster as a voting member without data (Galera's garbd): two data nodes and
    /// an arbitrator keep a primary component when either data node dies.
    Arbitrator(arbitrator_cmd::ArbitratorArgs),
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Cluster(command) => cluster_cmd::run(command),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Arbitrator(args) => arbitrator_cmd::run(args),
    }
}
