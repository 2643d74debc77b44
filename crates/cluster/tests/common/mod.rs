//! A test cluster in its own temporary directory, stopped when the test ends.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]
pub mod session;
pub mod workload;

use lockstep_cluster::{default_provider, Cluster, ClusterSpec, Node};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

/// Stops its servers when dropped (clean stop, SIGKILL after a bounded wait). The directory is
/// removed after a passing test and kept, with its error logs, after a failing one.
pub struct TestCluster {
    pub cluster: Cluster,
}

impl TestCluster {
    /// Creates (does not start) a cluster of `node_count` nodes for `test_name` with the
    /// provider named by `LOCKSTEP_PROVIDER`, default this workspace's
    /// `target/release/liblockstep.so`.
    pub fn create(test_name: &str, node_count: usize, provider_options: &str) -> TestCluster {
        Self::create_with(test_name, node_count, provider_options, None)
    }

    /// The same, and an arbitrator run by `arbitrator` (the `lockstep` program) when given.
    pub fn create_with(
        test_name: &str,
        node_count: usize,
        provider_options: &str,
        arbitrator: Option<PathBuf>,
    ) -> TestCluster {
        let provider = default_provider();
        assert!(
            provider.is_file(),
            "wsrep provider {} not found: run `cargo build --release -p lockstep-abi`, or set \
             LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so to test the harness against Galera",
            provider.display()
        );
        let dir = scratch_dir(test_name);
        // As `lockstep cluster up` makes them: with TLS.
        let provider_options = provider_options.to_string();
        let spec = ClusterSpec { dir, node_count, provider, provider_options, tls: true, arbitrator };
        let cluster = Cluster::create(&spec).unwrap_or_else(|e| panic!("creating the test cluster failed: {e}"));
        TestCluster { cluster }
    }

    /// Creates and starts a cluster with default provider options.
    pub fn start(test_name: &str, node_count: usize) -> TestCluster {
        let mut test = TestCluster::create(test_name, node_count, "");
        test.cluster.start().unwrap_or_else(|e| panic!("starting the cluster failed: {e}"));
        test
    }

    pub fn nodes(&self) -> &[Node] {
        &self.cluster.nodes
    }

    /// The first (bootstrap) node.
    pub fn node(&self) -> &Node {
        &self.cluster.nodes[0]
    }

    pub fn node_mut(&mut self) -> &mut Node {
        &mut self.cluster.nodes[0]
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Err(e) = self.cluster.stop() {
            eprintln!("stopping the test cluster: {e}");
        }
        if thread::panicking() {
            eprintln!("test cluster kept in {}", self.cluster.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.cluster.dir);
        }
    }
}

fn scratch_dir(test_name: &str) -> PathBuf {
    // Short: the socket path inside must stay under the 108-byte limit of Unix sockets.
    let dir = std::env::temp_dir().join("lockstep-tests").join(format!("{test_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs SQL on the node, panicking with the client's message on failure.
pub fn sql(node: &Node, sql: &str) -> String {
    node.sql(sql).unwrap_or_else(|e| panic!("{}: {e}", node.name()))
}

pub fn status_var(node: &Node, name: &str) -> String {
    let status = node.status().unwrap_or_else(|e| panic!("{}: {e}", node.name()));
    status.get(name).unwrap_or_else(|| panic!("{} has no status variable {name}", node.name())).to_string()
}

pub fn last_committed(node: &Node) -> i64 {
    node.status().and_then(|s| s.last_committed()).unwrap_or_else(|e| panic!("{}: {e}", node.name()))
}

/// Polls `wsrep_local_state_comment` until it equals `expected`; state changes such as resync
/// after `wsrep_desync=OFF` complete asynchronously.
pub fn wait_for_state_comment(node: &Node, expected: &str) {
    wait_for_status(node, &[("wsrep_local_state_comment", expected)], Duration::from_secs(20));
}

/// Polls `node`'s wsrep status until every `(name, value)` of `expected` holds; panics after
/// `timeout` with the values last seen.
pub fn wait_for_status(node: &Node, expected: &[(&str, &str)], timeout: Duration) {
    wait_until(&format!("{} to report {expected:?}", node.name()), timeout, || {
        let status = node.status().map_err(|e| e.to_string())?;
        let seen: Vec<(&str, &str)> =
            expected.iter().map(|(name, _)| (*name, status.get(name).unwrap_or("-"))).collect();
        if seen == expected {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    });
}

/// Polls `check` every 100 ms until it returns `Ok`; panics after `timeout` with `what` and
/// the last `Err` (what was seen instead).
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(()) => return,
            Err(seen) if Instant::now() >= deadline => {
                panic!("timed out after {} s waiting for {what}; last seen: {seen}", timeout.as_secs())
            }
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Waits until every node has committed the same writesets (equal `wsrep_last_committed`,
/// empty receive queue); call it once writes have stopped.
pub fn wait_until_converged(nodes: &[Node]) {
    wait_until("the nodes to commit the same writesets", Duration::from_secs(60), || {
        let seen: Vec<(String, String)> = nodes
            .iter()
            .map(|node| {
                let status = node.status().map_err(|e| format!("{}: {e}", node.name()))?;
                let get = |name| status.get(name).unwrap_or("-").to_string();
                Ok((get("wsrep_last_committed"), get("wsrep_local_recv_queue")))
            })
            .collect::<Result<_, String>>()?;
        if seen.iter().all(|(committed, queue)| *committed == seen[0].0 && queue == "0") {
            Ok(())
        } else {
            Err(format!("(last_committed, recv_queue) per node: {seen:?}"))
        }
    });
}

/// Waits for the nodes to converge ([`wait_until_converged`]), then checks that every node has
/// the same tables in `db`, with the same definitions (`SHOW CREATE TABLE` without the
/// `AUTO_INCREMENT=` counter, which each node keeps for itself) and the same `CHECKSUM TABLE`.
pub fn assert_same_data(nodes: &[Node], db: &str) {
    wait_until_converged(nodes);
    let reference = table_fingerprints(&nodes[0], db);
    assert!(!reference.is_empty(), "{}: no table in {db}", nodes[0].name());
    for node in &nodes[1..] {
        let fingerprints = table_fingerprints(node, db);
        assert_eq!(fingerprints, reference, "{} differs from {} in {db}", node.name(), nodes[0].name());
    }
}

/// `(table, definition, checksum)` for every table of `db`.
pub fn table_fingerprints(node: &Node, db: &str) -> Vec<(String, String, String)> {
    let tables = sql(node, &format!("SHOW TABLES FROM {db}"));
    tables
        .lines()
        .map(|table| {
            let create = sql(node, &format!("SHOW CREATE TABLE {db}.{table}"));
            let definition: String =
                create.split(' ').filter(|word| !word.starts_with("AUTO_INCREMENT=")).collect::<Vec<_>>().join(" ");
            let checksum = sql(node, &format!("CHECKSUM TABLE {db}.{table}"));
            let checksum = checksum.trim().rsplit('\t').next().unwrap_or("").to_string();
            assert!(checksum.parse::<u64>().is_ok(), "{}: CHECKSUM TABLE {db}.{table} gave {checksum:?}", node.name());
            (table.to_string(), definition, checksum)
        })
        .collect()
}
