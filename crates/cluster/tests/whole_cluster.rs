//! Every node down at once, then back without a human: no `--wsrep-new-cluster`, each node
//! started as the packaging starts it (`--wsrep-recover`, then `--wsrep_start_position`), all
//! at once, through `Cluster::start` (what `lockstep cluster up --dir` runs). The cluster is
//! primary again with every node Synced, no node needs a state transfer (each applies the
//! rest of the order from its own log), and no acknowledged bank transfer is lost.
mod common;

use common::workload::{assert_bank_consistent, create_bank, Load};
use common::{assert_same_data, last_committed, sql, wait_for_status, wait_until_converged, TestCluster};
use lockstep_cluster::Node;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

const ACCOUNTS: u32 = 50;
const CLIENTS_PER_NODE: usize = 3;
/// Issue 11: Synced within 60 s of a majority being up.
const BACK_WITHIN: Duration = Duration::from_secs(60);

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn assert_all_synced(nodes: &[Node]) {
    for node in nodes {
        wait_for_status(
            node,
            &[
                ("wsrep_cluster_size", "3"),
                ("wsrep_cluster_status", "Primary"),
                ("wsrep_local_state_comment", "Synced"),
            ],
            BACK_WITHIN,
        );
    }
}

/// The error log since `from` (a byte offset taken before the restart).
fn log_since(node: &Node, from: usize) -> String {
    node.error_log_text().unwrap().get(from..).unwrap_or_default().to_string()
}

fn log_lengths(nodes: &[Node]) -> Vec<usize> {
    nodes.iter().map(|n| n.error_log_text().map_or(0, |t| t.len())).collect()
}

/// With Lockstep, no node asked for a state transfer after the restart: each caught up from
/// its own log. (Galera instead bootstraps nothing by itself here; this test is ours.)
fn assert_no_state_transfer(nodes: &[Node], logs_before: &[usize]) {
    for (node, &from) in nodes.iter().zip(logs_before) {
        let log = log_since(node, from);
        assert!(!log.contains("requesting state transfer"), "{} asked for a state transfer:\n{log}", node.name());
        assert!(log.contains("no state transfer needed"), "{} did not catch up by itself:\n{log}", node.name());
    }
}

/// `kill -9` of every node, one right after the other.
fn kill_every_node(test: &mut TestCluster) {
    for node in &mut test.cluster.nodes {
        node.kill().unwrap();
    }
}

/// Three nodes with bank transfers running on each, a few hundred already committed.
fn cluster_under_load(name: &str) -> (TestCluster, Load) {
    let test = TestCluster::start(name, 3);
    create_bank(&test.cluster.nodes[0], ACCOUNTS);
    wait_until_converged(&test.cluster.nodes);
    let load = Load::start(&test.cluster.nodes, CLIENTS_PER_NODE, ACCOUNTS);
    load.wait_for_progress(&[0, 1, 2], 300, BACK_WITHIN);
    (test, load)
}

/// The load goes on after the restart; every acknowledged transfer is present everywhere.
fn finish(load: Load, nodes: &[Node]) {
    load.wait_for_progress(&[0, 1, 2], 200, BACK_WITHIN);
    let report = load.stop();
    println!("{report}");
    report.assert_clean(&["node1", "node2", "node3"]);
    assert_bank_consistent(nodes, ACCOUNTS, &report);
}

#[test]
fn every_node_killed_under_load_comes_back_by_itself_with_every_acknowledged_transfer() {
    let _serial = one_at_a_time();
    let (mut test, load) = cluster_under_load("crash_all");
    kill_every_node(&mut test);
    let logs_before = log_lengths(&test.cluster.nodes);
    let restarted_at = Instant::now();
    test.cluster.start().unwrap();
    assert_all_synced(&test.cluster.nodes);
    println!("every node Synced {:.1} s after the restart began", restarted_at.elapsed().as_secs_f64());
    assert_no_state_transfer(&test.cluster.nodes, &logs_before);
    finish(load, &test.cluster.nodes);
}

/// The failure Jepsen reported for MariaDB Galera Cluster 12.1: one node killed, a second one
/// a second later while writes go on, both restarted.
#[test]
fn two_nodes_killed_one_after_the_other_under_load_rejoin_with_every_acknowledged_transfer() {
    let _serial = one_at_a_time();
    let (mut test, load) = cluster_under_load("crash_two");
    test.cluster.nodes[2].kill().unwrap();
    thread::sleep(Duration::from_secs(1));
    test.cluster.nodes[1].kill().unwrap();
    let restarted_at = Instant::now();
    test.cluster.start().unwrap();
    assert_all_synced(&test.cluster.nodes);
    println!("both nodes Synced {:.1} s after their restart began", restarted_at.elapsed().as_secs_f64());
    finish(load, &test.cluster.nodes);
}

/// `lockstep cluster down` then `lockstep cluster up`: every node back, none bootstrapped,
/// none needing a transfer, at the position it stopped at.
#[test]
fn every_node_stopped_cleanly_comes_back_without_a_transfer() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("stop_all", 3);
    sql(&test.cluster.nodes[0], "CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY)");
    for (i, node) in test.cluster.nodes.iter().enumerate() {
        sql(node, &format!("INSERT INTO s.t VALUES ({i})"));
    }
    let committed = last_committed(&test.cluster.nodes[0]);
    test.cluster.stop().unwrap();
    let safe: Vec<bool> = test.cluster.nodes.iter().map(|n| n.saved_state().unwrap().safe_to_bootstrap).collect();
    assert_eq!(safe, [true, false, false], "only the last node to leave may bootstrap");
    let logs_before = log_lengths(&test.cluster.nodes);
    test.cluster.start().unwrap();
    assert_all_synced(&test.cluster.nodes);
    assert_no_state_transfer(&test.cluster.nodes, &logs_before);
    for node in &test.cluster.nodes {
        assert!(last_committed(node) > committed, "{}: a view after the restart", node.name());
        assert_eq!(sql(node, "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*) FROM s.t").trim(), "3");
    }
    assert_same_data(&test.cluster.nodes, "s");
}

/// Every node's writeset cache (1 MiB) was purged well past the group's first view before
/// every node is killed: each restores the group's certification state from its checkpoint
/// and still catches up by itself.
#[test]
fn every_node_killed_after_its_cache_was_purged_comes_back_from_its_certification_checkpoint() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::create("crash_purged", 3, "gcache.size=1M");
    test.cluster.start().unwrap();
    let nodes = &test.cluster.nodes;
    sql(&nodes[0], "CREATE DATABASE p; CREATE TABLE p.t (id INT PRIMARY KEY, filler LONGTEXT NOT NULL)");
    for id in 0..40 {
        sql(&nodes[id % 3], &format!("INSERT INTO p.t VALUES ({id}, REPEAT('x', 100000))"));
    }
    sql(&nodes[1], "UPDATE p.t SET filler = 'short' WHERE id < 10");
    kill_every_node(&mut test);
    let logs_before = log_lengths(&test.cluster.nodes);
    test.cluster.start().unwrap();
    let nodes = &test.cluster.nodes;
    assert_all_synced(nodes);
    assert_no_state_transfer(nodes, &logs_before);
    for (node, &from) in nodes.iter().zip(&logs_before) {
        let log = log_since(node, from);
        assert!(
            log.contains("restored from this node's checkpoint"),
            "{} did not use its checkpoint:\n{log}",
            node.name()
        );
    }
    let read = "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*), SUM(LENGTH(filler)) FROM p.t";
    for node in nodes {
        assert_eq!(sql(node, read).trim(), "40\t3000050", "{}", node.name());
    }
    assert_same_data(nodes, "p");
}

/// Every node killed, then started one at a time in another order, as an operator or a
/// supervisor might: the first one alone waits (no majority, not ready), the second makes a
/// majority and both are Synced, the third joins; nothing acknowledged is lost.
#[test]
fn every_node_killed_then_started_one_at_a_time_comes_back_once_a_majority_is_up() {
    let _serial = one_at_a_time();
    let (mut test, load) = cluster_under_load("crash_order");
    kill_every_node(&mut test);
    let positions: Vec<_> = test.cluster.nodes.iter().map(|n| n.restart_position().unwrap()).collect();
    let nodes = &mut test.cluster.nodes;
    nodes[2].launch(false, positions[2].as_ref()).unwrap();
    thread::sleep(Duration::from_secs(5));
    let alone = nodes[2].status().map(|s| s.get("wsrep_ready").map(str::to_string));
    assert!(!matches!(alone, Ok(Some(ref ready)) if ready == "ON"), "node3 alone must not be ready: {alone:?}");
    let majority_at = Instant::now();
    nodes[0].launch(false, positions[0].as_ref()).unwrap();
    nodes[2].wait_ready().unwrap();
    nodes[0].wait_ready().unwrap();
    println!("node3 and node1 ready {:.1} s after node1 started", majority_at.elapsed().as_secs_f64());
    assert!(majority_at.elapsed() < BACK_WITHIN);
    nodes[1].launch(false, positions[1].as_ref()).unwrap();
    nodes[1].wait_ready().unwrap();
    assert_all_synced(&test.cluster.nodes);
    finish(load, &test.cluster.nodes);
}

/// Nodes 1 and 2 killed; node 3, left alone and non-primary, reconnects
/// (`wsrep_cluster_address` set again), so its group member starts again from its cache and
/// has applied none of it when the operator tells it `pc.bootstrap=1`. It forms the primary
/// component at its own data's position, takes a write, and nodes 1 and 2 start and join
/// with every row. Before, such a member forced from its cache's boundary, below its node's
/// data, or not at all while that boundary's view did not hold it
/// (docs/design/group-forced-primary.md, "A restarted member forces from what its
/// application holds").
#[test]
fn a_reconnected_node_told_to_bootstrap_forms_the_primary_component_at_its_own_position() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("reconnect_bootstrap", 3);
    sql(&test.cluster.nodes[0], "CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY)");
    for id in 1..=50 {
        sql(&test.cluster.nodes[id % 3], &format!("INSERT INTO r.t VALUES ({id})"));
    }
    wait_until_converged(&test.cluster.nodes);
    let nodes = &mut test.cluster.nodes;
    nodes[0].kill().unwrap();
    nodes[1].kill().unwrap();
    wait_for_status(&nodes[2], &[("wsrep_cluster_status", "non-Primary")], BACK_WITHIN);
    let position = last_committed(&nodes[2]);
    let address = nodes[2].config.cluster_address.clone();
    // Returns once the group member has started again: its server sees no view yet.
    sql(&nodes[2], &format!("SET GLOBAL wsrep_cluster_address = '{address}'"));
    let log_before = log_lengths(std::slice::from_ref(&nodes[2]))[0];
    let told_at = Instant::now();
    sql(&nodes[2], "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=1'");
    wait_for_status(&nodes[2], &[("wsrep_cluster_status", "Primary"), ("wsrep_ready", "ON")], BACK_WITHIN);
    println!("node3 primary {:.1} s after pc.bootstrap", told_at.elapsed().as_secs_f64());
    let log = log_since(&nodes[2], log_before);
    assert!(!log.contains("ahead of the group"), "node3:\n{log}");
    assert!(last_committed(&nodes[2]) > position, "node3 at {}, its data at {position}", last_committed(&nodes[2]));
    sql(&nodes[2], "INSERT INTO r.t VALUES (51)");
    let positions: Vec<_> = nodes.iter().take(2).map(|n| n.restart_position().unwrap()).collect();
    for (node, position) in nodes.iter_mut().zip(&positions) {
        node.launch(false, position.as_ref()).unwrap();
    }
    for node in nodes.iter_mut().take(2) {
        node.wait_ready().unwrap();
    }
    assert_all_synced(&test.cluster.nodes);
    assert_same_data(&test.cluster.nodes, "r");
    assert_eq!(sql(&test.cluster.nodes[0], "SELECT COUNT(*) FROM r.t").trim(), "51");
}

/// The cluster stopped node by node, the last one ahead of the other; the other one is then
/// bootstrapped (its `safe_to_bootstrap` forced, as an operator would), and the last one is
/// started next to it. Restarted alone on its old group, the last one always hears the later
/// bootstrap at its seed before its own cache counts, joins it as a new member, and, its data
/// being ahead of that cluster's, is refused, keeping its position; the bootstrapped node
/// goes on (docs/design/group-bootstrap-id.md).
#[test]
fn a_node_ahead_of_a_later_bootstrap_is_refused_and_keeps_its_position() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("behind_bootstrap", 2);
    sql(&test.cluster.nodes[0], "CREATE DATABASE b; CREATE TABLE b.t (id INT PRIMARY KEY)");
    let nodes = &mut test.cluster.nodes;
    nodes[1].stop().unwrap();
    sql(&nodes[0], "INSERT INTO b.t VALUES (1), (2)");
    let ahead = last_committed(&nodes[0]);
    nodes[0].stop().unwrap();
    let saved = nodes[0].saved_state().unwrap();
    assert!(saved.safe_to_bootstrap && saved.position.seqno == ahead, "{saved:?}");

    let grastate = nodes[1].saved_state_file();
    let forced = std::fs::read_to_string(&grastate).unwrap().replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1");
    std::fs::write(&grastate, forced).unwrap();
    nodes[1].start(true, None).unwrap();
    let refused = nodes[0].start(false, None).expect_err("a node ahead of the cluster must not join it");
    println!("{refused}");
    let log = nodes[0].error_log_text().unwrap();
    assert!(log.contains("ahead of the group"), "{log}");
    let kept = nodes[0].saved_state().unwrap();
    assert!(kept.safe_to_bootstrap && kept.position.seqno == ahead, "{kept:?}");
    wait_for_status(&nodes[1], &[("wsrep_cluster_size", "1"), ("wsrep_cluster_status", "Primary")], BACK_WITHIN);
    assert_eq!(sql(&nodes[1], "SELECT COUNT(*) FROM b.t").trim(), "0");
}

/// Node 2 stopped cleanly (it left: the voters are nodes 1 and 3), then node 3 killed: node 1,
/// still running, is alone of two voters and not primary. `cluster up` (`Cluster::start`)
/// starts both stopped nodes at once: node 3 makes the majority again and node 2 joins. One
/// at a time, node 2 came first and waited for a primary component that only node 3 could
/// make, until it timed out, and node 3 was never started.
#[test]
fn stopped_nodes_of_a_cluster_with_a_node_left_running_start_at_once() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("partial_restart", 3);
    sql(&test.cluster.nodes[0], "CREATE DATABASE p; CREATE TABLE p.t (id INT PRIMARY KEY)");
    let nodes = &mut test.cluster.nodes;
    nodes[1].stop().unwrap();
    sql(&nodes[0], "INSERT INTO p.t VALUES (1)");
    nodes[2].kill().unwrap();
    wait_for_status(&nodes[0], &[("wsrep_cluster_status", "non-Primary")], BACK_WITHIN);
    let started = Instant::now();
    test.cluster.start().unwrap();
    println!("every node ready {:.1} s after `cluster up`", started.elapsed().as_secs_f64());
    assert_all_synced(&test.cluster.nodes);
    for node in &test.cluster.nodes {
        assert_eq!(sql(node, "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*) FROM p.t").trim(), "1");
    }
}
