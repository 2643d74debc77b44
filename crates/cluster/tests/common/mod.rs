//! A test cluster in its own temporary directory, stopped when the test ends.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]
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
        let provider = default_provider();
        assert!(
            provider.is_file(),
            "wsrep provider {} not found: run `cargo build --release -p lockstep-abi`, or set \
             LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so to test the harness against Galera",
            provider.display()
        );
        let dir = scratch_dir(test_name);
        let cluster =
            Cluster::create(&ClusterSpec { dir, node_count, provider, provider_options: provider_options.to_string() })
                .unwrap_or_else(|e| panic!("creating the test cluster failed: {e}"));
        TestCluster { cluster }
    }

    /// Creates and starts a cluster with default provider options.
    pub fn start(test_name: &str, node_count: usize) -> TestCluster {
        let mut test = TestCluster::create(test_name, node_count, "");
        test.cluster.start().unwrap_or_else(|e| panic!("starting the cluster failed: {e}"));
        test
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
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let current = status_var(node, "wsrep_local_state_comment");
        if current == expected {
            return;
        }
        assert!(Instant::now() < deadline, "wsrep_local_state_comment stayed {current:?}, expected {expected:?}");
        thread::sleep(Duration::from_millis(100));
    }
}
