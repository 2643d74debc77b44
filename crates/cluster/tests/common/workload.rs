//! The bank workload shared by the multi-node tests: `bank.accounts` holds a constant total;
//! client threads on every node move money between random accounts in transactions, log each
//! transfer in `bank.history`, and now and then check the total in one snapshot.
//!
//! Conflicts between nodes (ERROR 1213) are expected: the client counts them and moves on.
//! Every client keeps one [`Session`] (one `mariadb` process) and reconnects after an error,
//! so clients of a node that is down simply retry until it is back.
use super::session::{Session, SqlError, DEADLOCK};
use lockstep_cluster::Node;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const DB: &str = "bank";
pub const INITIAL_BALANCE: i64 = 1000;
/// How often (in operations) a client reads the total instead of transferring.
const TOTAL_CHECK_EVERY: u64 = 10;
/// Pause after an error that says the node cannot serve clients right now.
const UNAVAILABLE_BACKOFF: Duration = Duration::from_millis(300);
/// Error messages kept per node for the report.
const KEPT_MESSAGES: usize = 5;

/// Creates `bank.accounts` with `accounts` rows of [`INITIAL_BALANCE`] and an empty
/// `bank.history`, on `node` (replication brings them to the others).
pub fn create_bank(node: &Node, accounts: u32) {
    let rows: Vec<String> = (1..=accounts).map(|id| format!("({id}, {INITIAL_BALANCE})")).collect();
    super::sql(
        node,
        &format!(
            "CREATE DATABASE {DB};
             CREATE TABLE {DB}.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL);
             CREATE TABLE {DB}.history (id BIGINT PRIMARY KEY AUTO_INCREMENT, from_id INT NOT NULL,
                 to_id INT NOT NULL, amount INT NOT NULL, node VARCHAR(16) NOT NULL);
             INSERT INTO {DB}.accounts VALUES {}",
            rows.join(", ")
        ),
    );
}

/// What the clients of one node saw.
#[derive(Debug, Default, Clone)]
pub struct NodeStats {
    pub node: String,
    /// Transfers whose COMMIT succeeded.
    pub commits: u64,
    /// Transfers that failed with ERROR 1213 (conflict with another node, or a local deadlock).
    pub conflicts: u64,
    /// Batches refused because the node was down, starting or not in the primary component
    /// (2002, 2003, 1047, ...), which changed nothing.
    pub unavailable: u64,
    /// Transfers cut off by a lost connection (2006, 2013, client died): they may have committed.
    pub in_doubt: u64,
    /// Total checks (`SELECT SUM(balance)`) that returned the expected total.
    pub total_checks: u64,
    /// Anything else, wrong totals included; `messages` keeps the first few.
    pub other_errors: u64,
    pub messages: Vec<String>,
}

impl NodeStats {
    fn add(&mut self, other: &NodeStats) {
        self.commits += other.commits;
        self.conflicts += other.conflicts;
        self.unavailable += other.unavailable;
        self.in_doubt += other.in_doubt;
        self.total_checks += other.total_checks;
        self.other_errors += other.other_errors;
        for message in &other.messages {
            if self.messages.len() < KEPT_MESSAGES {
                self.messages.push(message.clone());
            }
        }
    }
}

/// A running workload; [`Load::stop`] ends it.
pub struct Load {
    stop: Arc<AtomicBool>,
    started: Instant,
    /// Commits so far, per node (in the order of the nodes given to [`Load::start`]).
    commits: Vec<Arc<AtomicU64>>,
    names: Vec<String>,
    clients: Vec<(usize, JoinHandle<NodeStats>)>,
    /// Messages of errors as they happen, for a failing test to show.
    first_errors: Arc<Mutex<Vec<String>>>,
}

/// The outcome of a workload.
pub struct LoadReport {
    pub per_node: Vec<NodeStats>,
    pub elapsed: Duration,
}

impl Load {
    /// Starts `clients_per_node` transfer clients on each node of `nodes`; `accounts` as given
    /// to [`create_bank`].
    pub fn start(nodes: &[Node], clients_per_node: usize, accounts: u32) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let first_errors = Arc::new(Mutex::new(Vec::new()));
        let commits: Vec<_> = nodes.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        let mut clients = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            for client in 0..clients_per_node {
                let context = ClientContext {
                    session: Session::open(node),
                    accounts,
                    stop: stop.clone(),
                    commits: commits[index].clone(),
                    first_errors: first_errors.clone(),
                    rng: Rng::new((index * 1000 + client) as u64),
                };
                let handle = thread::Builder::new()
                    .name(format!("bank-{}-{client}", node.name()))
                    .spawn(move || context.run())
                    .expect("spawn a workload client");
                clients.push((index, handle));
            }
        }
        Load {
            stop,
            started: Instant::now(),
            commits,
            names: nodes.iter().map(|n| n.name().to_string()).collect(),
            clients,
            first_errors,
        }
    }

    /// Commits so far by the clients of the `index`th node.
    pub fn commits(&self, index: usize) -> u64 {
        self.commits[index].load(Ordering::Relaxed)
    }

    /// Waits until the clients of every node in `indexes` have committed at least `count` more
    /// transfers; panics after `timeout`.
    pub fn wait_for_progress(&self, indexes: &[usize], count: u64, timeout: Duration) {
        let targets: Vec<(usize, u64)> = indexes.iter().map(|&i| (i, self.commits(i) + count)).collect();
        let deadline = Instant::now() + timeout;
        while let Some(&(i, target)) = targets.iter().find(|&&(i, target)| self.commits(i) < target) {
            assert!(
                Instant::now() < deadline,
                "clients of {} committed {} of {count} transfers in {} s; first errors: {:?}",
                self.names[i],
                count - (target - self.commits(i)),
                timeout.as_secs(),
                self.first_errors.lock().unwrap()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the clients (each finishes its current batch) and collects their counts.
    pub fn stop(mut self) -> LoadReport {
        self.stop.store(true, Ordering::Relaxed);
        let clients = std::mem::take(&mut self.clients);
        let mut per_node: Vec<NodeStats> =
            self.names.iter().map(|name| NodeStats { node: name.clone(), ..NodeStats::default() }).collect();
        for (index, handle) in clients {
            let stats = handle.join().unwrap_or_else(|_| panic!("a workload client of {} panicked", self.names[index]));
            per_node[index].add(&stats);
        }
        LoadReport { per_node, elapsed: self.started.elapsed() }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        // A test that panics with the load running must not leave clients behind.
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl LoadReport {
    pub fn total(&self) -> NodeStats {
        let mut total = NodeStats { node: "all".into(), ..NodeStats::default() };
        for stats in &self.per_node {
            total.add(stats);
        }
        total
    }

    /// Panics unless the load ran without errors other than conflicts (and, on the nodes named
    /// in `may_be_unavailable`, unavailability and cut-off transfers) and every node committed.
    pub fn assert_clean(&self, may_be_unavailable: &[&str]) {
        for stats in &self.per_node {
            assert!(stats.commits > 0, "no transfer committed on {}\n{self}", stats.node);
            assert_eq!(stats.other_errors, 0, "unexpected errors on {}: {:?}\n{self}", stats.node, stats.messages);
            if !may_be_unavailable.contains(&stats.node.as_str()) {
                assert_eq!(
                    stats.unavailable + stats.in_doubt,
                    0,
                    "{} refused or cut off clients: {:?}\n{self}",
                    stats.node,
                    stats.messages
                );
            }
        }
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.elapsed.as_secs_f64();
        writeln!(f, "bank workload, {seconds:.1} s:")?;
        writeln!(f, "  node   commits  commits/s  conflicts(1213)  unavailable  in_doubt  total_checks  other")?;
        for s in self.per_node.iter().chain(std::iter::once(&self.total())) {
            writeln!(
                f,
                "  {:<6} {:>7}  {:>9.1}  {:>15}  {:>11}  {:>8}  {:>12}  {:>5}",
                s.node,
                s.commits,
                s.commits as f64 / seconds,
                s.conflicts,
                s.unavailable,
                s.in_doubt,
                s.total_checks,
                s.other_errors
            )?;
        }
        Ok(())
    }
}

struct ClientContext {
    session: Session,
    accounts: u32,
    stop: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
    first_errors: Arc<Mutex<Vec<String>>>,
    rng: Rng,
}

impl ClientContext {
    fn run(mut self) -> NodeStats {
        let mut stats = NodeStats { node: self.session.label().to_string(), ..NodeStats::default() };
        let expected_total = i64::from(self.accounts) * INITIAL_BALANCE;
        let mut operation = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            operation += 1;
            if operation.is_multiple_of(TOTAL_CHECK_EVERY) {
                match self.session.exec(&format!("SELECT SUM(balance) FROM {DB}.accounts")) {
                    Ok(rows) if rows.trim() == expected_total.to_string() => stats.total_checks += 1,
                    Ok(rows) => {
                        self.other(&mut stats, format!("total is {:?}, expected {expected_total}", rows.trim()))
                    }
                    Err(e) => self.failed(&mut stats, e, false),
                }
                continue;
            }
            let from = self.rng.below(self.accounts) + 1;
            let to = (from + self.rng.below(self.accounts - 1)) % self.accounts + 1;
            let amount = self.rng.below(100) + 1;
            let node = self.session.label().to_string();
            let transfer = format!(
                "BEGIN;
                 UPDATE {DB}.accounts SET balance = balance - {amount} WHERE id = {from};
                 UPDATE {DB}.accounts SET balance = balance + {amount} WHERE id = {to};
                 INSERT INTO {DB}.history (from_id, to_id, amount, node) VALUES ({from}, {to}, {amount}, '{node}');
                 COMMIT"
            );
            match self.session.exec(&transfer) {
                Ok(_) => {
                    stats.commits += 1;
                    self.commits.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.failed(&mut stats, e, true),
            }
        }
        stats
    }

    fn failed(&self, stats: &mut NodeStats, error: SqlError, writes: bool) {
        match error.code {
            Some(DEADLOCK) => stats.conflicts += 1,
            // Cannot connect; node not ready (not primary, joining); shutdown in progress.
            Some(2002 | 2003 | 1047 | 1053) => {
                stats.unavailable += 1;
                self.note(stats, &error);
                thread::sleep(UNAVAILABLE_BACKOFF);
            }
            // Connection lost mid-batch, or the client died: the transfer may have committed.
            Some(2006 | 2013) | None => {
                if writes {
                    stats.in_doubt += 1;
                } else {
                    stats.unavailable += 1;
                }
                self.note(stats, &error);
                thread::sleep(UNAVAILABLE_BACKOFF);
            }
            Some(_) => self.other(stats, error.message),
        }
    }

    fn other(&self, stats: &mut NodeStats, message: String) {
        stats.other_errors += 1;
        self.note(stats, &SqlError { code: None, message });
    }

    fn note(&self, stats: &mut NodeStats, error: &SqlError) {
        let message = format!("{}: {}", stats.node, error.message);
        if stats.messages.len() < KEPT_MESSAGES {
            stats.messages.push(message.clone());
        }
        let mut first = self.first_errors.lock().unwrap_or_else(|e| e.into_inner());
        if first.len() < KEPT_MESSAGES {
            first.push(message);
        }
    }
}

/// Checks the bank on every node once the load has stopped: the same data everywhere
/// ([`super::assert_same_data`]), the constant total, and one history row per acknowledged
/// transfer (plus at most the transfers cut off by a lost connection).
pub fn assert_bank_consistent(nodes: &[Node], accounts: u32, report: &LoadReport) {
    super::assert_same_data(nodes, DB);
    let total = report.total();
    let expected_total = i64::from(accounts) * INITIAL_BALANCE;
    for node in nodes {
        let row = super::sql(node, &format!("SELECT SUM(balance), COUNT(*) FROM {DB}.accounts"));
        assert_eq!(row.trim(), format!("{expected_total}\t{accounts}"), "{}: accounts total and count", node.name());
        let logged: u64 = super::sql(node, &format!("SELECT COUNT(*) FROM {DB}.history")).trim().parse().unwrap();
        assert!(
            (total.commits..=total.commits + total.in_doubt).contains(&logged),
            "{}: {logged} transfers in history, {} acknowledged, {} in doubt",
            node.name(),
            total.commits,
            total.in_doubt
        );
    }
}

/// Duration of a load phase: `LOCKSTEP_LOAD_SECONDS` if set, else `default_seconds`.
pub fn load_duration(default_seconds: u64) -> Duration {
    let seconds = std::env::var("LOCKSTEP_LOAD_SECONDS")
        .ok()
        .map(|text| text.parse().unwrap_or_else(|_| panic!("LOCKSTEP_LOAD_SECONDS={text:?} is not a number")))
        .unwrap_or(default_seconds);
    Duration::from_secs(seconds)
}

/// xorshift64*: enough randomness for picking accounts, and no dependency.
struct Rng(u64);

impl Rng {
    fn new(stream: u64) -> Rng {
        let time = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        Rng((time ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..bound` (`bound` > 0).
    fn below(&mut self, bound: u32) -> u32 {
        (self.next() % u64::from(bound)) as u32
    }
}
