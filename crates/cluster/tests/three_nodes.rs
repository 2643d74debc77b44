//! Three nodes on loopback: replication, conflicts between nodes, concurrent load, DDL under
//! load, replay of a transaction aborted while ordered, and a node crash under load. They pass against Galera 4 as well:
//!
//!     LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so \
//!         cargo test -p lockstep-cluster --release --test three_nodes
//!
//! `--nocapture` shows the workload reports (commits and conflicts per node);
//! `LOCKSTEP_LOAD_SECONDS` sets the length of the bank test's load (default 60).
mod common;

use common::session::{Session, DEADLOCK};
use common::workload::{assert_bank_consistent, create_bank, load_duration, Load};
use common::{
    assert_same_data, last_committed, sql, status_var, table_fingerprints, wait_for_status, wait_until,
    wait_until_converged, TestCluster,
};
use lockstep_cluster::Node;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Accounts of the bank workload: few enough for transfers on different nodes to collide.
const ACCOUNTS: u32 = 50;
const CLIENTS_PER_NODE: usize = 4;

/// Three-node clusters under load share the machine's cores: one test at a time, so that
/// their time bounds measure the provider rather than each other.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn assert_all_synced(nodes: &[Node], size: &str) {
    for node in nodes {
        wait_for_status(
            node,
            &[
                ("wsrep_cluster_size", size),
                ("wsrep_cluster_status", "Primary"),
                ("wsrep_local_state_comment", "Synced"),
            ],
            Duration::from_secs(60),
        );
    }
}

/// Sum of a node's `wsrep_local_cert_failures` and `wsrep_local_bf_aborts`: local transactions
/// that lost a conflict to a replicated one (at certification, or aborted while executing).
fn lost_conflicts(node: &Node) -> u64 {
    ["wsrep_local_cert_failures", "wsrep_local_bf_aborts"]
        .iter()
        .map(|name| status_var(node, name).parse::<u64>().unwrap_or_else(|e| panic!("{name}: {e}")))
        .sum()
}

fn print_conflict_counters(nodes: &[Node]) {
    for node in nodes {
        println!(
            "  {}: wsrep_local_cert_failures={} wsrep_local_bf_aborts={} wsrep_last_committed={}",
            node.name(),
            status_var(node, "wsrep_local_cert_failures"),
            status_var(node, "wsrep_local_bf_aborts"),
            status_var(node, "wsrep_last_committed")
        );
    }
}

#[test]
fn writes_on_any_node_are_read_on_every_node() {
    let _serial = one_at_a_time();
    let test = TestCluster::start("three", 3);
    let nodes = test.nodes();
    assert_all_synced(nodes, "3");
    sql(&nodes[1], "CREATE DATABASE m; CREATE TABLE m.t (id INT PRIMARY KEY, origin VARCHAR(8))");
    for (i, node) in nodes.iter().enumerate() {
        sql(node, &format!("INSERT INTO m.t VALUES ({i}, '{}')", node.name()));
    }
    for node in nodes {
        let rows = sql(node, "SET SESSION wsrep_sync_wait = 15; SELECT GROUP_CONCAT(origin ORDER BY id) FROM m.t");
        assert_eq!(rows.trim(), "node1,node2,node3", "{}", node.name());
    }
    let committed = last_committed(&nodes[0]);
    for node in nodes {
        assert_eq!(last_committed(node), committed, "{}", node.name());
    }
}

#[test]
fn restarted_node_catches_up_in_the_same_history() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("rejoin", 3);
    sql(&test.cluster.nodes[0], "CREATE DATABASE j; CREATE TABLE j.t (id INT PRIMARY KEY)");
    test.cluster.nodes[2].stop().unwrap();
    sql(&test.cluster.nodes[0], "INSERT INTO j.t VALUES (1), (2)");
    let uuid = status_var(&test.cluster.nodes[0], "wsrep_local_state_uuid");
    test.cluster.start().unwrap();
    let rejoined = &test.cluster.nodes[2];
    assert_eq!(status_var(rejoined, "wsrep_local_state_uuid"), uuid);
    assert_eq!(status_var(rejoined, "wsrep_cluster_size"), "3");
    assert_eq!(sql(rejoined, "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*) FROM j.t").trim(), "2");
    assert_eq!(last_committed(rejoined), last_committed(&test.cluster.nodes[0]));
}

/// Node 3 stops; while it is away node 1 (whose writeset cache is only 1 MiB) writes more
/// than its cache holds. Node 3 restarts asking node 2 (`wsrep_sst_donor`, 128 MiB cache) for
/// state: node 2 sends the missing writesets to node 3's `ist.recv_addr` (an incremental
/// transfer, no snapshot) and node 3 ends with the same data and position.
#[test]
fn restarted_node_gets_its_gap_by_incremental_transfer_on_ist_recv_addr() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::create("ist", 3, "");
    let nodes = &mut test.cluster.nodes;
    nodes[0].config.provider_options = "gcache.size=1M".into();
    nodes[0].write_config().unwrap();
    let node3_config = nodes[2].config_file();
    let mut config = std::fs::read_to_string(&node3_config).unwrap();
    config = config.replacen("[mariadbd]\n", "[mariadbd]\nwsrep_sst_donor = node2\n", 1);
    std::fs::write(&node3_config, config).unwrap();
    test.cluster.start().unwrap();
    let nodes = &mut test.cluster.nodes;
    sql(&nodes[0], "CREATE DATABASE g; CREATE TABLE g.t (id INT PRIMARY KEY, filler LONGTEXT NOT NULL)");
    nodes[2].stop().unwrap();
    let stopped_at = nodes[2].saved_state().unwrap().position.seqno;
    for id in 0..40 {
        sql(&nodes[0], &format!("INSERT INTO g.t VALUES ({id}, REPEAT('x', 100000))"));
    }
    sql(&nodes[1], "UPDATE g.t SET filler = 'short' WHERE id < 10");
    nodes[2].start(false, None).unwrap();
    assert_all_synced(nodes, "3");
    let read = "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*), SUM(LENGTH(filler)) FROM g.t";
    assert_eq!(sql(&nodes[2], read).trim(), "40\t3000050");
    assert_eq!(last_committed(&nodes[2]), last_committed(&nodes[0]));
    assert_same_data(nodes, "g");
    if status_var(&nodes[2], "wsrep_provider_name") == "Lockstep" {
        let log = nodes[2].error_log_text().unwrap();
        let received = format!("incremental state transfer received: seqnos {}..=", stopped_at + 1);
        let line = log.lines().find(|l| l.contains(&received));
        println!("node3 stopped at seqno {stopped_at}; {}", line.unwrap_or("no incremental transfer"));
        assert!(line.is_some(), "node3 did not receive its gap incrementally:\n{log}");
        assert!(log.contains("the group no longer holds seqnos up to"), "node 1 still held node 3's gap");
        let donor_log = nodes[1].error_log_text().unwrap();
        let sent_to = format!("state transfer stream to 127.0.0.1:{} sent", nodes[2].config.ports.ist());
        assert!(donor_log.contains(&sent_to), "node2 did not send to node3's ist.recv_addr");
    }
}

/// Node 3 stops; while it is away 100 rows of 1 MB are written. Node 3 restarts asking node 2
/// first (`wsrep_sst_donor = node2,`), and node 2 is killed as soon as it starts donating (its
/// stream of the gap under way). Node 3 asks again, node 1 donates, and node 3 ends Synced
/// with every row and the same data, without a restart (docs/design/donor-left-mid-transfer.md;
/// Galera aborts node 3 here).
#[test]
fn a_donor_killed_mid_transfer_is_replaced_and_the_joiner_ends_synced() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::create("donorkill", 3, "");
    let node3_config = test.cluster.nodes[2].config_file();
    let config = std::fs::read_to_string(&node3_config).unwrap();
    let config = config.replacen("[mariadbd]\n", "[mariadbd]\nwsrep_sst_donor = node2,\n", 1);
    std::fs::write(&node3_config, config).unwrap();
    test.cluster.start().unwrap();
    let nodes = &mut test.cluster.nodes;
    write_while_node3_is_down(nodes);
    start_node3_until_node2_donates(nodes);
    nodes[1].kill().unwrap();
    let killed_at = Instant::now();
    nodes[2].wait_ready().unwrap();
    for node in [&nodes[0], &nodes[2]] {
        let synced = [("wsrep_cluster_size", "2"), ("wsrep_local_state_comment", "Synced")];
        wait_for_status(node, &synced, Duration::from_secs(120));
    }
    println!("node3 Synced {:.1} s after node2 was killed", killed_at.elapsed().as_secs_f64());
    assert_eq!(last_committed(&nodes[2]), last_committed(&nodes[0]));
    assert_node3_has_every_row(nodes, true);
}

/// Rows of 1 MB that node 1 writes while node 3 is down, for node 3 to receive.
const DONATED_ROWS: u64 = 100;

fn write_while_node3_is_down(nodes: &mut [Node]) {
    sql(&nodes[0], "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, filler LONGTEXT NOT NULL)");
    nodes[2].stop().unwrap();
    for id in 0..DONATED_ROWS {
        sql(&nodes[0], &format!("INSERT INTO d.t VALUES ({id}, REPEAT('x', 1000000))"));
    }
}

/// Starts node 3; returns, with a deadline 120 s from the start, once node 2 says it donates.
fn start_node3_until_node2_donates(nodes: &mut [Node]) -> Instant {
    let donations = |node: &Node| node.error_log_text().unwrap().matches("donating state").count();
    let donated_before = donations(&nodes[1]);
    nodes[2].launch(false, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while donations(&nodes[1]) == donated_before {
        assert!(Instant::now() < deadline, "node2 did not start donating to node3 within 120 s");
        thread::sleep(Duration::from_millis(20));
    }
    deadline
}

/// Node 3 has every row node 1 wrote, the same data, and (`asked_again`, Lockstep only) said
/// it asked another member when its donor left.
fn assert_node3_has_every_row(nodes: &[Node], asked_again: bool) {
    let read = "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*), SUM(LENGTH(filler)) FROM d.t";
    assert_eq!(sql(&nodes[2], read).trim(), format!("{DONATED_ROWS}\t{}", DONATED_ROWS * 1_000_000));
    assert_eq!(table_fingerprints(&nodes[2], "d"), table_fingerprints(&nodes[0], "d"));
    if asked_again && status_var(&nodes[2], "wsrep_provider_name") == "Lockstep" {
        let log = nodes[2].error_log_text().unwrap();
        let asked: Vec<&str> = log.lines().filter(|l| l.contains("left the group before")).collect();
        println!("{}", asked.join("\n"));
        assert!(!asked.is_empty(), "node3 never asked another donor (node2 finished first?):\n{log}");
    }
}

/// A full state transfer (SST) whose donor dies mid-way, as a crashed machine does (the
/// server and its SST script killed together): node 3, its data directory wiped, asks `node2,`
/// first; node 2's process group is killed once 20 MB of the 100 MB snapshot have reached
/// node 3. With `rsync` the joiner's script still waits (its daemon takes the next donor's
/// rsync), with `mysqldump` the joiner runs none (the next donor's dump connects to its server
/// again), and with `mariabackup` the joiner's script, which takes one stream only, fails with
/// the stream and the server starts a new one once the group has dropped node 2
/// (docs/design/donor-left-mid-transfer.md). Each time node 3 ends Synced from node 1 with the
/// same data, without a restart. Galera aborts node 3 instead, leaving node 1 a minority of
/// three: under Galera, node 2 and node 3 started again as the packaging does bring the
/// cluster back. Nothing hangs, and no acknowledged row is lost.
fn a_donor_killed_mid_snapshot(method: &str) {
    let _serial = one_at_a_time();
    let mut test = TestCluster::create(&format!("sstkill-{method}"), 3, "");
    let with_method = |node: &Node, donor: &str| {
        let path = node.config_file();
        let config = std::fs::read_to_string(&path).unwrap();
        let config = config.replacen("wsrep_sst_method = rsync\n", &format!("wsrep_sst_method = {method}\n"), 1);
        let mut config = config.replacen("[mariadbd]\n", &format!("[mariadbd]\nwsrep_sst_auth = root:\n{donor}"), 1);
        if method == "mysqldump" {
            // The donor's dump connects to the joiner's server: its client port.
            let port = config.lines().find_map(|l| l.strip_prefix("port = ")).unwrap().to_owned();
            let receive = config.lines().find(|l| l.starts_with("wsrep_sst_receive_address")).unwrap().to_owned();
            config = config.replacen(&receive, &format!("wsrep_sst_receive_address = 127.0.0.1:{port}"), 1);
        }
        std::fs::write(&path, config).unwrap();
    };
    for (i, node) in test.cluster.nodes.iter().enumerate() {
        with_method(node, if i == 2 { "wsrep_sst_donor = node2,\n" } else { "" });
    }
    test.cluster.start().unwrap();
    let nodes = &mut test.cluster.nodes;
    write_while_node3_is_down(nodes);
    // A new node: nothing to start from but a snapshot.
    std::fs::remove_dir_all(nodes[2].data_dir()).unwrap();
    nodes[2].initialize().unwrap();
    with_method(&nodes[2], "wsrep_sst_donor = node2,\n");
    let deadline = start_node3_until_node2_donates(nodes);
    // Mid-way: a fifth of the table has reached the joiner (under `.sst/` for mariabackup).
    while largest_file_named(&nodes[2].data_dir(), "t.ibd") < 20_000_000 {
        assert!(Instant::now() < deadline, "node3 received under 20 MB of the table within 120 s");
        thread::sleep(Duration::from_millis(5));
    }
    // The server and its SST script, as a machine that goes down takes both.
    let pid = std::fs::read_to_string(nodes[1].pid_file()).unwrap().trim().to_owned();
    let killed = std::process::Command::new("kill").args(["-9", "--", &format!("-{pid}")]).status().unwrap();
    assert!(killed.success(), "kill -9 of node2's process group {pid}");
    nodes[1].kill().unwrap();
    let killed_at = Instant::now();
    let lockstep = status_var(&nodes[0], "wsrep_provider_name") == "Lockstep";
    let mut size = "2";
    if let Err(e) = nodes[2].wait_ready() {
        assert!(!lockstep, "node3 did not join after its donor died: {e}");
        let log = nodes[2].error_log_text().unwrap();
        assert!(log.to_lowercase().contains("need to abort"), "node3 ended without saying why:\n{log}");
        println!("{method}: node3 stopped {:.1} s after node2 was killed", killed_at.elapsed().as_secs_f64());
        // Node 1 alone is a minority of three. Both others started again as the packaging
        // does after a crash: the majority is back, node 3 joins.
        let position = nodes[1].restart_position().unwrap();
        nodes[1].start(false, position.as_ref()).unwrap();
        nodes[2].start(false, None).unwrap();
        size = "3";
    }
    for node in nodes.iter().filter(|n| size == "3" || n.name() != "node2") {
        let synced = [("wsrep_cluster_size", size), ("wsrep_local_state_comment", "Synced")];
        wait_for_status(node, &synced, Duration::from_secs(120));
    }
    println!("{method}: node3 Synced {:.1} s after node2 was killed", killed_at.elapsed().as_secs_f64());
    assert_node3_has_every_row(nodes, true);
    if lockstep && method == "mariabackup" {
        let log = nodes[2].error_log_text().unwrap();
        let new_script = "asking the server to start its state transfer script again";
        assert!(log.contains(new_script), "node3 joined without a new script (its stream never broke?):\n{log}");
        // What an operator reads about it: the warnings and errors of the join.
        let loud = log.lines().filter(|l| l.contains("[Warning]") || l.contains("[ERROR]"));
        println!("node3's warnings and errors:\n{}", loud.collect::<Vec<_>>().join("\n"));
    }
}

/// The size of the biggest file called `name` under `dir`, which may change while it is read.
fn largest_file_named(dir: &std::path::Path, name: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => largest_file_named(&entry.path(), name),
            Ok(m) if entry.file_name() == name => m.len(),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn a_donor_killed_mid_rsync_snapshot_is_replaced_and_the_joiner_ends_synced() {
    a_donor_killed_mid_snapshot("rsync");
}

#[test]
fn a_donor_killed_mid_mysqldump_snapshot_is_replaced_and_the_joiner_ends_synced() {
    a_donor_killed_mid_snapshot("mysqldump");
}

#[test]
fn a_donor_killed_mid_mariabackup_snapshot_is_replaced_through_a_new_script_and_the_joiner_ends_synced() {
    a_donor_killed_mid_snapshot("mariabackup");
}

/// Two nodes update the same row in open transactions; the first COMMIT wins and the second
/// gets ERROR 1213, whether the replicated winner aborted it already or certification rejects
/// it at COMMIT. Every pair of nodes plays both roles; updates of different rows both commit.
#[test]
fn concurrent_updates_of_one_row_commit_once_and_the_other_gets_a_deadlock() {
    let _serial = one_at_a_time();
    let test = TestCluster::start("conflict", 3);
    let nodes = test.nodes();
    sql(
        &nodes[0],
        "CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY, v INT NOT NULL, writer VARCHAR(8) NOT NULL);
         INSERT INTO c.t VALUES (1, 0, ''), (2, 0, '')",
    );
    wait_until_converged(nodes);
    let pairs = [(0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2)];
    for (round, &(first, second)) in pairs.iter().enumerate() {
        let (winner, loser) = (&nodes[first], &nodes[second]);
        let (lost_before, winner_lost_before) = (lost_conflicts(loser), lost_conflicts(winner));
        let mut winner_session = Session::open(winner);
        let mut loser_session = Session::open(loser);
        let (winner_value, loser_value) = (round * 10 + 1, round * 10 + 2);
        winner_session
            .must(&format!("BEGIN; UPDATE c.t SET v = {winner_value}, writer = '{}' WHERE id = 1", winner.name()));
        loser_session
            .must(&format!("BEGIN; UPDATE c.t SET v = {loser_value}, writer = '{}' WHERE id = 1", loser.name()));
        winner_session.must("COMMIT");
        match loser_session.exec("COMMIT") {
            Err(e) if e.is(DEADLOCK) => {}
            Err(e) => panic!("round {round}: {} COMMIT failed with {e}, expected ERROR {DEADLOCK}", loser.name()),
            Ok(_) => panic!("round {round}: both {} and {} committed an update of row 1", winner.name(), loser.name()),
        }
        assert!(!loser_session.is_connected(), "the client ends its session on an error");
        let expected = format!("{winner_value}\t{}", winner.name());
        let read = "SET SESSION wsrep_sync_wait = 15; SELECT v, writer FROM c.t WHERE id = 1";
        for node in nodes {
            assert_eq!(sql(node, read).trim(), expected, "round {round}: row 1 on {}", node.name());
        }
        // The loser's client connects again and carries on.
        assert_eq!(loser_session.must(read).trim(), expected);
        // Galera counts a BF abort and a certification failure both when the loser's COMMIT
        // races the abort; the winner counts nothing.
        let lost = lost_conflicts(loser) - lost_before;
        assert!((1..=2).contains(&lost), "round {round}: {} counts {lost} lost conflicts", loser.name());
        assert_eq!(lost_conflicts(winner), winner_lost_before, "round {round}: {} lost nothing", winner.name());
    }

    // No conflict without a common row: both commit.
    let mut a = Session::open(&nodes[0]);
    let mut b = Session::open(&nodes[1]);
    a.must("BEGIN; UPDATE c.t SET v = v + 1 WHERE id = 1");
    b.must("BEGIN; UPDATE c.t SET v = v + 1 WHERE id = 2");
    a.must("COMMIT");
    b.must("COMMIT");
    assert_eq!(sql(&nodes[2], "SET SESSION wsrep_sync_wait = 15; SELECT SUM(v) FROM c.t").trim(), "53");
    assert_same_data(nodes, "c");
    print_conflict_counters(nodes);
}

/// A transaction on node 1 locks a row that it does not write (`SELECT ... FOR UPDATE`) and
/// writes another; node 2 keeps updating the locked row. When node 2's writeset is ordered
/// first and reaches node 1 while the local transaction is being ordered, its applier aborts
/// the local one, which has no conflicting key, passes certification and is replayed: its
/// client sees a commit. Every acknowledged commit is in the data of every node.
#[test]
fn local_transaction_aborted_while_ordered_is_replayed_and_commits() {
    const ROUNDS: u64 = 1000;
    let _serial = one_at_a_time();
    let test = TestCluster::start("replay", 3);
    let nodes = test.nodes();
    sql(
        &nodes[0],
        "CREATE DATABASE r; CREATE TABLE r.locked (id INT PRIMARY KEY, v BIGINT NOT NULL);
         CREATE TABLE r.written (id INT PRIMARY KEY, v BIGINT NOT NULL);
         INSERT INTO r.locked VALUES (1, 0); INSERT INTO r.written VALUES (1, 0)",
    );
    wait_until_converged(nodes);
    let replays_before: u64 = status_var(&nodes[0], "wsrep_local_replays").parse().unwrap();
    let (committed, aborted) = thread::scope(|scope| {
        let updates = scope.spawn(|| {
            let mut session = Session::open(&nodes[1]);
            for _ in 0..ROUNDS {
                session.must("UPDATE r.locked SET v = v + 1 WHERE id = 1");
            }
        });
        let mut session = Session::open(&nodes[0]);
        let (mut committed, mut aborted) = (0u64, 0u64);
        for _ in 0..ROUNDS {
            let batch = "START TRANSACTION; SELECT v FROM r.locked WHERE id = 1 FOR UPDATE;
                         UPDATE r.written SET v = v + 1 WHERE id = 1; COMMIT";
            match session.exec(batch) {
                Ok(_) => committed += 1,
                // Aborted while still executing: no replay is possible then.
                Err(e) if e.is(DEADLOCK) => aborted += 1,
                Err(e) => panic!("node1: {e}"),
            }
        }
        updates.join().expect("node2's updates");
        (committed, aborted)
    });
    let replays = status_var(&nodes[0], "wsrep_local_replays").parse::<u64>().unwrap() - replays_before;
    println!("node1: {committed} committed, {aborted} aborted while executing, {replays} replayed");
    print_conflict_counters(nodes);
    assert!(replays > 0, "no local transaction was replayed in {ROUNDS} rounds");
    let expected = format!("{ROUNDS}\t{committed}");
    let read = "SET SESSION wsrep_sync_wait = 15; SELECT (SELECT v FROM r.locked), (SELECT v FROM r.written)";
    for node in nodes {
        assert_eq!(sql(node, read).trim(), expected, "{}: locked and written counters", node.name());
    }
    assert_same_data(nodes, "r");
}

/// Transfers on all three nodes at once for `LOCKSTEP_LOAD_SECONDS` (default 60): conflicts are
/// expected and retried; the total stays constant, every acknowledged transfer is in the history
/// and every node ends with the same data.
#[test]
fn bank_transfers_on_all_nodes_keep_the_total_and_the_same_data() {
    let duration = load_duration(60);
    let _serial = one_at_a_time();
    let test = TestCluster::start("bank", 3);
    let nodes = test.nodes();
    create_bank(&nodes[0], ACCOUNTS);
    wait_until_converged(nodes);
    let load = Load::start(nodes, CLIENTS_PER_NODE, ACCOUNTS);
    thread::sleep(duration);
    let report = load.stop();
    println!("{report}");
    print_conflict_counters(nodes);
    report.assert_clean(&[]);
    assert_bank_consistent(nodes, ACCOUNTS, &report);
    assert_all_synced(nodes, "3");
}

/// Schema changes on node 1 while clients write on every node: DDL is ordered with the
/// transfers, and afterwards every node has the same schema and data.
#[test]
fn ddl_under_load_leaves_the_same_schema_and_data_everywhere() {
    let _serial = one_at_a_time();
    let test = TestCluster::start("ddl", 3);
    let nodes = test.nodes();
    create_bank(&nodes[0], ACCOUNTS);
    wait_until_converged(nodes);
    let load = Load::start(nodes, CLIENTS_PER_NODE, ACCOUNTS);
    let every_node = [0, 1, 2];
    let progress_timeout = Duration::from_secs(60);
    // A few thousand history rows for the rebuilds below to copy.
    load.wait_for_progress(&every_node, 500, progress_timeout);
    for ddl in [
        "ALTER TABLE bank.accounts ADD COLUMN note VARCHAR(32) NOT NULL DEFAULT 'none'",
        "CREATE INDEX by_target ON bank.history (to_id)",
        "CREATE TABLE bank.audit (id INT PRIMARY KEY AUTO_INCREMENT, label VARCHAR(32) NOT NULL)",
        "INSERT INTO bank.audit (label) VALUES ('after create'), ('second')",
        // A full rebuild of the table the transfers append to.
        "ALTER TABLE bank.history ADD COLUMN memo VARCHAR(16) NULL, FORCE",
        "ALTER TABLE bank.accounts DROP COLUMN note, ADD COLUMN flags INT NOT NULL DEFAULT 0",
        "DROP INDEX by_target ON bank.history",
        "CREATE INDEX by_source ON bank.history (from_id, amount)",
    ] {
        let started = Instant::now();
        sql(&nodes[0], ddl);
        println!("{:>6.2} s  {ddl}", started.elapsed().as_secs_f64());
        load.wait_for_progress(&every_node, 200, progress_timeout);
    }
    let report = load.stop();
    println!("{report}");
    print_conflict_counters(nodes);
    report.assert_clean(&[]);
    assert_bank_consistent(nodes, ACCOUNTS, &report);
    let node3 = &nodes[2];
    let columns = sql(node3, "SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME IN ('accounts', 'history') GROUP BY TABLE_NAME ORDER BY TABLE_NAME");
    assert_eq!(columns.trim(), "id,balance,flags\nid,from_id,to_id,amount,node,memo");
    let indexes = sql(node3, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME = 'history' ORDER BY INDEX_NAME");
    assert_eq!(indexes.trim(), "by_source\nPRIMARY");
    assert_eq!(sql(node3, "SELECT COUNT(*) FROM bank.audit").trim(), "2");
    assert_all_synced(nodes, "3");
}

/// `kill -9` of node 3 under load: nodes 1 and 2 stay primary (size 2) and keep committing;
/// node 3 restarts from the position `--wsrep-recover` finds in InnoDB, rejoins (size 3,
/// Synced), takes load again, and every node ends with the same data.
#[test]
fn killed_node_leaves_a_primary_pair_and_rejoins_after_recovery() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("kill", 3);
    create_bank(&test.cluster.nodes[0], ACCOUNTS);
    wait_until_converged(&test.cluster.nodes);
    let uuid = status_var(&test.cluster.nodes[0], "wsrep_local_state_uuid");
    let load = Load::start(&test.cluster.nodes, CLIENTS_PER_NODE, ACCOUNTS);
    let timeout = Duration::from_secs(60);
    load.wait_for_progress(&[0, 1, 2], 300, timeout);

    test.cluster.nodes[2].kill().unwrap();
    let killed_at = Instant::now();
    for survivor in &test.cluster.nodes[..2] {
        wait_for_status(survivor, &[("wsrep_cluster_size", "2"), ("wsrep_cluster_status", "Primary")], timeout);
    }
    println!("survivors at size 2 after {:.1} s", killed_at.elapsed().as_secs_f64());
    load.wait_for_progress(&[0, 1], 500, timeout);
    for survivor in &test.cluster.nodes[..2] {
        assert_eq!(status_var(survivor, "wsrep_cluster_status"), "Primary", "{}", survivor.name());
        assert_eq!(status_var(survivor, "wsrep_local_state_comment"), "Synced", "{}", survivor.name());
    }
    println!("survivors committing; restarting node3 {:.1} s after the kill", killed_at.elapsed().as_secs_f64());

    let node3 = &mut test.cluster.nodes[2];
    // A crash leaves seqno -1 in grastate.dat: the harness recovers the position from InnoDB.
    assert_eq!(node3.saved_state().unwrap().position.seqno, -1);
    let recovered = node3.restart_position().unwrap().expect("a crashed node needs --wsrep-recover");
    assert_eq!(recovered.uuid.to_string(), uuid, "recovered history");
    assert!(recovered.seqno > 0, "recovered seqno {}", recovered.seqno);
    let restarted_at = Instant::now();
    node3.start(false, Some(&recovered)).unwrap();
    assert_all_synced(&test.cluster.nodes, "3");
    println!(
        "node3 recovered at seqno {}, Synced {:.1} s after its start",
        recovered.seqno,
        restarted_at.elapsed().as_secs_f64()
    );
    load.wait_for_progress(&[0, 1, 2], 300, timeout);

    let report = load.stop();
    println!("{report}");
    let nodes = &test.cluster.nodes;
    print_conflict_counters(nodes);
    report.assert_clean(&["node3"]);
    let node3_stats = &report.per_node[2];
    assert!(node3_stats.unavailable + node3_stats.in_doubt > 0, "node3's clients never noticed the kill\n{report}");
    assert_bank_consistent(nodes, ACCOUNTS, &report);
    assert_eq!(status_var(&nodes[2], "wsrep_local_state_uuid"), uuid);
}

/// Node 3's data diverges (a row written there with replication off); a replicated insert of
/// the same key then fails to apply on node 3 alone. The members vote: nodes 1 and 2
/// committed it, so node 3 is inconsistent and leaves, saying why; nodes 1 and 2 go on as a
/// primary pair. Restarted, node 3 takes a full state transfer and has the group's data.
#[test]
fn a_node_that_alone_fails_to_apply_is_voted_out_and_the_others_go_on() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("vote", 3);
    let nodes = &test.cluster.nodes;
    sql(&nodes[0], "CREATE DATABASE v; CREATE TABLE v.t (id INT PRIMARY KEY, origin VARCHAR(8))");
    wait_until_converged(nodes);
    sql(&nodes[2], "SET SESSION wsrep_on = OFF; INSERT INTO v.t VALUES (7, 'diverged')");
    let started = Instant::now();
    sql(&nodes[0], "INSERT INTO v.t VALUES (7, 'group')");
    let timeout = Duration::from_secs(60);
    for node in &nodes[..2] {
        wait_for_status(node, &[("wsrep_cluster_size", "2"), ("wsrep_cluster_status", "Primary")], timeout);
    }
    println!("node3 voted out, nodes 1 and 2 a primary pair {:.1} s after the insert", started.elapsed().as_secs_f64());
    sql(&nodes[1], "INSERT INTO v.t VALUES (8, 'after')");
    let log = nodes[2].error_log_text().unwrap();
    let why = "Inconsistency detected: Inconsistent by consensus on";
    assert!(log.contains(why), "node3 did not say why it left:\n{log}");
    // It still shuts down cleanly (the server waits for a final view), and its saved state,
    // written at that close, forces a full transfer.
    let node3 = &mut test.cluster.nodes[2];
    node3.stop().unwrap();
    assert!(node3.saved_state().unwrap().position.uuid.is_nil(), "node3's saved state must force a full transfer");
    let restarted = Instant::now();
    test.cluster.start().unwrap();
    let nodes = &test.cluster.nodes;
    assert_all_synced(nodes, "3");
    println!("node3 back by full transfer in {:.1} s", restarted.elapsed().as_secs_f64());
    let rows = "SET SESSION wsrep_sync_wait = 15; SELECT GROUP_CONCAT(origin ORDER BY id) FROM v.t";
    for node in nodes {
        assert_eq!(sql(node, rows).trim(), "group,after", "{}", node.name());
    }
}

/// `pc.weight` as Galera's, with weights no set of one-vote voters expresses: 2,1,1,1 on four
/// nodes. When nodes 3 and 4 die together, nodes 1 and 2 hold 3 of 5 and stay primary (with
/// equal weights, 2 of 4 would not be enough). Set at runtime, the weight is in force when the
/// statement returns. Restarted, the others rejoin; weight 1 again gives the plain majority back.
#[test]
fn with_weights_2_1_1_1_the_heavier_node_and_one_other_stay_primary_when_the_other_two_die() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("weight", 4);
    let nodes = &test.cluster.nodes;
    sql(&nodes[0], "CREATE DATABASE w; CREATE TABLE w.t (id INT PRIMARY KEY, note VARCHAR(32))");
    let set_at = Instant::now();
    sql(&nodes[0], "SET GLOBAL wsrep_provider_options = 'pc.weight=2'");
    println!("pc.weight=2 in force after {:.2} s", set_at.elapsed().as_secs_f64());
    for node in nodes {
        wait_for_status(node, &[("wsrep_cluster_weight", "5")], Duration::from_secs(5));
    }
    let uuid = status_var(&nodes[0], "wsrep_local_state_uuid");

    for node in &mut test.cluster.nodes[2..] {
        node.kill().unwrap();
    }
    let killed_at = Instant::now();
    sql(&test.cluster.nodes[1], "INSERT INTO w.t VALUES (1, 'right after the kill')");
    println!("node2 committed {:.2} s after nodes 3 and 4 were killed", killed_at.elapsed().as_secs_f64());
    let timeout = Duration::from_secs(30);
    for node in &test.cluster.nodes[..2] {
        let primary_pair =
            [("wsrep_cluster_size", "2"), ("wsrep_cluster_status", "Primary"), ("wsrep_cluster_weight", "3")];
        wait_for_status(node, &primary_pair, timeout);
    }
    sql(&test.cluster.nodes[0], "INSERT INTO w.t VALUES (2, 'a pair holding 3 of 5')");

    for node in &mut test.cluster.nodes[2..] {
        let recovered = node.restart_position().unwrap().expect("a crashed node needs --wsrep-recover");
        assert_eq!(recovered.uuid.to_string(), uuid, "recovered history");
        node.start(false, Some(&recovered)).unwrap();
    }
    assert_all_synced(&test.cluster.nodes, "4");
    let nodes = &test.cluster.nodes;
    sql(&nodes[0], "SET GLOBAL wsrep_provider_options = 'pc.weight=1'");
    for node in nodes {
        wait_for_status(node, &[("wsrep_cluster_weight", "4")], Duration::from_secs(5));
    }
    wait_until_converged(nodes);
    assert_same_data(nodes, "w");
    assert_eq!(sql(&nodes[3], "SELECT COUNT(*) FROM w.t").trim(), "2");
}

/// A normal life writes no `[Warning]` or `[ERROR]` line into any node's error log (issue 11,
/// quiet logs): the start (node 1 bootstraps, nodes 2 and 3 join by SST), writes, node 3
/// leaving cleanly and joining again by IST while node 1 wrote meanwhile, node 2 restarted,
/// and a clean shutdown of every node. Every node's log is checked from its first line.
#[test]
fn a_normal_life_of_the_cluster_writes_no_warning_or_error() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("quiet", 3);
    {
        let nodes = &mut test.cluster.nodes;
        sql(&nodes[0], "CREATE DATABASE q; CREATE TABLE q.t (id INT PRIMARY KEY, v INT NOT NULL)");
        sql(&nodes[1], "INSERT INTO q.t VALUES (1, 1)");
        nodes[2].stop().unwrap();
        for id in 2..100 {
            sql(&nodes[0], &format!("INSERT INTO q.t VALUES ({id}, {id})"));
        }
        nodes[2].start(false, None).unwrap();
        assert_all_synced(nodes, "3");
        let log = nodes[2].error_log_text().unwrap();
        let rejoined = log.lines().filter(|l| l.contains("state transfer received") || l.contains("state confirmed"));
        println!("node3 rejoined:\n{}", rejoined.collect::<Vec<_>>().join("\n"));
        nodes[1].stop().unwrap();
        sql(&nodes[2], "UPDATE q.t SET v = v + 1");
        nodes[1].start(false, None).unwrap();
        assert_all_synced(nodes, "3");
        assert_same_data(nodes, "q");
    }
    test.cluster.stop().unwrap();
    let mut loud = Vec::new();
    for node in &test.cluster.nodes {
        let log = node.error_log_text().unwrap();
        loud.extend(
            log.lines()
                .filter(|l| l.contains("[Warning]") || l.contains("[ERROR]"))
                .map(|l| format!("{}: {l}", node.name())),
        );
    }
    assert!(loud.is_empty(), "warnings or errors in a normal life:\n{}", loud.join("\n"));
}

/// Points `node` at `donor` (`wsrep_sst_donor`), or at any member with `None`.
fn set_sst_donor(node: &Node, donor: Option<&str>) {
    let path = node.config_file();
    let config = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = config.lines().filter(|l| !l.starts_with("wsrep_sst_donor")).collect();
    let line = donor.map(|d| format!("wsrep_sst_donor = {d}"));
    if let (Some(line), Some(at)) = (&line, lines.iter().position(|l| *l == "[mariadbd]")) {
        lines.insert(at + 1, line);
    }
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

/// Waits up to 60 s for `node`'s error log to hold `count` lines containing `text`.
fn wait_for_log_lines(node: &Node, text: &str, count: usize) {
    let lines = || node.error_log_text().unwrap().lines().filter(|l| l.contains(text)).count();
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines() < count {
        assert!(Instant::now() < deadline, "{} never logged \"{text}\" {count} times", node.name());
        thread::sleep(Duration::from_millis(100));
    }
}

/// Nodes 2 and 3 stop while node 1 writes more than its 1 MiB writeset cache holds, and lose
/// their certification checkpoints: restarted, they read the group's order past a gap and only
/// guess which members are synced. Node 2 rejoins naming a donor nobody is (`wsrep_sst_donor
/// = nobody`), so it stays a joiner; node 3 asks for node 2 alone. Its guess takes node 2 as
/// synced; node 1, which knows, answers that no member can donate, and node 3 asks again every
/// second (before, it took its guess and waited 300 s for a stream node 2 never sent, then
/// stopped). Node 2, started again without the bogus donor, gets its state from node 1, then
/// node 3 from node 2, and the three end with the same data
/// (docs/design/donor-choice-of-a-guessing-joiner.md). Galera retries node 3's request every
/// second as well.
#[test]
fn a_joiner_that_guesses_who_is_synced_goes_by_the_donor_choice_of_a_member_that_knows() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::create("guess", 3, "gcache.size=1M");
    test.cluster.start().unwrap();
    let nodes = &mut test.cluster.nodes;
    sql(&nodes[0], "CREATE DATABASE q; CREATE TABLE q.t (id INT PRIMARY KEY, filler LONGTEXT NOT NULL)");
    nodes[2].stop().unwrap();
    nodes[1].stop().unwrap();
    for id in 0..40 {
        sql(&nodes[0], &format!("INSERT INTO q.t VALUES ({id}, REPEAT('x', 100000))"));
    }
    for node in &nodes[1..] {
        let _ = std::fs::remove_file(node.data_dir().join("lockstep-cache.certification.galera.cache"));
    }
    let lockstep = status_var(&nodes[0], "wsrep_provider_name") == "Lockstep";
    set_sst_donor(&nodes[1], Some("nobody"));
    nodes[1].launch(false, None).unwrap();
    // Node 2 is in the view, joining, before node 3's first view: node 3 guesses it synced.
    if lockstep {
        wait_for_log_lines(&nodes[0], "member node2 requested state transfer but no member can donate now", 1);
    }
    set_sst_donor(&nodes[2], Some("node2"));
    nodes[2].launch(false, None).unwrap();
    if lockstep {
        wait_for_log_lines(&nodes[2], "differs from this node's guess", 3);
        let log = nodes[2].error_log_text().unwrap();
        assert!(!log.contains("requested state transfer from 'node2'; selected node2"), "went by its guess:\n{log}");
    } else {
        thread::sleep(Duration::from_secs(5));
    }
    for id in 40..50 {
        sql(&nodes[0], &format!("INSERT INTO q.t VALUES ({id}, 'meanwhile')"));
    }
    // Node 2's server, its joiner script and the script's rsync daemon share a process group.
    let server = format!("mariadbd --defaults-file={}", nodes[1].config_file().display());
    let pgrep = std::process::Command::new("pgrep").args(["-f", &server]).output().unwrap();
    let pid = String::from_utf8_lossy(&pgrep.stdout).lines().next().expect("node2 runs").to_owned();
    let killed = std::process::Command::new("kill").args(["-9", "--", &format!("-{pid}")]).status().unwrap();
    assert!(killed.success(), "kill -9 of node2's process group {pid}");
    nodes[1].kill().unwrap();
    for leftover in ["rsync_sst.pid", "rsync_sst.conf", "sst_in_progress"] {
        let _ = std::fs::remove_file(nodes[1].data_dir().join(leftover));
    }
    set_sst_donor(&nodes[1], None);
    nodes[1].start(false, None).unwrap();
    nodes[2].wait_ready().unwrap();
    assert_all_synced(nodes, "3");
    let read = "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*), SUM(LENGTH(filler)) FROM q.t";
    assert_eq!(sql(&nodes[2], read).trim(), format!("50\t{}", 40 * 100_000 + 10 * 9));
    assert_same_data(nodes, "q");
    if lockstep {
        let log = nodes[2].error_log_text().unwrap();
        assert!(log.contains("requested state transfer from 'node2'; selected node2 as donor"), "{log}");
    }
}

/// A split brain that heals: node 3, cut off, forces a primary component of its own
/// (`pc.bootstrap=1`) while nodes 1 and 2 stay primary, and each side writes a row. When the
/// isolation ends the two components meet and node 3's side ends: its data is not the
/// cluster's and it needs a full state transfer, which its running server cannot take. So it
/// ends its own process, as Galera aborts a running node whose transfer is impossible
/// (docs/design/running-node-needing-a-full-transfer.md). Started again, as a service manager
/// does (`Restart=on-abnormal`), it takes a full transfer and holds the majority's rows.
/// Galera keeps the sides two clusters here (`bench/split-brain.sh`): Lockstep only.
#[test]
fn a_node_whose_forced_component_met_the_cluster_ends_and_restarts_into_a_full_transfer() {
    let _serial = one_at_a_time();
    let mut test = TestCluster::start("split", 3);
    let nodes = &test.cluster.nodes;
    if status_var(&nodes[0], "wsrep_provider_name") != "Lockstep" {
        return;
    }
    let timeout = Duration::from_secs(60);
    let rows = "SET SESSION wsrep_sync_wait = 15; SELECT GROUP_CONCAT(side ORDER BY id) FROM sb.t";
    sql(&nodes[0], "CREATE DATABASE sb; CREATE TABLE sb.t (id INT PRIMARY KEY, side VARCHAR(10))");
    sql(&nodes[0], "INSERT INTO sb.t VALUES (1, 'before')");
    wait_until_converged(nodes);
    sql(&nodes[2], "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'");
    wait_for_status(&nodes[2], &[("wsrep_cluster_status", "non-Primary")], timeout);
    for node in &nodes[..2] {
        wait_for_status(node, &[("wsrep_cluster_size", "2"), ("wsrep_cluster_status", "Primary")], timeout);
    }
    sql(&nodes[2], "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=1'");
    wait_for_status(&nodes[2], &[("wsrep_cluster_status", "Primary"), ("wsrep_ready", "ON")], timeout);
    sql(&nodes[0], "INSERT INTO sb.t VALUES (2, 'majority')");
    sql(&nodes[2], "INSERT INTO sb.t VALUES (3, 'forced')");
    sql(&nodes[2], "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'");
    let healed = Instant::now();
    let node3 = &mut test.cluster.nodes[2];
    wait_until("node3's process ends by itself", Duration::from_secs(120), || {
        if node3.is_running() {
            Err("node3 still runs".into())
        } else {
            Ok(())
        }
    });
    println!("node3 ended {:.1} s after the isolation ended", healed.elapsed().as_secs_f64());
    let log = node3.error_log_text().unwrap();
    assert!(log.contains("this node ends its process, to be restarted with a full state transfer"), "{log}");
    assert!(node3.saved_state().unwrap().position.uuid.is_nil(), "node3's saved state must force a full transfer");
    for node in &test.cluster.nodes[..2] {
        assert_eq!(sql(node, rows).trim(), "before,majority", "{}", node.name());
    }
    let restarted = Instant::now();
    test.cluster.start().unwrap();
    let nodes = &test.cluster.nodes;
    assert_all_synced(nodes, "3");
    println!("node3 back by full transfer in {:.1} s", restarted.elapsed().as_secs_f64());
    for node in nodes {
        assert_eq!(sql(node, rows).trim(), "before,majority", "{}", node.name());
    }
    assert_same_data(nodes, "sb");
}
