//! `lockstep`: operate local Lockstep clusters, run the simulator and benchmarks.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "lockstep", version, about = "Synchronous multi-master replication for MariaDB")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() {
    let cli = Cli::parse();
    match cli.command {}
}
