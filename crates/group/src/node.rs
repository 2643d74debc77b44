//! A running member: the `Member` state machine driven by one thread, with the TCP
//! transport and the on-disk cache at its edges. This is what the provider uses.
//!
//! If the driver thread panics, the member stops visibly: `status().failed` says why,
//! every submission waiting or to come gets `SubmitError::Failed`, and the delivery
//! stream closes. Nothing waits forever on a thread that is gone.

use crate::cache::{FileStore, LogStore};
use crate::config::GroupConfig;
use crate::member::{Member, Status};
use crate::message::{Body, Message};
use crate::transport::Transport;
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, SubmitError};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Events waiting for the driver; a full queue blocks the readers (TCP back-pressure).
const EVENT_QUEUE: usize = 8192;
/// Deliveries handed to the application ahead of it consuming them.
const DELIVERY_QUEUE: usize = 1024;
/// Inputs taken per round before the driver flushes (group commit of the cache).
const EVENTS_PER_ROUND: usize = 1024;

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
    /// top-level `lockstep.cache.*` files).
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
}

enum Event {
    Incoming(Message),
    /// A seed address answered as this member.
    Seed(MemberId),
    Submit(Vec<u8>, Sender<Result<Seqno, SubmitError>>),
    SendMessage(Vec<u8>, Sender<Result<Seqno, SubmitError>>),
    Leave,
    ReadCache(Seqno, Seqno, Sender<Result<Vec<Delivered>, Seqno>>),
    Pause,
    Resume,
    Stop,
    /// Makes the driver panic, to test what a panic leaves behind.
    #[cfg(test)]
    Panic,
}

struct Shared {
    status: Status,
    queue_lengths: Vec<(MemberId, usize)>,
}

/// Handle to a running node.
pub struct GroupNode {
    events: SyncSender<Event>,
    /// One consumer at a time (the provider's applier); the mutex makes the handle `Sync`.
    deliveries: Mutex<Receiver<Delivered>>,
    shared: Arc<Mutex<Shared>>,
    driver: Option<JoinHandle<()>>,
    transport: Arc<Transport>,
}

impl GroupNode {
    pub fn start(config: NodeConfig) -> io::Result<Self> {
        let segment_bytes = (config.group.gcache_bytes / 8).max(1 << 20);
        if config.bootstrap.is_some() && FileStore::wipe(&config.data_dir)? {
            log::info!("{}: bootstrapping a new cluster: the old cache was discarded", config.info.id);
        }
        let store = FileStore::open(&config.data_dir, config.fsync, segment_bytes)?;
        // Besides the seed addresses, a restarted member asks every member its cache names.
        let known = Member::known_members(&store);
        let known_ids: Vec<MemberId> = known.iter().map(|m| m.id).collect();
        let (info, group, now) = (config.info.clone(), config.group.clone(), 0);
        let mut member = match config.bootstrap {
            Some(genesis) => Member::bootstrap(info, group, store, genesis, now),
            None if store.last_index() == 0 => Member::join(info, group, store, &[], now),
            None => Member::restart(info, group, store, &known_ids, now, config.resume_after),
        };
        let jitter = Instant::now().elapsed().as_nanos() as u64;
        member.set_rng_seed(std::process::id() as u64 ^ jitter ^ config.info.id.0 << 40);

        let (events, inbox) = mpsc::sync_channel(EVENT_QUEUE);
        let incoming = Mutex::new(events.clone());
        let transport = Arc::new(Transport::start(
            config.info.id,
            &config.group.cluster_name,
            &config.listen,
            crate::config::RECORD_LIMIT_BYTES,
            move |m| {
                let _ = incoming.lock().expect("not poisoned").send(Event::Incoming(m));
            },
        )?);
        for m in &known {
            transport.set_address(m.id, &m.address);
        }
        for address in &config.peers {
            let found = events.clone();
            transport.discover(address, move |id| {
                let _ = found.send(Event::Seed(id));
            });
        }
        let (delivered_tx, deliveries) = mpsc::sync_channel(DELIVERY_QUEUE);
        let shared = Arc::new(Mutex::new(Shared { status: member.status(), queue_lengths: member.queue_lengths() }));
        let driver = Driver {
            member,
            inbox,
            transport: transport.clone(),
            delivered_tx,
            held: None,
            shared: shared.clone(),
            replies: BTreeMap::new(),
            started: Instant::now(),
        };
        let handle = thread::Builder::new().name(format!("{}-driver", config.info.id)).spawn(move || {
            let mut driver = driver;
            if let Err(panic) = crate::guarded(|| driver.run()) {
                driver.fail(format!("group driver panicked: {panic}"));
            }
        })?;
        Ok(Self { events, deliveries: Mutex::new(deliveries), shared, driver: Some(handle), transport })
    }

    /// Orders a writeset; blocks until it has its seqno (or cannot get one).
    pub fn submit(&self, data: Vec<u8>) -> Result<Seqno, SubmitError> {
        // A closed channel means the driver is gone.
        self.submit_async(data).recv().unwrap_or(Err(SubmitError::Failed))
    }

    /// Orders a writeset; the seqno arrives on the returned channel.
    pub fn submit_async(&self, data: Vec<u8>) -> Receiver<Result<Seqno, SubmitError>> {
        let (tx, rx) = mpsc::channel();
        let _ = self.events.send(Event::Submit(data, tx));
        rx
    }

    /// Orders an unnumbered message (delivered everywhere as `DeliveredKind::Message`,
    /// taking no seqno); the channel gets the seqno it was ordered after. Flow control does
    /// not pause messages.
    pub fn send_message(&self, data: Vec<u8>) -> Receiver<Result<Seqno, SubmitError>> {
        let (tx, rx) = mpsc::channel();
        let _ = self.events.send(Event::SendMessage(data, tx));
        rx
    }

    /// The next event of the total order (writeset, message, view or state gap), waiting
    /// up to `timeout`. Until it is taken, it counts in this member's receive queue.
    pub fn recv_delivered(&self, timeout: Duration) -> Option<Delivered> {
        self.deliveries.lock().expect("not poisoned").recv_timeout(timeout).ok()
    }

    pub fn status(&self) -> Status {
        self.shared.lock().expect("not poisoned").status.clone()
    }

    #[cfg(test)]
    fn inject_panic(&self) {
        let _ = self.events.send(Event::Panic);
    }

    /// Every member's receive-queue length (flow-control input).
    pub fn queue_lengths(&self) -> Vec<(MemberId, usize)> {
        self.shared.lock().expect("not poisoned").queue_lengths.clone()
    }

    /// Writesets and views with seqnos in `from..=to` from this member's cache;
    /// `Err(oldest retained seqno)` if `from` was purged (a state transfer is needed).
    pub fn cached_range(&self, from: Seqno, to: Seqno) -> Result<Vec<Delivered>, Seqno> {
        let (tx, rx) = mpsc::channel();
        let _ = self.events.send(Event::ReadCache(from, to, tx));
        rx.recv().unwrap_or(Err(from))
    }

    pub fn pause_senders(&self) {
        let _ = self.events.send(Event::Pause);
    }

    pub fn resume_senders(&self) {
        let _ = self.events.send(Event::Resume);
    }

    /// Leaves the primary component gracefully; `status().left` turns true when done.
    pub fn leave(&self) {
        let _ = self.events.send(Event::Leave);
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.transport.local_addr()
    }
}

impl Drop for GroupNode {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Stop);
        if let Some(handle) = self.driver.take() {
            let _ = handle.join();
        }
        self.transport.shutdown();
    }
}

struct Driver {
    member: Member<FileStore>,
    inbox: Receiver<Event>,
    transport: Arc<Transport>,
    delivered_tx: SyncSender<Delivered>,
    /// A delivery the application had no room for yet.
    held: Option<Delivered>,
    shared: Arc<Mutex<Shared>>,
    replies: BTreeMap<u64, Sender<Result<Seqno, SubmitError>>>,
    started: Instant,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn run(&mut self) {
        loop {
            let now = self.now_ms();
            let wait = self.member.next_deadline_ms().saturating_sub(now).clamp(1, 50);
            let first = match self.inbox.recv_timeout(Duration::from_millis(wait)) {
                Ok(event) => Some(event),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let now = self.now_ms();
            self.member.tick(now);
            let mut next = first;
            for _ in 0..EVENTS_PER_ROUND {
                let Some(event) = next.take() else { break };
                if !self.handle(event) {
                    return;
                }
                next = self.inbox.try_recv().ok();
            }
            self.member.flush();
            for (to, message) in self.member.take_outbox() {
                self.transport.send(to, message);
            }
            for (request, result) in self.member.take_completions() {
                if let Some(reply) = self.replies.remove(&request) {
                    let _ = reply.send(result);
                }
            }
            self.hand_over_deliveries();
            self.publish();
        }
    }

    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Incoming(message) => {
                if let Body::Join(info) = &message.body {
                    self.transport.set_address(info.id, &info.address);
                }
                self.member.receive(message);
            }
            Event::Seed(id) => self.member.add_seed(id),
            Event::Submit(data, reply) => {
                let request = self.member.submit(data);
                self.await_reply(request, reply);
            }
            Event::SendMessage(data, reply) => {
                let request = self.member.send_message(data);
                self.await_reply(request, reply);
            }
            Event::Leave => self.member.leave(),
            Event::ReadCache(from, to, reply) => {
                let _ = reply.send(self.member.cached_range(from, to));
            }
            Event::Pause => self.member.pause_senders(),
            Event::Resume => self.member.resume_senders(),
            Event::Stop => return false,
            #[cfg(test)]
            Event::Panic => panic!("injected by a test"),
        }
        true
    }

    /// After a panic the member's state cannot be trusted: publish the failure, answer
    /// every waiting submitter, and close the inbox and the delivery stream (by dropping
    /// them), so that later submissions fail at once and the application sees the end.
    fn fail(self, reason: String) {
        log::error!("{}: the member stops: {reason}", self.member.id());
        {
            // The panic may have struck while the status was being published.
            let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            shared.status.primary = false;
            shared.status.failed = Some(reason);
        }
        self.shared.clear_poison();
        for (_, reply) in self.replies {
            let _ = reply.send(Err(SubmitError::Failed));
        }
        while let Ok(event) = self.inbox.try_recv() {
            if let Event::Submit(_, reply) | Event::SendMessage(_, reply) = event {
                let _ = reply.send(Err(SubmitError::Failed));
            }
        }
    }

    fn await_reply(&mut self, request: Result<u64, SubmitError>, reply: Sender<Result<Seqno, SubmitError>>) {
        match request {
            Ok(request) => {
                self.replies.insert(request, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    fn hand_over_deliveries(&mut self) {
        loop {
            let Some(d) = self.held.take().or_else(|| self.member.pop_delivered()) else {
                return;
            };
            if let DeliveredKind::View(view) = &d.kind {
                for m in &view.members {
                    self.transport.set_address(m.id, &m.address);
                }
            }
            match self.delivered_tx.try_send(d) {
                Ok(()) => {}
                Err(TrySendError::Full(d)) => {
                    self.held = Some(d);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
    }

    fn publish(&self) {
        let mut shared = self.shared.lock().expect("not poisoned");
        shared.status = self.member.status();
        shared.queue_lengths = self.member.queue_lengths();
    }
}

#[cfg(test)]
mod tests;
