//! `lockstep cluster up|status|top|down`: local MariaDB clusters on loopback.
use crate::top;
use clap::Subcommand;
use lockstep_cluster::{default_provider, Arbitrator, Cluster, ClusterSpec, Error, Node, Result, ARBITRATOR_NAME};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Create a cluster in DIR (or restart the stopped nodes of the one already there) and wait
    /// until every node reports wsrep_ready=ON.
    Up {
        #[arg(long, default_value_t = 1)]
        nodes: usize,
        #[arg(long)]
        dir: PathBuf,
        /// wsrep provider library [default: $LOCKSTEP_PROVIDER, else target/release/liblockstep.so]
        #[arg(long)]
        provider: Option<PathBuf>,
        /// Extra wsrep_provider_options for every node, e.g. "gcs.fc_limit=32;gcache.size=64M".
        #[arg(long, default_value = "")]
        provider_options: String,
        /// Group and IST traffic in plain TCP: no cluster CA, no certificates, no socket.ssl.
        #[arg(long)]
        no_tls: bool,
        /// Also run an arbitrator (`lockstep arbitrator`, Galera's garbd): a voting member
        /// without data, e.g. with --nodes 2 so either node may die. Give a program to run
        /// another one with the same options (--arbitrator=/usr/bin/garbd beside Galera).
        #[arg(long, value_name = "PROGRAM", num_args = 0..=1, default_missing_value = "lockstep")]
        arbitrator: Option<PathBuf>,
    },
    /// Print each node's wsrep status and ports.
    Status {
        #[arg(long)]
        dir: PathBuf,
    },
    /// A live view of every node, refreshed every second: commits/s, apply queue, flow-control
    /// paused share, lag in seqnos and ms, conflicts/s, state. Nodes of a local cluster
    /// (--dir) or any servers (--host, repeated; Galera's too).
    Top {
        #[arg(long, conflicts_with = "hosts", required_unless_present = "hosts")]
        dir: Option<PathBuf>,
        /// A server's client address, HOST:PORT; repeat for each node.
        #[arg(long = "host", value_name = "HOST:PORT")]
        hosts: Vec<String>,
        /// User for --host [default: root]; the password is read from $MYSQL_PWD.
        #[arg(long, default_value = "root")]
        user: String,
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Stop after this many refreshes [default: until interrupted].
        #[arg(long)]
        count: Option<u64>,
    },
    /// Shut every node down cleanly (SIGKILL only after a bounded wait).
    Down {
        #[arg(long)]
        dir: PathBuf,
    },
}

pub fn run(command: ClusterCommand) {
    let result = match command {
        ClusterCommand::Up { nodes, dir, provider, provider_options, no_tls, arbitrator } => {
            up(nodes, dir, provider, provider_options, !no_tls, arbitrator)
        }
        ClusterCommand::Status { dir } => status(dir),
        ClusterCommand::Top { dir, hosts, user, interval, count } => top(dir, hosts, user, interval, count),
        ClusterCommand::Down { dir } => down(dir),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn up(
    node_count: usize,
    dir: PathBuf,
    provider: Option<PathBuf>,
    provider_options: String,
    tls: bool,
    arbitrator: Option<PathBuf>,
) -> Result<()> {
    let mut cluster = if dir.join("cluster.state").exists() {
        println!("restarting the cluster in {}", dir.display());
        Cluster::open(&dir)?
    } else {
        let program = match arbitrator {
            // This program's own `arbitrator` command.
            Some(program) if program.as_os_str() == "lockstep" => {
                Some(std::env::current_exe().map_err(|e| Error::Invalid(format!("cannot find this program: {e}")))?)
            }
            other => other,
        };
        Cluster::create(&ClusterSpec {
            dir,
            node_count,
            provider: provider.unwrap_or_else(default_provider),
            provider_options,
            tls,
            arbitrator: program,
        })?
    };
    for node in &cluster.nodes {
        println!("{}", describe_ports(node));
    }
    if let Some(arbitrator) = &cluster.arbitrator {
        println!("{}", describe_arbitrator(arbitrator));
    }
    cluster.start()?;
    for node in &cluster.nodes {
        println!("{}: wsrep_ready=ON, socket {}", node.name(), node.socket().display());
    }
    if cluster.arbitrator.is_some() {
        println!("{ARBITRATOR_NAME}: joined");
    }
    println!("stop it with: lockstep cluster down --dir {}", cluster.dir.display());
    Ok(())
}

fn status(dir: PathBuf) -> Result<()> {
    let mut cluster = Cluster::open(&dir)?;
    for node in &mut cluster.nodes {
        println!("{}", describe_ports(node));
        if !node.is_running() {
            println!("  not running");
            continue;
        }
        match node.status() {
            Ok(status) => {
                for name in [
                    "wsrep_ready",
                    "wsrep_cluster_status",
                    "wsrep_cluster_size",
                    "wsrep_local_state_comment",
                    "wsrep_last_committed",
                    "wsrep_local_state_uuid",
                    "wsrep_provider_name",
                    "wsrep_provider_version",
                ] {
                    println!("  {name} = {}", status.get(name).unwrap_or("-"));
                }
            }
            Err(e) => println!("  running, but its status could not be read: {e}"),
        }
    }
    if let Some(arbitrator) = cluster.arbitrator.as_mut() {
        println!("{}", describe_arbitrator(arbitrator));
        println!("  {}", if arbitrator.is_running() { "running" } else { "not running" });
    }
    Ok(())
}

fn top(dir: Option<PathBuf>, hosts: Vec<String>, user: String, interval: f64, count: Option<u64>) -> Result<()> {
    if !(interval.is_finite() && interval >= 0.1) {
        return Err(Error::Invalid(format!("--interval {interval}: at least 0.1 seconds")));
    }
    let (source, targets) = match dir {
        Some(dir) => {
            let cluster = Cluster::open(&dir)?;
            let targets = cluster
                .nodes
                .iter()
                .map(|n| top::Target { name: n.name().to_string(), endpoint: n.endpoint() })
                .collect();
            (dir.display().to_string(), targets)
        }
        None => {
            let password = std::env::var("MYSQL_PWD").ok();
            let targets =
                hosts.iter().map(|h| top::parse_host(h, &user, password.as_deref())).collect::<Result<Vec<_>>>()?;
            (hosts.join(", "), targets)
        }
    };
    top::run(&source, targets, Duration::from_secs_f64(interval), count)
}

fn down(dir: PathBuf) -> Result<()> {
    let mut cluster = Cluster::open(&dir)?;
    cluster.stop()?;
    for node in &cluster.nodes {
        match node.saved_state() {
            Ok(state) => println!(
                "{}: stopped at {}, safe_to_bootstrap: {}",
                node.name(),
                state.position,
                u8::from(state.safe_to_bootstrap)
            ),
            Err(_) => println!("{}: stopped", node.name()),
        }
    }
    Ok(())
}

fn describe_arbitrator(arbitrator: &Arbitrator) -> String {
    format!(
        "{ARBITRATOR_NAME} (arbitrator): group 127.0.0.1:{}; log {}",
        arbitrator.port,
        arbitrator.log_file().display()
    )
}

fn describe_ports(node: &Node) -> String {
    let p = &node.config.ports;
    format!(
        "{}: client 127.0.0.1:{}, group {}, IST {}, SST {}; error log {}",
        node.name(),
        p.client,
        p.group,
        p.ist(),
        p.sst,
        node.error_log().display()
    )
}
