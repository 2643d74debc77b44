//! Threads and sockets of the transport: one acceptor, one reader per inbound
//! connection, one writer per peer with a bounded queue (full means drop: Raft resends),
//! and one short-lived prober per seed address until it learns who listens there.
//!
//! A small message is written by the thread that sends it when its peer's connection is
//! free and nothing is queued before it (one thread hand-off fewer per message: see
//! docs/design/group-run-to-completion.md); the writer thread takes over whatever that
//! thread cannot write at once.
//!
//! A panic on any of these threads is logged naming the thread and ends no more than its
//! connection (Raft resends): the acceptor starts accepting again, a prober tries again,
//! and a writer whose thread ended is replaced at the next message to its peer.

use super::tls::{self, secure, Refusals, Side, Stream, Tls};
use super::{read_hello, read_record, Hello, TransportError, HANDSHAKE_TIMEOUT, MAX_UNAUTHENTICATED, PROTOCOL_VERSION};
use crate::config::{Allowlist, GroupConfig, ThreadStart};
use crate::message::Message;
use crate::record::{self, RecordKind};
use crate::types::MemberId;
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// A peer's queue takes a message while fewer messages and writeset bytes than these
/// wait, however big the message: one at the group's limit (`config::RECORD_LIMIT_BYTES`)
/// always gets through to a peer that keeps up, and a queue holds at most this budget
/// plus one message.
const OUTBOUND_QUEUE_RECORDS: usize = 4096;
const OUTBOUND_QUEUE_BYTES: usize = 64 << 20;
/// What a sending thread writes itself: messages carrying at most this many writeset bytes;
/// bigger ones are encoded and written by the peer's writer thread.
const DIRECT_PAYLOAD_BYTES: usize = 16 << 10;
/// The connection's buffer: a record that fits in what is free of it is copied there whole,
/// so a write that times out never leaves half a record anywhere but in the buffer.
const WRITE_BUFFER_BYTES: usize = 1 << 16;
/// The longest a socket write waits for room (`SO_SNDTIMEO`, and the read a TLS write makes
/// when blocked): a sending thread then leaves the rest to the writer thread, which waits
/// on. Without it two readers each writing to the other's full socket would wait forever.
const WRITE_WAIT: Duration = Duration::from_millis(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// Between attempts to reach a seed address that does not answer yet.
const DISCOVER_PAUSE: Duration = Duration::from_millis(500);
/// A connection unused this long is checked for the peer's close before the next write
/// (`Connection::closed_by_peer`). A leader's connections carry a heartbeat every tick and
/// never wait this long; a follower's to another follower always does.
const IDLE_CHECK: Duration = Duration::from_millis(200);

/// What the transport hands up: a peer's message, or the end of the last connection that
/// peer had open to us (its process ended, or it closed the connection).
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// Boxed: far larger than the close, as the node's queue keeps it.
    Message(Box<Message>),
    Closed(MemberId),
}

type Deliver = Arc<dyn Fn(Inbound) + Send + Sync>;

struct Shared {
    hello: Hello,
    limit_bytes: u32,
    addresses: Mutex<BTreeMap<MemberId, String>>,
    stopping: AtomicBool,
    /// Certificates: every connection is TLS, both ways authenticated. None: plain TCP.
    tls: Option<Arc<Tls>>,
    refusals: Refusals,
    /// Accepted connections whose hello is not in yet.
    unauthenticated: AtomicUsize,
    /// Galera's `gmcast.isolate`: no connection in or out, nothing sent or delivered but the
    /// close of every inbound connection (`Inbound::Closed`).
    isolated: AtomicBool,
    /// Messages carrying writesets go deflated (`GroupConfig::compress`).
    compress: bool,
    /// Run first on each of our threads (`GroupConfig::thread_start`).
    thread_start: ThreadStart,
    /// Who may connect to us (`GroupConfig::allowlist`).
    allowlist: Allowlist,
    /// The address we listen on when it is a specific one (`gmcast.listen_addr`): our
    /// connections to peers go out from it too, as Galera's do, so that a peer's allowlist
    /// (`wsrep_allowlist`) sees the address this node is known by.
    source_ip: Option<IpAddr>,
    /// Inbound connections past their hello, by peer (`OpenInbound`).
    inbound: Mutex<BTreeMap<MemberId, usize>>,
}

/// Messages carrying fewer writeset bytes than this go as they are: too little to gain.
const COMPRESS_MIN_BYTES: usize = 1024;
/// Deflate's fastest level: a WAN link is slower than it on any core.
const COMPRESS_LEVEL: u8 = 1;

pub struct Transport {
    shared: Arc<Shared>,
    local: SocketAddr,
    writers: Mutex<BTreeMap<MemberId, Arc<Outbound>>>,
    /// Owns the listener: joined on shutdown, so the port is free once that returns.
    acceptor: Mutex<Option<thread::JoinHandle<()>>>,
}

/// One peer's outgoing side: its queue and its connection. Whoever holds the connection
/// writes what is queued, oldest first: the sending thread when it can (`write_queued`),
/// else the peer's writer thread. Messages are encoded and checksummed outside the member's
/// lock, so a big writeset does not hold it up once per peer.
struct Outbound {
    queue: Mutex<Queue>,
    /// Wakes the writer thread.
    wake: Condvar,
    /// `None` until the writer thread connects, and again after a failure.
    connection: Mutex<Option<Connection>>,
}

/// Our end of a connection to a peer. It carries our messages only, so a peer whose process
/// ended shows it only to a write, and the first write after its close still succeeds: that
/// message goes nowhere (a follower's vote for the next leader, and an election round with
/// it; docs/design/group-dead-connection.md).
struct Connection {
    stream: BufWriter<Stream>,
    written_at: Instant,
}

impl Connection {
    fn new(stream: BufWriter<Stream>) -> Self {
        Self { stream, written_at: Instant::now() }
    }

    /// Whether the peer closed its end while we had nothing to write. Only a connection
    /// unused for `IDLE_CHECK` is looked at: one in use fails at its next write or two, and
    /// Raft resends what those carried.
    fn closed_by_peer(&self) -> bool {
        if self.written_at.elapsed() < IDLE_CHECK {
            return false;
        }
        let tcp = self.stream.get_ref().tcp();
        if tcp.set_nonblocking(true).is_err() {
            return true;
        }
        // Nothing but the peer's close arrives on it (TLS housekeeping came with the hello):
        // end of stream or an error is a closed peer, nothing to read an open one.
        let closed = match tcp.peek(&mut [0u8; 1]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        };
        closed || tcp.set_nonblocking(false).is_err()
    }
}

#[derive(Default)]
struct Queue {
    messages: VecDeque<Message>,
    /// Writeset bytes in `messages`.
    bytes: usize,
    /// The writer thread ended, or should: no more messages are taken.
    closed: bool,
}

impl Outbound {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self) {
        self.queue().closed = true;
        self.wake.notify_one();
    }

    /// The connection, unless there is none or the peer closed it (then dropped, so the
    /// writer thread dials again).
    fn usable<'a>(
        &self,
        connection: &'a mut Option<Connection>,
        to: MemberId,
        shared: &Shared,
    ) -> Option<&'a mut Connection> {
        if connection.as_ref().is_some_and(Connection::closed_by_peer) {
            log::info!("{}: {to} closed our connection to it; dialing again", shared.hello.member);
            *connection = None;
        }
        connection.as_mut()
    }

    /// A message taken but not written goes back, first in line.
    fn put_back(&self, message: Message) {
        let mut queue = self.queue();
        queue.bytes += message.payload_bytes();
        queue.messages.push_front(message);
    }

    /// The first message in line, if `wanted`.
    fn pop_if(&self, wanted: impl Fn(&Message) -> bool) -> Option<Message> {
        let mut queue = self.queue();
        let message = queue.messages.pop_front_if(|m| wanted(m))?;
        queue.bytes -= message.payload_bytes();
        Some(message)
    }

    /// Writes what is queued while the messages are small and the socket takes them
    /// without waiting more than `WRITE_WAIT`. Returns whether anything is left for the writer
    /// thread; an error means the connection is lost.
    fn write_small(&self, connection: &mut Connection, shared: &Shared) -> io::Result<bool> {
        connection.written_at = Instant::now();
        let stream = &mut connection.stream;
        while let Some(message) = self.pop_if(|m| m.payload_bytes() <= DIRECT_PAYLOAD_BYTES) {
            let record = encode(&message, shared.compress);
            // Too big to go through the buffer whole: the writer thread takes it.
            if record.len() >= stream.capacity() {
                self.put_back(message);
                return Ok(true);
            }
            if record.len() > stream.capacity() - stream.buffer().len() {
                if let Err(e) = stream.flush() {
                    self.put_back(message);
                    return if waited(&e) { Ok(true) } else { Err(e) };
                }
            }
            // Fits in the buffer: copied, no I/O.
            stream.write_all(&record)?;
        }
        match stream.flush() {
            // A big message may be first in line: the writer thread's.
            Ok(()) => Ok(!self.queue().messages.is_empty()),
            Err(e) if waited(&e) => Ok(true),
            Err(e) => Err(e),
        }
    }
}

/// The socket had no room within `WRITE_WAIT`: what was not written stays buffered.
fn waited(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

fn encode(message: &Message, compress: bool) -> Vec<u8> {
    if compress && message.payload_bytes() >= COMPRESS_MIN_BYTES {
        let body = message.encode();
        let deflated = miniz_oxide::deflate::compress_to_vec(&body, COMPRESS_LEVEL);
        // Not worth the receiver's work under an eighth saved (data already compressed).
        if deflated.len() < body.len() - body.len() / 8 {
            return record::encode(RecordKind::CompressedMessage, &deflated);
        }
        return record::encode(RecordKind::Message, &body);
    }
    record::encode_with(RecordKind::Message, message.payload_bytes() + 256, |w| message.encode_into(w))
}

impl Transport {
    /// Listens on `listen` and hands every decoded message from a peer to `deliver`, and the
    /// end of a peer's last connection to us (`Inbound::Closed`); with
    /// `tls`, every connection is TLS and a peer must show a certificate of the cluster's CA;
    /// with `group.compress`, what this member sends with writesets in it goes deflated (it reads
    /// both either way).
    pub fn start(
        me: MemberId,
        group: &GroupConfig,
        listen: &str,
        limit_bytes: u32,
        tls: Option<Arc<Tls>>,
        deliver: impl Fn(Inbound) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            hello: Hello { protocol: PROTOCOL_VERSION, cluster_name: group.cluster_name.clone(), member: me },
            limit_bytes,
            addresses: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
            tls,
            refusals: Refusals::default(),
            unauthenticated: AtomicUsize::new(0),
            isolated: AtomicBool::new(false),
            compress: group.compress,
            thread_start: group.thread_start.clone(),
            allowlist: group.allowlist.clone(),
            source_ip: Some(local.ip()).filter(|ip| !ip.is_unspecified()),
            inbound: Mutex::new(BTreeMap::new()),
        });
        let deliver: Deliver = Arc::new(deliver);
        let acceptor_shared = shared.clone();
        let acceptor = shared.thread_start.spawn(format!("{me}-accept"), move || {
            // Accepting must go on after a panic, or no peer could reach us again.
            while crate::guarded(|| accept_loop(&listener, &acceptor_shared, &deliver)).is_err() {
                thread::sleep(RECONNECT_PAUSE);
            }
        })?;
        Ok(Self { shared, local, writers: Mutex::new(BTreeMap::new()), acceptor: Mutex::new(Some(acceptor)) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Where to reach `id` (learned from seeds, views and join requests); `host:port`,
    /// the host a name or an address.
    pub fn set_address(&self, id: MemberId, address: &str) {
        self.shared.set_address(id, address);
    }

    /// Finds out which member listens at `address` (a seed of `wsrep_cluster_address`,
    /// which names no ids): dials it until its hello answers, routes to that member there
    /// and reports its id to `tried` (our own id for our own address). A first attempt that
    /// fails is reported too, as `None`, once: nobody of this cluster was there yet.
    pub fn discover(&self, address: &str, mut tried: impl FnMut(Option<MemberId>) + Send + 'static) {
        let (shared, seed) = (self.shared.clone(), address.to_owned());
        let me = shared.hello.member;
        let spawned = shared.thread_start.clone().spawn(format!("{me}-discover"), move || {
            let (mut last_error, mut first_try) = (String::new(), true);
            while !shared.stopping.load(Ordering::SeqCst) {
                // A panic in an attempt is retried like any other failure to connect.
                let text = match crate::guarded(|| dial(&seed, &shared)) {
                    Ok(Ok((_, theirs))) => {
                        if theirs.member != me {
                            log::info!("{me}: seed {seed} is {}", theirs.member);
                            shared.set_address(theirs.member, &seed);
                        }
                        tried(Some(theirs.member));
                        return;
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(panic) => format!("panic: {panic}"),
                };
                if std::mem::take(&mut first_try) {
                    tried(None);
                }
                if text != last_error {
                    log::info!("{me}: seed {seed} not reached yet: {text}");
                    last_error = text;
                }
                thread::sleep(DISCOVER_PAUSE);
            }
        });
        if let Err(e) = spawned {
            log::error!("cannot start discovery of {address}: {e}");
        }
    }

    /// Galera's `gmcast.isolate`: cuts this member off from every peer as a network failure
    /// would (open connections close, new ones are refused, nothing is sent or delivered)
    /// until turned off again.
    pub fn set_isolated(&self, on: bool) {
        self.shared.isolated.store(on, Ordering::SeqCst);
        if on {
            // Their threads end, closing the connections.
            self.close_writers();
        }
    }

    /// Sends a message: `queue` and `write_queued`.
    pub fn send(&self, to: MemberId, message: Message) {
        self.queue(to, message);
        self.write_queued(to);
    }

    /// Queues a message for `write_queued`; drops it if the peer's queue is full. Messages
    /// to one peer go in the order they were queued.
    pub fn queue(&self, to: MemberId, message: Message) {
        if self.shared.isolated.load(Ordering::SeqCst) {
            return;
        }
        let mut writers = self.writers.lock().expect("not poisoned");
        let mut outbound = writers.entry(to).or_insert_with(|| self.start_writer(to)).clone();
        if outbound.queue().closed {
            // Its thread ended (a panic, logged there): another takes over.
            outbound = self.start_writer(to);
            writers.insert(to, outbound.clone());
        }
        drop(writers);
        let mut queue = outbound.queue();
        if queue.bytes >= OUTBOUND_QUEUE_BYTES || queue.messages.len() >= OUTBOUND_QUEUE_RECORDS {
            log::debug!("queue to {to} full, message dropped");
            return;
        }
        queue.bytes += message.payload_bytes();
        queue.messages.push_back(message);
    }

    /// Writes what is queued to `to` on this thread if its connection is free and the
    /// messages small; wakes its writer thread for the rest. Not to be called under a lock
    /// other threads need: the socket may make it wait up to `WRITE_WAIT`.
    pub fn write_queued(&self, to: MemberId) {
        let Some(outbound) = self.writers.lock().expect("not poisoned").get(&to).cloned() else { return };
        let left = match outbound.connection.try_lock() {
            Ok(mut connection) => {
                match outbound.usable(&mut connection, to, &self.shared).map(|c| outbound.write_small(c, &self.shared))
                {
                    Some(Ok(left)) => left,
                    Some(Err(e)) => {
                        log::info!("{} lost connection to {to}: {e}", self.shared.hello.member);
                        *connection = None;
                        true
                    }
                    // Not connected yet: the writer thread connects.
                    None => true,
                }
            }
            // The writer thread is at it; it looks at the queue again before it waits.
            Err(_) => true,
        };
        if left {
            outbound.wake.notify_one();
        }
    }

    fn start_writer(&self, to: MemberId) -> Arc<Outbound> {
        let outbound =
            Arc::new(Outbound { queue: Mutex::default(), wake: Condvar::new(), connection: Mutex::new(None) });
        let (shared, writing) = (self.shared.clone(), outbound.clone());
        let spawned = shared.thread_start.clone().spawn(format!("{}-to-{to}", shared.hello.member), move || {
            // A panic drops the connection and what was queued: Raft resends.
            let _ = crate::guarded(|| write_loop(to, &writing, &shared));
            writing.close();
            *writing.connection.lock().unwrap_or_else(PoisonError::into_inner) = None;
        });
        if let Err(e) = spawned {
            log::error!("cannot start writer to {to}: {e}");
            outbound.close();
        }
        outbound
    }

    /// Stops accepting and sending. Once it returns the listening port is free again, so
    /// a node restarted at once can bind it (found by a test restarting on one port).
    pub fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.close_writers();
        let Some(acceptor) = self.acceptor.lock().expect("not poisoned").take() else { return };
        // Wake the acceptor so it sees the flag (a wildcard listener is woken on loopback).
        let mut wake = self.local;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() { Ipv4Addr::LOCALHOST.into() } else { Ipv6Addr::LOCALHOST.into() });
        }
        if TcpStream::connect_timeout(&wake, CONNECT_TIMEOUT).is_ok() {
            let _ = acceptor.join();
        }
    }
}

impl Transport {
    fn close_writers(&self) {
        let writers = std::mem::take(&mut *self.writers.lock().expect("not poisoned"));
        for outbound in writers.values() {
            outbound.close();
        }
    }
}

impl Shared {
    fn set_address(&self, id: MemberId, address: &str) {
        let mut map = self.addresses.lock().expect("not poisoned");
        if map.get(&id).map(String::as_str) != Some(address) {
            map.insert(id, address.to_owned());
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Counts a connection as unauthenticated until dropped.
struct Unauthenticated(Arc<Shared>);

impl Drop for Unauthenticated {
    fn drop(&mut self) {
        self.0.unauthenticated.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, deliver: &Deliver) {
    let mut flood_logged = false;
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        if shared.isolated.load(Ordering::SeqCst) {
            continue;
        }
        // Without this cap a flood of silent connections would cost a thread each.
        if shared.unauthenticated.load(Ordering::SeqCst) >= MAX_UNAUTHENTICATED {
            if !flood_logged {
                log::warn!(
                    "{}: {MAX_UNAUTHENTICATED} connections are in their handshake; closing new ones until they finish",
                    shared.hello.member
                );
                flood_logged = true;
            }
            continue;
        }
        flood_logged = false;
        shared.unauthenticated.fetch_add(1, Ordering::SeqCst);
        let pending = Unauthenticated(shared.clone());
        let shared = shared.clone();
        let deliver = deliver.clone();
        let spawned = shared.thread_start.clone().spawn(format!("{}-recv", shared.hello.member), move || {
            let peer = stream.peer_addr().ok();
            // A panic drops this connection (the stream goes with the closure); the peer
            // dials again and Raft resends.
            if let Ok(Err(e)) = crate::guarded(|| read_loop(stream, pending, &shared, &deliver)) {
                match e {
                    // A peer going away, or a port probe: the view change is what matters.
                    TransportError::Io(_) => {}
                    e => {
                        shared.refusals.refused(&shared.hello.member.to_string(), peer, &e);
                    }
                }
            }
        });
        if let Err(e) = spawned {
            log::error!("cannot start reader: {e}");
        }
    }
}

fn read_loop(
    tcp: TcpStream,
    pending: Unauthenticated,
    shared: &Shared,
    deliver: &Deliver,
) -> Result<(), TransportError> {
    let peer = tcp.peer_addr()?;
    if !shared.allowlist.allows(peer.ip().to_canonical()) {
        shared.refusals.not_allowed(peer);
        return Ok(());
    }
    let peer = Some(peer);
    // After the allowlist, which may take the server a while.
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    tcp.set_nodelay(true)?;
    let mut stream = secure(shared.tls.as_deref(), Side::Acceptor, tcp, deadline)?;
    let theirs = read_hello(&mut stream, &shared.hello, deadline)?;
    stream.write_all(&shared.hello.encode())?;
    stream.flush()?;
    drop(pending);
    shared.refusals.authenticated(peer);
    let _open = OpenInbound::new(theirs.member, shared, deliver);
    let mut reader = std::io::BufReader::with_capacity(1 << 16, stream);
    loop {
        let (kind, body) = read_record(&mut reader, shared.limit_bytes)?;
        let body = match kind {
            RecordKind::Message => body,
            // Bounded: a small body that would inflate past the record limit is refused.
            RecordKind::CompressedMessage => {
                miniz_oxide::inflate::decompress_to_vec_with_limit(&body, shared.limit_bytes as usize).map_err(
                    |_| TransportError::Unexpected("a compressed message that does not inflate within the limit"),
                )?
            }
            _ => return Err(TransportError::Unexpected("record kind on a message stream")),
        };
        let message = Message::decode(&body)?;
        if message.from != theirs.member {
            return Err(TransportError::Unexpected("sender differs from the hello"));
        }
        // Peers send at least a heartbeat per tick, so isolation closes this at once.
        if shared.stopping.load(Ordering::SeqCst) || shared.isolated.load(Ordering::SeqCst) {
            return Ok(());
        }
        deliver(Inbound::Message(Box::new(message)));
    }
}

/// One inbound connection past its hello. When the last of a peer's ends, the member hears
/// of it at once: a killed process closes its sockets, and a leader that knows so stops
/// appending what could not commit (docs/design/group-views-and-primary-component.md).
/// A redial that begins after the old connection ended reports a close that may reach the
/// member after the new connection's first message, from another reader thread: the peer
/// then counts as closed until its next message, a heartbeat at most. So does a seed
/// prober's short connection (`discover`), which the member ignores for a peer it does not
/// know yet.
struct OpenInbound<'a> {
    peer: MemberId,
    shared: &'a Shared,
    deliver: &'a Deliver,
}

impl<'a> OpenInbound<'a> {
    fn new(peer: MemberId, shared: &'a Shared, deliver: &'a Deliver) -> Self {
        *shared.inbound.lock().unwrap_or_else(PoisonError::into_inner).entry(peer).or_insert(0) += 1;
        Self { peer, shared, deliver }
    }
}

impl Drop for OpenInbound<'_> {
    fn drop(&mut self) {
        let mut open = self.shared.inbound.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(count) = open.get_mut(&self.peer) else { return };
        *count -= 1;
        if *count > 0 {
            return;
        }
        open.remove(&self.peer);
        drop(open);
        // Not while unwinding: the member's input could panic in turn.
        if !thread::panicking() && !self.shared.stopping.load(Ordering::SeqCst) {
            (self.deliver)(Inbound::Closed(self.peer));
        }
    }
}

fn connect(to: MemberId, shared: &Shared) -> Result<BufWriter<Stream>, TransportError> {
    let address = shared
        .addresses
        .lock()
        .expect("not poisoned")
        .get(&to)
        .cloned()
        .ok_or(TransportError::Unexpected("peer without address"))?;
    let (stream, theirs) = dial(&address, shared)?;
    if theirs.member != to {
        return Err(TransportError::Unexpected("peer answered with another member id"));
    }
    stream.tcp().set_write_timeout(Some(WRITE_WAIT))?;
    // A TLS write that finds the socket full reads before it gives up (rustls'
    // `complete_io`), and nothing but TLS housekeeping ever arrives here.
    stream.tcp().set_read_timeout(Some(WRITE_WAIT))?;
    Ok(BufWriter::with_capacity(WRITE_BUFFER_BYTES, stream))
}

/// Connects to `address` (resolving a host name, trying each of its addresses), opens TLS
/// when configured and exchanges hellos.
fn dial(address: &str, shared: &Shared) -> Result<(Stream, Hello), TransportError> {
    if shared.isolated.load(Ordering::SeqCst) {
        return Err(TransportError::Unexpected("connection while isolated (gmcast.isolate)"));
    }
    let mut last = TransportError::Unexpected("peer address resolves to nothing");
    for socket in address.to_socket_addrs()? {
        match connect_from(shared.source_ip, socket) {
            Ok(tcp) => {
                let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
                let reconnect = || connect_from(shared.source_ip, socket);
                let mut stream = tls::dial(shared.tls.as_deref(), tcp, reconnect, deadline)?;
                stream.write_all(&shared.hello.encode())?;
                stream.flush()?;
                let theirs = read_hello(&mut stream, &shared.hello, deadline).map_err(|e| match e {
                    // A node that requires TLS closes a plain dialer without a word.
                    TransportError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && shared.tls.is_none() => {
                        TransportError::Unexpected("close before the hello (does the peer require TLS? socket.ssl)")
                    }
                    e => e,
                })?;
                return Ok((stream, theirs));
            }
            Err(e) => last = e.into(),
        }
    }
    Err(last)
}

/// Connects to `peer`, from `source` when it is of the same family.
fn connect_from(source: Option<IpAddr>, peer: SocketAddr) -> io::Result<TcpStream> {
    let tcp = match source.filter(|ip| ip.is_ipv4() == peer.is_ipv4()) {
        None => TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT)?,
        Some(source) => {
            let socket = socket2::Socket::new(socket2::Domain::for_address(peer), socket2::Type::STREAM, None)?;
            socket.bind(&SocketAddr::new(source, 0).into())?;
            socket.connect_timeout(&peer.into(), CONNECT_TIMEOUT)?;
            socket.into()
        }
    };
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// The writer thread: connects, and writes what the sending threads left queued, waiting
/// for the socket as long as it takes.
fn write_loop(to: MemberId, outbound: &Outbound, shared: &Shared) {
    // One line per outage: a peer that refuses or resets in turn would otherwise alternate.
    let mut outage_logged = false;
    loop {
        {
            let mut queue = outbound.queue();
            while queue.messages.is_empty() && !queue.closed {
                queue = outbound.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
            }
            if queue.closed {
                return;
            }
        }
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut connection = outbound.connection.lock().unwrap_or_else(PoisonError::into_inner);
        if outbound.usable(&mut connection, to, shared).is_none() {
            match connect(to, shared) {
                Ok(c) => *connection = Some(Connection::new(c)),
                Err(e) => {
                    // Peers come and go with membership: the view change is what matters.
                    if !outage_logged {
                        log::info!("{} cannot reach {to}: {e} (retrying)", shared.hello.member);
                        outage_logged = true;
                    }
                    drop(connection);
                    // Drop what queued meanwhile: Raft resends, and stale votes are noise.
                    thread::sleep(RECONNECT_PAUSE);
                    while outbound.pop_if(|_| true).is_some() {}
                    continue;
                }
            }
            outage_logged = false;
        }
        let Connection { stream, written_at } = connection.as_mut().expect("connected above");
        *written_at = Instant::now();
        let mut result = Ok(());
        while let (Ok(()), Some(message)) = (&result, outbound.pop_if(|_| true)) {
            result = write_waiting(stream, &encode(&message, shared.compress), outbound);
        }
        if let Err(e) = result.and_then(|()| flush_waiting(stream, outbound)) {
            log::info!("{} lost connection to {to}: {e}", shared.hello.member);
            *connection = None;
        }
    }
}

/// Writes all of `bytes`, waiting for the socket in `WRITE_WAIT` steps until the peer takes
/// them or the writer is closed.
fn write_waiting(stream: &mut BufWriter<Stream>, mut bytes: &[u8], outbound: &Outbound) -> io::Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if waited(&e) && !outbound.queue().closed => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn flush_waiting(stream: &mut BufWriter<Stream>, outbound: &Outbound) -> io::Result<()> {
    loop {
        match stream.flush() {
            Err(e) if waited(&e) && !outbound.queue().closed => {}
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests;
