//! What monitoring sees: Debian's `prometheus-mysqld-exporter` (the exporter behind PMM and
//! the usual Galera dashboards) pointed at a Lockstep node exports the
//! `mysql_global_status_wsrep_*` and `mysql_galera_*` metrics those dashboards read, with
//! values that move under load rather than constants.
mod common;

use common::workload::{create_bank, Load};
use common::TestCluster;
use lockstep_cluster::Node;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const EXPORTER: &str = "prometheus-mysqld-exporter";

/// The exporter process, killed when the test ends.
struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(node: &Node) -> Exporter {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = Command::new(EXPORTER)
            .env("DATA_SOURCE_NAME", format!("root@unix({})/", node.socket().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {EXPORTER} ({e}): scripts/setup.sh installs it"));
        Exporter { child, port }
    }

    /// Metric name (labels included) to value, from one scrape of `/metrics`.
    fn scrape(&self) -> Result<BTreeMap<String, f64>, String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
        let mut text = String::new();
        stream.read_to_string(&mut text).map_err(|e| e.to_string())?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("mysql_"))
            .filter_map(|l| l.rsplit_once(' '))
            .filter_map(|(name, value)| Some((name.to_string(), value.parse().ok()?)))
            .collect())
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_prometheus_exporter_shows_a_loaded_node_as_galera_dashboards_expect() {
    let test = TestCluster::start("exporter", 3);
    let nodes = test.nodes();
    create_bank(&nodes[0], 100);
    let load = Load::start(&nodes[..2], 4, 100);
    load.wait_for_progress(&[0, 1], 300, Duration::from_secs(60));
    let exporters: Vec<Exporter> = nodes[..2].iter().map(Exporter::start).collect();
    let mut scraped = Vec::new();
    for exporter in &exporters {
        let mut last = String::new();
        let metrics = (0..100)
            .find_map(|_| match exporter.scrape() {
                Ok(m) if m.get("mysql_up") == Some(&1.0) => Some(m),
                other => {
                    last = format!("{other:?}");
                    std::thread::sleep(Duration::from_millis(100));
                    None
                }
            })
            .unwrap_or_else(|| panic!("the exporter did not answer with mysql_up 1: {last}"));
        scraped.push(metrics);
    }
    load.stop().assert_clean(&[]);
    let metric = |node: usize, name: &str| -> f64 {
        *scraped[node]
            .get(name)
            .unwrap_or_else(|| panic!("node {}: no {name} among {:?}", node + 1, scraped[node].keys()))
    };
    let status = |name: &str| format!("mysql_global_status_wsrep_{name}");
    for node in 0..2 {
        // State, as the dashboards' singlestats read it.
        assert_eq!(metric(node, &status("cluster_size")), 3.0);
        assert_eq!(metric(node, &status("ready")), 1.0);
        assert_eq!(metric(node, &status("connected")), 1.0);
        assert_eq!(metric(node, &status("local_state")), 4.0, "Synced");
        // Present, whatever their value at this moment.
        for name in [
            "local_recv_queue",
            "local_send_queue",
            "local_recv_queue_avg",
            "local_send_queue_avg",
            "flow_control_paused",
            "flow_control_paused_ns",
            "flow_control_sent",
            "flow_control_recv",
            "local_cert_failures",
            "local_bf_aborts",
            "open_transactions",
            "cert_index_size",
            "desync_count",
        ] {
            metric(node, &status(name));
        }
        // Moved by the load: these were constants before.
        for name in [
            "replicated_bytes",
            "received_bytes",
            "local_commits",
            "cert_deps_distance",
            "apply_window",
            "commit_window",
        ] {
            assert!(metric(node, &status(name)) > 0.0, "node {}: {name} is {}", node + 1, metric(node, &status(name)));
        }
        assert!(metric(node, &status("local_cached_downto")) >= 1.0, "node {}: local_cached_downto", node + 1);
        assert!(metric(node, "mysql_galera_evs_repl_latency_sample_size") > 0.0, "node {}", node + 1);
        let average = metric(node, "mysql_galera_evs_repl_latency_avg_seconds");
        assert!(average > 0.0 && average < 1.0, "node {}: replication latency {average} s", node + 1);
    }
}
