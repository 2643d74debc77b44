//! The provider instance: the thread-facing edge around the deterministic cores
//! (certification index, seqno windows, options, saved state). One mutex guards the node's
//! state; one condition variable wakes every waiter whenever it changes (see
//! docs/design/provider-locking.md for why one lock and where callbacks run).
mod applier;
mod catch_up;
mod connection;
mod control;
mod delivery;
mod isolation;
mod stats;
mod transactions;

pub use stats::{StatValue, StatVar};

use crate::application::{Application, View};
use crate::certification::{CertificationIndex, Key, Verdict};
use crate::grastate::{SavedState, StateFile};
use crate::options::{NodeSite, Options};
use crate::seqno_window::SeqnoWindow;
use crate::types::{capabilities, Gtid, Seqno, Uuid};
use crate::writeset::Writeset;
use lockstep_group::{GroupNode, MemberId};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const PROVIDER_NAME: &str = "Lockstep";
/// Galera-shaped (`<major>.<minor>(...)`) so that mtr's version gates parse it; the level we
/// aim to be compatible with, then our own version in parentheses.
pub const PROVIDER_VERSION: &str = concat!("4.23(lockstep ", env!("CARGO_PKG_VERSION"), ")");
pub const PROVIDER_VENDOR: &str = "Lockstep developers";

/// Application protocol MariaDB 10.11 speaks; views must carry it.
const APPLICATION_PROTOCOL: i32 = 4;

pub const CAPABILITIES: u32 = capabilities::MULTI_MASTER
    | capabilities::CERTIFICATION
    | capabilities::PARALLEL_APPLYING
    | capabilities::TRX_REPLAY
    | capabilities::ISOLATION
    | capabilities::PAUSE
    | capabilities::CAUSAL_READS;

/// Everything `init` receives, copied out of the C arguments.
#[derive(Clone, Debug)]
pub struct InitArgs {
    pub node_name: String,
    pub node_address: String,
    pub node_incoming: String,
    pub data_dir: String,
    pub options: String,
    pub start_position: Gtid,
}

/// Galera's member states (`wsrep_local_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MemberState {
    Initialized,
    Joining,
    Joined,
    Synced,
}

/// Ordered events waiting for an applier thread in `recv`.
enum Event {
    /// A primary view that includes us.
    View { view: View, first_in_connection: bool },
    /// We lost the primary component: delivered at once, nothing to wait for.
    NonPrimary { view: View },
    /// A writeset from another member (or one of ours whose client gave up waiting).
    Apply { seqno: Seqno, writeset: Box<Writeset>, depends_on: Seqno, failed: bool },
    /// We were chosen to donate state to a joiner, once everything up to `after` is committed.
    Donate(Box<catch_up::Donation>),
    /// A seqno received by state transfer that changes no data (a configuration change).
    Skipped { seqno: Seqno },
    /// Our own announcement came back: synced once everything up to `after` is committed.
    Synced { after: Seqno },
    /// The last view of a connection; after it every `recv` returns.
    Final { view: View },
}

/// How the joiner's state transfer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transfer {
    None,
    Requested,
    /// The group had no member able to donate: ask again.
    NoDonor,
    Received {
        position: Gtid,
        rcode: i32,
    },
}

struct Connection {
    generation: u64,
    group: Uuid,
    member: Uuid,
    me: MemberId,
    node: Arc<GroupNode>,
    /// The current primary view as the group delivered it (empty before the first).
    view: lockstep_group::View,
    /// Holds the group's state up to `committed` (else it waits for a state transfer).
    has_state: bool,
    /// Whether the group's history is known yet (after the first delivery).
    history_known: bool,
    /// This connection started a new cluster (MariaDB then expects no state transfer).
    bootstrapped: bool,
    /// The application may apply: it bootstrapped, or its state-transfer handshake ended
    /// (MariaDB starts its storage engines only then).
    app_ready: bool,
    /// An applied writeset failed on this node: its data may differ from the group's.
    apply_failed: Option<Seqno>,
    primary: bool,
    /// The group's primary-component status when last polled.
    group_primary: bool,
    /// Seqno of our first view in this connection: the server sees every view from there.
    joined_at: Option<Seqno>,
    transfer: Transfer,
    /// Id of our latest state request (0: none sent).
    request_id: u64,
    catch_up: catch_up::CatchUp,
    /// Where donors send us the incremental transfer (`ist.recv_addr`).
    ist_addr: String,
    /// `wsrep_sst_donor`.
    donors: String,
    closing: bool,
    /// The thread reading the group's deliveries; joined when the connection closes.
    delivery: Option<std::thread::JoinHandle<()>>,
}

/// What only the thread that reads the group's deliveries touches besides `Shared`.
#[derive(Default)]
struct Ordering {
    /// Highest seqno delivered (and certified) so far.
    delivered: Seqno,
    /// Views, isolated and PA-unsafe writesets: nothing after them applies before them.
    barrier: Seqno,
    /// Our writesets waiting for their place in the order, by local id, with their `last_seen`.
    awaiting: BTreeMap<u64, Seqno>,
    /// Where ours arrived: local id -> (seqno, verdict).
    arrived: HashMap<u64, (Seqno, Verdict)>,
    /// Each member's latest commit cut; certification history below their minimum is purged.
    cuts: HashMap<MemberId, Seqno>,
    /// Members announced synced (donor candidates).
    synced: BTreeSet<MemberId>,
    /// Until the first view: announcements made before our first delivery are unknown.
    synced_unknown: bool,
    /// Which seqnos failed certification, for the incremental transfers we donate.
    verdicts: catch_up::Verdicts,
}

#[derive(Debug)]
enum TrxState {
    /// Collecting keys and data.
    Executing,
    /// BF-aborted before it was ordered: certify must refuse it.
    Aborted,
    Certified,
    CertFailed,
    /// Sent to the group, waiting for its place in the order.
    Ordering,
    /// Ordered, then BF-aborted: must replay.
    MustReplay,
    Replaying,
    Committing,
}

struct LocalTrx {
    trx_id: u64,
    keys: Vec<Key>,
    data: Vec<u8>,
    state: TrxState,
    flags: u32,
    seqno: Seqno,
    depends_on: Seqno,
    conn_id: u64,
    left_commit_order: bool,
    /// BF-aborted while being ordered: replay if it certifies.
    must_abort: bool,
    /// Its writeset's origin-local id once sent (0 before).
    local_id: u64,
}

#[derive(Default)]
struct Counters {
    replicated: i64,
    replicated_bytes: i64,
    repl_keys: i64,
    repl_keys_bytes: i64,
    repl_data_bytes: i64,
    received: i64,
    received_bytes: i64,
    local_commits: i64,
    local_cert_failures: i64,
    local_replays: i64,
    causal_reads: i64,
    certified: i64,
    deps_distance_sum: i64,
    interval_sum: i64,
}

struct Shared {
    options: Options,
    state_file: StateFile,
    safe_to_bootstrap: bool,
    /// Where our history stands when not connected (start position, then the close point).
    position: Gtid,
    connection: Option<Connection>,
    generation: u64,
    member_state: MemberState,
    desync_count: i64,
    paused_at: Option<Seqno>,
    ordering: Ordering,
    next_local_id: u64,
    /// Seqnos that have left commit order (commit monitor).
    commit_order: SeqnoWindow,
    /// Seqnos fully committed or cancelled (apply monitor): `last_committed`.
    committed: SeqnoWindow,
    certification: CertificationIndex,
    events: VecDeque<Event>,
    /// Threads inside `recv`: the last one never leaves on `exit_loop`.
    receivers: usize,
    next_handle: u64,
    trxs: HashMap<u64, LocalTrx>,
    handle_of_trx: HashMap<u64, u64>,
    isolation_by_conn: HashMap<u64, Seqno>,
    counters: Counters,
}

pub struct Provider {
    app: Arc<dyn Application>,
    node_name: String,
    node_address: String,
    node_incoming: String,
    shared: Mutex<Shared>,
    changed: Condvar,
}

/// Galera's rule (wsrep-behaviour.md §1.2 step 5): the saved seqno after a clean stop, the
/// recovered one after a crash when it belongs to the same history, otherwise nothing.
fn starting_position(saved: Option<SavedState>, start_position: Gtid) -> Gtid {
    match saved {
        Some(s) if s.position.seqno >= 0 => s.position,
        Some(s) if !s.position.uuid.is_nil() && s.position.uuid == start_position.uuid => start_position,
        _ => Gtid::UNDEFINED,
    }
}

impl Provider {
    pub fn init(args: InitArgs, app: Arc<dyn Application>) -> Result<Provider, String> {
        let mut options = Options::new(&NodeSite { data_dir: &args.data_dir, node_address: &args.node_address });
        options.apply(&args.options).map_err(|e| e.to_string())?;
        let base_dir = PathBuf::from(options.get("base_dir"));
        let (state_file, saved, lock_warning) = StateFile::open(&base_dir)
            .map_err(|e| format!("cannot open saved state in {}: {e}", base_dir.display()))?;
        if let Some(warning) = lock_warning {
            log::warn!("{warning}");
        }
        let position = starting_position(saved, args.start_position);
        let safe_to_bootstrap = saved.is_none_or(|s| s.safe_to_bootstrap);
        log::info!(
            "{PROVIDER_NAME} {PROVIDER_VERSION}: saved state {}, safe_to_bootstrap: {}; start position {}; initial position {position}",
            saved.map_or("none".to_string(), |s| s.position.to_string()),
            u8::from(safe_to_bootstrap),
            args.start_position,
        );
        let mut certification = CertificationIndex::new(position.seqno.max(0));
        certification.set_optimistic_pa(options.flag("cert.optimistic_pa"));
        let start = position.seqno.max(0);
        Ok(Provider {
            app,
            node_name: args.node_name,
            node_address: args.node_address,
            node_incoming: args.node_incoming,
            shared: Mutex::new(Shared {
                options,
                state_file,
                safe_to_bootstrap,
                position,
                connection: None,
                generation: 0,
                member_state: MemberState::Initialized,
                desync_count: 0,
                paused_at: None,
                ordering: Ordering { delivered: start, barrier: start, ..Ordering::default() },
                next_local_id: 1,
                commit_order: SeqnoWindow::starting_at(start),
                committed: SeqnoWindow::starting_at(start),
                certification,
                events: VecDeque::new(),
                receivers: 0,
                next_handle: 1,
                trxs: HashMap::new(),
                handle_of_trx: HashMap::new(),
                isolation_by_conn: HashMap::new(),
                counters: Counters::default(),
            }),
            changed: Condvar::new(),
        })
    }

    pub fn capabilities(&self) -> u32 {
        CAPABILITIES
    }

    pub fn options_get(&self) -> String {
        self.lock().options.render()
    }

    pub fn options_set(&self, text: &str) -> Result<(), String> {
        let mut shared = self.lock();
        shared.options.apply(text).map_err(|e| e.to_string())?;
        let optimistic = shared.options.flag("cert.optimistic_pa");
        shared.certification.set_optimistic_pa(optimistic);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic caught at the ABI boundary may have poisoned the lock; the state it guards
        // is updated in single steps, so carry on rather than fail every later call.
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, Shared>) -> MutexGuard<'a, Shared> {
        self.changed.wait(guard).unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until `done` holds or `deadline` passes; returns whether `done` held.
    fn wait_until<'a>(
        &self,
        mut guard: MutexGuard<'a, Shared>,
        deadline: Option<Instant>,
        mut done: impl FnMut(&mut Shared) -> bool,
    ) -> (MutexGuard<'a, Shared>, bool) {
        loop {
            if done(&mut guard) {
                return (guard, true);
            }
            match deadline {
                None => guard = self.wait(guard),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return (guard, false);
                    }
                    let left = (deadline - now).min(Duration::from_secs(3600));
                    guard = self.changed.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
                }
            }
        }
    }

    fn notify(&self) {
        self.changed.notify_all();
    }
}

impl Shared {
    fn group(&self) -> Uuid {
        self.connection.as_ref().map_or(self.position.uuid, |c| c.group)
    }

    fn last_committed(&self) -> Gtid {
        Gtid::new(self.group(), self.committed.last_contiguous())
    }

    /// Connected to a primary component and holding the group's state.
    fn can_replicate(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| !c.closing && c.primary && c.has_state)
            && matches!(self.member_state, MemberState::Joined | MemberState::Synced)
    }

    fn group_node(&self) -> Option<Arc<GroupNode>> {
        self.connection.as_ref().map(|c| c.node.clone())
    }

    /// Both monitors start over with everything up to `seqno` finished.
    fn restart_windows(&mut self, seqno: Seqno) {
        self.committed = SeqnoWindow::starting_at(seqno);
        self.commit_order = SeqnoWindow::starting_at(seqno);
    }

    fn save_state(&self, position: Gtid) {
        let state = SavedState { position, safe_to_bootstrap: self.safe_to_bootstrap };
        if let Err(e) = self.state_file.write(&state) {
            log::error!("failed to write {}: {e}", crate::grastate::FILE_NAME);
        }
    }
}

#[cfg(test)]
mod tests;
