//! `lockstep cluster up|status|top|down`: local MariaDB clusters on loopback.
use crate::top;
use clap::Subcommand;
use lockstep_cluster::{
    default_provider, interrupting_signal, signal_name, Arbitrator, Cluster, ClusterSpec, Error, Node, Requested,
    Result, SavedState, ARBITRATOR_NAME, INTERRUPTING_SIGNAL,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The fastest `top` refreshes: each runs a `mariadb` client per node.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The slowest: beyond an hour a live view is a typo.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Create a cluster in DIR (or restart the stopped nodes of the one already there) and wait
    /// until every node reports wsrep_ready=ON. On a cluster that exists, settings that differ
    /// from the ones it was made with are refused. Ctrl-C or SIGTERM stops the servers it
    /// started and leaves the others running.
    Up {
        /// Data nodes, at most 64 [default: 1]
        #[arg(long)]
        nodes: Option<usize>,
        #[arg(long)]
        dir: PathBuf,
        /// wsrep provider library [default: $LOCKSTEP_PROVIDER, else target/release/liblockstep.so]
        #[arg(long)]
        provider: Option<PathBuf>,
        /// Extra wsrep_provider_options for every node, e.g. "gcs.fc_limit=32;gcache.size=64M".
        #[arg(long)]
        provider_options: Option<String>,
        /// Group and IST traffic in plain TCP: no cluster CA, no certificates, no socket.ssl.
        #[arg(long)]
        no_tls: bool,
        /// Also run an arbitrator (`lockstep arbitrator`, Galera's garbd): a voting member
        /// without data, e.g. with --nodes 2 so either node may die. Give a program to run
        /// another one with the same options (--arbitrator=garbd beside Galera; a bare name is
        /// looked up on PATH).
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
        /// Seconds between refreshes, 0.1 to 3600.
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
        std::process::exit(exit_code(interrupting_signal()));
    }
}

/// 1 for a failure; for one a signal caused, 128 + its number, as a shell reports a command
/// the signal ended (130 for Ctrl-C).
fn exit_code(signal: Option<i32>) -> i32 {
    signal.map_or(1, |signal| 128 + signal)
}

/// From here on SIGINT and SIGTERM no longer end the process at once: they set
/// [`INTERRUPTING_SIGNAL`], the cluster's waits give up on it, and `up` stops what it started.
fn catch_interruptions() -> Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(signal, &INTERRUPTING_SIGNAL, signal as usize)
            .map_err(|e| Error::Invalid(format!("cannot handle {}: {e}", signal_name(signal))))?;
    }
    Ok(())
}

fn up(
    node_count: Option<usize>,
    dir: PathBuf,
    provider: Option<PathBuf>,
    provider_options: Option<String>,
    tls: bool,
    arbitrator: Option<PathBuf>,
) -> Result<()> {
    catch_interruptions()?;
    let arbitrator = match arbitrator {
        // This program's own `arbitrator` command.
        Some(program) if program.as_os_str() == "lockstep" => {
            Some(std::env::current_exe().map_err(|e| Error::Invalid(format!("cannot find this program: {e}")))?)
        }
        other => other,
    };
    let mut cluster = if dir.join("cluster.state").exists() {
        let cluster = Cluster::open(&dir)?;
        cluster.refuse_changes(&Requested { node_count, provider, provider_options, no_tls: !tls, arbitrator })?;
        println!("restarting the cluster in {}", dir.display());
        cluster
    } else {
        Cluster::create(&ClusterSpec {
            dir,
            node_count: node_count.unwrap_or(1),
            provider: provider.unwrap_or_else(default_provider),
            provider_options: provider_options.unwrap_or_default(),
            tls,
            arbitrator,
        })?
    };
    for node in &cluster.nodes {
        println!("{}", describe_ports(node));
    }
    if let Some(arbitrator) = &cluster.arbitrator {
        println!("{}", describe_arbitrator(arbitrator));
    }
    // `start` leaves running nodes alone: they are reported as such, not as checked.
    let was_running: Vec<bool> = cluster.nodes.iter_mut().map(Node::is_running).collect();
    let arbitrator_was_running = cluster.arbitrator.as_mut().is_some_and(Arbitrator::is_running);
    let start = cluster.start();
    if let Some(signal) = interrupting_signal() {
        stop_after_interruption(&mut cluster, signal, start, &was_running, arbitrator_was_running);
        std::process::exit(exit_code(Some(signal)));
    }
    if let Err(error) = start {
        let mut running: Vec<String> =
            cluster.nodes.iter_mut().filter_map(|n| n.is_running().then(|| n.name().to_string())).collect();
        if cluster.arbitrator.as_mut().is_some_and(Arbitrator::is_running) {
            running.push(ARBITRATOR_NAME.to_string());
        }
        return Err(with_running(error, &cluster.dir, &running));
    }
    for (node, was_running) in cluster.nodes.iter().zip(was_running) {
        println!("{}", started(node, was_running));
    }
    if cluster.arbitrator.is_some() {
        println!("{ARBITRATOR_NAME}: {}", if arbitrator_was_running { "already running" } else { "joined" });
    }
    println!("stop it with: lockstep cluster down --dir {}", cluster.dir.display());
    Ok(())
}

/// An interrupted `up` stops the servers it started, as `down` stops them, and says so in one
/// line; the servers that ran before it keep running.
fn stop_after_interruption(
    cluster: &mut Cluster,
    signal: i32,
    start: Result<()>,
    was_running: &[bool],
    arbitrator_was_running: bool,
) {
    let during = match start {
        Err(Error::Interrupted { during, .. }) => Some(during),
        // A failure that came before the start saw the signal.
        Err(error) => {
            eprintln!("error: {error}");
            None
        }
        Ok(()) => None,
    };
    let mut started: Vec<String> =
        cluster.nodes.iter_mut().filter_map(|n| n.started_here().then(|| n.name().to_string())).collect();
    if cluster.arbitrator.as_mut().is_some_and(Arbitrator::started_here) {
        started.push(ARBITRATOR_NAME.to_string());
    }
    let mut ran_before: Vec<String> =
        cluster.nodes.iter().zip(was_running).filter(|(_, was)| **was).map(|(n, _)| n.name().to_string()).collect();
    if arbitrator_was_running {
        ran_before.push(ARBITRATOR_NAME.to_string());
    }
    if let Err(e) = cluster.stop_started() {
        eprintln!("error: stopping what cluster up started: {e}");
    }
    eprintln!("{}", interrupted(signal, during.as_deref(), &started, &ran_before));
}

/// The line an interrupted `up` ends with.
fn interrupted(signal: i32, during: Option<&str>, stopped: &[String], left_alone: &[String]) -> String {
    let mut line = format!("cluster up interrupted by {}", signal_name(signal));
    if let Some(during) = during {
        line += &format!(" {during}");
    }
    line += &match stopped {
        [] => "; no server it started was running".to_string(),
        _ => format!("; stopped the servers it had started: {}", stopped.join(", ")),
    };
    if !left_alone.is_empty() {
        line += &format!("; left alone those running before it: {}", left_alone.join(", "));
    }
    line
}

/// What `up` says of a node once the cluster is up: a node it started reported
/// wsrep_ready=ON; one that was running is asked now.
fn started(node: &Node, was_running: bool) -> String {
    let socket = node.socket();
    if !was_running {
        return format!("{}: wsrep_ready=ON, socket {}", node.name(), socket.display());
    }
    match node.status() {
        Ok(status) => format!(
            "{}: already running, wsrep_ready={}, socket {}",
            node.name(),
            status.get("wsrep_ready").unwrap_or("-"),
            socket.display()
        ),
        Err(e) => format!("{}: already running; its status could not be read: {e}", node.name()),
    }
}

/// A failed start may leave nodes running (those started before the failure, or the others
/// of a restart): the error says which, and how to stop them.
fn with_running(error: Error, dir: &Path, running: &[String]) -> Error {
    if running.is_empty() {
        return error;
    }
    Error::Invalid(format!(
        "{error}\nstill running: {}; stop them with: lockstep cluster down --dir {}",
        running.join(", "),
        dir.display()
    ))
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
    let interval = refresh_interval(interval, count)?;
    let (source, targets) = match dir {
        Some(dir) => {
            let cluster = Cluster::open(&dir)?;
            let targets = cluster
                .nodes
                .iter()
                .map(|n| top::Target {
                    name: n.name().to_string(),
                    endpoint: n.endpoint(),
                    pid_file: Some(n.pid_file()),
                })
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
    top::run(&source, targets, interval, count)
}

/// `--interval` as a period between [`MIN_INTERVAL`] and [`MAX_INTERVAL`]; `--count` 0 would
/// show nothing.
fn refresh_interval(seconds: f64, count: Option<u64>) -> Result<Duration> {
    if count == Some(0) {
        return Err(Error::Invalid("--count 0: at least 1 refresh".into()));
    }
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|period| (MIN_INTERVAL..=MAX_INTERVAL).contains(period))
        .ok_or_else(|| {
            Error::Invalid(format!(
                "--interval {seconds}: between {} and {} seconds",
                MIN_INTERVAL.as_secs_f64(),
                MAX_INTERVAL.as_secs()
            ))
        })
}

fn down(dir: PathBuf) -> Result<()> {
    let mut cluster = Cluster::open(&dir)?;
    let was_running: Vec<bool> = cluster.nodes.iter_mut().map(Node::is_running).collect();
    cluster.stop()?;
    for (node, was_running) in cluster.nodes.iter().zip(was_running) {
        println!("{}", stopped(node.name(), was_running, node.saved_state().ok()));
    }
    Ok(())
}

/// What `down` says of a node: stopped, or not running (it never ran, or stopped before),
/// with the position its `grastate.dat` holds.
fn stopped(name: &str, was_running: bool, saved: Option<SavedState>) -> String {
    match (was_running, saved) {
        (true, Some(state)) => {
            format!("{name}: stopped at {}, safe_to_bootstrap: {}", state.position, u8::from(state.safe_to_bootstrap))
        }
        (true, None) => format!("{name}: stopped"),
        (false, Some(state)) => format!(
            "{name}: not running (grastate.dat: {}, safe_to_bootstrap: {})",
            state.position,
            u8::from(state.safe_to_bootstrap)
        ),
        (false, None) => format!("{name}: not running"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_cluster::{NodeConfig, NodePorts, Position};

    #[test]
    fn a_failed_start_names_the_nodes_still_running_and_how_to_stop_them() {
        let error = || Error::Invalid("node3: mariadbd exited (exit status: 1)".into());
        let dir = Path::new("/tmp/c");
        assert_eq!(with_running(error(), dir, &[]).to_string(), "node3: mariadbd exited (exit status: 1)");
        let running = ["node1".to_string(), "node2".to_string()];
        assert_eq!(
            with_running(error(), dir, &running).to_string(),
            "node3: mariadbd exited (exit status: 1)\nstill running: node1, node2; stop them with: \
             lockstep cluster down --dir /tmp/c"
        );
    }

    #[test]
    fn an_interrupted_up_says_what_it_stopped_and_what_it_left_alone() {
        let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            interrupted(2, Some("while waiting for node2 to report wsrep_ready=ON"), &names(&["node1", "node2"]), &[]),
            "cluster up interrupted by SIGINT while waiting for node2 to report wsrep_ready=ON; stopped the \
             servers it had started: node1, node2"
        );
        assert_eq!(
            interrupted(15, None, &names(&["node3", "garb"]), &names(&["node1", "node2"])),
            "cluster up interrupted by SIGTERM; stopped the servers it had started: node3, garb; left alone those \
             running before it: node1, node2"
        );
        assert_eq!(
            interrupted(2, Some("before starting node1"), &[], &[]),
            "cluster up interrupted by SIGINT before starting node1; no server it started was running"
        );
        assert_eq!(exit_code(Some(2)), 130);
        assert_eq!(exit_code(Some(15)), 143);
        assert_eq!(exit_code(None), 1);
    }

    #[test]
    fn a_node_that_was_running_is_asked_for_its_state_not_reported_ready() {
        let config = NodeConfig {
            name: "node1".into(),
            ports: NodePorts { client: 23000, group: 23001, sst: 23003 },
            provider: PathBuf::from("/x.so"),
            cluster_name: "lockstep".into(),
            cluster_address: "gcomm://".into(),
            provider_options: String::new(),
            tls: None,
        };
        let node = Node::new(PathBuf::from("/nonexistent/node1"), config);
        assert_eq!(started(&node, false), "node1: wsrep_ready=ON, socket /nonexistent/node1/mariadbd.sock");
        let line = started(&node, true);
        assert!(line.starts_with("node1: already running; its status could not be read: "), "{line}");
    }

    #[test]
    fn top_refuses_an_interval_out_of_range_and_a_count_of_zero() {
        assert_eq!(refresh_interval(1.0, None).unwrap(), Duration::from_secs(1));
        assert_eq!(refresh_interval(3600.0, Some(1)).unwrap(), MAX_INTERVAL);
        for seconds in [1e30, 3600.5, f64::INFINITY, f64::NAN, 0.05, -1.0] {
            let error = refresh_interval(seconds, None).unwrap_err().to_string();
            assert_eq!(error, format!("--interval {seconds}: between 0.1 and 3600 seconds"));
        }
        assert_eq!(refresh_interval(1.0, Some(0)).unwrap_err().to_string(), "--count 0: at least 1 refresh");
    }

    #[test]
    fn down_says_not_running_of_a_node_it_did_not_stop() {
        let position: Position = "6b1c3e2a-4f5d-11ef-8000-0123456789ab:42".parse().unwrap();
        let state = SavedState { position, safe_to_bootstrap: true };
        assert_eq!(stopped("node1", false, None), "node1: not running");
        assert_eq!(
            stopped("node1", false, Some(state)),
            "node1: not running (grastate.dat: 6b1c3e2a-4f5d-11ef-8000-0123456789ab:42, safe_to_bootstrap: 1)"
        );
        assert_eq!(
            stopped("node2", true, Some(state)),
            "node2: stopped at 6b1c3e2a-4f5d-11ef-8000-0123456789ab:42, safe_to_bootstrap: 1"
        );
    }
}
