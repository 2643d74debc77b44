//! The provider's logic as one deterministic state machine with no I/O: no threads, clocks,
//! sockets or files. It is fed the group's deliveries, the server's calls, the appliers'
//! completions and ticks, and answers with values and [`Effects`]: waiters to wake, control
//! messages to order, the saved state to write, deliveries to resume. The runtime
//! (`crate::provider`) drives it from real threads; the simulator (`crate::sim`) drives many
//! of them over the simulated group from one seed.
//!
//! Blocking calls are polls: a call that cannot finish yet registers its waiter `W` with
//! exactly the condition that lets it go on (its own verdict, a seqno in a monitor, the end
//! of a pause, a task for an idle applier) and returns `None`; the change that meets the
//! condition puts that waiter, and only it, into `Effects::wake`. See
//! docs/design/provider-core.md.
mod apply;
mod control;
mod donor_choice;
mod flow;
mod monitor;
mod ordering;
mod parallelism;
pub mod phase;
#[cfg(test)]
mod restart_tests;
mod stats;
mod trx;
mod vote;

#[cfg(test)]
mod apply_queue_tests;
#[cfg(test)]
mod missed_view_tests;
#[cfg(test)]
mod transfer_failure_tests;

/// The settings the core's tests run with: the options' defaults, small sizes.
#[cfg(test)]
fn test_settings() -> Settings {
    Settings {
        flow: FlowSettings::default(),
        optimistic_pa: false,
        log_conflicts: false,
        max_writeset_bytes: 1 << 20,
        checkpoint_bytes: 1 << 20,
        applier_boost: 0,
        stateless: false,
        apply_queue_bytes: APPLY_QUEUE_BYTES,
    }
}

/// A node bootstrapped at seqno 0 of history `[7; 16]` as member 1, in a view with member 2,
/// its view and synced events taken.
#[cfg(test)]
fn test_synced_with_other(settings: Settings) -> (Core<u32>, u64) {
    let (history, me) = (Uuid([7; 16]), MemberId(1));
    let live = DeliveryContext { history, replayed: false };
    let mut core = Core::new(settings, Gtid::new(history, 0), true);
    let generation = core.open(Opening {
        me,
        member: member_uuid(me, 1),
        bootstrap_history: Some(history),
        ist_addr: "127.0.0.1:4568".into(),
        donors: String::new(),
        checkpoint: None,
    });
    let members = [me, MemberId(2)].iter().map(|id| test_member(*id)).collect();
    core.on_delivered(generation, 1, Payload::View(lockstep_group::View { view_id: 1, members }), live);
    let synced = Payload::Control {
        origin: me,
        control: Control::Synced { since: None, ends_donation: None, stateless: false },
    };
    core.on_delivered(generation, 1, synced, live);
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::View { .. }))));
    core.view_applied(1);
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Synced { .. }))));
    core.take_effects();
    (core, generation)
}

/// A data member named `node<id>`, as the core's tests put one in a view.
#[cfg(test)]
fn test_member(id: MemberId) -> lockstep_group::MemberInfo {
    lockstep_group::MemberInfo {
        id,
        name: format!("node{}", id.0),
        address: String::new(),
        incoming_address: String::new(),
        incarnation: 1,
        arbitrator: false,
        weight: 1,
        segment: 0,
    }
}

/// The group's status as member `id` sees it: `primary` or not, with the members of `view`
/// (each its `test_member`), as the core's tests feed `on_group_status`.
#[cfg(test)]
fn test_status(id: MemberId, primary: bool, view: &[MemberId]) -> lockstep_group::Status {
    lockstep_group::Status {
        id,
        primary,
        leader: view.iter().copied().find(|m| *m != id),
        term: 1,
        view: lockstep_group::View { view_id: 1, members: view.iter().map(|m| test_member(*m)).collect() },
        history: [7; 16],
        last_seqno: 0,
        cached_from: 1,
        recv_queue: 0,
        senders_paused: false,
        left: false,
        in_contact: view.to_vec(),
        history_forked: false,
        follower_behind: None,
        failed: None,
        weights_settled: true,
    }
}

pub use apply::{member_uuid, Donation, Event, HandshakeStep, RequestStart, StreamStart, Task, Transferred, Turn};
pub use control::Opening;
pub use flow::FlowSettings;
pub use ordering::{DeliveryContext, Payload, RESTART_CHOICE_MS};
pub use stats::{StatValue, StatVar, StatsSnapshot};
pub use trx::{CertifyStart, ReplayPlan, Statement, REMOTE_HANDLE};
pub use vote::{outcome_of, VoteResult};

use crate::certification::{CertificationIndex, Verdict};
use crate::checkpoint::Checkpoint;
use crate::grastate::SavedState;
use crate::types::{capabilities, flags, Gtid, Seqno, Status, Uuid, SEQNO_UNDEFINED};
use crate::writeset::{Control, DonationEnd, Writeset};
use lockstep_group::MemberId;
use monitor::Monitor;
use phase::{CatchUp, Component, Handshake, Phase};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Capabilities of this provider (wsrep v26 bits), carried by every view.
pub const CAPABILITIES: u32 = capabilities::MULTI_MASTER
    | capabilities::CERTIFICATION
    | capabilities::PARALLEL_APPLYING
    | capabilities::TRX_REPLAY
    | capabilities::ISOLATION
    | capabilities::PAUSE
    | capabilities::CAUSAL_READS
    | capabilities::STREAMING;

/// Application protocol MariaDB 10.11 speaks; views must carry it.
pub const APPLICATION_PROTOCOL: i32 = 4;

/// Events waiting for appliers before deliveries stop being taken from the group (which then
/// holds them: its queue is what flow control sees).
pub const APPLY_QUEUE_LIMIT: usize = 16384;

/// The same in writeset bytes, at most (`gcs.recv_q_hard_limit` may set less): what waits
/// to be applied stays in memory, what the group holds back waits in its cache, on disk.
pub const APPLY_QUEUE_BYTES: u64 = 64 << 20;

/// glibc's first mmap threshold: buffers this big are mapped, until a freed one raises the
/// threshold past them, and then the freed memory stays with the allocator.
pub const LARGE_WRITESET_BYTES: i64 = 128 << 10;

/// What the core needs of the provider options, typed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// `gcs.fc_limit`, `gcs.fc_factor`, `gcs.fc_single_primary`.
    pub flow: FlowSettings,
    /// `cert.optimistic_pa`.
    pub optimistic_pa: bool,
    /// `cert.log_conflicts`.
    pub log_conflicts: bool,
    /// `repl.max_ws_size`, capped by what the group can carry.
    pub max_writeset_bytes: u64,
    /// A certification checkpoint is kept at least every this many writeset bytes: a small
    /// part of `gcache.size`, so that the cache still holds the order after the last one.
    pub checkpoint_bytes: u64,
    /// `gcs.stateless`: this node announces itself synced as one never to be chosen to
    /// donate (Galera 26.4.23's option), from its next announcement.
    pub stateless: bool,
    /// `repl.applier_boost`: nice levels an applier rises by while it applies a writeset
    /// that holds commit order long (`Writeset::holds_commit_order_long`).
    pub applier_boost: i32,
    /// Writeset bytes queued to apply before deliveries stop being taken: `gcs.recv_q_hard_limit`,
    /// at most `APPLY_QUEUE_BYTES`.
    pub apply_queue_bytes: u64,
}

/// Galera's rule (wsrep-behaviour.md §1.2 step 5): the saved seqno after a clean stop, the
/// recovered one after a crash when it belongs to the same history, otherwise nothing.
pub fn starting_position(saved: Option<SavedState>, start_position: Gtid) -> Gtid {
    match saved {
        Some(s) if s.position.seqno >= 0 => s.position,
        Some(s) if !s.position.uuid.is_nil() && s.position.uuid == start_position.uuid => start_position,
        _ => Gtid::UNDEFINED,
    }
}

/// What the runtime must do after a call, once the core's lock is released.
#[derive(Debug)]
pub struct Effects<W> {
    /// Waiters whose condition may now hold.
    pub wake: Vec<W>,
    /// Control messages to order, with the tag their failure comes back with (0: none needed,
    /// a lost one only delays what it drives).
    pub send: Vec<(Control, u64)>,
    /// Writesets the core itself sends again (rollback fragments the group refused), with
    /// their tags.
    pub submit: Vec<(Writeset, u64)>,
    /// The saved state (`grastate.dat`) to write, with its version: writes may race, the
    /// newest version wins.
    pub save: Option<(u64, SavedState)>,
    /// The other data members of our last primary component changed: kept beside the saved
    /// state, they are the better candidates a refused bootstrap names. With a version, as
    /// `save`.
    pub last_primary: Option<(u64, Vec<String>)>,
    /// The apply queue has room again: the group may hand over what it held back.
    pub resume_deliveries: bool,
    /// A certification checkpoint to keep in the cache directory (the newest one wins).
    pub checkpoint: Option<Box<Checkpoint>>,
}

impl<W> Default for Effects<W> {
    fn default() -> Self {
        Effects {
            wake: Vec::new(),
            send: Vec::new(),
            submit: Vec::new(),
            save: None,
            last_primary: None,
            resume_deliveries: false,
            checkpoint: None,
        }
    }
}

impl<W> Effects<W> {
    pub fn is_empty(&self) -> bool {
        self.wake.is_empty()
            && self.send.is_empty()
            && self.submit.is_empty()
            && self.save.is_none()
            && self.last_primary.is_none()
            && !self.resume_deliveries
            && self.checkpoint.is_none()
    }
}

/// One connection to the group, from `connect` to the final view.
#[derive(Debug)]
pub struct Connection {
    pub generation: u64,
    pub group: Uuid,
    pub member: Uuid,
    pub me: MemberId,
    /// The current primary view as the group delivered it (empty before the first).
    pub view: lockstep_group::View,
    /// Holds the group's state up to `committed` (else it waits for a state transfer).
    pub has_state: bool,
    /// This connection started a new cluster (MariaDB then expects no state transfer).
    pub bootstrapped: bool,
    /// An applied writeset failed on this node: its data may differ from the group's.
    pub apply_failed: Option<Seqno>,
    pub component: Component,
    /// The group's primary-component status when last reported.
    pub group_primary: bool,
    /// Seqno of our first view in this connection: the server sees every view from there.
    pub joined_at: Option<Seqno>,
    /// A gap in the group's log (not one replayed from our own) came before our first view
    /// in this connection: the view that would have started it may be inside the gap, and
    /// the group's current view then stands in for it (`Core::view_after_gap`).
    pub gap_before_first_view: bool,
    pub catch_up: CatchUp,
    /// The donor's gap while it is handed over in batches (`CatchUp::Feeding`).
    pub gap: apply::GapMerge,
    /// Id of our latest state request (0: none sent).
    pub request_id: u64,
    /// Ids of our earlier state requests in this connection (the last few): one asked again
    /// (not ordered in time, or no donor then) may still be ordered late, and its donor act
    /// on it.
    pub earlier_requests: Vec<u64>,
    /// Id of the latest request the core asked again by itself (0: none): the next is two
    /// past it. Not two past `request_id`, which an earlier request ordered late takes back.
    pub asked_again_id: u64,
    /// Where donors send us the incremental transfer (`ist.recv_addr`).
    pub ist_addr: String,
    /// `wsrep_sst_donor`.
    pub donors: String,
    /// The member that orders writesets now, as the group last reported.
    pub leader: Option<MemberId>,
    /// The first seqno the group's cache here holds, as last reported (none when empty).
    pub cached: Option<Seqno>,
    /// The donor chosen for our state request, once it is ordered, with its incarnation then
    /// (a donor that restarted lost the transfer, as one that left).
    pub donor: Option<(MemberId, u64)>,
    /// Its name (`wsrep_node_name`), for the log once it has left the view.
    pub donor_name: String,
    /// A request of this connection was given a donor (see `keeps_nothing_before_its_request`).
    pub had_donor: bool,
    /// A donor of ours left before its stream was in: once the server holds its state and no
    /// request of ours waits for a stream, the core asks for the stream alone until one is in.
    pub donor_search: Option<apply::DonorSearch>,
    /// A donor of ours left while the server's handshake waited: a failure of the server's
    /// script is that donor's broken stream (`Core::script_failed`).
    pub donor_lost: bool,
    /// When the server's script failed while its donor was still in the group.
    pub script_failed_ms: Option<u64>,
    /// How many times this connection had the server start its script again.
    pub new_scripts: u32,
    /// A donor's certification state installed with no gap, for the order after this seqno:
    /// the server's snapshot must reach it (see `Core::snapshot_reaches_stream`).
    pub index_only_at: Option<Seqno>,
    /// The server's snapshot, installed at this seqno.
    pub snapshot_at: Option<Seqno>,
    /// The newest seqno a gap of the group's log skipped while this node had no state: a
    /// snapshot older than it misses what the gap skipped (see `Core::snapshot_covers_gap`).
    pub skipped_without_state: Option<Seqno>,
    /// Donations this node's server is running, oldest first: a failed one is reported for
    /// its joiner.
    pub donations: Vec<apply::Donating>,
    /// A restarted node that could catch up alone: whether it does.
    pub restart: phase::Restart,
    /// Our state request, ordered while we guessed which members are synced, awaiting the
    /// donor choice of a member that knows.
    pub awaited_choice: Option<donor_choice::AwaitedChoice>,
    /// Other members' state requests, ordered while we guessed which members are synced:
    /// whether we donate waits for the donor choice of a member that knows, keyed by joiner
    /// and request id.
    pub possible_donations: BTreeMap<(MemberId, u64), donor_choice::PossibleDonation>,
    /// The certification checkpoint found at the start, until the first delivery says
    /// whether it fits.
    pub checkpoint: Option<Box<Checkpoint>>,
}

/// How many earlier state requests a connection remembers (`Connection::earlier_requests`).
const EARLIER_REQUESTS: usize = 16;

impl Connection {
    /// A new state request of ours: the one before it may still be ordered.
    fn new_request_id(&mut self, id: u64) {
        if self.request_id != 0 {
            if self.earlier_requests.len() == EARLIER_REQUESTS {
                self.earlier_requests.remove(0);
            }
            self.earlier_requests.push(self.request_id);
        }
        self.request_id = id;
    }

    /// The id of a request the core asks again by itself, never one of ours already sent
    /// (provider simulator, seed 73016: an earlier request ordered late took `request_id`
    /// back, and the next asked again repeated the id of one already ordered with a donor,
    /// so the members took two donors for one request). Random ids are the runtime's; ours
    /// count on from them and are as unlikely to match one of them.
    fn next_own_request_id(&mut self) -> u64 {
        let base = if self.asked_again_id == 0 { self.request_id } else { self.asked_again_id };
        self.asked_again_id = base.wrapping_add(2);
        self.asked_again_id
    }
}

/// What only the delivery path touches besides the monitors and the index.
#[derive(Debug)]
struct Ordering<W> {
    /// Highest seqno delivered (and certified) so far.
    delivered: Seqno,
    /// Views, isolated and PA-unsafe writesets: nothing after them applies before them.
    barrier: Seqno,
    /// Our writesets between submission and their place in the order, by local id.
    in_flight: BTreeMap<u64, InFlight<W>>,
    /// Our causal barriers, by id.
    barriers: HashMap<u64, BarrierWait<W>>,
    /// Our rollback fragments until they come back through the order, by local id; `true`:
    /// the group refused it, send it again once primary.
    rollbacks: BTreeMap<u64, (Writeset, bool)>,
    /// Each member's latest commit cut; certification history below their minimum is purged.
    cuts: HashMap<MemberId, Seqno>,
    /// The members of the last view: the minimum is taken over their cuts.
    members: Vec<MemberId>,
    /// Members announced synced (donor candidates).
    synced: BTreeSet<MemberId>,
    /// Members chosen to donate, with their incarnation then, until they announce the
    /// donation's end: what they announce to views meanwhile does not make them donor
    /// candidates again (docs/design/donor-chosen-twice.md).
    donors: BTreeMap<MemberId, u64>,
    /// The state request each of `donors` was chosen for (joiner, id), where known: only
    /// the end of that donation ends it (a late end of an earlier one does not).
    donor_requests: BTreeMap<MemberId, (MemberId, u64)>,
    /// Members whose latest state request, ordered after this seqno with a donor chosen,
    /// asked for a snapshot (no state of their own), until they announce themselves synced:
    /// their vote on a seqno up to that one can only be success (core/vote.rs).
    snapshot_joiners: BTreeMap<MemberId, Seqno>,
    /// Until the first view: announcements made before our first delivery are unknown.
    synced_unknown: bool,
    /// `synced` is the guess taken at our first view (every other member), not the group's:
    /// our state requests await the donor choice of a member that knows (core/donor_choice.rs).
    synced_guessed: bool,
    /// Each member's incarnation in the view a restored checkpoint was taken in, until the
    /// next view is compared with it (a restart since drops a member from `synced`).
    restored_incarnations: Option<BTreeMap<MemberId, u64>>,
    /// Which seqnos failed certification, for the incremental transfers we donate.
    verdicts: apply::Verdicts,
    /// Our last commit cut sent, and when (in ticks' milliseconds).
    last_cut: Option<(Seqno, u64)>,
    /// The index holds the group's certification state (see `Observation::Certified`).
    index_from_group: bool,
    /// Our synced announcement was not ordered: it is sent again, ending a donation if
    /// it or another one not ordered did.
    announce_synced_again: Option<Option<DonationEnd>>,
    /// The donation our last announcement of an end ended, to say again if it is lost.
    last_donation_end: Option<DonationEnd>,
    /// Failures of our donations reported to the group and not yet seen ordered (joiner,
    /// request id, code); `report_failures_again`: one was not ordered, and they are sent
    /// again once primary (a joiner whose donor's failure is lost waits for its own script).
    unordered_failures: Vec<(MemberId, u64, i32)>,
    report_failures_again: bool,
    /// Control messages taken since the last numbered delivery.
    controls_after: u32,
    /// The restored checkpoint covers the order through this numbered delivery and this
    /// many control messages after it: those change nothing again.
    restored: Option<(Seqno, u32)>,
    /// Where our last checkpoint was taken, and when (in ticks' milliseconds).
    last_checkpoint: Option<(Seqno, u64)>,
    /// Writeset bytes delivered since.
    bytes_since_checkpoint: u64,
}

impl<W> Default for Ordering<W> {
    fn default() -> Self {
        Ordering {
            delivered: 0,
            barrier: 0,
            in_flight: BTreeMap::new(),
            barriers: HashMap::new(),
            rollbacks: BTreeMap::new(),
            cuts: HashMap::new(),
            members: Vec::new(),
            synced: BTreeSet::new(),
            donors: BTreeMap::new(),
            donor_requests: BTreeMap::new(),
            snapshot_joiners: BTreeMap::new(),
            synced_unknown: false,
            synced_guessed: false,
            restored_incarnations: None,
            verdicts: apply::Verdicts::default(),
            last_cut: None,
            index_from_group: false,
            announce_synced_again: None,
            last_donation_end: None,
            unordered_failures: Vec::new(),
            report_failures_again: false,
            controls_after: 0,
            restored: None,
            last_checkpoint: None,
            bytes_since_checkpoint: 0,
        }
    }
}

/// A writeset of ours on its way through the order.
#[derive(Debug)]
struct InFlight<W> {
    /// The origin's `last_seen` (it bounds our commit cut).
    last_seen: Seqno,
    /// The local transaction it belongs to (none for an isolated statement).
    trx: Option<u64>,
    outcome: Option<Result<(Seqno, Verdict), Status>>,
    /// The thread waiting for the outcome.
    waiter: Option<W>,
}

/// A causal read's barrier on its way through the order.
#[derive(Debug)]
struct BarrierWait<W> {
    /// The seqno it was ordered after: the causal point.
    at: Option<Seqno>,
    /// It will not be ordered (the group refused it, or the connection ended).
    failed: bool,
    waiter: Option<W>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug)]
struct LocalTrx {
    trx_id: u64,
    /// Its writeset's keys and data as they are collected, until certified.
    collected: crate::writeset::WritesetBuilder,
    /// Its writeset's data, taken from the delivered writeset (for a replay).
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

impl LocalTrx {
    fn new(trx_id: u64, conn_id: u64) -> Self {
        LocalTrx {
            trx_id,
            collected: Default::default(),
            data: Vec::new(),
            state: TrxState::Executing,
            flags: 0,
            seqno: SEQNO_UNDEFINED,
            depends_on: SEQNO_UNDEFINED,
            conn_id,
            left_commit_order: false,
            must_abort: false,
            local_id: 0,
        }
    }

    /// Its writeset is a streaming fragment that does not end the transaction: the server
    /// goes on executing it afterwards (docs/design/streaming-replication.md).
    fn is_fragment(&self) -> bool {
        self.flags & (flags::TRX_END | flags::ROLLBACK) == 0
    }
}

#[derive(Default, Debug, Clone)]
pub struct Counters {
    pub replicated: i64,
    pub replicated_bytes: i64,
    pub repl_keys: i64,
    pub repl_keys_bytes: i64,
    pub repl_data_bytes: i64,
    pub received: i64,
    pub received_bytes: i64,
    /// Of those, the bytes of writesets of `LARGE_WRITESET_BYTES` or more: what leaves memory
    /// with the allocator once applied (`provider/memory.rs`).
    pub received_large_bytes: i64,
    pub local_commits: i64,
    pub local_cert_failures: i64,
    pub local_replays: i64,
    pub causal_reads: i64,
    pub certified: i64,
    pub deps_distance_sum: i64,
    pub interval_sum: i64,
    pub recv_queue: stats::QueueSamples,
    pub send_queue: stats::QueueSamples,
    pub apply_monitor: stats::MonitorSamples,
    pub commit_monitor: stats::MonitorSamples,
    pub replication_latency: stats::LatencySamples,
}

/// The node's whole provider state. `W` identifies a waiting thread (a real thread in the
/// runtime, a simulated one in the simulator).
#[derive(Debug)]
pub struct Core<W> {
    settings: Settings,
    safe_to_bootstrap: bool,
    /// The other data members of our last primary component, by name (see
    /// `Effects::last_primary`).
    last_primary_others: Vec<String>,
    /// Where our history stands when not connected (start position, then the close point).
    position: Gtid,
    phase: Phase,
    connection: Option<Connection>,
    generation: u64,
    desync_count: i64,
    /// Donations of earlier connections whose end the server has not reported yet: its
    /// script outlives the connection, and its `sst_sent` belongs to none of this one's.
    earlier_donations: usize,
    paused_at: Option<Seqno>,
    flow: flow::FlowControl,
    /// The time of the group driver's last round (ms, monotonic): what flow control counts in.
    clock_ms: u64,
    ordering: Ordering<W>,
    next_local_id: u64,
    /// Seqnos that have left commit order (the commit monitor).
    commit_order: Monitor<W>,
    /// Seqnos fully committed or cancelled (the apply monitor): `last_committed`.
    committed: Monitor<W>,
    certification: CertificationIndex,
    events: VecDeque<Event>,
    /// Appliers waiting for an event, longest first.
    idle_appliers: VecDeque<W>,
    /// Appliers that took an event and have not asked for another since, with when they
    /// took it (`clock_ms`): one in flight for `apply.rs`'s `HELD_QUEUE_MS` holds the queue.
    appliers_in_flight: Vec<(W, u64)>,
    /// One applier or all at once (parallelism.rs).
    parallelism: parallelism::Parallelism,
    /// The group was told to hold deliveries: resume them when there is room.
    deliveries_held: bool,
    /// Deliveries not taken yet, in order, taken first when there is room: one that arrived
    /// when there was none, or what the order delivered while our state request awaited its
    /// donor choice (core/donor_choice.rs).
    held_deliveries: VecDeque<(Seqno, Payload, DeliveryContext)>,
    /// Writeset bytes queued to apply, as counted when queued and taken; never less than
    /// the truth but for a gap's batches (see `queue_bytes_within_limit`).
    queued_bytes: u64,
    /// The queue is counted again no sooner than this (`clock_ms`).
    next_recount_ms: u64,
    /// Votes on seqnos whose commit failed somewhere (vote.rs), by seqno.
    ballots: BTreeMap<Seqno, vote::Ballot<W>>,
    /// Seqnos whose commit failed here, with the outcome we voted, until decided.
    failures: BTreeMap<Seqno, u64>,
    /// Recently decided votes, with the group's outcome where this member tallied it (not
    /// where a donor's or checkpoint's state said it was decided): late votes on them change
    /// nothing, and a failure of ours on one takes its outcome.
    decided_votes: BTreeMap<Seqno, Option<u64>>,
    /// The node was synced when it lost the primary component (it is again with the next view).
    synced_before_loss: bool,
    /// While synced: the seqno its announcement that made it synced was ordered after (the
    /// view's, when it resynced with a view). Carried by its later announcements.
    synced_since: Option<Seqno>,
    /// The members of the last primary view the server saw, until a non-primary one.
    server_view: Option<Vec<Uuid>>,
    /// The seqno of the view at this node's own position while the server is shown it
    /// (`Core::last_committed_reported`).
    view_at_own_position: Option<Seqno>,
    /// This node's data is not the group's (an apply failure the vote went against, a gap in
    /// the order): every later save of its position says so, until a full transfer.
    inconsistent: bool,
    /// This node's history forked from the group's (`history_forked`): every save of its
    /// position is undefined until a full transfer is installed, so that a restart before
    /// it does not take the server's own position for a place in the group's history.
    forked: bool,
    /// Threads inside `recv`: the last one never leaves on `exit_loop`.
    receivers: usize,
    next_handle: u64,
    trxs: HashMap<u64, LocalTrx>,
    handle_of_trx: HashMap<u64, u64>,
    /// Waiters blocked by a BF-abortable wait, by transaction token.
    trx_waiters: HashMap<u64, W>,
    /// Waiters for the end of a pause (writers, commit order, appliers past the pause).
    unpause_waiters: Vec<W>,
    /// Waiters for a change of phase, handshake or catch-up (joining, rare).
    phase_waiters: Vec<W>,
    isolation_by_conn: HashMap<u64, Seqno>,
    counters: Counters,
    effects: Effects<W>,
    save_version: u64,
    /// The node stopped serving (a panic or a fatal error): every call fails.
    failed: bool,
    /// It stopped because it needs a full state transfer, which a running server cannot take:
    /// its runtime ends the process (see [`Core::restart_needed`]).
    restart_needed: bool,
    /// Galera's node state last logged (`log_state_shift`).
    state_shown: &'static str,
    /// What the simulator watches (off in the runtime).
    observations: Option<Vec<Observation>>,
}

/// What the core reports to a watcher (the simulator's invariant checkers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A writeset was certified here. `with_group_state`: this node certifies from the
    /// group's state (bootstrapped, or installed from a donor), not from a fresh index.
    Certified { seqno: Seqno, verdict: Verdict, with_group_state: bool },
    /// A donor's certification state was installed for the order after `at`.
    IndexInstalled { at: Seqno, digest: u64 },
    /// A state request, ours or one we might donate for, awaited the donor choice of a member
    /// that knows who is synced: `guess` was ours, `chosen` the one taken (`answered`: told,
    /// else our guess after the bound).
    DonorChoice { guess: Option<MemberId>, chosen: Option<MemberId>, answered: bool },
    /// This member took `donor` as the donor for `joiner`'s state request `id`, ordered after
    /// seqno `after` (delivered live or replayed from its log), knowing who is synced or told
    /// by a member that knows (`authoritative`), or guessing.
    DonorTaken { joiner: MemberId, id: u64, after: Seqno, donor: Option<MemberId>, authoritative: bool },
}

impl<W: Clone + PartialEq> Core<W> {
    pub fn new(settings: Settings, position: Gtid, safe_to_bootstrap: bool) -> Self {
        let start = position.seqno.max(0);
        let mut certification = CertificationIndex::new(start);
        certification.set_optimistic_pa(settings.optimistic_pa);
        Core {
            settings,
            safe_to_bootstrap,
            last_primary_others: Vec::new(),
            position,
            phase: Phase::Closed,
            connection: None,
            generation: 0,
            desync_count: 0,
            earlier_donations: 0,
            paused_at: None,
            flow: flow::FlowControl::default(),
            clock_ms: 0,
            ordering: Ordering { delivered: start, barrier: start, ..Ordering::default() },
            next_local_id: 1,
            commit_order: Monitor::starting_at(start),
            committed: Monitor::starting_at(start),
            certification,
            events: VecDeque::new(),
            idle_appliers: VecDeque::new(),
            appliers_in_flight: Vec::new(),
            parallelism: Default::default(),
            deliveries_held: false,
            held_deliveries: VecDeque::new(),
            queued_bytes: 0,
            next_recount_ms: 0,
            ballots: BTreeMap::new(),
            failures: BTreeMap::new(),
            decided_votes: BTreeMap::new(),
            inconsistent: false,
            forked: false,
            synced_before_loss: false,
            synced_since: None,
            server_view: None,
            view_at_own_position: None,
            receivers: 0,
            next_handle: 1,
            trxs: HashMap::new(),
            handle_of_trx: HashMap::new(),
            trx_waiters: HashMap::new(),
            unpause_waiters: Vec::new(),
            phase_waiters: Vec::new(),
            isolation_by_conn: HashMap::new(),
            counters: Counters::default(),
            effects: Effects::default(),
            save_version: 0,
            failed: false,
            restart_needed: false,
            state_shown: "CLOSED",
            observations: None,
        }
    }

    /// Starts keeping [`Observation`]s for `take_observations`.
    pub fn observe(&mut self) {
        self.observations = Some(Vec::new());
    }

    pub fn take_observations(&mut self) -> Vec<Observation> {
        self.observations.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn observed(&mut self, observation: impl FnOnce() -> Observation) {
        if let Some(list) = self.observations.as_mut() {
            list.push(observation());
        }
    }

    pub fn configure(&mut self, settings: Settings) {
        self.settings = settings;
        self.certification.set_optimistic_pa(settings.optimistic_pa);
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// What the runtime must do now that this call returned.
    pub fn take_effects(&mut self) -> Effects<W> {
        self.log_state_shift();
        std::mem::take(&mut self.effects)
    }

    /// Galera's node state (gcs's names): what its "Shifting" log lines show.
    fn galera_state(&self) -> &'static str {
        let non_primary = self.connection.as_ref().is_some_and(|c| c.component == Component::NonPrimary);
        match self.phase {
            Phase::Closed => "CLOSED",
            Phase::Opening | Phase::Closing { .. } => "OPEN",
            _ if non_primary => "OPEN",
            Phase::Joining(_) => "JOINER",
            Phase::Joined | Phase::Synced if self.desync_count > 0 => "DONOR/DESYNCED",
            Phase::Joined => "JOINED",
            Phase::Synced => "SYNCED",
        }
    }

    /// Logs a change of Galera's node state in Galera's words ("Shifting SYNCED ->
    /// DONOR/DESYNCED (TO: 5)"), which operators and MariaDB's tests look for
    /// (galera_3nodes.galera_sst_stateless counts a donor's). Checked once per call into the
    /// core, when its effects are taken.
    fn log_state_shift(&mut self) {
        let now = self.galera_state();
        if now != self.state_shown {
            log::info!("Shifting {} -> {now} (TO: {})", self.state_shown, self.committed.last_contiguous());
            self.state_shown = now;
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn connection(&self) -> Option<&Connection> {
        self.connection.as_ref()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_current(&self, generation: u64) -> bool {
        self.connection.as_ref().is_some_and(|c| c.generation == generation)
    }

    pub fn position(&self) -> Gtid {
        self.position
    }

    pub fn safe_to_bootstrap(&self) -> bool {
        self.safe_to_bootstrap
    }

    pub fn group(&self) -> Uuid {
        self.connection.as_ref().map_or(self.position.uuid, |c| c.group)
    }

    pub fn last_committed(&self) -> Gtid {
        Gtid::new(self.group(), self.committed.last_contiguous())
    }

    /// What the server is told is committed (`last_committed_id`): [`Core::last_committed`],
    /// but the seqno before it while the server is shown a view at this node's own position
    /// (`Core::showing_view_at_own_position`). MariaDB stores every primary view and moves
    /// its storage checkpoint to the view's seqno, unless the provider reports that very
    /// seqno committed (its rule for Galera 3's views without a seqno of their own). Our
    /// position can be ahead of the server's checkpoint by views the server was not shown;
    /// a view stored ahead of the checkpoint then makes the server refuse the position of
    /// its next bypass transfer, after a crash ("SST script passed bogus GTID"), so the
    /// server must take the view's position as its checkpoint. It holds every writeset up to
    /// it (a clean stop flushed them; after a crash our position is the server's own).
    pub fn last_committed_reported(&self) -> Gtid {
        let committed = self.last_committed();
        match self.view_at_own_position {
            Some(seqno) if seqno == committed.seqno && seqno > 0 => Gtid::new(committed.uuid, seqno - 1),
            _ => committed,
        }
    }

    /// The server is shown (`Some`) or was shown (`None`) the view at our own position.
    pub fn showing_view_at_own_position(&mut self, seqno: Option<Seqno>) {
        self.view_at_own_position = seqno;
    }

    pub fn member(&self) -> Uuid {
        self.connection.as_ref().map_or(Uuid::NIL, |c| c.member)
    }

    fn me(&self) -> MemberId {
        self.connection.as_ref().map_or(MemberId(0), |c| c.me)
    }

    pub fn has_state(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| c.has_state)
    }

    /// In a primary component, holding the group's state (its certification state too: a
    /// joiner whose donor left certifies what it reads with its own until another donor's
    /// stream is in), and not leaving.
    pub fn can_replicate(&self) -> bool {
        !self.failed
            && matches!(self.phase, Phase::Joined | Phase::Synced)
            && self.connection.as_ref().is_some_and(|c| {
                c.component == Component::Primary && c.has_state && c.catch_up != phase::CatchUp::Waiting
            })
    }

    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// The node stops serving: every waiter is woken to find out, and every later call fails.
    /// A writeset still waiting for its place fails now: deliveries are ignored from here on,
    /// so its outcome would never come.
    pub fn fail(&mut self, why: &str) {
        if !self.failed && self.restart_needed {
            log::error!("{why}: this node ends its process, to be restarted with a full state transfer");
        } else if !self.failed {
            log::error!("{why}: this node stops replicating; restart it to rejoin the cluster");
        }
        self.failed = true;
        // A joiner whose server's handshake is under way will never receive the state: it
        // ends as after a failed transfer, rather than ask for a donor for ever (mtr
        // MDEV-29142 under load: a member of an earlier bootstrap stopped mid-handshake).
        let handshake = matches!(
            self.phase,
            Phase::Joining(
                Handshake::Requested | Handshake::NoDonor | Handshake::NewScript | Handshake::ScriptFailed { .. }
            )
        );
        if handshake {
            self.set_phase(Phase::Joining(Handshake::Failed { rcode: crate::state_transfer::GROUP_FAILED }));
        }
        self.fail_in_flight(Status::ConnFail);
        self.wake_everyone();
    }

    fn wake_everyone(&mut self) {
        let wake = &mut self.effects.wake;
        self.commit_order.wake_all(wake);
        self.committed.wake_all(wake);
        wake.extend(self.idle_appliers.drain(..));
        wake.extend(self.trx_waiters.drain().map(|(_, w)| w));
        wake.append(&mut self.unpause_waiters);
        wake.append(&mut self.phase_waiters);
    }

    fn set_phase(&mut self, next: Phase) {
        if next == Phase::Joined && self.phase != Phase::Joined {
            self.flow.joined(self.queued_events());
        }
        self.phase.to(next);
        if next != Phase::Synced {
            self.synced_since = None;
        }
        self.effects.wake.append(&mut self.phase_waiters);
    }

    fn set_catch_up(&mut self, next: CatchUp) {
        if let Some(c) = self.connection.as_mut() {
            c.catch_up.to(next);
        }
        self.effects.wake.append(&mut self.phase_waiters);
        // Appliers hold back while the donor's stream may still replace what they would apply.
        self.effects.wake.extend(self.idle_appliers.drain(..));
    }

    /// Both monitors start over with everything up to `seqno` finished.
    fn restart_windows(&mut self, seqno: Seqno) {
        self.committed.restart_at(seqno, &mut self.effects.wake);
        self.commit_order.restart_at(seqno, &mut self.effects.wake);
    }

    /// This node's data is not the group's: its saved state forces a full transfer from now
    /// on (the clean close included), and it stops.
    fn fail_inconsistent(&mut self, why: &str) {
        self.mark_inconsistent();
        self.fail(why);
    }

    /// A node whose running server needs a full state transfer: MariaDB takes an rsync or
    /// mariabackup snapshot only before its storage engines start (a running server's
    /// request is empty), and the runtime does not ask a running server for a mysqldump one.
    /// So, as Galera aborts where a running node's transfer is impossible, the runtime ends
    /// the process once the node has left; the service manager restarts it
    /// (`Restart=on-abnormal` in MariaDB's unit), and the saved state, which names no
    /// position any more, makes the restarted server take a full transfer
    /// (docs/design/running-node-needing-a-full-transfer.md).
    fn fail_needing_full_transfer(&mut self, why: &str) {
        if !self.failed {
            self.restart_needed = true;
        }
        self.fail_inconsistent(why);
    }

    /// The node failed needing a full state transfer its running server cannot take: the
    /// runtime ends the process ([`Core::fail_needing_full_transfer`]).
    pub fn restart_needed(&self) -> bool {
        self.restart_needed
    }

    fn mark_inconsistent(&mut self) {
        self.inconsistent = true;
        self.save_state(Gtid::UNDEFINED);
    }

    fn save_state(&mut self, position: Gtid) {
        let position = if self.inconsistent || self.forked { Gtid::UNDEFINED } else { position };
        self.save_version += 1;
        let state = SavedState { position, safe_to_bootstrap: self.safe_to_bootstrap };
        self.effects.save = Some((self.save_version, state));
    }

    /// Finishes `seqno` in both monitors (it needs no commit of its own here).
    fn finish_both(&mut self, seqno: Seqno) {
        self.commit_order.finish(seqno, &mut self.effects.wake);
        self.committed.finish(seqno, &mut self.effects.wake);
        self.flow.applied(seqno);
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// This node holds the group's state: its data continues the order, and it certifies
    /// with the group's certification state (so it can donate).
    pub fn holds_group_state(&self) -> bool {
        self.phase.app_ready() && self.has_state() && self.ordering.index_from_group
    }

    /// The certification index (a joiner's must equal its donor's: the simulator checks it).
    pub fn certification(&self) -> &CertificationIndex {
        &self.certification
    }
}
