//! A running member: the `Member` state machine with the TCP transport and the on-disk
//! cache at its edges. This is what the provider uses.
//!
//! The member sits in a mutex with a queue of inputs. A ticker thread takes what is queued,
//! in batches with one flush of the cache each (one fsync with `gcache.sync`: group commit),
//! and runs timeouts. When the node is idle, a client's writeset and a peer's message skip
//! the queue and are processed on the thread that has them: no hand-off at low load, batches
//! under load (see docs/design/group-run-to-completion.md).
//!
//! If processing panics, the member stops visibly: `status().failed` says why, every
//! submission waiting or to come gets `SubmitError::Failed`, and the delivery stream
//! closes. Nothing waits forever on work nobody will do.

use crate::cache::{FileStore, LogStore};
use crate::config::{GroupConfig, ThreadStart, Tuning};
use crate::member::{CacheRead, Member, StartOver, Status};
use crate::message::{Body, Message};
use crate::transport::{Inbound, Tls, TlsConfig, TlsError, Transport};
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, SubmitError};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Inputs waiting for the member; past this a pusher waits for the member itself (TCP
/// back-pressure on a reader).
const EVENT_QUEUE: usize = 8192;
/// Deliveries handed to the application ahead of it consuming them.
const DELIVERY_QUEUE: usize = 1024;
/// Inputs taken per round before the cache is flushed (group commit).
const EVENTS_PER_ROUND: usize = 1024;
/// The ticker's longest sleep: how late a timeout may be noticed at most.
const TICK_MAX: Duration = Duration::from_millis(50);
/// How often the status is published and the sink's round runs (primary changes, commit
/// cuts), at most.
const PERIODIC_MS: u64 = 10;
/// A delivery at least this big goes to the sink on a thread of its own: the application
/// takes long over it (about 1 s to decode and certify 70 MB), and the member must go on
/// heartbeating and replying meanwhile (docs/design/group-writeset-parts.md).
const AWAY_BYTES: usize = 4 << 20;
/// The ticker's sleep while the sink is away, to take it back soon after it returns.
const TICK_AWAY: Duration = Duration::from_millis(5);
/// What a cache reader reads per hold of the member's lock: a few milliseconds of disk and
/// decoding, so heartbeats and replies go on while a donor reads gigabytes.
const CACHE_READ_BATCH_BYTES: usize = 4 << 20;

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub group: GroupConfig,
    /// `info.address` is where peers reach this member; `info.id` should come from
    /// [`load_or_create_member_id`](crate::load_or_create_member_id).
    pub info: MemberInfo,
    /// Where the transport listens (`gmcast.listen_addr`, e.g. `0.0.0.0:4567`); often
    /// `info.address` itself.
    pub listen: String,
    /// The cache directory (`gcache.dir`); may be MariaDB's datadir (the cache is only
    /// top-level `lockstep-cache.*.galera.cache` files).
    pub data_dir: PathBuf,
    /// `gcache.sync`: fdatasync the log once per driver round, before anything that
    /// depends on what the round appended is sent or acknowledged (group commit). Off, the
    /// log is written to the OS in the same place and order, so a process crash loses
    /// nothing, but a power loss may lose its tail. The Raft term and vote and the purge
    /// boundary are synced either way. See docs/design/group-durability-sync-before-send.md.
    pub fsync: bool,
    /// Start a new cluster (`--wsrep-new-cluster`) from this history and base seqno
    /// instead of joining `peers`. An existing cache is discarded: it belonged to an
    /// earlier cluster.
    pub bootstrap: Option<Genesis>,
    /// Transport addresses (`host:port`) of members to join through
    /// (`wsrep_cluster_address`); their ids are learned from their handshake, and our own
    /// address may appear among them.
    pub peers: Vec<String>,
    /// On restart: the last seqno the application applied durably; the cache re-delivers
    /// from the one after (or a `StateGap` if it no longer holds it). Ignored by a
    /// bootstrap (its application is at the genesis' base seqno) and a first join.
    pub resume_after: Seqno,
    /// On restart: the last seqno the application holds on this history (its saved
    /// position, 0 for none), however far back the cache re-delivers: a member whose
    /// application went past a fork of the group's history learns its history forked.
    pub application_position: Seqno,
}

/// Where a submission's outcome goes.
enum Reply {
    Channel(Sender<Result<Seqno, SubmitError>>),
    /// Only a failure is reported, to the sink, with this tag; success shows as the delivery.
    Tag(u64),
}

/// What the application does with the total order, on the driver's thread: it takes each
/// delivery as it is made, with no thread hand-off in between. It must be quick and must not
/// block; messages it wants ordered go to the [`Outbox`] it is given. A delivery of at least
/// `AWAY_BYTES` is the exception: it is made on a thread of its own while the member goes
/// on, and what follows waits for it.
pub trait DeliverySink: Send {
    /// One delivery, in order. Returns false when it has no room for more: the driver then
    /// holds what follows (its receive queue grows, which is what flow control sees) until
    /// [`GroupNode::resume_deliveries`].
    /// `replayed`: it comes from this member's own log as it was at a restart (history).
    fn deliver(&mut self, delivered: Delivered, replayed: bool, status: &Status, outbox: &mut Outbox) -> bool;
    /// A tagged submission will not be ordered.
    fn submit_failed(&mut self, tag: u64, error: SubmitError, outbox: &mut Outbox);
    /// A read barrier's point: every writeset acknowledged before it was asked is at or
    /// below `seqno` (see [`crate::Member::read_barrier`]).
    fn barrier_reached(&mut self, tag: u64, seqno: Seqno, outbox: &mut Outbox);
    /// After every round of the driver (at least every 50 ms), with the member's status.
    /// Returns whether it has room for deliveries (after refusing some).
    fn round(&mut self, status: &Status, outbox: &mut Outbox) -> bool;
}

/// Messages and writesets a [`DeliverySink`] asks to order, as `(bytes, tag)`: a failure
/// comes back to `submit_failed` with the tag.
#[derive(Default)]
pub struct Outbox {
    messages: Vec<(Vec<u8>, u64)>,
    writesets: Vec<(Vec<u8>, u64)>,
}

impl Outbox {
    pub fn send_message(&mut self, data: Vec<u8>, tag: u64) {
        self.messages.push((data, tag));
    }

    /// Like [`GroupNode::submit_tagged`], from the driver's own thread.
    pub fn submit(&mut self, data: Vec<u8>, tag: u64) {
        self.writesets.push((data, tag));
    }
}

/// The sink behind [`GroupNode::recv_delivered`]: a bounded channel.
struct ChannelSink(SyncSender<Delivered>, Option<Delivered>);

impl DeliverySink for ChannelSink {
    fn deliver(&mut self, delivered: Delivered, _: bool, _: &Status, _: &mut Outbox) -> bool {
        match self.0.try_send(delivered) {
            Ok(()) => true,
            Err(TrySendError::Full(d)) => {
                // Offered again first at the next round.
                self.1 = Some(d);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    fn submit_failed(&mut self, _: u64, _: SubmitError, _: &mut Outbox) {}

    fn barrier_reached(&mut self, _: u64, _: Seqno, _: &mut Outbox) {}

    fn round(&mut self, status: &Status, outbox: &mut Outbox) -> bool {
        match self.1.take() {
            Some(d) => self.deliver(d, false, status, outbox),
            None => true,
        }
    }
}

enum Event {
    /// Boxed: a message is far larger than every other event, and events wait in a queue.
    Incoming(Box<Message>),
    /// A seed address was tried: the member that answered there, if any, and whether this is
    /// that address's first report.
    SeedTried {
        found: Option<MemberId>,
        first_try: bool,
    },
    /// The last connection this member had open to us ended.
    PeerClosed(MemberId),
    Submit(Vec<u8>, Reply),
    SendMessage(Vec<u8>, Reply),
    /// The sink has room again.
    ResumeDeliveries,
    ReadBarrier(u64),
    /// Makes the driver panic, to test what a panic leaves behind.
    #[cfg(test)]
    Panic,
    Leave,
    OpenCacheRead(Seqno, Seqno, Sender<Result<CacheRead, Seqno>>),
    /// The next batch of an open cache read, which travels with it and comes back.
    ReadCache(Box<CacheRead>, Sender<CacheBatch>),
    CloseCacheRead(u64),
    Pause,
    Resume,
    /// `pc.bootstrap=1`.
    BootstrapPrimary,
    IgnoreSplitBrain(bool),
    Weight(u8),
    Tune(Tuning),
}

/// The member and its queue of inputs, shared by every thread that has work for it.
struct Engine {
    /// The thread that takes what others leave queued, and runs timeouts.
    ticker: OnceLock<thread::Thread>,
    inputs: Mutex<VecDeque<Event>>,
    /// Submissions of ours waiting for their seqno (read barriers aside), as of the last round.
    in_flight: AtomicUsize,
    /// `None` once the node stopped, or failed after a panic.
    driver: Mutex<Option<Driver>>,
    stopping: AtomicBool,
}

impl Engine {
    /// Queues `event` and processes one batch of what is queued, unless another
    /// thread is at it (that thread takes it). What is still queued after the batch goes to
    /// the ticker thread: a reader or a client does not stay to work for others (a reader
    /// away from its socket would hold up its peer's messages).
    fn input(&self, event: Event) {
        let waiting = {
            let mut inputs = self.inputs.lock().unwrap_or_else(PoisonError::into_inner);
            inputs.push_back(event);
            inputs.len()
        };
        let guard = match self.driver.try_lock() {
            Ok(guard) => guard,
            // Back-pressure: past the queue's bound, wait for the member instead.
            Err(TryLockError::WouldBlock) if waiting > EVENT_QUEUE => {
                self.driver.lock().unwrap_or_else(PoisonError::into_inner)
            }
            Err(TryLockError::WouldBlock) => return,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        self.process_batch(guard);
        if !self.is_idle() {
            self.wake_ticker();
        }
    }

    /// The ticker: processes until nothing is queued.
    fn drain(&self) {
        while !self.is_idle() {
            let guard = self.driver.lock().unwrap_or_else(PoisonError::into_inner);
            self.process_batch(guard);
        }
    }

    fn process_batch(&self, mut guard: MutexGuard<'_, Option<Driver>>) {
        let batch: Vec<Event> = {
            let mut inputs = self.inputs.lock().unwrap_or_else(PoisonError::into_inner);
            let take = inputs.len().min(EVENTS_PER_ROUND);
            inputs.drain(..take).collect()
        };
        match guard.as_mut() {
            None => refuse(batch),
            Some(driver) => {
                if let Err(panic) = crate::guarded(|| driver.process(batch)) {
                    let driver = guard.take().expect("checked above");
                    driver.fail(format!("group member panicked: {panic}"));
                    return;
                }
                self.in_flight.store(driver.replies.len(), Ordering::Relaxed);
                let (transport, peers) = (driver.transport.clone(), std::mem::take(&mut driver.unwritten));
                // Written on this thread when the sockets let it: no I/O under the member's lock.
                drop(guard);
                for peer in peers {
                    transport.write_queued(peer);
                }
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.inputs.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    /// Leaves `event` to the ticker thread; past the queue's bound, waits for room
    /// (back-pressure on a reader's socket).
    fn queue(&self, event: Event) {
        let waiting = {
            let mut inputs = self.inputs.lock().unwrap_or_else(PoisonError::into_inner);
            inputs.push_back(event);
            inputs.len()
        };
        if waiting > EVENT_QUEUE {
            let guard = self.driver.lock().unwrap_or_else(PoisonError::into_inner);
            self.process_batch(guard);
        }
        self.wake_ticker();
    }

    fn wake_ticker(&self) {
        if let Some(ticker) = self.ticker.get() {
            ticker.unpark();
        }
    }

    /// How long the ticker may sleep.
    fn next_tick(&self) -> Duration {
        let guard = self.driver.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(driver) = guard.as_ref() else { return TICK_MAX };
        let now = driver.now_ms();
        let wait = driver.member.next_deadline_ms().saturating_sub(now);
        let longest = if driver.away.is_some() { TICK_AWAY } else { TICK_MAX };
        Duration::from_millis(wait.clamp(1, longest.as_millis() as u64))
    }
}

/// A seed for a member's random numbers that differs at every start, a reconnect in the same
/// process included: its request numbers start from it, and the leader takes a forwarded
/// request it has seen from this member id before for a duplicate. A seed made of the
/// process id and a near-zero elapsed time repeated across reconnects, and a writeset of
/// the new connection was dropped as one of the old (mtr galera_sr_cc_slave, once in five).
fn fresh_seed(info: &MemberInfo) -> u64 {
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    wall ^ u64::from(std::process::id()) << 32 ^ info.incarnation.rotate_left(17) ^ info.id.0 << 40
}

/// Inputs for a member that stopped: every waiting submitter learns it.
fn refuse(batch: Vec<Event>) {
    for event in batch {
        match event {
            Event::Submit(_, Reply::Channel(reply)) | Event::SendMessage(_, Reply::Channel(reply)) => {
                drop(reply.send(Err(SubmitError::Failed)))
            }
            Event::OpenCacheRead(from, _, reply) => drop(reply.send(Err(from))),
            _ => {}
        }
    }
}

struct Shared {
    status: Status,
    queue_lengths: Vec<(MemberId, usize)>,
}

/// Handle to a running node.
pub struct GroupNode {
    engine: Arc<Engine>,
    /// With the default sink: one consumer at a time; the mutex makes the handle `Sync`.
    deliveries: Option<Mutex<Receiver<Delivered>>>,
    shared: Arc<Mutex<Shared>>,
    ticker: Option<JoinHandle<()>>,
    transport: Arc<Transport>,
    tls: Option<Arc<Tls>>,
}

impl GroupNode {
    /// Starts a node on plain TCP whose deliveries are read with
    /// [`GroupNode::recv_delivered`]: group traffic neither encrypted nor authenticated.
    pub fn start(config: NodeConfig) -> io::Result<Self> {
        Self::start_with_tls(config, None)
    }

    /// Like [`GroupNode::start`], with TLS when `tls` is given (see
    /// [`GroupNode::start_with_sink_and_tls`]).
    pub fn start_with_tls(config: NodeConfig, tls: Option<Arc<Tls>>) -> io::Result<Self> {
        let (delivered_tx, deliveries) = mpsc::sync_channel(DELIVERY_QUEUE);
        let mut node = Self::start_with_sink_and_tls(config, Box::new(ChannelSink(delivered_tx, None)), tls)?;
        node.deliveries = Some(Mutex::new(deliveries));
        Ok(node)
    }

    /// Starts a node on plain TCP that hands every delivery to `sink` on its driver thread.
    pub fn start_with_sink(config: NodeConfig, sink: Box<dyn DeliverySink>) -> io::Result<Self> {
        Self::start_with_sink_and_tls(config, sink, None)
    }

    /// Starts a node that hands every delivery to `sink` on its driver thread; with `tls`
    /// every group connection is TLS and each peer must show a certificate signed by the
    /// cluster's CA. The same `Tls` can serve the application's other connections (state
    /// transfers), so [`GroupNode::reload_tls`] renews both.
    pub fn start_with_sink_and_tls(
        config: NodeConfig,
        sink: Box<dyn DeliverySink>,
        tls: Option<Arc<Tls>>,
    ) -> io::Result<Self> {
        let segment_bytes = (config.group.gcache_bytes / 8).max(1 << 20);
        if config.bootstrap.is_some() && FileStore::wipe(&config.data_dir)? {
            log::info!("{}: bootstrapping a new cluster: the old cache was discarded", config.info.id);
        }
        let store = FileStore::open(&config.data_dir, config.fsync, segment_bytes)?;
        // Besides the seed addresses, a restarted member asks every member its cache names.
        let known = Member::known_members(&store);
        let known_ids: Vec<MemberId> = known.iter().map(|m| m.id).collect();
        let engine = Arc::new(Engine {
            ticker: OnceLock::new(),
            inputs: Mutex::new(VecDeque::new()),
            in_flight: AtomicUsize::new(0),
            driver: Mutex::new(None),
            stopping: AtomicBool::new(false),
        });
        // Held until the driver is in place: what the transport brings meanwhile (a seed's
        // answer, a peer's message) stays queued for the ticker instead of meeting an empty
        // slot, which means a stopped node and refuses it.
        let mut slot = engine.driver.lock().expect("not shared yet");
        // Weak: the engine owns the transport (through the driver), which owns this callback.
        let incoming = Arc::downgrade(&engine);
        let transport = Arc::new(Transport::start(
            config.info.id,
            &config.group,
            &config.listen,
            crate::config::RECORD_LIMIT_BYTES,
            tls.clone(),
            move |inbound| {
                let event = match inbound {
                    Inbound::Message(m) => Event::Incoming(m),
                    Inbound::Closed(id) => Event::PeerClosed(id),
                };
                // Idle, the reader processes it (no hand-off); busy, the ticker takes it and
                // the reader goes back to its socket at once.
                if let Some(engine) = incoming.upgrade() {
                    if engine.is_idle() && engine.in_flight.load(Ordering::Relaxed) == 0 {
                        engine.input(event);
                    } else {
                        engine.queue(event);
                    }
                }
            },
        )?);
        for m in &known {
            transport.set_address(m.id, &m.address);
        }
        let mut info = config.info.clone();
        // Asked for any port: peers dial the one it took.
        if let Some(host) = info.address.strip_suffix(":0") {
            info.address = format!("{host}:{}", transport.local_addr().port());
        }
        let (group, now) = (config.group.clone(), 0);
        let mut member = match config.bootstrap {
            Some(genesis) => Member::bootstrap(info, group, store, genesis, now),
            None if store.last_index() == 0 => Member::join(info, group, store, &[], now),
            None => {
                let mut member = Member::restart(info, group, store, &known_ids, now, config.resume_after);
                member.set_application_position(config.application_position);
                member
            }
        };
        member.set_rng_seed(fresh_seed(&config.info));
        member.expect_seed_addresses(config.peers.len());
        for address in &config.peers {
            let engine: Weak<Engine> = Arc::downgrade(&engine);
            let mut first_try = true;
            transport.discover(address, move |found| {
                if let Some(engine) = engine.upgrade() {
                    engine.input(Event::SeedTried { found, first_try: std::mem::take(&mut first_try) });
                }
            });
        }
        let shared = Arc::new(Mutex::new(Shared { status: member.status(), queue_lengths: member.queue_lengths() }));
        let cache = CacheSettings { dir: config.data_dir.clone(), fsync: config.fsync, segment_bytes };
        let driver = Driver {
            member,
            cache,
            thread_start: config.group.thread_start.clone(),
            transport: transport.clone(),
            sink: Some(sink),
            away: None,
            deferred: Vec::new(),
            engine: Arc::downgrade(&engine),
            sink_full: false,
            outbox: Outbox::default(),
            shared: shared.clone(),
            replies: BTreeMap::new(),
            barriers: BTreeMap::new(),
            unwritten: BTreeSet::new(),
            started: Instant::now(),
            last_periodic_ms: 0,
        };
        *slot = Some(driver);
        drop(slot);
        let ticking = engine.clone();
        let ticker = config.group.thread_start.spawn(format!("{}-ticker", config.info.id), move || {
            while !ticking.stopping.load(Ordering::SeqCst) {
                thread::park_timeout(ticking.next_tick());
                // A round even with nothing queued: timeouts, periodic work.
                let guard = ticking.driver.lock().unwrap_or_else(PoisonError::into_inner);
                ticking.process_batch(guard);
                ticking.drain();
            }
        })?;
        let _ = engine.ticker.set(ticker.thread().clone());
        engine.wake_ticker();
        Ok(Self { engine, deliveries: None, shared, ticker: Some(ticker), transport, tls })
    }

    fn input(&self, event: Event) {
        self.engine.input(event);
    }

    /// An application thread's submission: processed at once on this thread when nothing of
    /// ours is in flight (low load: no hand-off), else left to the ticker, which takes it
    /// with whatever else arrives meanwhile (under load: one append for many writesets).
    fn submit_input(&self, event: Event) {
        if self.engine.in_flight.load(Ordering::Relaxed) == 0 {
            self.input(event);
        } else {
            self.engine.queue(event);
        }
    }

    /// Orders a writeset; blocks until it has its seqno (or cannot get one).
    pub fn submit(&self, data: Vec<u8>) -> Result<Seqno, SubmitError> {
        // A dropped reply means the member is gone.
        self.submit_async(data).recv().unwrap_or(Err(SubmitError::Failed))
    }

    /// Orders a writeset; the seqno arrives on the returned channel.
    pub fn submit_async(&self, data: Vec<u8>) -> Receiver<Result<Seqno, SubmitError>> {
        let (tx, rx) = mpsc::channel();
        self.input(Event::Submit(data, Reply::Channel(tx)));
        rx
    }

    /// Orders a writeset without waiting: it arrives in the delivery stream, or its failure
    /// reaches the sink's `submit_failed` with `tag`.
    pub fn submit_tagged(&self, data: Vec<u8>, tag: u64) {
        self.submit_input(Event::Submit(data, Reply::Tag(tag)));
    }

    /// [`GroupNode::send_message`] without waiting, like [`GroupNode::submit_tagged`].
    pub fn send_message_tagged(&self, data: Vec<u8>, tag: u64) {
        self.input(Event::SendMessage(data, Reply::Tag(tag)));
    }

    /// A read barrier (a causal read's point) for the sink, with `tag`: its seqno reaches the
    /// sink's `barrier_reached`, or `SubmitError::NoLease` its `submit_failed` (then order a
    /// barrier message instead).
    pub fn read_barrier_tagged(&self, tag: u64) {
        self.input(Event::ReadBarrier(tag));
    }

    /// The sink has room again after refusing a delivery.
    pub fn resume_deliveries(&self) {
        self.input(Event::ResumeDeliveries);
    }

    /// Orders an unnumbered message (delivered everywhere as `DeliveredKind::Message`,
    /// taking no seqno); the channel gets the seqno it was ordered after. Flow control does
    /// not pause messages.
    pub fn send_message(&self, data: Vec<u8>) -> Receiver<Result<Seqno, SubmitError>> {
        let (tx, rx) = mpsc::channel();
        self.input(Event::SendMessage(data, Reply::Channel(tx)));
        rx
    }

    /// The next event of the total order (writeset, message, view or state gap), waiting
    /// up to `timeout`. Until it is taken, it counts in this member's receive queue. Only
    /// for a node started with [`GroupNode::start`].
    pub fn recv_delivered(&self, timeout: Duration) -> Option<Delivered> {
        let deliveries = self.deliveries.as_ref().expect("started with a sink: deliveries go there");
        deliveries.lock().expect("not poisoned").recv_timeout(timeout).ok()
    }

    pub fn status(&self) -> Status {
        self.shared.lock().expect("not poisoned").status.clone()
    }

    /// Every member's receive-queue length (flow-control input).
    pub fn queue_lengths(&self) -> Vec<(MemberId, usize)> {
        self.shared.lock().expect("not poisoned").queue_lengths.clone()
    }

    /// Writesets and views with seqnos in `from..=to` from this member's cache, read a batch
    /// at a time as the reader is iterated; `Err(oldest retained seqno)` if `from` was purged
    /// (a state transfer is needed). The cache keeps what the reader has not read until it is
    /// dropped.
    pub fn read_cache(&self, from: Seqno, to: Seqno) -> Result<CacheReader, Seqno> {
        let (tx, rx) = mpsc::channel();
        self.input(Event::OpenCacheRead(from, to, tx));
        let read = rx.recv().unwrap_or(Err(from))?;
        let last = from.saturating_sub(1);
        Ok(CacheReader { engine: self.engine.clone(), read: Some(Box::new(read)), batch: VecDeque::new(), last })
    }

    pub fn pause_senders(&self) {
        self.input(Event::Pause);
    }

    pub fn resume_senders(&self) {
        self.input(Event::Resume);
    }

    #[cfg(test)]
    fn inject_panic(&self) {
        self.input(Event::Panic);
    }

    /// Leaves the primary component gracefully; `status().left` turns true when done.
    pub fn leave(&self) {
        self.input(Event::Leave);
    }

    /// Galera's `pc.bootstrap=1`: if this member is not in a primary component, the members it
    /// hears from become one, without a quorum of the old group.
    pub fn bootstrap_primary(&self) {
        self.input(Event::BootstrapPrimary);
    }

    /// `pc.ignore_sb` / `pc.ignore_quorum` set at runtime (`GroupConfig::ignore_split_brain`).
    pub fn set_ignore_split_brain(&self, on: bool) {
        self.input(Event::IgnoreSplitBrain(on));
    }

    /// Provider options changed at runtime: see [`Tuning`].
    pub fn tune(&self, tuning: Tuning) {
        self.input(Event::Tune(tuning));
    }

    /// `pc.weight` set at runtime: the member joins again with it, which makes a new view
    /// (a weight change is a membership event in Galera too). Waits up to `timeout` for the
    /// voters to follow, so the new quorum is in force when this returns `true`.
    pub fn set_weight(&self, weight: u8, timeout: Duration) -> bool {
        self.input(Event::Weight(weight));
        // None: no deadline this side of the clock's end (`evs.suspect_timeout` may be centuries).
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let status = self.status();
            let mine = status.view.members.iter().find(|m| m.id == status.id);
            let settled = status.weights_settled && mine.is_some_and(|m| m.weight == weight);
            if settled || status.failed.is_some() {
                return settled;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Galera's `gmcast.isolate`: cut off from every peer (as by a network failure) or back.
    pub fn set_isolated(&self, on: bool) {
        self.transport.set_isolated(on);
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.transport.local_addr()
    }

    /// The TLS contexts the node was started with (None: plain TCP).
    pub fn tls(&self) -> Option<&Arc<Tls>> {
        self.tls.as_ref()
    }

    /// Galera's `socket.ssl_reload`: reads the certificate, key and CA files `config` names
    /// (the options as they are now) for the connections opened from now on; open ones keep
    /// theirs. On error the old files stay in use. Returns false when the node runs without
    /// TLS (nothing to reload).
    pub fn reload_tls(&self, config: TlsConfig) -> Result<bool, TlsError> {
        let Some(tls) = &self.tls else { return Ok(false) };
        let cert = config.cert.display().to_string();
        tls.reload(config)?;
        log::info!("{}: TLS certificates reloaded from {cert}", self.status().id);
        Ok(true)
    }
}

impl Drop for GroupNode {
    fn drop(&mut self) {
        self.engine.stopping.store(true, Ordering::SeqCst);
        if let Some(ticker) = self.ticker.take() {
            ticker.thread().unpark();
            let _ = ticker.join();
        }
        // Stop the readers first, then close the cache (the member goes with the driver).
        self.transport.shutdown();
        let driver = self.engine.driver.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(driver);
    }
}

/// An open cache read back from the member with its next batch.
type CacheBatch = (Box<CacheRead>, Result<Vec<Delivered>, Seqno>);

/// A donor's read of the cache (`GroupNode::read_cache`): yields writesets and views in
/// seqno order, fetching a batch at a time; `Err(seqno)` ends it when the cache no longer
/// holds what follows `seqno`, or the node stopped after it.
pub struct CacheReader {
    engine: Arc<Engine>,
    /// `None` once done, or after an error.
    read: Option<Box<CacheRead>>,
    batch: VecDeque<Delivered>,
    /// The seqno yielded last.
    last: Seqno,
}

impl Iterator for CacheReader {
    type Item = Result<Delivered, Seqno>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.batch.is_empty() {
            let read = self.read.take()?;
            let id = read.id();
            if read.done {
                self.engine.input(Event::CloseCacheRead(id));
                return None;
            }
            let (tx, rx) = mpsc::channel();
            self.engine.input(Event::ReadCache(read, tx));
            let Ok((read, batch)) = rx.recv() else {
                return Some(Err(self.last));
            };
            match batch {
                Ok(batch) => self.batch.extend(batch),
                Err(seqno) => {
                    self.engine.input(Event::CloseCacheRead(id));
                    return Some(Err(seqno));
                }
            }
            self.read = Some(read);
        }
        let delivered = self.batch.pop_front()?;
        self.last = delivered.seqno;
        Some(Ok(delivered))
    }
}

impl Drop for CacheReader {
    fn drop(&mut self) {
        if let Some(read) = &self.read {
            self.engine.input(Event::CloseCacheRead(read.id()));
        }
    }
}

/// Where the member's cache lives, to start over with an empty one.
struct CacheSettings {
    dir: std::path::PathBuf,
    fsync: bool,
    segment_bytes: u64,
}

/// A call for the sink made while it was away, made when it is back, in order.
enum SinkCall {
    SubmitFailed(u64, SubmitError),
    BarrierReached(u64, Seqno),
}

/// The sink back from a big delivery: itself, what it asked to order, whether it has room;
/// or the panic that struck it.
type Returned = Result<(Box<dyn DeliverySink>, Outbox, bool), String>;

struct Driver {
    member: Member<FileStore>,
    cache: CacheSettings,
    /// Run first on the threads it starts (`GroupConfig::thread_start`).
    thread_start: ThreadStart,
    transport: Arc<Transport>,
    /// `None` while a big delivery has it on another thread (`away`).
    sink: Option<Box<dyn DeliverySink>>,
    away: Option<Receiver<Returned>>,
    /// Sink calls made while it was away.
    deferred: Vec<SinkCall>,
    /// To wake the ticker when the sink returns.
    engine: Weak<Engine>,
    /// The sink refused more: deliveries wait in the member's receive queue.
    sink_full: bool,
    outbox: Outbox,
    shared: Arc<Mutex<Shared>>,
    replies: BTreeMap<u64, Reply>,
    /// Read barriers waiting for their point, by request, with the sink's tag. Apart from
    /// `replies`, which counts as in flight: the leader's answer to a causal read is taken
    /// on the reader's thread, not handed over.
    barriers: BTreeMap<u64, u64>,
    /// Peers with messages queued in this round, for the transport to write after it.
    unwritten: BTreeSet<MemberId>,
    started: Instant,
    last_periodic_ms: u64,
}

impl SinkCall {
    fn make(self, sink: &mut dyn DeliverySink, outbox: &mut Outbox) {
        match self {
            Self::SubmitFailed(tag, e) => sink.submit_failed(tag, e, outbox),
            Self::BarrierReached(tag, seqno) => sink.barrier_reached(tag, seqno, outbox),
        }
    }
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// One round: the inputs, then one flush, the sends, the completions and the
    /// deliveries.
    fn process(&mut self, batch: Vec<Event>) {
        let now = self.now_ms();
        self.take_sink_back();
        self.member.tick(now);
        for event in batch {
            self.handle(event);
        }
        self.start_over_if_not_the_groups();
        self.member.flush();
        self.send_outbox();
        for (request, result) in self.member.take_completions() {
            if let Some(tag) = self.barriers.remove(&request) {
                match result {
                    Ok(seqno) => self.call_sink(SinkCall::BarrierReached(tag, seqno)),
                    Err(e) => self.call_sink(SinkCall::SubmitFailed(tag, e)),
                }
                continue;
            }
            match self.replies.remove(&request) {
                Some(Reply::Channel(reply)) => drop(reply.send(result)),
                Some(Reply::Tag(tag)) => {
                    if let Err(e) = result {
                        self.call_sink(SinkCall::SubmitFailed(tag, e));
                    }
                }
                None => {}
            }
        }
        // The status (a copy of the view), the sink's round and publishing it are for
        // deliveries and for periodic work: not for every input (many small rounds now).
        let periodic = now >= self.last_periodic_ms + PERIODIC_MS || self.sink_full;
        if self.member.has_deliveries() || periodic {
            let status = self.member.status();
            self.hand_over_deliveries(&status);
            if periodic {
                self.last_periodic_ms = now;
                if let Some(sink) = self.sink.as_mut() {
                    let room = sink.round(&status, &mut self.outbox);
                    if self.sink_full {
                        self.sink_full = !room;
                    }
                }
                self.publish(status);
            }
        }
        let messages = std::mem::take(&mut self.outbox.messages);
        let writesets = std::mem::take(&mut self.outbox.writesets);
        if !messages.is_empty() || !writesets.is_empty() {
            for (data, tag) in messages {
                let request = self.member.send_message(data);
                self.await_reply(request, Reply::Tag(tag));
            }
            for (data, tag) in writesets {
                let request = self.member.submit(data);
                self.await_reply(request, Reply::Tag(tag));
            }
            self.member.flush();
            self.send_outbox();
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Incoming(message) => {
                // Only a member's own request or probe says where it listens.
                match &message.body {
                    Body::Join(info) if info.id == message.from => self.transport.set_address(info.id, &info.address),
                    Body::Probe { address } => self.transport.set_address(message.from, address),
                    _ => {}
                }
                self.member.receive(*message);
            }
            Event::SeedTried { found, first_try } => self.member.seed_address_tried(found, first_try),
            Event::PeerClosed(id) => self.member.peer_closed(id),
            Event::ResumeDeliveries => self.sink_full = false,
            Event::ReadBarrier(tag) => match self.member.read_barrier() {
                Ok(request) => {
                    self.barriers.insert(request, tag);
                }
                Err(e) => self.call_sink(SinkCall::SubmitFailed(tag, e)),
            },
            Event::Submit(data, reply) => {
                let request = self.member.submit(data);
                self.await_reply(request, reply);
            }
            Event::SendMessage(data, reply) => {
                let request = self.member.send_message(data);
                self.await_reply(request, reply);
            }
            Event::Leave => self.member.leave(),
            Event::OpenCacheRead(from, to, reply) => {
                let _ = reply.send(self.member.open_cache_read(from, to));
            }
            Event::ReadCache(mut read, reply) => {
                let batch = self.member.read_cache(&mut read, CACHE_READ_BATCH_BYTES);
                let _ = reply.send((read, batch));
            }
            Event::CloseCacheRead(id) => self.member.close_cache_read(id),
            Event::Pause => self.member.pause_senders(),
            Event::Resume => self.member.resume_senders(),
            Event::BootstrapPrimary => self.member.bootstrap_primary(),
            Event::IgnoreSplitBrain(on) => self.member.set_ignore_split_brain(on),
            Event::Weight(weight) => self.member.set_weight(weight),
            Event::Tune(tuning) => self.member.tune(tuning),
            #[cfg(test)]
            Event::Panic => panic!("injected by a test"),
        }
    }

    /// After a panic the member's state cannot be trusted: publish the failure, answer
    /// every waiting submitter (the sink learns it from a last round), and close the
    /// delivery stream (by dropping the sink), so that later submissions fail at once and
    /// the application sees the end.
    fn fail(mut self, reason: String) {
        log::error!("{}: the member stops: {reason}", self.member.id());
        let status = {
            // The panic may have struck while the status was being published.
            let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            shared.status.primary = false;
            shared.status.failed = Some(reason);
            shared.status.clone()
        };
        self.shared.clear_poison();
        // A sink away finishes its delivery first: it is told too.
        if let Some(away) = self.away.take() {
            if let Ok(Ok((sink, _, _))) = away.recv() {
                self.sink = Some(sink);
            }
        }
        let Some(mut sink) = self.sink.take() else { return };
        for call in std::mem::take(&mut self.deferred) {
            call.make(sink.as_mut(), &mut self.outbox);
        }
        let waiting: Vec<Reply> = std::mem::take(&mut self.replies).into_values().collect();
        for reply in waiting {
            match reply {
                Reply::Channel(reply) => drop(reply.send(Err(SubmitError::Failed))),
                Reply::Tag(tag) => sink.submit_failed(tag, SubmitError::Failed, &mut self.outbox),
            }
        }
        for tag in std::mem::take(&mut self.barriers).into_values() {
            sink.submit_failed(tag, SubmitError::Failed, &mut self.outbox);
        }
        sink.round(&status, &mut self.outbox);
    }

    /// To the sink now, or when it is back from a big delivery.
    fn call_sink(&mut self, call: SinkCall) {
        match self.sink.as_mut() {
            Some(sink) => call.make(sink.as_mut(), &mut self.outbox),
            None => self.deferred.push(call),
        }
    }

    /// The sink back from a big delivery, if it is: what it asked to order and the calls
    /// made meanwhile go through now.
    fn take_sink_back(&mut self) {
        let Some(away) = &self.away else { return };
        let returned = match away.try_recv() {
            Ok(returned) => returned,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => Err("the delivery thread ended".to_owned()),
        };
        self.away = None;
        match returned {
            Ok((mut sink, outbox, room)) => {
                self.outbox.messages.extend(outbox.messages);
                self.outbox.writesets.extend(outbox.writesets);
                self.sink_full = !room;
                for call in std::mem::take(&mut self.deferred) {
                    call.make(sink.as_mut(), &mut self.outbox);
                }
                self.sink = Some(sink);
            }
            Err(why) => self.member.stop(&format!("the application failed on a delivery: {why}")),
        }
    }

    /// Hands a big delivery to the sink on a thread of its own; deliveries wait behind it.
    fn send_away(&mut self, mut sink: Box<dyn DeliverySink>, d: Delivered, replayed: bool, status: &Status) {
        let (tx, rx) = mpsc::sync_channel(1);
        let (status, engine) = (status.clone(), self.engine.clone());
        let spawned = self.thread_start.spawn("lockstep-big-delivery".to_owned(), move || {
            let mut outbox = Outbox::default();
            let returned = crate::guarded(move || {
                let room = sink.deliver(d, replayed, &status, &mut outbox);
                (sink, outbox, room)
            });
            let _ = tx.send(returned);
            if let Some(engine) = engine.upgrade() {
                engine.wake_ticker();
            }
        });
        match spawned {
            Ok(_) => self.away = Some(rx),
            Err(e) => self.member.stop(&format!("cannot start a thread for a big delivery: {e}")),
        }
    }

    fn await_reply(&mut self, request: Result<u64, SubmitError>, reply: Reply) {
        match (request, reply) {
            (Ok(request), reply) => {
                self.replies.insert(request, reply);
            }
            (Err(e), Reply::Channel(reply)) => drop(reply.send(Err(e))),
            (Err(e), Reply::Tag(tag)) => self.call_sink(SinkCall::SubmitFailed(tag, e)),
        }
    }

    /// The cluster was bootstrapped again while this member was away, or this member's
    /// history forked from the group's: its cache (old log, old votes and terms) is discarded
    /// and it joins as a new member; the application then gets the group's order from its
    /// start (a state transfer, or a refusal if its data is ahead). See
    /// docs/design/group-bootstrap-id.md and docs/design/group-forked-history.md.
    fn start_over_if_not_the_groups(&mut self) {
        let Some((why, seeds)) = self.member.start_over() else { return };
        let (info, config) = (self.member.info().clone(), self.member.config().clone());
        match why {
            StartOver::LaterBootstrap(later) => log::info!(
                "{}: member {later} belongs to a later bootstrap of this cluster: this member's cache is from an \
                 earlier one; it is discarded and the member joins that cluster as a new one",
                info.id
            ),
            // A Note: the component was forced on an operator's word, as the forcing is.
            StartOver::Forked(primary) => log::info!(
                "{}: member {primary} is in a primary component of this cluster whose history forked from this \
                 member's cache: a component was forced without a quorum (pc.ignore_sb, pc.bootstrap). This \
                 member's cache is discarded; it joins that component as a new member and its data takes a full \
                 state transfer",
                info.id
            ),
        }
        let c = &self.cache;
        let store = FileStore::wipe(&c.dir).and_then(|_| FileStore::open(&c.dir, c.fsync, c.segment_bytes));
        match store {
            Ok(store) => {
                let seed = fresh_seed(&info);
                let mut member = Member::join(info, config, store, &seeds, self.now_ms());
                member.set_rng_seed(seed);
                if matches!(why, StartOver::Forked(_)) {
                    member.set_history_forked();
                }
                self.member = member;
            }
            Err(e) => self.member.stop(&format!("cannot empty the cache to join the cluster: {e}")),
        }
    }

    /// Queues the member's messages in order; they are written once the member's lock is
    /// released (`Engine::process_batch`).
    fn send_outbox(&mut self) {
        for (to, message) in self.member.take_outbox() {
            self.transport.queue(to, message);
            self.unwritten.insert(to);
        }
    }

    fn hand_over_deliveries(&mut self, status: &Status) {
        while !self.sink_full && self.sink.is_some() {
            let Some((d, replayed)) = self.member.pop_delivery() else {
                return;
            };
            if let DeliveredKind::View(view) = &d.kind {
                for m in &view.members {
                    self.transport.set_address(m.id, &m.address);
                }
            }
            let mut sink = self.sink.take().expect("checked");
            if d.bytes.len() >= AWAY_BYTES {
                self.send_away(sink, d, replayed, status);
                return;
            }
            self.sink_full = !sink.deliver(d, replayed, status, &mut self.outbox);
            self.sink = Some(sink);
        }
    }

    fn publish(&self, status: Status) {
        let mut shared = self.shared.lock().expect("not poisoned");
        shared.status = status;
        shared.queue_lengths = self.member.queue_lengths();
    }
}

#[cfg(test)]
mod tests;
