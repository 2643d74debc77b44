//! `lockstep arbitrator` with real servers: two data nodes and an arbitrator keep a primary
//! component when either data node dies (issue 14), and the arbitrator never serves data.
#[path = "../../cluster/tests/common/mod.rs"]
mod common;

use common::{sql, status_var, wait_for_status, wait_until_converged, TestCluster};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn two_nodes_and_an_arbitrator_survive_the_death_of_either_node() {
    let program = PathBuf::from(env!("CARGO_BIN_EXE_lockstep"));
    let mut test = TestCluster::create_with("arbitrator", 2, "", Some(program));
    test.cluster.start().unwrap_or_else(|e| panic!("starting the cluster failed: {e}"));
    for node in &test.cluster.nodes {
        wait_for_status(node, &[("wsrep_cluster_size", "3"), ("wsrep_cluster_status", "Primary")], TIMEOUT);
    }
    sql(&test.cluster.nodes[0], "CREATE DATABASE arb; CREATE TABLE arb.t (id INT PRIMARY KEY, node VARCHAR(8))");

    for (dies, survives) in [(1, 0), (0, 1)] {
        test.cluster.nodes[dies].kill().unwrap();
        let killed_at = Instant::now();
        let survivor = &test.cluster.nodes[survives];
        let survivor_name = survivor.name().to_string();
        // With the arbitrator the survivor and it are a majority: the survivor's first write
        // commits at once if it led, or waits for the election if the dead node led (node 1,
        // the bootstrapper), as Galera's waits out its suspect timeout; it never fails.
        let id = 10 + dies;
        sql(survivor, &format!("INSERT INTO arb.t VALUES ({id}, '{survivor_name}')"));
        println!("{survivor_name} committed {:.1} s after node{} died", killed_at.elapsed().as_secs_f64(), dies + 1);
        wait_for_status(survivor, &[("wsrep_cluster_size", "2"), ("wsrep_cluster_status", "Primary")], TIMEOUT);
        assert_eq!(status_var(survivor, "wsrep_local_state_comment"), "Synced");
        println!("{} alone with the arbitrator after {:.1} s", survivor.name(), killed_at.elapsed().as_secs_f64());

        // The dead node comes back from the survivor (never from the arbitrator: no data).
        test.cluster.start().unwrap_or_else(|e| panic!("restarting node{} failed: {e}", dies + 1));
        for node in &test.cluster.nodes {
            wait_for_status(node, &[("wsrep_cluster_size", "3"), ("wsrep_cluster_status", "Primary")], TIMEOUT);
        }
        wait_until_converged(&test.cluster.nodes);
        let back = &test.cluster.nodes[dies];
        assert_eq!(sql(back, &format!("SELECT node FROM arb.t WHERE id = {id}")).trim(), survivor_name);
        let log = back.error_log_text().unwrap();
        assert!(!log.contains("selected garb as donor"), "{} took state from the arbitrator:\n{log}", back.name());
    }

    // Without the arbitrator, one node of two is no majority: the survivor stops taking writes.
    test.cluster.arbitrator.as_mut().unwrap().stop().unwrap();
    for node in &test.cluster.nodes {
        wait_for_status(node, &[("wsrep_cluster_size", "2")], TIMEOUT);
    }
    test.cluster.nodes[1].kill().unwrap();
    wait_for_status(&test.cluster.nodes[0], &[("wsrep_cluster_status", "non-Primary")], TIMEOUT);
}
