//! One bootstrap node running the provider named by `LOCKSTEP_PROVIDER` (default: this
//! workspace's target/release/liblockstep.so): what MariaDB and an operator see of it.
//! Every test passes against Galera 4 (`LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so`).
mod common;

use common::{last_committed, sql, status_var, wait_for_state_comment, TestCluster};
use lockstep_cluster::{Error, Node};
use std::process::Command;

/// Runs `statement` and checks that `wsrep_last_committed` moved by exactly `expected_delta`.
fn assert_seqno_delta(node: &Node, statement: &str, expected_delta: i64) {
    let before = last_committed(node);
    sql(node, statement);
    let after = last_committed(node);
    assert_eq!(after - before, expected_delta, "wsrep_last_committed went {before} -> {after} for `{statement}`");
}

#[test]
fn bootstrap_node_is_primary_and_synced() {
    let test = TestCluster::start("bootstrap", 1);
    let status = test.node().status().unwrap();
    for (name, expected) in [
        ("wsrep_ready", "ON"),
        ("wsrep_connected", "ON"),
        ("wsrep_cluster_status", "Primary"),
        ("wsrep_cluster_size", "1"),
        ("wsrep_local_state_comment", "Synced"),
    ] {
        assert_eq!(status.get(name), Some(expected), "{name}");
    }
    for name in ["wsrep_provider_name", "wsrep_provider_version"] {
        assert!(!status.get(name).unwrap_or("").is_empty(), "{name} is empty");
    }
    assert!(status.last_committed().unwrap() >= 1, "the bootstrap view is ordered");
}

#[test]
fn last_committed_grows_by_one_per_committed_writeset() {
    let test = TestCluster::start("seqno", 1);
    let node = test.node();
    assert_seqno_delta(node, "CREATE DATABASE seqno", 1);
    assert_seqno_delta(node, "CREATE TABLE seqno.t (id INT PRIMARY KEY, v INT)", 1);
    assert_seqno_delta(node, "INSERT INTO seqno.t VALUES (1, 1)", 1);
    assert_seqno_delta(node, "BEGIN; INSERT INTO seqno.t VALUES (2, 2); INSERT INTO seqno.t VALUES (3, 3); COMMIT", 1);
    assert_seqno_delta(node, "BEGIN; INSERT INTO seqno.t VALUES (4, 4); ROLLBACK", 0);
    assert_seqno_delta(node, "SELECT COUNT(*) FROM seqno.t", 0);
    assert_seqno_delta(node, "UPDATE seqno.t SET v = v + 1 WHERE id = 1", 1);
    // A statement that changes no row replicates nothing.
    assert_seqno_delta(node, "UPDATE seqno.t SET v = 0 WHERE id = 99", 0);
    assert_seqno_delta(node, "ALTER TABLE seqno.t ADD COLUMN w INT", 1);
    assert_seqno_delta(node, "DROP TABLE seqno.t", 1);
    assert_eq!(sql(node, "SHOW DATABASES LIKE 'seqno'").trim(), "seqno");
}

#[test]
fn ddl_dml_sync_wait_ftwrl_desync_and_flush_status() {
    let test = TestCluster::start("sql", 1);
    let node = test.node();
    sql(node, "CREATE DATABASE app");
    sql(node, "CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL)");
    sql(node, "ALTER TABLE app.t ADD COLUMN note VARCHAR(20), ADD INDEX (v)");
    sql(node, "INSERT INTO app.t (v) VALUES (1), (2), (3)");
    sql(node, "BEGIN; INSERT INTO app.t (v) VALUES (4); UPDATE app.t SET note = 'x' WHERE v = 1; COMMIT");
    sql(node, "BEGIN; DELETE FROM app.t; ROLLBACK");
    let count = sql(node, "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*), SUM(v) FROM app.t");
    assert_eq!(count.trim(), "4\t10", "rows after commit and rollback");
    assert_eq!(sql(node, "SELECT note FROM app.t WHERE v = 1").trim(), "x");

    // FTWRL desyncs and pauses the provider; UNLOCK TABLES resumes and resyncs.
    let during = sql(node, "FLUSH TABLES WITH READ LOCK; SHOW STATUS LIKE 'wsrep_local_state_comment'; UNLOCK TABLES");
    assert_eq!(during.trim(), "wsrep_local_state_comment\tDonor/Desynced", "state under FLUSH TABLES WITH READ LOCK");
    wait_for_state_comment(node, "Synced");
    sql(node, "INSERT INTO app.t (v) VALUES (5)");

    sql(node, "SET GLOBAL wsrep_desync = ON");
    wait_for_state_comment(node, "Donor/Desynced");
    assert_eq!(status_var(node, "wsrep_desync_count"), "1");
    // A desynced node still commits.
    sql(node, "INSERT INTO app.t (v) VALUES (6)");
    sql(node, "SET GLOBAL wsrep_desync = OFF");
    wait_for_state_comment(node, "Synced");

    sql(node, "FLUSH STATUS");
    assert_eq!(status_var(node, "wsrep_ready"), "ON");
    assert_eq!(status_var(node, "wsrep_cluster_status"), "Primary");

    sql(node, "DROP TABLE app.t");
    sql(node, "DROP DATABASE app");
    assert_eq!(sql(node, "SHOW DATABASES LIKE 'app'").trim(), "");
}

/// sysbench's closing summary value for `label`, e.g. "transactions:" or "ignored errors:".
fn sysbench_count(report: &str, label: &str) -> u64 {
    report
        .lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` in sysbench output:\n{report}"))
}

fn sysbench(node: &Node, step: &str, extra: &[&str]) -> String {
    let output = Command::new("sysbench")
        .arg("oltp_write_only")
        .arg("--db-driver=mysql")
        .arg(format!("--mysql-socket={}", node.socket().display()))
        .args(["--mysql-user=root", "--mysql-db=sbtest", "--tables=1"])
        .args(["--table-size=100000", "--db-ps-mode=disable"])
        .args(extra)
        .arg(step)
        .output()
        .expect("sysbench is installed (scripts/setup.sh)");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "sysbench {step} failed:\n{text}");
    text
}

fn global_status(node: &Node, name: &str) -> u64 {
    let row = sql(node, &format!("SHOW GLOBAL STATUS LIKE '{name}'"));
    row.trim()
        .split_once('\t')
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or_else(|| panic!("{name}: unexpected {row:?}"))
}

#[test]
fn sysbench_oltp_write_only_has_no_errors() {
    let test = TestCluster::start("sysbench", 1);
    let node = test.node();
    sql(node, "CREATE DATABASE sbtest");
    sysbench(node, "prepare", &[]);
    let committed_before = last_committed(node);
    let deadlocks_before = global_status(node, "Innodb_deadlocks");
    let report = sysbench(node, "run", &["--threads=8", "--time=10"]);
    let committed_after = last_committed(node);
    let innodb_deadlocks = global_status(node, "Innodb_deadlocks") - deadlocks_before;
    let transactions = sysbench_count(&report, "transactions:");
    assert!(transactions > 0, "no transaction committed:\n{report}");
    // The 100k-row table makes InnoDB's own deadlocks rare; any that happen are the server's,
    // not the provider's (a failed certification would also surface as an error to sysbench).
    assert_eq!(
        sysbench_count(&report, "ignored errors:"),
        innodb_deadlocks,
        "errors other than InnoDB deadlocks:\n{report}"
    );
    assert_eq!(sysbench_count(&report, "reconnects:"), 0, "{report}");
    assert_eq!(global_status(node, "wsrep_local_cert_failures"), 0);
    assert_eq!(global_status(node, "wsrep_local_bf_aborts"), 0);
    // Each sysbench transaction is one writeset.
    assert_eq!(
        (committed_after - committed_before) as u64,
        transactions,
        "wsrep_last_committed moved {committed_before} -> {committed_after}"
    );
}

#[test]
fn clean_shutdown_saves_state_and_restart_continues_history() {
    let mut test = TestCluster::start("restart", 1);
    let node = test.node_mut();
    sql(node, "CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY)");
    sql(node, "INSERT INTO r.t VALUES (1), (2)");
    let uuid = status_var(node, "wsrep_local_state_uuid");
    let committed = last_committed(node);
    node.stop().unwrap();

    let saved = node.saved_state().unwrap();
    assert_eq!(saved.position.uuid.to_string(), uuid, "grastate.dat uuid");
    assert_eq!(saved.position.seqno, committed, "grastate.dat seqno");
    assert!(saved.safe_to_bootstrap, "grastate.dat safe_to_bootstrap");

    node.start(true, None).unwrap();
    assert_eq!(status_var(node, "wsrep_local_state_uuid"), uuid);
    assert_eq!(status_var(node, "wsrep_cluster_state_uuid"), uuid);
    // The bootstrap view of the restarted node is the next event of the same history.
    assert_eq!(last_committed(node), committed + 1);
    assert_seqno_delta(node, "INSERT INTO r.t VALUES (3)", 1);
    assert_eq!(sql(node, "SELECT COUNT(*) FROM r.t").trim(), "3");
}

#[test]
fn crash_recovery_restarts_in_same_history() {
    let mut test = TestCluster::start("crash", 1);
    let node = test.node_mut();
    sql(node, "CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY)");
    sql(node, "INSERT INTO c.t VALUES (1); INSERT INTO c.t VALUES (2)");
    let uuid = status_var(node, "wsrep_local_state_uuid");
    let committed = last_committed(node);
    node.kill().unwrap();

    // While running the provider keeps seqno -1 in grastate.dat; only InnoDB knows the position.
    assert_eq!(node.saved_state().unwrap().position.seqno, -1);
    let recovered = node.recover().unwrap();
    assert_eq!(recovered.uuid.to_string(), uuid, "recovered uuid");
    assert_eq!(recovered.seqno, committed, "recovered seqno");

    node.start(true, Some(&recovered)).unwrap();
    assert_eq!(status_var(node, "wsrep_local_state_uuid"), uuid);
    assert_eq!(last_committed(node), committed + 1);
    assert_seqno_delta(node, "INSERT INTO c.t VALUES (3)", 1);
    assert_eq!(sql(node, "SELECT COUNT(*) FROM c.t").trim(), "3");
}

#[test]
fn galera_provider_options_are_accepted_and_echoed() {
    let options = "gcache.size=64M;gcs.fc_limit=32;evs.suspect_timeout=PT6S;\
                   repl.causal_read_timeout=PT20S";
    let mut test = TestCluster::create("options", 1, options);
    test.cluster.start().unwrap_or_else(|e| panic!("start with `{options}`: {e}"));
    let node = test.node();
    let effective = sql(node, "SELECT @@wsrep_provider_options");
    let group_port = node.config.ports.group;
    for expected in [
        "gcache.size = 64M".to_string(),
        "gcs.fc_limit = 32".to_string(),
        "evs.suspect_timeout = PT6S".to_string(),
        "repl.causal_read_timeout = PT20S".to_string(),
        format!("base_port = {group_port}"),
    ] {
        assert!(effective.contains(&expected), "`{expected}` missing from wsrep_provider_options: {effective}");
    }
}

#[test]
fn unknown_provider_option_fails_start_and_is_named_in_the_log() {
    let mut test = TestCluster::create("bad-option", 1, "no.such.option=1");
    match test.cluster.start() {
        Err(Error::NodeExited { .. }) => {}
        Err(other) => panic!("expected mariadbd to exit, got: {other}"),
        Ok(()) => panic!("mariadbd started with an unknown provider option"),
    }
    let log = test.node().error_log_text().unwrap();
    assert!(
        log.lines().any(|line| line.contains("no.such.option") && line.contains("WSREP")),
        "no WSREP error log line names no.such.option:\n{log}"
    );
}

#[test]
fn provider_logs_through_the_server_error_log() {
    let test = TestCluster::start("log", 1);
    let node = test.node();
    let name = status_var(node, "wsrep_provider_name");
    let log = node.error_log_text().unwrap();
    // The server's own lines that quote the library path do not count.
    let provider_lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("[Note] WSREP: "))
        .filter(|line| !line.contains("Loading provider") && !line.contains("loading provider"))
        .collect();
    assert!(
        provider_lines.iter().any(|line| line.contains(&name)),
        "no [Note] WSREP: line names the provider {name:?}:\n{log}"
    );
}
