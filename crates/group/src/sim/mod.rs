//! Deterministic simulator: N members in one process, one seeded generator drives the
//! network (drop, duplicate, reorder, delay, partition), crashes with loss of unsynced
//! writes, restarts and client load. Virtual time advances in fixed steps and everything
//! is iterated in a fixed order, so one seed always yields one trace.
//!
//! A run has a chaos phase (faults on) and a heal phase (faults off, everyone restarted);
//! the checkers in [`invariants`] watch every delivery and judge the end state.

mod fork;
pub mod invariants;

use crate::cache::{LogStore, MemoryStore};
use crate::config::GroupConfig;
use crate::member::{Member, StartOver, Status};
use crate::message::Message;
use crate::record::{self, RecordKind};
use crate::rng::Rng;
use crate::state::ForcedBoundary;
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, SubmitError};
use invariants::{hash_bytes, EndState, Invariant};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt;

const STEP_MS: u64 = 10;
/// Messages in flight per link; beyond it the network drops (as a full socket would).
const LINK_QUEUE_LIMIT: usize = 4096;

/// What travels on a simulated link: (deliver at, sequence, from, to, the record bytes), or
/// `None` for the end of the sender's connections: a crashed process closes its sockets,
/// and the close arrives after what it sent before.
type InFlight = (u64, u64, usize, usize, Option<Vec<u8>>);

/// Shape of one run, drawn from its seed.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub members: usize,
    pub chaos_ms: u64,
    pub heal_ms: u64,
    pub drop_per_million: u32,
    pub duplicate_per_million: u32,
    pub max_delay_ms: u64,
    /// Per step, chance to start a partition or a crash.
    pub partition_per_million: u32,
    pub crash_per_million: u32,
    /// Per step, chance that a majority of the members crash at once, or all of them.
    pub majority_crash_per_million: u32,
    pub whole_crash_per_million: u32,
    /// Per step, chance that one direction of one link clogs (everything on it waits).
    pub clog_per_million: u32,
    /// Per step, chance a member leaves gracefully (it stops once out, and rejoins later).
    pub leave_per_million: u32,
    /// Per step, chance a client submits a writeset.
    pub submit_per_million: u32,
    /// Per step, chance a client sends an unnumbered message.
    pub message_per_million: u32,
    /// Some runs use a tiny gcache so purges, catch-up by snapshot and gaps happen.
    pub gcache_bytes: u64,
    /// Some runs order most writesets in parts of a few bytes.
    pub part_bytes: usize,
    /// Some runs of 3 or more make the last member an arbitrator (votes, holds no data).
    pub arbitrator: bool,
    /// Some runs weigh members unequally (`pc.weight`, 0-3 each; empty: all 1)...
    pub weights: Vec<u8>,
    /// ...and change one member's weight now and then, per step.
    pub reweigh_per_million: u32,
    /// Some runs place members in segments (0-2 each; empty: all in 0), so messages are
    /// relayed.
    pub segments: Vec<u8>,
    /// Some runs send most writesets from one member, another every 10 s, so the lead
    /// follows the writes from member to member.
    pub hot_writer: bool,
    /// Some runs have an operator force the survivors of their first majority power cut into
    /// a primary component (`pc.bootstrap=1` on one of them) once they are not primary, and
    /// bring the others back later: the order forks (see `fork`).
    pub force_after_majority_crash: bool,
}

impl Scenario {
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x5343_454e_4152_494f);
        let members = if rng.chance(500_000) { 3 } else { 5 };
        let mut scenario = Self {
            members,
            chaos_ms: 30_000,
            heal_ms: 40_000,
            drop_per_million: rng.range(0, 100_000) as u32,
            duplicate_per_million: rng.range(0, 50_000) as u32,
            max_delay_ms: rng.range(1, 200),
            partition_per_million: rng.range(1_000, 6_000) as u32,
            crash_per_million: rng.range(500, 4_000) as u32,
            majority_crash_per_million: rng.range(0, 150) as u32,
            whole_crash_per_million: rng.range(0, 100) as u32,
            clog_per_million: rng.range(0, 3_000) as u32,
            leave_per_million: rng.range(0, 1_500) as u32,
            submit_per_million: rng.range(100_000, 400_000) as u32,
            message_per_million: rng.range(0, 100_000) as u32,
            gcache_bytes: if rng.chance(300_000) { rng.range(16 << 10, 256 << 10) } else { 128 << 20 },
            part_bytes: if rng.chance(400_000) { rng.range(16, 256) as usize } else { 1 << 20 },
            arbitrator: rng.chance(250_000),
            weights: if rng.chance(300_000) {
                (0..members).map(|_| rng.range(0, 4) as u8).collect()
            } else {
                Vec::new()
            },
            reweigh_per_million: rng.range(0, 200) as u32,
            segments: if rng.chance(400_000) {
                (0..members).map(|_| rng.range(0, 3) as u8).collect()
            } else {
                Vec::new()
            },
            hot_writer: rng.chance(400_000),
            force_after_majority_crash: rng.chance(300_000),
        };
        if scenario.force_after_majority_crash {
            // Often enough that the operator gets to force.
            scenario.majority_crash_per_million = scenario.majority_crash_per_million.max(300);
        }
        scenario
    }
}

/// A broken guarantee, with the seed that replays it.
#[derive(Debug, Clone)]
pub struct Violation {
    pub seed: u64,
    pub invariant: &'static str,
    pub at_ms: u64,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {}: invariant '{}' violated at {} ms: {}", self.seed, self.invariant, self.at_ms, self.detail)
    }
}

/// Figures of a passed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub seed: u64,
    /// Hash of every delivery in order: equal for equal seeds.
    pub history_hash: u64,
    pub deliveries: u64,
    pub acked: u64,
    pub final_seqno: Seqno,
    pub final_view_id: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub messages: u64,
    /// Members that caught up by snapshot because their gap was purged everywhere.
    pub state_gaps: u64,
    /// Members that caught up by snapshot past views only (`DeliveredKind::ViewsMissed`).
    pub views_missed: u64,
    /// Components forced by the operator (`pc.bootstrap`) after a majority was lost.
    pub forced: u64,
    /// Unnumbered messages acknowledged to their senders.
    pub messages_acked: u64,
    /// Times the member leading in the highest term changed (sampled every 100 ms):
    /// elections and hand-overs of the lead.
    pub leader_changes: u64,
}

struct Node {
    info: MemberInfo,
    member: Option<Member<MemoryStore>>,
    /// The cache of a crashed member, kept for its restart.
    crashed_store: Option<MemoryStore>,
    restart_at_ms: u64,
    /// What the application consumed (it survives crashes, like a database).
    consumed: Seqno,
    /// An external application's saved position, told to its restarted member (as the
    /// node's `application_position`).
    application_position: Seqno,
    /// Left on the simulator's initiative: stop it once out, restart it later.
    leaving: bool,
    /// Request number -> hash of the submitted bytes.
    submitted: BTreeMap<u64, u64>,
    /// The same for unnumbered messages.
    messages: BTreeMap<u64, u64>,
    /// Request number -> the external application's tag, for its submissions.
    tags: BTreeMap<u64, u64>,
    /// Failed tagged submissions, for the external application.
    failures: Vec<(u64, SubmitError)>,
    /// Read barriers: request number -> tag; then the points reached, as (tag, seqno).
    barrier_tags: BTreeMap<u64, u64>,
    barriers: Vec<(u64, Seqno)>,
    /// Counts starts, so the external application sees a restart it did not ask for.
    incarnation: u64,
    /// Seed addresses a restarted member's transport still tries, as (when, whose,
    /// first try): every member's, its own among them, as `wsrep_cluster_address` lists them.
    seed_tries: Vec<(u64, usize, bool)>,
}

/// One simulated cluster.
pub struct Sim {
    seed: u64,
    genesis: Genesis,
    rng: Rng,
    config: GroupConfig,
    now_ms: u64,
    nodes: Vec<Node>,
    network: BinaryHeap<Reverse<InFlight>>,
    in_flight: BTreeMap<(usize, usize), usize>,
    sequence: u64,
    /// Links cut by the current partition, as (from, to).
    cut: BTreeSet<(usize, usize)>,
    /// One-way clogged links, (from, to) -> until when what is sent on them waits.
    clogged: BTreeMap<(usize, usize), u64>,
    /// An application outside the simulator takes the deliveries (`pop_delivered`) and
    /// keeps no position of its own: restarted members deliver their whole log again.
    external: bool,
    heal_partition_at_ms: u64,
    faults: Option<Scenario>,
    checkers: Vec<Box<dyn Invariant>>,
    history_hash: u64,
    probes_acked: usize,
    counting_probes: bool,
    /// Members whose application stops taking deliveries (a slow applier).
    stalled: BTreeSet<usize>,
    /// Encoded message bodies seen on the wire, when capturing (for codec tests).
    captured: Option<Vec<Vec<u8>>>,
    trace: bool,
    /// The member leading in the highest term at the last sample (`note_leader`).
    leader: Option<MemberId>,
    /// The order forked by a forced component, and who is not yet on its side...
    fork: Option<fork::Fork>,
    /// ...and every forced boundary seen.
    known_forks: Vec<ForcedBoundary>,
    /// When the operator forces the survivors of a majority power cut.
    operator_force_at: Option<u64>,
    pub stats: Outcome,
}

impl Sim {
    /// A cluster of `members` formed by member 1 bootstrapping and the rest joining. The
    /// genesis comes from the seed: half the seeds start numbering past zero.
    pub fn new(seed: u64, members: usize, config: GroupConfig) -> Self {
        Self::with_arbitrator(seed, members, config, false)
    }

    /// The same, the last member an arbitrator when `arbitrator`.
    pub fn with_arbitrator(seed: u64, members: usize, config: GroupConfig, arbitrator: bool) -> Self {
        Self::with_segments(seed, members, config, arbitrator, &[])
    }

    /// The same, member `i` in segment `segments[i]` (`gmcast.segment`; missing: 0).
    pub fn with_segments(seed: u64, members: usize, config: GroupConfig, arbitrator: bool, segments: &[u8]) -> Self {
        let mut draw = Rng::new(seed ^ 0x4745_4e45_5349_5321);
        let mut history = [0u8; 16];
        history[..8].copy_from_slice(&draw.next_u64().to_le_bytes());
        history[8..].copy_from_slice(&seed.to_le_bytes());
        let base_seqno = if draw.chance(500_000) { 0 } else { draw.range(1, 1 << 40) };
        // Deterministic (no clock): one bootstrap per run.
        let group = u64::from_le_bytes(history[..8].try_into().expect("8 bytes")) | 1;
        let genesis = Genesis { history, base_seqno, group };
        let ids: Vec<MemberId> = (1..=members as u64).map(MemberId).collect();
        let nodes = ids
            .iter()
            .map(|&id| {
                let info = MemberInfo {
                    id,
                    name: format!("node{}", id.0),
                    address: format!("127.0.0.1:{}", 4566 + id.0),
                    incoming_address: format!("127.0.0.1:{}", 3305 + id.0),
                    incarnation: 1,
                    arbitrator: arbitrator && id.0 == members as u64,
                    weight: 1,
                    segment: segments.get(id.0 as usize - 1).copied().unwrap_or(0),
                };
                let store = MemoryStore::new();
                let mut member = if id.0 == 1 {
                    Member::bootstrap(info.clone(), config.clone(), store, genesis, 0)
                } else {
                    Member::join(info.clone(), config.clone(), store, &ids, 0)
                };
                member.set_rng_seed(seed.wrapping_mul(31).wrapping_add(id.0));
                Node {
                    info,
                    member: Some(member),
                    crashed_store: None,
                    restart_at_ms: 0,
                    // The bootstrapper's application is at the base seqno.
                    consumed: if id.0 == 1 { base_seqno } else { 0 },
                    application_position: 0,
                    leaving: false,
                    submitted: BTreeMap::new(),
                    messages: BTreeMap::new(),
                    tags: BTreeMap::new(),
                    failures: Vec::new(),
                    barrier_tags: BTreeMap::new(),
                    barriers: Vec::new(),
                    incarnation: 1,
                    seed_tries: Vec::new(),
                }
            })
            .collect();
        let mut checkers = invariants::all();
        for c in checkers.iter_mut() {
            c.on_restart(MemberId(1), base_seqno).expect("nothing delivered yet");
        }
        Self {
            seed,
            genesis,
            rng: Rng::new(seed),
            config,
            now_ms: 0,
            nodes,
            network: BinaryHeap::new(),
            in_flight: BTreeMap::new(),
            sequence: 0,
            cut: BTreeSet::new(),
            clogged: BTreeMap::new(),
            external: false,
            heal_partition_at_ms: 0,
            faults: None,
            checkers,
            history_hash: 0xcbf2_9ce4_8422_2325,
            probes_acked: 0,
            counting_probes: false,
            stalled: BTreeSet::new(),
            captured: None,
            trace: false,
            stats: Outcome {
                seed,
                history_hash: 0,
                deliveries: 0,
                acked: 0,
                final_seqno: 0,
                final_view_id: 0,
                crashes: 0,
                partitions: 0,
                messages: 0,
                state_gaps: 0,
                views_missed: 0,
                forced: 0,
                messages_acked: 0,
                leader_changes: 0,
            },
            leader: None,
            fork: None,
            known_forks: Vec::new(),
            operator_force_at: None,
        }
    }

    /// Hands deliveries to an application outside the simulator (see `external`).
    pub fn set_external_application(&mut self, on: bool) {
        self.external = on;
    }

    /// Turns the fault injection of `scenario` on, or off (`None`).
    pub fn set_faults(&mut self, scenario: Option<Scenario>) {
        self.faults = scenario;
    }

    pub fn members(&self) -> usize {
        self.nodes.len()
    }

    /// Whether member `id` runs, and how many times it was started.
    pub fn incarnation(&self, id: MemberId) -> Option<u64> {
        let node = self.node(id);
        node.member.as_ref().map(|_| node.incarnation)
    }

    /// The next delivery of member `id` for the external application, and whether it replays
    /// the member's log from before a restart.
    pub fn pop_delivered(&mut self, id: MemberId) -> Result<Option<(Delivered, bool)>, Violation> {
        let i = id.0 as usize - 1;
        let Some((d, replayed)) = self.nodes[i].member.as_mut().and_then(|m| m.pop_delivery()) else {
            return Ok(None);
        };
        self.consumed(i, &d)?;
        Ok(Some((d, replayed)))
    }

    /// Submits from member `id` for the external application; a failure comes back from
    /// `take_failures` with `tag`. False if the member is not running.
    pub fn submit_tagged(&mut self, id: MemberId, data: Vec<u8>, tag: u64, unnumbered: bool) -> bool {
        let i = id.0 as usize - 1;
        let hash = hash_bytes(if unnumbered { 4 } else { 1 }, &data);
        let Some(member) = self.nodes[i].member.as_mut() else { return false };
        let request = if unnumbered { member.send_message(data) } else { member.submit(data) };
        match request {
            Ok(request) => {
                member.flush();
                let node = &mut self.nodes[i];
                if unnumbered {
                    node.messages.insert(request, hash);
                } else {
                    node.submitted.insert(request, hash);
                }
                node.tags.insert(request, tag);
            }
            Err(e) => self.nodes[i].failures.push((tag, e)),
        }
        true
    }

    /// A read barrier from member `id` for the external application; its point comes back
    /// from `take_barriers`, its failure from `take_failures`, with `tag`.
    pub fn read_barrier_tagged(&mut self, id: MemberId, tag: u64) -> bool {
        let i = id.0 as usize - 1;
        let Some(member) = self.nodes[i].member.as_mut() else { return false };
        match member.read_barrier() {
            Ok(request) => {
                member.flush();
                self.nodes[i].barrier_tags.insert(request, tag);
            }
            Err(e) => self.nodes[i].failures.push((tag, e)),
        }
        true
    }

    pub fn take_barriers(&mut self, id: MemberId) -> Vec<(u64, Seqno)> {
        std::mem::take(&mut self.nodes[id.0 as usize - 1].barriers)
    }

    pub fn take_failures(&mut self, id: MemberId) -> Vec<(u64, SubmitError)> {
        std::mem::take(&mut self.nodes[id.0 as usize - 1].failures)
    }

    /// Writesets and views member `id`'s cache serves (an incremental transfer's donor side).
    pub fn cached_range(&self, id: MemberId, from: Seqno, to: Seqno) -> Result<Vec<Delivered>, Seqno> {
        self.node(id).member.as_ref().map_or(Err(from), |m| m.cached_range(from, to))
    }

    /// Prints faults and views as they happen.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// Starts or stops keeping a copy of every message body sent.
    pub fn capture_messages(&mut self, on: bool) {
        self.captured = on.then(Vec::new);
    }

    pub fn captured_messages(&self) -> Vec<Vec<u8>> {
        self.captured.clone().unwrap_or_default()
    }

    /// Stops or restarts member `id`'s application taking deliveries.
    pub fn stall_applier(&mut self, id: MemberId, stalled: bool) {
        if stalled {
            self.stalled.insert(id.0 as usize - 1);
        } else {
            self.stalled.remove(&(id.0 as usize - 1));
        }
    }

    /// Receive-queue lengths as member `id` knows them.
    pub fn queue_lengths(&self, id: MemberId) -> Vec<(MemberId, usize)> {
        self.node(id).member.as_ref().map(|m| m.queue_lengths()).unwrap_or_default()
    }

    /// Flow control of member `id`'s local senders.
    pub fn pause_senders(&mut self, id: MemberId, paused: bool) {
        if let Some(m) = self.nodes[id.0 as usize - 1].member.as_mut() {
            if paused {
                m.pause_senders();
            } else {
                m.resume_senders();
            }
        }
    }

    /// `pc.bootstrap=1` on member `id`: the members it hears from become the primary
    /// component, from the state of the one that applied most.
    pub fn bootstrap_primary(&mut self, id: MemberId) -> Result<(), Violation> {
        let Some(m) = self.nodes[id.0 as usize - 1].member.as_mut() else { return Ok(()) };
        m.bootstrap_primary();
        self.note(|| format!("{id} is told pc.bootstrap=1"));
        self.note_forks()
    }

    /// A member that forced a component (told `pc.bootstrap`, or by `pc.ignore_sb`) holds a
    /// boundary nobody held before: the order forks after the seqno before its forced view.
    /// Its component's members applied no further: it is formed from the state of the one
    /// that applied most.
    fn note_forks(&mut self) -> Result<(), Violation> {
        for i in 0..self.nodes.len() {
            let Some(m) = self.nodes[i].member.as_ref() else { continue };
            let Some(&fork) = m.forks().iter().find(|f| !self.known_forks.contains(f)) else { continue };
            self.known_forks.push(fork);
            let (id, boundary) = (self.nodes[i].info.id, fork.seqno - 1);
            let component = m.status().view.members;
            self.stats.forced += 1;
            self.note(|| format!("{id} forced a primary component: the order forks after seqno {boundary}"));
            self.fork = Some(fork::Fork::new(boundary, id, self.nodes.iter().map(|n| n.info.id)));
            self.check(|c| {
                c.on_fork(boundary);
                Ok(())
            })?;
            // A member still joining (not in its own view) cannot force, and is not asked.
            let ahead = (component.iter().filter_map(|info| self.status(info.id)))
                .find(|s| s.id != id && s.view.contains(s.id) && s.last_seqno > boundary);
            if let Some(s) = ahead {
                let detail = format!(
                    "{id} forced a component after seqno {boundary}, and {} of it had applied up to {}",
                    s.id, s.last_seqno
                );
                return Err(Violation {
                    seed: self.seed,
                    invariant: "a forced component keeps what its members applied",
                    at_ms: self.now_ms,
                    detail,
                });
            }
        }
        Ok(())
    }

    /// `pc.ignore_sb` of member `id` alone, set at runtime.
    pub fn set_ignore_split_brain(&mut self, id: MemberId, on: bool) {
        if let Some(m) = self.nodes[id.0 as usize - 1].member.as_mut() {
            m.set_ignore_split_brain(on);
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    pub fn genesis(&self) -> Genesis {
        self.genesis
    }

    pub fn status(&self, id: MemberId) -> Option<Status> {
        self.node(id).member.as_ref().map(|m| m.status())
    }

    /// The external application of member `id` saved its position at `seqno` (0 for none):
    /// the member's next restart is told it.
    pub fn set_application_position(&mut self, id: MemberId, seqno: Seqno) {
        self.nodes[id.0 as usize - 1].application_position = seqno;
    }

    /// For the external application's checkers: where the order forked, if a component was
    /// forced, and the members not yet shown to be on the forced side (their deliveries past
    /// the boundary are the abandoned side's).
    pub fn fork(&self) -> Option<(Seqno, Vec<MemberId>)> {
        self.fork.as_ref().map(|f| (f.boundary, f.unsettled().copied().collect()))
    }

    fn node(&self, id: MemberId) -> &Node {
        &self.nodes[id.0 as usize - 1]
    }

    fn note(&self, what: impl FnOnce() -> String) {
        if self.trace {
            println!("[{:>6} ms] {}", self.now_ms, what());
        }
    }

    /// Advances virtual time by `ms`.
    pub fn run_for(&mut self, ms: u64) -> Result<(), Violation> {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            self.step()?;
        }
        Ok(())
    }

    /// Submits from member `id` if it is running; returns whether it was accepted.
    pub fn submit(&mut self, id: MemberId, data: Vec<u8>) -> bool {
        let i = id.0 as usize - 1;
        let hash = hash_bytes(1, &data);
        let Some(member) = self.nodes[i].member.as_mut() else {
            return false;
        };
        match member.submit(data) {
            Ok(request) => {
                member.flush();
                self.nodes[i].submitted.insert(request, hash);
                true
            }
            Err(_) => false,
        }
    }

    /// Sends an unnumbered message from member `id` if it is running; returns whether it
    /// was accepted.
    pub fn send_message(&mut self, id: MemberId, data: Vec<u8>) -> bool {
        let i = id.0 as usize - 1;
        let hash = hash_bytes(4, &data);
        let Some(member) = self.nodes[i].member.as_mut() else {
            return false;
        };
        match member.send_message(data) {
            Ok(request) => {
                member.flush();
                self.nodes[i].messages.insert(request, hash);
                true
            }
            Err(_) => false,
        }
    }

    /// Crash: the process stops and unsynced cache writes are lost.
    pub fn crash(&mut self, id: MemberId, restart_after_ms: Option<u64>) {
        let i = id.0 as usize - 1;
        if let Some(member) = self.nodes[i].member.take() {
            let mut store = member.into_store();
            store.crash(&mut self.rng);
            self.nodes[i].crashed_store = Some(store);
            self.nodes[i].submitted.clear();
            self.nodes[i].messages.clear();
            self.nodes[i].tags.clear();
            self.nodes[i].failures.clear();
            self.nodes[i].barrier_tags.clear();
            self.nodes[i].barriers.clear();
            self.nodes[i].seed_tries.clear();
            self.nodes[i].leaving = false;
            self.nodes[i].restart_at_ms = restart_after_ms.map_or(u64::MAX, |d| self.now_ms + d);
            self.stats.crashes += 1;
            self.note(|| format!("crash {id}"));
            self.close_connections(i);
        }
    }

    /// Member `from`'s process ended: each member it can reach sees its connection close,
    /// after the messages it sent before.
    fn close_connections(&mut self, from: usize) {
        for to in (0..self.nodes.len()).filter(|&to| to != from && !self.cut.contains(&(from, to))) {
            let sent = self.network.iter().filter(|Reverse(m)| m.2 == from && m.3 == to).map(|Reverse(m)| m.0);
            let at = sent.max().unwrap_or(self.now_ms + 1);
            self.sequence += 1;
            self.network.push(Reverse((at, self.sequence, from, to, None)));
        }
    }

    pub fn restart(&mut self, id: MemberId) -> Result<(), Violation> {
        let i = id.0 as usize - 1;
        let Some(store) = self.nodes[i].crashed_store.take() else {
            return Ok(());
        };
        let consumed = if self.external { 0 } else { self.nodes[i].consumed };
        self.nodes[i].consumed = consumed;
        if !self.fork.as_ref().is_some_and(|f| f.abandoned(id, consumed)) {
            self.check(|c| c.on_restart(id, consumed))?;
        }
        self.nodes[i].incarnation += 1;
        // As a real node: every connection of a member is a new incarnation (a new view).
        self.nodes[i].info.incarnation = self.nodes[i].incarnation;
        let ids: Vec<MemberId> = self.nodes.iter().map(|n| n.info.id).collect();
        let info = self.nodes[i].info.clone();
        let mut member = Member::restart(info, self.config.clone(), store, &ids, self.now_ms, consumed);
        if self.external {
            member.set_application_position(self.nodes[i].application_position);
        }
        member.set_rng_seed(self.rng.next_u64());
        // Its cache counts once every seed had its say (docs/design/group-bootstrap-id.md).
        member.expect_seed_addresses(self.nodes.len());
        let tries = (0..self.nodes.len()).map(|seed| (self.now_ms + self.rng.range(1, 50), seed, true)).collect();
        self.nodes[i].seed_tries = tries;
        self.nodes[i].member = Some(member);
        self.note(|| format!("restart {id} after seqno {consumed}"));
        Ok(())
    }

    pub fn leave(&mut self, id: MemberId) {
        if let Some(m) = self.nodes[id.0 as usize - 1].member.as_mut() {
            m.leave();
            m.flush();
        }
        self.note(|| format!("{id} leaves"));
    }

    /// `pc.weight`: kept across restarts, as the option is.
    pub fn set_weight(&mut self, id: MemberId, weight: u8) {
        let node = &mut self.nodes[id.0 as usize - 1];
        node.info.weight = weight;
        if let Some(m) = node.member.as_mut() {
            m.set_weight(weight);
            m.flush();
        }
        self.note(|| format!("{id} weighs {weight}"));
    }

    /// Stops a member that has left (a graceful shutdown).
    pub fn stop(&mut self, id: MemberId) {
        self.nodes[id.0 as usize - 1].member = None;
    }

    /// Cuts the network into `side` and the rest.
    pub fn partition(&mut self, side: &BTreeSet<usize>) {
        self.cut.clear();
        for a in 0..self.nodes.len() {
            for b in 0..self.nodes.len() {
                if side.contains(&a) != side.contains(&b) {
                    self.cut.insert((a, b));
                }
            }
        }
        self.stats.partitions += 1;
        self.note(|| format!("partition {side:?} | rest"));
    }

    /// What `from` sends to `to` waits `for_ms` (a one-way clogged link).
    #[cfg(test)]
    pub fn clog(&mut self, from: MemberId, to: MemberId, for_ms: u64) {
        let until = self.now_ms + for_ms;
        self.clogged.insert((from.0 as usize - 1, to.0 as usize - 1), until);
        self.note(|| format!("clog m{} -> m{} until {until} ms", from.0, to.0));
    }

    pub fn heal(&mut self) {
        if !self.cut.is_empty() {
            self.note(|| "heal partition".to_string());
        }
        self.cut.clear();
        self.clogged.clear();
    }

    fn check(&mut self, mut f: impl FnMut(&mut dyn Invariant) -> Result<(), String>) -> Result<(), Violation> {
        for checker in self.checkers.iter_mut() {
            if let Err(detail) = f(checker.as_mut()) {
                return Err(Violation { seed: self.seed, invariant: checker.name(), at_ms: self.now_ms, detail });
            }
        }
        Ok(())
    }

    /// Advances virtual time by one step.
    pub fn step(&mut self) -> Result<(), Violation> {
        self.now_ms += STEP_MS;
        if let Some(s) = self.faults.clone() {
            self.inject_faults(&s)?;
        }
        while let Some(Reverse((at, ..))) = self.network.peek() {
            if *at > self.now_ms {
                break;
            }
            let Reverse((_, _, from, to, record)) = self.network.pop().expect("peeked");
            match record {
                Some(bytes) => self.deliver(to, &bytes)?,
                None => {
                    if let Some(member) = self.nodes[to].member.as_mut() {
                        member.peer_closed(MemberId(from as u64 + 1));
                    }
                }
            }
        }
        self.try_seed_addresses();
        if self.operator_force_at.is_some_and(|at| at <= self.now_ms) {
            self.operator_force_at = None;
            self.force_a_survivor()?;
        }
        for i in 0..self.nodes.len() {
            if let Some(m) = self.nodes[i].member.as_mut() {
                m.tick(self.now_ms);
                m.flush();
            }
            self.start_over_if_asked(i)?;
        }
        self.note_forks()?;
        for i in 0..self.nodes.len() {
            self.drain(i)?;
        }
        if self.now_ms.is_multiple_of(100) {
            self.note_leader();
        }
        self.finish_leaves();
        for i in 0..self.nodes.len() {
            if self.nodes[i].member.is_none() && self.now_ms >= self.nodes[i].restart_at_ms {
                self.restart(MemberId(i as u64 + 1))?;
            }
        }
        Ok(())
    }

    /// Whether the operator is still to force the survivors of a power cut: the members that
    /// lost power come back only after it, also when the chaos ends meanwhile.
    pub fn operator_pending(&self) -> bool {
        self.operator_force_at.is_some()
    }

    /// The operator's `pc.bootstrap=1` on a running member that is not primary, if any, and
    /// only while no member is primary.
    fn force_a_survivor(&mut self) -> Result<(), Violation> {
        if self.nodes.iter().any(|n| n.member.as_ref().is_some_and(|m| m.status().primary)) {
            return Ok(());
        }
        let candidates: Vec<MemberId> = (self.nodes.iter())
            .filter(|n| !n.leaving && n.member.as_ref().is_some_and(|m| !m.status().primary))
            .map(|n| n.info.id)
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let who = candidates[self.rng.range(0, candidates.len() as u64) as usize];
        self.bootstrap_primary(who)
    }

    /// As the node driver does (`Node::start_over_if_not_the_groups`): a member whose cache
    /// is not the group's joins again as a new member with an emptied cache, and its
    /// application takes the group's order afresh (a state transfer).
    fn start_over_if_asked(&mut self, i: usize) -> Result<(), Violation> {
        let Some((why, seeds)) = self.nodes[i].member.as_ref().and_then(|m| m.start_over()) else {
            return Ok(());
        };
        let (id, info) = (self.nodes[i].info.id, self.nodes[i].info.clone());
        let mut member = Member::join(info, self.config.clone(), MemoryStore::new(), &seeds, self.now_ms);
        member.set_rng_seed(self.rng.next_u64());
        if matches!(why, StartOver::Forked(_)) {
            member.set_history_forked();
        }
        self.nodes[i].member = Some(member);
        self.note(|| format!("{id} starts over as a new member: {why:?}"));
        let consumed = std::mem::take(&mut self.nodes[i].consumed);
        if self.fork.as_ref().is_some_and(|f| f.abandoned(id, consumed)) {
            return Ok(());
        }
        self.check(|c| c.on_restart(id, 0))
    }

    /// A restarted member's transport dials each seed address until a member answers there,
    /// and reports each address's first try (`Member::seed_address_tried`), as the real one
    /// does: a seed down or cut off answers nothing, and is tried again a second later.
    fn try_seed_addresses(&mut self) {
        for i in 0..self.nodes.len() {
            let now = self.now_ms;
            let (due, later): (Vec<_>, Vec<_>) = self.nodes[i].seed_tries.drain(..).partition(|t| t.0 <= now);
            self.nodes[i].seed_tries = later;
            for (_, seed, first_try) in due {
                let up = self.nodes[seed].member.is_some();
                let reachable = up && !self.cut.contains(&(i, seed)) && !self.cut.contains(&(seed, i));
                let found = reachable.then(|| MemberId(seed as u64 + 1));
                if found.is_none() {
                    self.nodes[i].seed_tries.push((now + 1_000, seed, false));
                }
                if let Some(member) = self.nodes[i].member.as_mut() {
                    if found.is_some() || first_try {
                        member.seed_address_tried(found, first_try);
                    }
                }
            }
        }
    }

    fn note_leader(&mut self) {
        let leader = (self.nodes.iter().filter_map(|n| n.member.as_ref()).map(|m| m.status()))
            .filter(|s| s.leader == Some(s.id))
            .max_by_key(|s| s.term)
            .map(|s| s.id);
        if leader.is_some() && leader != self.leader {
            self.stats.leader_changes += u64::from(self.leader.is_some());
            self.leader = leader;
        }
    }

    /// A member that has left is shut down cleanly (nothing lost) and comes back later.
    fn finish_leaves(&mut self) {
        for i in 0..self.nodes.len() {
            let left = self.nodes[i].member.as_ref().is_some_and(|m| m.status().left);
            if self.nodes[i].leaving && left {
                let member = self.nodes[i].member.take().expect("checked");
                self.nodes[i].crashed_store = Some(member.into_store());
                self.nodes[i].leaving = false;
                self.nodes[i].submitted.clear();
                self.nodes[i].messages.clear();
                let away = if self.faults.is_some() { self.rng.range(500, 10_000) } else { 1_000 };
                self.nodes[i].restart_at_ms = self.now_ms + away;
                self.note(|| format!("m{} has left and stops", i + 1));
            }
        }
    }

    fn deliver(&mut self, to: usize, bytes: &[u8]) -> Result<(), Violation> {
        let Some(member) = self.nodes[to].member.as_mut() else {
            return Ok(());
        };
        let decoded = record::decode(bytes, crate::config::RECORD_LIMIT_BYTES).map_err(|e| e.to_string()).and_then(
            |(kind, body, _)| match kind {
                RecordKind::Message => Message::decode(body).map_err(|e| e.to_string()),
                other => Err(format!("unexpected record {other:?}")),
            },
        );
        match decoded {
            Ok(message) => {
                let from = message.from.0 as usize - 1;
                if let Some(n) = self.in_flight.get_mut(&(from, to)) {
                    *n = n.saturating_sub(1);
                }
                member.receive(message);
                member.flush();
                Ok(())
            }
            // The simulated network corrupts nothing: a failure here is a codec bug.
            Err(detail) => {
                Err(Violation { seed: self.seed, invariant: "wire records decode", at_ms: self.now_ms, detail })
            }
        }
    }

    fn drain(&mut self, i: usize) -> Result<(), Violation> {
        let Some(member) = self.nodes[i].member.as_mut() else {
            return Ok(());
        };
        let id = member.id();
        let outbox = member.take_outbox();
        let completions = member.take_completions();
        let mut delivered = Vec::new();
        while !self.stalled.contains(&i) && !self.external {
            let Some(d) = member.pop_delivered() else { break };
            delivered.push(d);
        }
        for d in delivered {
            self.consumed(i, &d)?;
        }
        for (request, result) in completions {
            if let Some(tag) = self.nodes[i].barrier_tags.remove(&request) {
                match result {
                    Ok(seqno) => self.nodes[i].barriers.push((tag, seqno)),
                    Err(e) => self.nodes[i].failures.push((tag, e)),
                }
                continue;
            }
            let tag = self.nodes[i].tags.remove(&request);
            let Ok(seqno) = result else {
                self.nodes[i].submitted.remove(&request);
                self.nodes[i].messages.remove(&request);
                if let (Some(tag), Err(e)) = (tag, result) {
                    self.nodes[i].failures.push((tag, e));
                }
                continue;
            };
            if tag.is_some() {
                // The external application judges its own acknowledgements: it takes the
                // deliveries they refer to only later.
                self.nodes[i].submitted.remove(&request);
                self.nodes[i].messages.remove(&request);
                self.stats.acked += 1;
                continue;
            }
            if let Some(hash) = self.nodes[i].submitted.remove(&request) {
                self.stats.acked += 1;
                if self.counting_probes {
                    self.probes_acked += 1;
                }
                self.check(|c| c.on_ack(id, seqno, hash))?;
            } else if let Some(hash) = self.nodes[i].messages.remove(&request) {
                self.stats.messages_acked += 1;
                self.check(|c| c.on_message_ack(id, request, seqno, hash))?;
            }
        }
        for (to, message) in outbox {
            self.send(i, to.0 as usize - 1, &message);
        }
        Ok(())
    }

    /// The application took delivery `d` of member `i`.
    fn consumed(&mut self, i: usize, d: &Delivered) -> Result<(), Violation> {
        let id = self.nodes[i].info.id;
        let last = std::mem::replace(&mut self.nodes[i].consumed, d.seqno);
        self.stats.deliveries += 1;
        let h = invariants::delivered_hash(d);
        self.history_hash = (self.history_hash ^ h ^ id.0).wrapping_mul(0x0100_0000_01b3);
        // Not the genesis' gap of a member that joins: that is no catch-up.
        let gap = matches!(d.kind, DeliveredKind::StateGap | DeliveredKind::HistoryForked);
        if gap && d.seqno != self.genesis.base_seqno {
            self.stats.state_gaps += 1;
            self.note(|| format!("{id} state gap up to seqno {}", d.seqno));
        }
        if d.kind == DeliveredKind::ViewsMissed {
            self.stats.views_missed += 1;
            self.note(|| format!("{id} missed views only, up to seqno {}", d.seqno));
        }
        if let DeliveredKind::View(v) = &d.kind {
            self.note(|| {
                let ids: Vec<u64> = v.members.iter().map(|m| m.id.0).collect();
                format!("{id} view {} at seqno {}: {ids:?}", v.view_id, d.seqno)
            });
        }
        match self.fork.as_mut().map_or(fork::Verdict::Check, |f| f.judge(id, last, d)) {
            fork::Verdict::Check => self.check(|c| c.on_deliver(id, d)),
            fork::Verdict::Skip => Ok(()),
            fork::Verdict::Settle { resume_after, ahead } => {
                let from = ahead.first().map_or(d.seqno, |e| e.seqno);
                self.note(|| format!("{id} is on the forced side from seqno {from}"));
                self.check(|c| c.on_restart(id, resume_after))?;
                for e in &ahead {
                    self.check(|c| c.on_deliver(id, e))?;
                }
                self.check(|c| c.on_deliver(id, d))
            }
            fork::Verdict::Broken(detail) => Err(self.across_a_fork(detail)),
        }
    }

    fn send(&mut self, from: usize, to: usize, message: &Message) {
        if to >= self.nodes.len() || self.cut.contains(&(from, to)) {
            return;
        }
        self.stats.messages += 1;
        let body = message.encode();
        if let Some(captured) = self.captured.as_mut() {
            captured.push(body.clone());
        }
        let bytes = record::encode(RecordKind::Message, &body);
        let (drop, duplicate, max_delay) = match &self.faults {
            Some(s) => (s.drop_per_million, s.duplicate_per_million, s.max_delay_ms),
            None => (0, 0, 1),
        };
        if self.rng.chance(drop) {
            return;
        }
        let copies = if self.rng.chance(duplicate) { 2 } else { 1 };
        for _ in 0..copies {
            let in_flight = self.in_flight.entry((from, to)).or_insert(0);
            if *in_flight >= LINK_QUEUE_LIMIT {
                return;
            }
            *in_flight += 1;
            let mut at = self.now_ms + self.rng.range(1, max_delay + 1);
            if let Some(&until) = self.clogged.get(&(from, to)) {
                at = at.max(until);
            }
            self.sequence += 1;
            self.network.push(Reverse((at, self.sequence, from, to, Some(bytes.clone()))));
        }
    }

    fn inject_faults(&mut self, s: &Scenario) -> Result<(), Violation> {
        let n = self.nodes.len();
        if !self.cut.is_empty() && self.now_ms >= self.heal_partition_at_ms {
            self.heal();
        }
        // The operator forces a component because the others are gone: from the power cut
        // until they are back in it, nothing cuts the survivors off from each other or from
        // them, and nothing stops a member. The members of the component the forced one left
        // cannot know of the fork, and restarted without it they would form their own
        // (docs/design/group-forced-primary.md, "Members restarted out of reach").
        let forcing =
            self.operator_force_at.is_some() || self.fork.as_ref().is_some_and(|f| f.unsettled().next().is_some());
        if forcing {
            self.heal();
            self.client_load(s);
            return Ok(());
        }
        if self.cut.is_empty() && self.rng.chance(s.partition_per_million) {
            let side: BTreeSet<usize> = (0..n).filter(|_| self.rng.chance(400_000)).collect();
            if !side.is_empty() && side.len() < n {
                self.partition(&side);
                self.heal_partition_at_ms = self.now_ms + self.rng.range(500, 8_000);
            }
        }
        if !s.weights.is_empty() && self.rng.chance(s.reweigh_per_million) {
            let who = self.rng.range(0, n as u64) as usize;
            let weight = self.rng.range(0, 4) as u8;
            self.set_weight(MemberId(who as u64 + 1), weight);
        }
        let down = self.nodes.iter().filter(|n| n.member.is_none() || n.leaving).count();
        if down < (n - 1) / 2 && self.rng.chance(s.leave_per_million) {
            let who = self.rng.range(0, n as u64) as usize;
            let primary = self.nodes[who].member.as_ref().is_some_and(|m| m.status().primary);
            if primary && !self.nodes[who].leaving {
                self.nodes[who].leaving = true;
                self.leave(MemberId(who as u64 + 1));
            }
        }
        self.clogged.retain(|_, until| *until > self.now_ms);
        if self.rng.chance(s.clog_per_million) {
            let (from, to) = (self.rng.range(0, n as u64) as usize, self.rng.range(0, n as u64) as usize);
            if from != to {
                let until = self.now_ms + self.rng.range(200, 6_000);
                self.clogged.insert((from, to), until);
                self.note(|| format!("clog m{} -> m{} until {until} ms", from + 1, to + 1));
            }
        }
        let all_up = self.nodes.iter().all(|n| n.member.is_some() && !n.leaving);
        let (majority, whole) =
            (self.rng.chance(s.majority_crash_per_million), self.rng.chance(s.whole_crash_per_million));
        if all_up && (majority || whole) {
            // Power cuts: a majority at once (no primary component until they are back), or
            // every member.
            let count = if whole { n } else { n / 2 + 1 };
            let mut victims: Vec<usize> = (0..n).collect();
            while victims.len() > count {
                let spared = self.rng.range(0, victims.len() as u64) as usize;
                victims.remove(spared);
            }
            self.note(|| format!("{} crash at once: {victims:?}", if whole { "all members" } else { "a majority" }));
            // The survivors are not primary once they miss the majority for the suspect
            // timeout; the operator forces them then, and the others stay down until after.
            // Not when the survivors weigh more than half (`pc.weight`): they form a primary
            // component again by themselves, and forcing beside it is two clusters (seed 24163).
            let weight = |i: usize| u32::from(self.nodes[i].info.weight);
            let survivors: u32 = (0..n).filter(|i| !victims.contains(i)).map(weight).sum();
            let outweighed = 2 * survivors <= (0..n).map(weight).sum::<u32>();
            let force = !whole
                && outweighed
                && s.force_after_majority_crash
                && self.fork.is_none()
                && self.operator_force_at.is_none();
            let force_in = if force { self.config.suspect_timeout_ms + self.rng.range(500, 3_000) } else { 0 };
            self.operator_force_at = force.then_some(self.now_ms + force_in);
            for victim in victims {
                let outage = force_in + self.rng.range(200, 8_000);
                self.crash(MemberId(victim as u64 + 1), Some(outage));
            }
        }
        let down = self.nodes.iter().filter(|n| n.member.is_none() || n.leaving).count();
        if down < (n - 1) / 2 && self.rng.chance(s.crash_per_million) {
            let victim = self.rng.range(0, n as u64) as usize;
            if self.nodes[victim].member.is_some() {
                // Some outages outlast suspect_timeout, so eviction and rejoin happen too.
                let outage = self.rng.range(200, 25_000);
                self.crash(MemberId(victim as u64 + 1), Some(outage));
            }
        }
        self.client_load(s);
        Ok(())
    }

    fn client_load(&mut self, s: &Scenario) {
        if self.rng.chance(s.submit_per_million) {
            self.submit_random(s.hot_writer);
        }
        if self.rng.chance(s.message_per_million) {
            let i = self.rng.range(0, self.nodes.len() as u64) as usize;
            let data = format!("msg-s{}-t{}-m{}", self.seed, self.now_ms, i + 1).into_bytes();
            self.send_message(MemberId(i as u64 + 1), data);
        }
    }

    fn submit_random(&mut self, hot_writer: bool) {
        let n = self.nodes.len();
        let i = if hot_writer && self.rng.chance(800_000) {
            (self.now_ms / 10_000 + self.seed) as usize % n
        } else {
            self.rng.range(0, n as u64) as usize
        };
        let len = self.rng.range(8, 512) as usize;
        let mut data = format!("s{}-t{}-m{}-", self.seed, self.now_ms, i + 1).into_bytes();
        while data.len() < len {
            data.push(b'a' + (self.rng.next_u64() % 26) as u8);
        }
        self.submit(MemberId(i as u64 + 1), data);
    }

    fn end_state(&self) -> EndState {
        EndState {
            genesis: self.genesis,
            live: self.nodes.iter().filter_map(|n| n.member.as_ref().map(|m| m.status())).collect(),
            probes_acked: self.probes_acked,
            cached: self
                .nodes
                .iter()
                .filter_map(|n| n.member.as_ref())
                .map(|m| {
                    let oldest = m.store().boundary().seqno + 1;
                    (m.id(), m.cached_range(oldest, Seqno::MAX).unwrap_or_default())
                })
                .collect(),
        }
    }

    fn across_a_fork(&self, detail: String) -> Violation {
        Violation { seed: self.seed, invariant: "one history per member across a fork", at_ms: self.now_ms, detail }
    }

    /// Checks the end-of-run invariants on the current state.
    pub fn finish(&mut self) -> Result<Outcome, Violation> {
        if let Some(fork) = &self.fork {
            let running = |id: &&MemberId| self.nodes[id.0 as usize - 1].member.is_some();
            if let Some(id) = fork.unsettled().find(running) {
                let detail =
                    format!("{id} is still on the side the component forced after seqno {} left", fork.boundary);
                return Err(self.across_a_fork(detail));
            }
        }
        let end = self.end_state();
        self.check(|c| c.at_end(&end))?;
        let mut out = self.stats.clone();
        out.history_hash = self.history_hash;
        if let Some(s) = end.live.first() {
            out.final_seqno = s.last_seqno;
            out.final_view_id = s.view.view_id;
        }
        Ok(out)
    }
}

/// Runs one seed: form the cluster, chaos, heal, probe, check.
pub fn run_seed(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    let scenario = Scenario::from_seed(seed);
    let mut config = GroupConfig::new("sim");
    config.gcache_bytes = scenario.gcache_bytes;
    config.part_bytes = scenario.part_bytes;
    let mut sim = Sim::with_segments(seed, scenario.members, config, scenario.arbitrator, &scenario.segments);
    sim.set_trace(trace);
    sim.note(|| format!("scenario {scenario:?}"));
    for (i, &weight) in scenario.weights.iter().enumerate() {
        sim.set_weight(MemberId(i as u64 + 1), weight);
    }
    // Formation without faults, then chaos.
    sim.run_for(8_000)?;
    sim.faults = Some(scenario.clone());
    sim.run_for(scenario.chaos_ms)?;
    sim.faults = None;
    while sim.operator_pending() {
        sim.step()?;
    }
    sim.heal();
    for i in 0..sim.nodes.len() {
        sim.restart(MemberId(i as u64 + 1))?;
    }
    // Long enough for elections, eviction of the unreachable and rejoins.
    sim.run_for(scenario.heal_ms / 2)?;
    sim.counting_probes = true;
    let probe_until = sim.now_ms + scenario.heal_ms / 2;
    let mut k = 0;
    while sim.now_ms < probe_until {
        if sim.now_ms.is_multiple_of(200) {
            let id = MemberId(1 + k % sim.nodes.len() as u64);
            k += 1;
            // Long enough to go in parts where the scenario cuts writesets small.
            sim.submit(id, format!("probe-{seed}-{k}-{:>300}", "").into_bytes());
            sim.send_message(id, format!("probe-message-{seed}-{k}").into_bytes());
        }
        sim.step()?;
    }
    // Let the last probes settle before judging convergence.
    sim.run_for(3_000)?;
    sim.finish()
}

#[cfg(test)]
mod tests;
