//! One simulated node: a provider [`Core`] with the server around it (client threads running
//! transactions, applier threads in `recv`, row locks with brute-force aborts, a database
//! that survives crashes). Every server thread is a state machine that calls the core the
//! way MariaDB calls the runtime; a thread that the core parks runs again only when the core
//! wakes it, so a missed wake-up shows as a thread stuck at the end of the run.
use super::db::{decode_writes, encode_writes, hash_writes, Db, Write};
use super::invariants::Checks;
use super::transfer::{PendingTransfer, TransferKind};
use crate::application::{View, WsHandle};
use crate::certification::{ChainsBuilder, Key, KeySet, KeyType};
use crate::checkpoint::Checkpoint;
use crate::core::phase::Restart;
use crate::core::VoteResult;
use crate::core::{
    phase::{CatchUp, Phase},
    CertifyStart, Core, Donation, Event, FlowSettings, HandshakeStep, Observation, Opening, ReplayPlan, RequestStart,
    Settings, Task, Turn, REMOTE_HANDLE,
};
use crate::grastate::SavedState;
use crate::types::{flags, Gtid, Seqno, Status, Uuid};
use crate::writeset::{Control, Outgoing, StateRequest, Writeset};
use lockstep_group::sim::Sim as GroupSim;
use lockstep_group::MemberId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Identifies a simulated server thread of one node: clients from 0, appliers from here.
pub type Waiter = u32;
const APPLIER_BASE: Waiter = 1000;
/// Steps a simulated thread may take in one go without blocking: more is a livelock (seed
/// 36032: a joiner's handshake asked for new scripts without end), reported rather than run
/// forever with virtual time stopped.
const SPIN_BOUND: usize = 1_000_000;
/// How long a joiner waits for its donor's stream (the runtime: 300 s; simulated runs are
/// shorter). A donor that restarted in the meantime is still in the view but will never send.
const DONOR_PATIENCE_MS: u64 = 20_000;
/// The tag of the handshake's state requests: one the group refuses (this member is out of
/// the primary component) is sent again after a second, as the runtime does.
const STATE_REQUEST_TAG: u64 = 1 << 61;
/// Rows of the simulated table: few, so transactions conflict.
pub const TABLE: &[u8] = b"t";

/// What one node's threads do, drawn from the seed.
#[derive(Debug, Clone)]
pub struct Workload {
    pub clients: usize,
    pub appliers: usize,
    pub keys: u8,
    /// Per step and idle client, chance to start something.
    pub start_per_million: u32,
    pub causal_per_million: u32,
    pub isolation_per_million: u32,
    pub optimistic_pa: bool,
    /// `Settings::checkpoint_bytes`, from the scenario's cache size.
    pub checkpoint_bytes: u64,
    /// `gcs.fc_limit`.
    pub fc_limit: u64,
    /// How long applying a writeset takes, in microseconds (0: at once), so that appliers
    /// can fall behind the writers and flow control comes into play.
    pub apply_us: u64,
}

/// The group's seeded generator, except that an empty range still draws a number: the
/// provider simulator's seeds, and the runs recorded of them, depend on it.
#[derive(Debug, Clone)]
pub struct Rng(lockstep_group::rng::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(lockstep_group::rng::Rng::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low).max(1)
    }

    pub fn chance(&mut self, per_million: u32) -> bool {
        self.0.chance(per_million)
    }
}

#[derive(Debug)]
struct Trx {
    id: u64,
    token: u64,
    writes: Vec<Write>,
    /// Rolled back by a brute-force abort (its locks are gone); it may still replay.
    bf_rolled_back: bool,
}

impl Trx {
    fn handle(&self) -> WsHandle {
        WsHandle { trx_id: self.id, opaque: self.token }
    }
}

#[derive(Debug)]
enum Client {
    Idle,
    Executing {
        trx: Trx,
        until_ms: u64,
    },
    /// Waiting for its turn under a flow-control pace before it submits.
    Paced {
        trx: Trx,
        local_id: u64,
        writeset: Box<Outgoing>,
        until_ms: u64,
    },
    Certifying {
        trx: Trx,
        local_id: u64,
    },
    Committing {
        trx: Trx,
        seqno: Seqno,
        passed: bool,
    },
    Replaying {
        trx: Trx,
        plan: Option<ReplayPlan>,
    },
    Isolated {
        conn: u64,
        statement: Option<crate::core::Statement>,
        local_id: Option<u64>,
    },
    Causal {
        barrier: Option<u64>,
        point: Option<Seqno>,
        acked_before: Seqno,
    },
}

#[derive(Debug)]
enum Applier {
    Idle,
    Turn {
        event: Event,
        after: Seqno,
        seqno: Seqno,
    },
    Locks {
        seqno: Seqno,
        writeset: Box<Writeset>,
        failed: bool,
    },
    /// Applying takes the workload's `apply_us`, after what the applier applied before.
    Applying {
        seqno: Seqno,
        writeset: Box<Writeset>,
        failed: bool,
        until_us: u64,
    },
    Order {
        seqno: Seqno,
        writeset: Box<Writeset>,
        failed: bool,
    },
    Handshake {
        view: View,
        resend_at_ms: u64,
        sent: bool,
    },
    /// A restarted node's first view: it waits to choose between its own log and a transfer.
    Choosing {
        view: View,
    },
    /// Applying `seqno` failed here: waits for the members' vote.
    Vote {
        seqno: Seqno,
    },
    /// Left `recv` (the connection ended, or the node cannot go on).
    Stopped,
}

pub struct Node {
    pub index: usize,
    pub id: MemberId,
    pub core: Option<Core<Waiter>>,
    /// The group member's incarnation the core belongs to.
    pub incarnation: u64,
    pub generation: u64,
    /// The member's news that its history forked (`Status::history_forked`) was told to
    /// this connection's core, as the runtime's sink tells it once per connection.
    history_forked_told: bool,
    pub db: Db,
    pub saved: Option<SavedState>,
    /// The certification checkpoint in the cache directory (survives crashes).
    checkpoint: Option<Box<Checkpoint>>,
    clients: Vec<Client>,
    appliers: Vec<Applier>,
    /// Until when (µs) each applier is busy with what it took before.
    applier_busy_until_us: Vec<u64>,
    runnable: BTreeSet<Waiter>,
    /// Threads that look again at the next step (time-driven, or a row another holds): put
    /// back into `runnable` in the same step, one that spins would starve the others.
    next_step: BTreeSet<Waiter>,
    /// Row -> the client whose transaction holds it.
    locks: BTreeMap<u8, usize>,
    next_trx: u64,
    workload: Workload,
    /// The node failed for good in this incarnation (an applier left with Fatal).
    pub fatal: bool,
    /// The server's state-transfer script of this incarnation (its number travels in the
    /// request, and a donor's snapshot goes to that script), and whether it failed: a failed
    /// script listens no more, as mariabackup's takes one stream only.
    pub script: u64,
    pub script_failed: bool,
    /// Scripts started again after a donor's crash broke one (all incarnations).
    pub new_scripts: u64,
    /// No new client work (the end of a run).
    pub quiet: bool,
    /// When this node's request was found ordered (its donor's stream is awaited since).
    at_request_since: Option<(Seqno, u64)>,
    /// Restarts that could catch up alone: how many did, and how many took a transfer from a
    /// member that stayed up and synced.
    pub restarts_alone: u64,
    pub restarts_with_transfer: u64,
    /// State requests that awaited the donor choice of a member that knows who is synced:
    /// all of them, those where it differed from this node's guess, those never told.
    pub choices_awaited: u64,
    pub guesses_wrong: u64,
    pub choices_untold: u64,
}

/// What a node's threads reach beyond the node.
pub struct Env<'a> {
    pub group: &'a mut GroupSim,
    pub now_ms: u64,
    pub rng: &'a mut Rng,
    pub checks: &'a mut Checks,
    pub transfers: &'a mut Vec<PendingTransfer>,
    /// The newest seqno acknowledged to any client so far.
    pub acked_max: &'a mut Seqno,
    pub trace: bool,
}

/// The outcome a simulated apply failure reports.
const SIMULATED_APPLY_ERROR: u64 = 0xfa11;

/// Whether the server fails to apply `seqno` on node `index`: in about one run in six (chosen by
/// the history, so no random draw shifts the rest of the run), 3 applies in 10 000, on one node
/// at a time as a diverged row or a full disk would.
fn apply_breaks(history: Uuid, index: usize, seqno: Seqno) -> bool {
    if history.0[0] >= 40 {
        return false;
    }
    let mut h =
        (seqno as u64) ^ ((index as u64) << 56) ^ u64::from_le_bytes(history.0[..8].try_into().expect("8 bytes"));
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (h ^ (h >> 33)) % 10_000 < 3
}

/// Whether the server's side of a donation by node `index` at `after` fails, and how: in
/// about one run in four (chosen by the history, as `apply_breaks`), one donation in six,
/// refused at once (the donor's server says no: Galera's -ECANCELED) or broken midway
/// (-EPIPE on both sides).
fn donation_breaks(history: Uuid, index: usize, after: Seqno) -> Option<i32> {
    if history.0[1] >= 64 {
        return None;
    }
    let mut h = (after as u64).rotate_left(17)
        ^ ((index as u64) << 48)
        ^ u64::from_le_bytes(history.0[8..].try_into().expect("8 bytes"));
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    match (h ^ (h >> 33)) % 12 {
        0 => Some(crate::state_transfer::DONATION_REFUSED),
        1 => Some(BROKEN_PIPE),
        _ => None,
    }
}

/// `-EPIPE`: a transfer broken midway.
pub const BROKEN_PIPE: i32 = -32;

fn row_key(key: u8) -> Key {
    Key::new(vec![b"db".to_vec(), TABLE.to_vec(), vec![key]], KeyType::Update)
}

impl Node {
    pub fn new(index: usize, db: Db, saved: Option<SavedState>, workload: Workload) -> Self {
        Node {
            index,
            id: MemberId(index as u64 + 1),
            core: None,
            incarnation: 0,
            generation: 0,
            history_forked_told: false,
            db,
            saved,
            checkpoint: None,
            clients: (0..workload.clients).map(|_| Client::Idle).collect(),
            appliers: Vec::new(),
            applier_busy_until_us: Vec::new(),
            runnable: BTreeSet::new(),
            next_step: BTreeSet::new(),
            locks: BTreeMap::new(),
            next_trx: 1,
            workload,
            fatal: false,
            script: 0,
            script_failed: false,
            new_scripts: 0,
            quiet: false,
            at_request_since: None,
            restarts_alone: 0,
            restarts_with_transfer: 0,
            choices_awaited: 0,
            guesses_wrong: 0,
            choices_untold: 0,
        }
    }

    /// The server starts (again) with its database and saved state, and connects.
    pub fn start(&mut self, incarnation: u64, bootstrap: Option<Uuid>) {
        let position = crate::core::starting_position(self.saved, self.db.position());
        let safe = self.saved.is_none_or(|s| s.safe_to_bootstrap);
        let settings = Settings {
            flow: FlowSettings { limit: self.workload.fc_limit, ..FlowSettings::default() },
            optimistic_pa: self.workload.optimistic_pa,
            log_conflicts: false,
            max_writeset_bytes: 1 << 20,
            checkpoint_bytes: self.workload.checkpoint_bytes,
            applier_boost: 0,
            stateless: false,
            // Small (writesets here are tens of bytes), so that deliveries are held back
            // now and then in every run.
            apply_queue_bytes: 1 << 10,
        };
        let mut core = Core::new(settings, position, safe);
        core.observe();
        self.generation = core.open(Opening {
            me: self.id,
            member: crate::core::member_uuid(self.id, incarnation),
            bootstrap_history: bootstrap,
            ist_addr: format!("sim:{}:{incarnation}", self.index),
            donors: String::new(),
            checkpoint: self.checkpoint.clone(),
        });
        self.core = Some(core);
        self.history_forked_told = false;
        self.incarnation = incarnation;
        self.clients = (0..self.workload.clients).map(|_| Client::Idle).collect();
        self.appliers = (0..self.workload.appliers).map(|_| Applier::Idle).collect();
        self.applier_busy_until_us = vec![0; self.workload.appliers];
        self.locks.clear();
        self.fatal = false;
        // A new process: its script, if it runs one, is a new one.
        self.script += 1;
        self.script_failed = false;
        self.at_request_since = None;
        self.runnable = (0..self.workload.appliers as Waiter).map(|a| APPLIER_BASE + a).collect();
        self.next_step.clear();
        self.apply_effects(None);
    }

    /// The process dies: only the database and the saved state remain.
    pub fn crash(&mut self) {
        self.core = None;
        self.clients.iter_mut().for_each(|c| *c = Client::Idle);
        self.appliers.clear();
        self.locks.clear();
        self.runnable.clear();
        self.next_step.clear();
    }

    fn core(&mut self) -> &mut Core<Waiter> {
        self.core.as_mut().expect("a running node")
    }

    /// Takes what the core asked for: wake-ups, control messages, the saved state.
    fn apply_effects(&mut self, group: Option<&mut GroupSim>) {
        let Some(core) = self.core.as_mut() else { return };
        let effects = core.take_effects();
        self.runnable.extend(effects.wake);
        if let Some((_, state)) = effects.save {
            self.saved = Some(state);
        }
        if let Some(checkpoint) = effects.checkpoint {
            // Through its file format, as the runtime keeps it.
            let decoded = Checkpoint::decode(&checkpoint.encode(), self.workload.optimistic_pa);
            self.checkpoint = Some(Box::new(decoded.expect("a checkpoint reads back")));
        }
        if let Some(group) = group {
            for (control, tag) in effects.send {
                group.submit_tagged(self.id, control.encode(), tag, true);
            }
            for (writeset, tag) in effects.submit {
                group.submit_tagged(self.id, writeset.encode(), tag, false);
            }
        }
    }

    /// One step of simulated time: the group's deliveries and failures go in, then every
    /// thread that may proceed runs.
    pub fn step(&mut self, env: &mut Env<'_>) -> Result<(), String> {
        if self.core.is_none() {
            return Ok(());
        }
        let generation = self.generation;
        let status = env.group.status(self.id).expect("a running member");
        let history = Uuid(status.history);
        if status.history_forked && !self.history_forked_told {
            // As `provider::sink::CoreSink` does, before the next delivery (provider
            // simulator, seed 84829: without it, a member that started over because its
            // history forked let its node continue from a position past the fork).
            self.history_forked_told = true;
            self.core().history_forked();
        }
        for (tag, error) in env.group.take_failures(self.id) {
            if tag == STATE_REQUEST_TAG {
                self.resend_state_request(env.now_ms + 1_000);
            } else {
                self.core().on_submit_failed(generation, tag, error);
            }
        }
        for (tag, seqno) in env.group.take_barriers(self.id) {
            self.core().on_read_barrier(generation, tag, seqno as Seqno);
        }
        for _ in 0..512 {
            if !self.core().accepting_deliveries() {
                break;
            }
            let Some((delivered, replayed)) = env.group.pop_delivered(self.id).map_err(|v| v.to_string())? else {
                break;
            };
            let (seqno, payload) = crate::core::Payload::decode(delivered);
            let context = crate::core::DeliveryContext { history, replayed };
            self.core().on_delivered(generation, seqno, payload, context);
        }
        self.core().on_group_status(generation, &status, env.now_ms);
        self.apply_effects(Some(env.group));
        self.observe(env)?;
        self.runnable.append(&mut self.next_step);
        // Clients with time-driven work run every step; the rest only when woken.
        for c in 0..self.clients.len() {
            if matches!(self.clients[c], Client::Idle | Client::Executing { .. } | Client::Paced { .. }) {
                self.runnable.insert(c as Waiter);
            }
        }
        for _ in 0..64 {
            let Some(waiter) = self.runnable.pop_first() else { break };
            if self.core.is_none() {
                break;
            }
            if waiter >= APPLIER_BASE {
                self.run_applier((waiter - APPLIER_BASE) as usize, env)?;
            } else {
                self.run_client(waiter as usize, env)?;
            }
            self.apply_effects(Some(env.group));
            self.observe(env)?;
        }
        Ok(())
    }

    fn observe(&mut self, env: &mut Env<'_>) -> Result<(), String> {
        let Some(core) = self.core.as_mut() else { return Ok(()) };
        for observation in core.take_observations() {
            match observation {
                Observation::Certified { seqno, verdict, with_group_state } => {
                    env.checks.certified(self.index, seqno, verdict, with_group_state)?;
                }
                Observation::IndexInstalled { at, digest } => env.checks.index_installed(self.index, at, digest)?,
                Observation::DonorChoice { guess, chosen, answered } => {
                    self.choices_awaited += 1;
                    self.guesses_wrong += u64::from(answered && guess != chosen);
                    self.choices_untold += u64::from(!answered);
                }
                Observation::DonorTaken { joiner, id, after, donor, authoritative } => {
                    // Replayed choices too: one that differs shows the replaying member's
                    // state is not the group's (seed 2752: a checkpoint without the votes).
                    if authoritative {
                        env.checks.donor_taken(self.index, joiner, id, after, donor)?;
                    }
                }
            }
        }
        Ok(())
    }

    // ---- clients ---------------------------------------------------------------------------

    fn run_client(&mut self, c: usize, env: &mut Env<'_>) -> Result<(), String> {
        for _ in 0..SPIN_BOUND {
            let state = std::mem::replace(&mut self.clients[c], Client::Idle);
            match self.client_step(c, state, env)? {
                Step::Continue(next) => self.clients[c] = next,
                Step::Block(state) => {
                    self.clients[c] = state;
                    return Ok(());
                }
            }
            if matches!(self.clients[c], Client::Idle) {
                return Ok(());
            }
        }
        Err(format!("client {c} took {SPIN_BOUND} steps without waiting: a livelock"))
    }

    fn client_step(&mut self, c: usize, state: Client, env: &mut Env<'_>) -> Result<Step<Client>, String> {
        let me = c as Waiter;
        let generation = self.generation;
        Ok(match state {
            Client::Idle => {
                if self.quiet || !env.rng.chance(self.workload.start_per_million) {
                    return Ok(Step::Block(Client::Idle));
                }
                self.start_work(c, env).map_or(Step::Block(Client::Idle), Step::Continue)
            }
            Client::Executing { trx, until_ms } => {
                if trx.bf_rolled_back {
                    self.end_trx(c, &trx);
                    return Ok(Step::Continue(Client::Idle));
                }
                if env.now_ms < until_ms {
                    return Ok(Step::Block(Client::Executing { trx, until_ms }));
                }
                let flags = flags::TRX_START | flags::TRX_END;
                match self.core().certify_start(c as u64, trx.handle(), flags, &me, Duration::from_millis(env.now_ms)) {
                    // Paused: woken when the pause ends or the transaction is aborted.
                    None => Step::Block(Client::Executing { trx, until_ms }),
                    Some(CertifyStart::Done(_, _)) => {
                        self.end_trx(c, &trx);
                        Step::Continue(Client::Idle)
                    }
                    Some(CertifyStart::Submit { writeset, local_id, pace }) => {
                        let until_ms = env.now_ms + pace.as_micros().div_ceil(1_000) as u64;
                        Step::Continue(Client::Paced { trx, local_id, writeset: Box::new(writeset), until_ms })
                    }
                }
            }
            Client::Paced { trx, local_id, writeset, until_ms } => {
                if env.now_ms < until_ms {
                    return Ok(Step::Block(Client::Paced { trx, local_id, writeset, until_ms }));
                }
                if !env.group.submit_tagged(self.id, writeset.encode(), local_id, false) {
                    self.core().submit_impossible(local_id);
                }
                Step::Continue(Client::Certifying { trx, local_id })
            }
            Client::Certifying { trx, local_id } => match self.core().certify_outcome(trx.handle(), local_id, &me) {
                None => Step::Block(Client::Certifying { trx, local_id }),
                Some((Status::Ok, meta)) => {
                    Step::Continue(Client::Committing { seqno: meta.gtid.seqno, trx, passed: true })
                }
                // Failed certification still takes its seqno: rolled back at once (its rows
                // are free), then its seqno passes through commit order.
                Some((Status::TrxFail, meta)) if meta.gtid.seqno >= 0 => {
                    self.locks.retain(|_, holder| *holder != c);
                    Step::Continue(Client::Committing { seqno: meta.gtid.seqno, trx, passed: false })
                }
                Some((Status::BfAbort, _)) => Step::Continue(Client::Replaying { trx, plan: None }),
                Some(_) => {
                    self.end_trx(c, &trx);
                    Step::Continue(Client::Idle)
                }
            },
            Client::Committing { trx, seqno, passed } => match self.core().commit_order_enter(trx.handle(), seqno, &me)
            {
                None => Step::Block(Client::Committing { trx, seqno, passed }),
                Some(Status::BfAbort) => Step::Continue(Client::Replaying { trx, plan: None }),
                Some(Status::Ok) => {
                    let history = self.core().group();
                    let writes = passed.then_some(trx.writes.as_slice());
                    env.checks.committed(self.index, self.db.commit(history, seqno, writes, false))?;
                    self.core().commit_order_leave(trx.handle(), seqno, None);
                    self.end_trx(c, &trx);
                    if passed {
                        self.acked(env, seqno, hash_writes(&trx.writes, false))?;
                    }
                    Step::Continue(Client::Idle)
                }
                Some(_) => {
                    self.end_trx(c, &trx);
                    Step::Continue(Client::Idle)
                }
            },
            Client::Replaying { trx, plan } => self.replay(c, trx, plan, env)?,
            Client::Isolated { conn, mut statement, local_id: None } => {
                let flags = flags::TRX_START | flags::TRX_END;
                match self.core().isolation_start(conn, &mut statement, flags, &me) {
                    None => Step::Block(Client::Isolated { conn, statement, local_id: None }),
                    Some(Err(_)) => Step::Continue(Client::Idle),
                    Some(Ok((writeset, local_id))) => {
                        if !env.group.submit_tagged(self.id, writeset.encode(), local_id, false) {
                            self.core().submit_impossible(local_id);
                        }
                        Step::Continue(Client::Isolated { conn, statement: None, local_id: Some(local_id) })
                    }
                }
            }
            Client::Isolated { conn, statement, local_id: Some(local_id) } => {
                match self.core().isolation_outcome(conn, local_id, &me) {
                    None => Step::Block(Client::Isolated { conn, statement, local_id: Some(local_id) }),
                    Some((Status::Ok, meta)) => {
                        // The statement runs alone: it aborts every local transaction.
                        let seqno = meta.gtid.seqno;
                        self.abort_lock_holders(seqno, None, &[]);
                        let history = self.core().group();
                        env.checks.committed(self.index, self.db.commit(history, seqno, Some(&[]), true))?;
                        // Without an error there is nothing to vote on.
                        let _ = self.core().isolation_end(conn, None);
                        self.acked(env, seqno, hash_writes(&[], true))?;
                        Step::Continue(Client::Idle)
                    }
                    Some(_) => Step::Continue(Client::Idle),
                }
            }
            Client::Causal { barrier: None, acked_before, .. } => match self.core().barrier_start() {
                None => Step::Continue(Client::Idle),
                Some(id) => {
                    if !env.group.read_barrier_tagged(self.id, id) {
                        self.core().submit_impossible(id);
                    }
                    Step::Continue(Client::Causal { barrier: Some(id), point: None, acked_before })
                }
            },
            Client::Causal { barrier: Some(id), point: None, acked_before } => match self.core().barrier_point(id, &me)
            {
                None => Step::Block(Client::Causal { barrier: Some(id), point: None, acked_before }),
                Some(Err(())) => Step::Continue(Client::Idle),
                Some(Ok(p)) => Step::Continue(Client::Causal { barrier: Some(id), point: Some(p), acked_before }),
            },
            Client::Causal { barrier, point: Some(point), acked_before } => {
                if !self.core().committed_up_to(point, &me) {
                    return Ok(Step::Block(Client::Causal { barrier, point: Some(point), acked_before }));
                }
                if self.core().is_current(generation) && !self.core().is_failed() {
                    env.checks.causal_read(self.index, acked_before, &self.db)?;
                }
                Step::Continue(Client::Idle)
            }
        })
    }

    fn start_work(&mut self, c: usize, env: &mut Env<'_>) -> Option<Client> {
        if env.rng.chance(self.workload.causal_per_million) {
            return Some(Client::Causal { barrier: None, point: None, acked_before: *env.acked_max });
        }
        if env.rng.chance(self.workload.isolation_per_million) {
            let statement = (vec![vec![b"db".to_vec(), TABLE.to_vec()]], b"ALTER TABLE t".to_vec());
            return Some(Client::Isolated { conn: 10_000 + c as u64, statement: Some(statement), local_id: None });
        }
        let count = env.rng.range(1, 4) as usize;
        let mut writes: Vec<Write> = Vec::new();
        for _ in 0..count {
            let key = env.rng.range(0, u64::from(self.workload.keys)) as u8;
            if !writes.iter().any(|(k, _)| *k == key) {
                writes.push((key, env.rng.next_u64()));
            }
        }
        // A row held by another local transaction: the client would wait on the lock; it
        // tries something else later instead.
        if writes.iter().any(|(k, _)| self.locks.contains_key(k)) {
            return None;
        }
        for (key, _) in &writes {
            self.locks.insert(*key, c);
        }
        let id = (self.index as u64 + 1) << 40 | self.next_trx;
        self.next_trx += 1;
        let handle = WsHandle { trx_id: id, opaque: 0 };
        let keys: KeySet = writes.iter().map(|(k, _)| row_key(*k)).collect();
        let token = self.core().append_key(handle, ChainsBuilder::of(keys.as_slice()));
        let data = encode_writes(&writes);
        self.core().append_data(WsHandle { trx_id: id, opaque: token }, &[&data]);
        let until_ms = env.now_ms + env.rng.range(0, 40);
        Some(Client::Executing { trx: Trx { id, token, writes, bf_rolled_back: false }, until_ms })
    }

    /// The transaction is over here: its locks go, and the provider forgets it.
    fn end_trx(&mut self, c: usize, trx: &Trx) {
        self.locks.retain(|_, holder| *holder != c);
        self.core().release(trx.handle());
    }

    /// The order forked after `boundary`: causal reads under way no longer expect the
    /// abandoned side's commits past it.
    pub fn forget_acks_after(&mut self, boundary: Seqno) {
        for client in &mut self.clients {
            if let Client::Causal { acked_before, .. } = client {
                *acked_before = (*acked_before).min(boundary);
            }
        }
    }

    fn acked(&mut self, env: &mut Env<'_>, seqno: Seqno, hash: u64) -> Result<(), String> {
        // A commit of the side a forced component left is not one causal reads must see.
        if env.checks.acked(self.index, seqno, hash)? {
            *env.acked_max = (*env.acked_max).max(seqno);
        }
        Ok(())
    }

    fn replay(
        &mut self,
        c: usize,
        mut trx: Trx,
        plan: Option<ReplayPlan>,
        env: &mut Env<'_>,
    ) -> Result<Step<Client>, String> {
        let me = c as Waiter;
        // Rolled back for the abort: its locks are released until it applies again.
        self.locks.retain(|_, holder| *holder != c);
        trx.bf_rolled_back = true;
        let plan = match plan {
            Some(plan) => plan,
            None => match self.core().replay_start(trx.handle(), &me) {
                None => return Ok(Step::Block(Client::Replaying { trx, plan: None })),
                Some(Err(_)) => {
                    self.end_trx(c, &trx);
                    return Ok(Step::Continue(Client::Idle));
                }
                Some(Ok(plan)) => plan,
            },
        };
        let seqno = plan.meta.gtid.seqno;
        let handle = WsHandle { trx_id: trx.id, opaque: plan.token };
        // A replay applies with priority, as an applier does; a row held by a transaction
        // that commits first is looked at again each step.
        if !self.take_locks(seqno, Some(c), &trx.writes) {
            self.next_step.insert(me);
            return Ok(Step::Block(Client::Replaying { trx, plan: Some(plan) }));
        }
        Ok(match self.core().commit_order_enter(handle, seqno, &me) {
            None => Step::Block(Client::Replaying { trx, plan: Some(plan) }),
            Some(Status::Ok) => {
                let writes = decode_writes(&plan.data)?;
                let history = self.core().group();
                env.checks.committed(self.index, self.db.commit(history, seqno, Some(&writes), false))?;
                self.core().commit_order_leave(handle, seqno, None);
                self.core().replay_ended(true);
                self.end_trx(c, &trx);
                self.acked(env, seqno, hash_writes(&writes, false))?;
                Step::Continue(Client::Idle)
            }
            Some(_) => {
                self.end_trx(c, &trx);
                Step::Continue(Client::Idle)
            }
        })
    }

    /// Takes `writes`' rows for a high-priority writer at `seqno` (an applier, a replay),
    /// aborting local transactions that hold them; false while a row is held by a
    /// transaction that commits first.
    fn take_locks(&mut self, seqno: Seqno, owner: Option<usize>, writes: &[Write]) -> bool {
        self.abort_lock_holders(seqno, owner, writes);
        let free = writes.iter().all(|(k, _)| self.locks.get(k).is_none_or(|h| Some(*h) == owner));
        if free {
            if let Some(owner) = owner {
                for (k, _) in writes {
                    self.locks.insert(*k, owner);
                }
            }
        }
        free
    }

    /// Brute-force aborts of the local transactions holding `writes`' rows (every row when
    /// `writes` is empty: an isolated statement).
    fn abort_lock_holders(&mut self, seqno: Seqno, owner: Option<usize>, writes: &[Write]) {
        let holders: BTreeSet<usize> = self
            .locks
            .iter()
            .filter(|(k, h)| Some(**h) != owner && (writes.is_empty() || writes.iter().any(|(w, _)| w == *k)))
            .map(|(_, h)| *h)
            .collect();
        for holder in holders {
            let trx_id = match &self.clients[holder] {
                Client::Executing { trx, .. }
                | Client::Paced { trx, .. }
                | Client::Certifying { trx, .. }
                | Client::Committing { trx, .. }
                | Client::Replaying { trx, .. } => trx.id,
                _ => continue,
            };
            let (status, _) = self.core().abort_certification(seqno, trx_id);
            if status == Status::Ok {
                // The server rolls the victim back at once: its rows are free.
                self.locks.retain(|_, h| *h != holder);
                match &mut self.clients[holder] {
                    Client::Executing { trx, .. }
                    | Client::Paced { trx, .. }
                    | Client::Certifying { trx, .. }
                    | Client::Committing { trx, .. } => {
                        trx.bf_rolled_back = true;
                    }
                    _ => {}
                }
                self.runnable.insert(holder as Waiter);
            }
        }
    }

    // ---- appliers ----------------------------------------------------------------------------

    fn run_applier(&mut self, a: usize, env: &mut Env<'_>) -> Result<(), String> {
        for _ in 0..SPIN_BOUND {
            if self.core.is_none() {
                return Ok(());
            }
            let state = std::mem::replace(&mut self.appliers[a], Applier::Idle);
            match self.applier_step(a, state, env)? {
                Step::Continue(next) => self.appliers[a] = next,
                Step::Block(state) => {
                    self.appliers[a] = state;
                    return Ok(());
                }
            }
        }
        Err(format!("applier {a} took {SPIN_BOUND} steps without waiting: a livelock"))
    }

    fn applier_step(&mut self, a: usize, state: Applier, env: &mut Env<'_>) -> Result<Step<Applier>, String> {
        let me = APPLIER_BASE + a as Waiter;
        let generation = self.generation;
        Ok(match state {
            Applier::Stopped => Step::Block(Applier::Stopped),
            Applier::Idle => match self.core().next_task(generation, &me) {
                None => Step::Block(Applier::Idle),
                Some(Task::Exit(status)) => {
                    if status == Status::Fatal {
                        self.fatal = true;
                    }
                    Step::Block(Applier::Stopped)
                }
                Some(Task::Run(event)) => Step::Continue(self.dispatch(event, env)?),
            },
            Applier::Turn { event, after, seqno } => match self.core().turn(generation, after, seqno, &me) {
                None => Step::Block(Applier::Turn { event, after, seqno }),
                Some(turn) => Step::Continue(self.on_turn(event, turn, env)?),
            },
            Applier::Locks { seqno, writeset, failed } => {
                let writes = rows_of(&writeset)?;
                let free = if writeset.flags & flags::ISOLATION != 0 {
                    self.abort_lock_holders(seqno, None, &[]);
                    self.locks.is_empty()
                } else {
                    self.take_locks(seqno, None, &writes)
                };
                if free {
                    // Several short applies fit in one step of the simulation.
                    let busy_until = &mut self.applier_busy_until_us[a];
                    let until_us = (*busy_until).max(env.now_ms * 1_000) + self.workload.apply_us;
                    *busy_until = until_us;
                    Step::Continue(Applier::Applying { seqno, writeset, failed, until_us })
                } else {
                    // Waits for a transaction ordered before it: it looks again each step.
                    self.next_step.insert(me);
                    Step::Block(Applier::Locks { seqno, writeset, failed })
                }
            }
            Applier::Applying { seqno, writeset, failed, until_us } => {
                if env.now_ms * 1_000 < until_us {
                    // Time-driven: it looks again each step.
                    self.next_step.insert(me);
                    return Ok(Step::Block(Applier::Applying { seqno, writeset, failed, until_us }));
                }
                Step::Continue(Applier::Order { seqno, writeset, failed })
            }
            Applier::Order { seqno, writeset, failed } => {
                let handle = WsHandle { trx_id: writeset.source.trx_id, opaque: REMOTE_HANDLE | seqno as u64 };
                match self.core().commit_order_enter(handle, seqno, &me) {
                    None => Step::Block(Applier::Order { seqno, writeset, failed }),
                    Some(Status::Ok) => {
                        let writes = rows_of(&writeset)?;
                        let isolation = writeset.flags & flags::ISOLATION != 0;
                        let history = self.core().group();
                        // The server fails to apply it here (a diverged row, a full disk): it
                        // rolls it back and reports the error, and the members vote.
                        let breaks = !failed && apply_breaks(history, self.index, seqno);
                        let content = (!failed && !breaks).then_some(writes.as_slice());
                        env.checks.committed(self.index, self.db.commit(history, seqno, content, isolation))?;
                        if breaks {
                            if env.trace {
                                println!("[{:>6} ms] node {} fails to apply seqno {seqno}", env.now_ms, self.index + 1);
                            }
                            self.core().commit_order_leave(handle, seqno, Some(SIMULATED_APPLY_ERROR));
                            return Ok(Step::Continue(Applier::Vote { seqno }));
                        }
                        self.core().commit_order_leave(handle, seqno, None);
                        if self.core().remote_applied(seqno).is_err() {
                            // An earlier seqno left this node inconsistent (its vote was lost).
                            self.fatal = true;
                            return Ok(Step::Block(Applier::Stopped));
                        }
                        Step::Continue(Applier::Idle)
                    }
                    // The node failed while this applier waited for its turn (a gap in the
                    // group's log past its position): the server rolls the writeset back, and
                    // its applier, back in `recv`, leaves with the node's fatal error.
                    Some(Status::NodeFail) if self.core().is_failed() => {
                        self.fatal = true;
                        Step::Block(Applier::Stopped)
                    }
                    Some(other) => return Err(format!("an applier's commit_order_enter got {other:?}")),
                }
            }
            Applier::Handshake { view, resend_at_ms, sent } => self.handshake(a, view, resend_at_ms, sent, env),
            Applier::Choosing { view } => match self.core().restart_choice(generation, &me) {
                None => Step::Block(Applier::Choosing { view }),
                Some(_) => {
                    match self.core().connection().map(|c| c.restart) {
                        Some(Restart::Alone) => self.restarts_alone += 1,
                        Some(Restart::Transfer) => self.restarts_with_transfer += 1,
                        _ => {}
                    }
                    match self.core().own_log_position(generation) {
                        Some(position) => {
                            if env.trace {
                                println!("[{:>6} ms] node {} catches up alone", env.now_ms, self.index + 1);
                            }
                            Step::Continue(self.start_from_own_state(view, position, env)?)
                        }
                        None => {
                            if env.trace && self.core().has_state() {
                                println!("[{:>6} ms] node {} asks for a transfer", env.now_ms, self.index + 1);
                            }
                            Step::Continue(Applier::Handshake { view, resend_at_ms: env.now_ms, sent: false })
                        }
                    }
                }
            },
            Applier::Vote { seqno } => match self.core().vote_result(generation, seqno, &me) {
                None => Step::Block(Applier::Vote { seqno }),
                Some(result) => {
                    if env.trace {
                        println!("[{:>6} ms] node {} vote on seqno {seqno}: {result:?}", env.now_ms, self.index + 1);
                    }
                    match result {
                        VoteResult::Continue => self.core().vote_taken(seqno),
                        VoteResult::Inconsistent => self.core().vote_lost(seqno, true),
                    }
                    if self.core().remote_applied(seqno).is_err() {
                        // Inconsistent: the server's applier fails and the node leaves.
                        self.fatal = true;
                        return Ok(Step::Block(Applier::Stopped));
                    }
                    Step::Continue(Applier::Idle)
                }
            },
        })
    }

    fn dispatch(&mut self, event: Event, env: &mut Env<'_>) -> Result<Applier, String> {
        Ok(match event {
            Event::View { view, first_in_connection } if !self.core().phase().app_ready() => {
                if first_in_connection {
                    Applier::Choosing { view }
                } else {
                    Applier::Handshake { view, resend_at_ms: env.now_ms, sent: false }
                }
            }
            Event::View { ref view, .. } | Event::Excluded { ref view } => {
                let seqno = view.state_id.seqno;
                Applier::Turn { event, after: seqno - 1, seqno }
            }
            Event::Apply { seqno, depends_on, .. } => Applier::Turn { event, after: depends_on, seqno },
            Event::Donate(ref d) => {
                let after = d.after;
                Applier::Turn { event, after, seqno: after }
            }
            Event::Skipped { seqno } => Applier::Turn { event, after: seqno - 1, seqno },
            Event::Synced { after } => Applier::Turn { event, after, seqno: after },
            Event::NonPrimary { .. } => Applier::Idle,
            Event::Final { .. } => {
                self.core().close("closed");
                Applier::Stopped
            }
        })
    }

    /// The server starts on a view at its own position (it keeps its checkpoint only if that
    /// is the position it holds), then the order after it is applied from the node's own log.
    fn start_from_own_state(&mut self, view: View, position: Gtid, env: &mut Env<'_>) -> Result<Applier, String> {
        // Seqnos after the database's may be views without this node, which the server
        // never sees (it keeps its own position then).
        if self.db.history != position.uuid || self.db.committed > position.seqno {
            return Err(format!(
                "a first view at {position} while the database holds {}:{}",
                self.db.history, self.db.committed
            ));
        }
        if env.trace {
            println!("[{:>6} ms] node {} starts from its own state at {position}", env.now_ms, self.index + 1);
        }
        let generation = self.generation;
        if self.core().catch_up_from_own_log(generation, position).is_err() {
            self.fatal = true;
            return Ok(Applier::Stopped);
        }
        self.core().requeue_view(view);
        Ok(Applier::Idle)
    }

    fn on_turn(&mut self, event: Event, turn: Turn, env: &mut Env<'_>) -> Result<Applier, String> {
        Ok(match event {
            Event::View { view, .. } => {
                if turn == Turn::Go {
                    // The server is told synced now or when the announcement comes back.
                    let _synced_now = self.core().view_applied(view.state_id.seqno);
                }
                Applier::Idle
            }
            Event::Apply { seqno, writeset, depends_on, failed } => {
                if turn != Turn::Go {
                    return Ok(Applier::Idle);
                }
                env.checks.applying(self.index, seqno, depends_on, &self.db)?;
                if failed {
                    Applier::Order { seqno, writeset, failed }
                } else {
                    Applier::Locks { seqno, writeset, failed }
                }
            }
            Event::Donate(donation) => {
                if turn != Turn::Ended {
                    self.donate(*donation, env)?;
                }
                Applier::Idle
            }
            Event::Skipped { seqno } => {
                if turn == Turn::Go {
                    self.core().finished(seqno);
                }
                Applier::Idle
            }
            Event::Excluded { view } => {
                if turn == Turn::Go {
                    self.core().finished(view.state_id.seqno);
                }
                Applier::Idle
            }
            Event::Synced { after } => {
                if turn != Turn::Ended {
                    self.core().become_synced(after);
                }
                Applier::Idle
            }
            Event::NonPrimary { .. } | Event::Final { .. } => Applier::Idle,
        })
    }

    /// The joiner's handshake: the server asks for state and waits for it.
    fn handshake(&mut self, a: usize, view: View, resend_at_ms: u64, sent: bool, env: &mut Env<'_>) -> Step<Applier> {
        let me = APPLIER_BASE + a as Waiter;
        let generation = self.generation;
        if !sent {
            if env.now_ms < resend_at_ms {
                // Asks again after a while: looked at every step until then.
                self.next_step.insert(me);
                return Step::Block(Applier::Handshake { view, resend_at_ms, sent });
            }
            let id = env.rng.next_u64() | 1;
            match self.core().begin_state_request(generation, id) {
                RequestStart::Ended => {
                    self.core().requeue_view(view);
                    return Step::Continue(Applier::Idle);
                }
                RequestStart::AlreadyReceived => {}
                RequestStart::Send(request) => {
                    let position = request.position;
                    let sst_request = format!("sim:{}", self.script).into_bytes();
                    let request = Control::StateRequest(StateRequest { sst_request, ..request });
                    env.group.submit_tagged(self.id, request.encode(), STATE_REQUEST_TAG, true);
                    if env.trace {
                        println!(
                            "[{:>6} ms] node {} applier {a} requests state (position {position}, id {id:x})",
                            env.now_ms,
                            self.index + 1
                        );
                    }
                }
            }
        }
        // An unordered request is sent again if nothing comes of it (see `retry_lost_requests`).
        let resend_at_ms = if sent { resend_at_ms } else { env.now_ms + 30_000 };
        match self.core().handshake_step(generation, &me) {
            None => Step::Block(Applier::Handshake { view, resend_at_ms, sent: true }),
            Some(HandshakeStep::Ended) => {
                self.core().requeue_view(view);
                Step::Continue(Applier::Idle)
            }
            Some(HandshakeStep::NoDonor) => {
                Step::Continue(Applier::Handshake { view, resend_at_ms: env.now_ms + 1_000, sent: false })
            }
            Some(HandshakeStep::NewScript) => {
                self.script += 1;
                self.script_failed = false;
                self.new_scripts += 1;
                if env.trace {
                    println!(
                        "[{:>6} ms] node {} starts state transfer script {}",
                        env.now_ms,
                        self.index + 1,
                        self.script
                    );
                }
                Step::Continue(Applier::Handshake { view, resend_at_ms: env.now_ms, sent: false })
            }
            Some(HandshakeStep::Failed { rcode }) => {
                // The runtime ends the process here (Galera's abort); the server restarts.
                if env.trace {
                    println!(
                        "[{:>6} ms] node {} will never receive state (rcode {rcode}): aborts",
                        env.now_ms,
                        self.index + 1
                    );
                }
                self.fatal = true;
                Step::Block(Applier::Stopped)
            }
            Some(HandshakeStep::Received { .. }) => match self.core().install_transfer(generation) {
                Ok(_) => {
                    self.core().requeue_view(view);
                    Step::Continue(Applier::Idle)
                }
                Err(_) => {
                    self.fatal = true;
                    Step::Block(Applier::Stopped)
                }
            },
        }
    }

    /// The group refused the handshake's request: it is sent again at `at_ms` (see
    /// `retry_lost_requests`).
    fn resend_state_request(&mut self, at_ms: u64) {
        for applier in &mut self.appliers {
            if let Applier::Handshake { resend_at_ms, sent: true, .. } = applier {
                *resend_at_ms = at_ms;
            }
        }
    }

    /// Re-polls handshakes whose request was not ordered in time, as the runtime's 30-second
    /// wait for the request's ordering does; and gives up on a donor that sends nothing, as
    /// the runtime's receiver does (there after 300 s).
    pub fn retry_lost_requests(&mut self, now_ms: u64) {
        let generation = self.generation;
        let Some(catch_up) = self.core.as_ref().and_then(|c| c.catch_up(generation)) else { return };
        match catch_up {
            CatchUp::AtRequest(at) => {
                // Since when this request (a donor that left makes the node ask again) waits.
                let since = match self.at_request_since {
                    Some((request, since)) if request == at => since,
                    _ => now_ms,
                };
                self.at_request_since = Some((at, since));
                if now_ms >= since + DONOR_PATIENCE_MS {
                    let message =
                        format!("no donor sent the state transfer for seqno {at} within {DONOR_PATIENCE_MS} ms");
                    self.core().fail_stream(generation, &message);
                }
                return;
            }
            CatchUp::Waiting => self.at_request_since = None,
            CatchUp::Feeding(_) | CatchUp::Done => {
                // The stream is in: the handshake asks again only after its donor left
                // (`Core::donor_left`), and then its request may be lost as any other.
                let ordered = self.core.as_ref().and_then(|c| c.connection()).is_some_and(|c| c.donor.is_some());
                if ordered {
                    return;
                }
            }
            CatchUp::Failed => return,
        }
        for a in 0..self.appliers.len() {
            if let Applier::Handshake { resend_at_ms, sent: true, .. } = self.appliers[a] {
                if now_ms >= resend_at_ms {
                    let me = APPLIER_BASE + a as Waiter;
                    if let Some(core) = self.core.as_mut() {
                        core.abandon_wait(&me);
                    }
                    if let Applier::Handshake { sent, .. } = &mut self.appliers[a] {
                        *sent = false;
                    }
                    self.runnable.insert(me);
                }
            }
        }
    }

    /// The donor's side: the incremental part from the cache (when it holds the gap and the
    /// verdicts), the certification state through its wire format, and the server's
    /// snapshot or position-only confirmation.
    fn donate(&mut self, d: Donation, env: &mut Env<'_>) -> Result<(), String> {
        if env.trace {
            println!(
                "[{:>6} ms] node {} donates to {} ({}) after {}",
                env.now_ms,
                self.index + 1,
                d.ist_addr,
                String::from_utf8_lossy(&d.request),
                d.after
            );
        }
        let gap = d.failed.as_ref().and_then(|failed| {
            let range = env.group.cached_range(self.id, (d.position.seqno + 1) as u64, d.after as u64).ok()?;
            Some(
                range
                    .into_iter()
                    .filter_map(|delivered| {
                        let seqno = delivered.seqno as Seqno;
                        match delivered.kind {
                            lockstep_group::DeliveredKind::Writeset { .. } => Some(crate::ist::Item::Writeset {
                                seqno,
                                bytes: delivered.bytes,
                                failed: failed.contains(&seqno),
                            }),
                            lockstep_group::DeliveredKind::View(_) => Some(crate::ist::Item::Skipped { seqno }),
                            _ => None,
                        }
                    })
                    .collect::<Vec<_>>(),
            )
        });
        // Position only when the gap travels with the group's verdicts, or the joiner certified
        // it with the group's state itself (`Donation::position_only`).
        let bypass = d.position_only(gap.is_some());
        let Some((to, incarnation)) = parse_sim_address(&d.ist_addr) else {
            return Err(format!(
                "node {} was asked to donate to {}, no address of the simulator's",
                self.index + 1,
                d.ist_addr
            ));
        };
        let from = gap.as_ref().map(|_| d.position.seqno + 1);
        env.transfers.push(PendingTransfer {
            to,
            incarnation,
            since_ms: env.now_ms,
            at_ms: env.now_ms + env.rng.range(10, 300),
            donor: self.index,
            donor_incarnation: self.incarnation,
            kind: TransferKind::Stream {
                at: d.after,
                from,
                items: gap.unwrap_or_default(),
                preload: d.preload.encode(),
                donor_digest: d.preload.index.digest(),
            },
        });
        if d.stream_only() {
            // No script: the joiner's server took its state from a donor that left.
            let generation = self.generation;
            self.core().donated_stream_only(generation, &d);
            return Ok(());
        }
        // Listed from its start to `sst_sent`, whatever the desync count (a loss of the primary
        // component clears that while the script runs).
        let donating = self.core().connection().is_some_and(|c| !c.donations.is_empty());
        env.checks.donation_starts(self.index, donating)?;
        let state_id = self.core().donation_started(&d, bypass);
        let breaks = if self.quiet { None } else { donation_breaks(state_id.uuid, self.index, d.after) };
        if breaks == Some(crate::state_transfer::DONATION_REFUSED) {
            if env.trace {
                println!("[{:>6} ms] node {} refuses to donate after {}", env.now_ms, self.index + 1, d.after);
            }
            self.core().donation_refused(&d, crate::state_transfer::DONATION_REFUSED);
            return Ok(());
        }
        let snapshot = (!bypass).then(|| self.db.snapshot(state_id.seqno));
        env.transfers.push(PendingTransfer {
            to,
            incarnation,
            since_ms: env.now_ms,
            at_ms: env.now_ms + env.rng.range(50, 2_000),
            donor: self.index,
            donor_incarnation: self.incarnation,
            kind: TransferKind::State { state_id, snapshot, broken: breaks.is_some(), script: sim_script(&d.request) },
        });
        Ok(())
    }

    /// A transfer for this node arrived (see [`super::transfer`]).
    pub fn core_mut(&mut self) -> Option<&mut Core<Waiter>> {
        self.core.as_mut()
    }

    /// Applies core effects after a call made from outside the node's threads.
    pub fn after_call(&mut self, group: &mut GroupSim) {
        self.apply_effects(Some(group));
    }

    /// Threads still busy: at the end of a quiet run, every one should be idle.
    pub fn busy_threads(&self) -> Vec<String> {
        let mut busy = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            if !matches!(client, Client::Idle) {
                busy.push(format!("client {c}: {client:?}"));
            }
        }
        for (a, applier) in self.appliers.iter().enumerate() {
            if !matches!(applier, Applier::Idle) {
                busy.push(format!("applier {a}: {applier:?}"));
            }
        }
        if let Some(core) = self.core.as_ref().filter(|c| c.queued_events() > 0 || c.phase() != Phase::Synced) {
            let c = core.connection().expect("connected");
            busy.push(format!(
                "queue: {:?}; catch-up {:?}, component {:?}, has state {}, committed {}, deliveries taken {}",
                core.queue_head(6),
                c.catch_up,
                c.component,
                c.has_state,
                core.last_committed().seqno,
                core.accepting_deliveries()
            ));
        }
        busy
    }

    /// Where the core stands: last committed, and its apply queue.
    pub fn core_position(&self) -> Option<(Seqno, usize)> {
        self.core.as_ref().map(|c| (c.last_committed().seqno, c.queued_events()))
    }

    pub fn holds_group_state(&self) -> bool {
        self.core.as_ref().is_some_and(|c| c.holds_group_state())
    }

    pub fn phase(&self) -> Option<Phase> {
        self.core.as_ref().map(|c| c.phase())
    }
}

/// The rows a writeset writes (an isolated statement writes none: its data is the statement).
fn rows_of(writeset: &Writeset) -> Result<Vec<Write>, String> {
    if writeset.flags & flags::ISOLATION != 0 {
        Ok(Vec::new())
    } else {
        decode_writes(&writeset.data)
    }
}

/// What a thread's step leads to: go on with the next state, or wait in this one.
enum Step<S> {
    Continue(S),
    Block(S),
}

/// The joiner's script a simulated SST request names (`sim:N`).
fn sim_script(request: &[u8]) -> u64 {
    std::str::from_utf8(request).ok().and_then(|r| r.strip_prefix("sim:")).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// `sim:<node>:<incarnation>`: where a joiner of the simulator receives its transfer.
pub fn parse_sim_address(address: &str) -> Option<(usize, u64)> {
    let mut parts = address.strip_prefix("sim:")?.split(':');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}
