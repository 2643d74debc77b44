//! Threads and sockets of the transport: one acceptor, one reader per inbound
//! connection, one writer per peer with a bounded queue (full means drop: Raft resends),
//! and one short-lived prober per seed address until it learns who listens there.
//!
//! A panic on any of these threads is logged naming the thread and ends no more than its
//! connection (Raft resends): the acceptor starts accepting again, a prober tries again,
//! and a writer whose thread ended is replaced at the next message to its peer.

use super::tls::{secure, Refusals, Side, Stream, Tls};
use super::{read_hello, read_record, Hello, TransportError, HANDSHAKE_TIMEOUT, MAX_UNAUTHENTICATED, PROTOCOL_VERSION};
use crate::message::Message;
use crate::record::{self, RecordKind};
use crate::types::MemberId;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A peer's queue takes a message while fewer messages and writeset bytes than these
/// wait, however big the message: one at the group's limit (`config::RECORD_LIMIT_BYTES`)
/// always gets through to a peer that keeps up, and a queue holds at most this budget
/// plus one message.
const OUTBOUND_QUEUE_RECORDS: usize = 4096;
const OUTBOUND_QUEUE_BYTES: usize = 64 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// Between attempts to reach a seed address that does not answer yet.
const DISCOVER_PAUSE: Duration = Duration::from_millis(500);

type Deliver = Arc<dyn Fn(Message) + Send + Sync>;

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
    /// Galera's `gmcast.isolate`: no connection in or out, nothing sent or delivered.
    isolated: AtomicBool,
    /// Messages carrying writesets go deflated (`GroupConfig::compress`).
    compress: bool,
}

/// Messages carrying fewer writeset bytes than this go as they are: too little to gain.
const COMPRESS_MIN_BYTES: usize = 1024;
/// Deflate's fastest level: a WAN link is slower than it on any core.
const COMPRESS_LEVEL: u8 = 1;

pub struct Transport {
    shared: Arc<Shared>,
    local: SocketAddr,
    writers: Mutex<BTreeMap<MemberId, Writer>>,
    /// Owns the listener: joined on shutdown, so the port is free once that returns.
    acceptor: Mutex<Option<thread::JoinHandle<()>>>,
}

/// The queue to one peer's writer thread and the writeset bytes waiting in it. Messages
/// are encoded and checksummed by the writer, not by the member's driver thread, which a
/// big writeset would otherwise hold up once per peer.
struct Writer {
    queue: SyncSender<Message>,
    queued_bytes: Arc<AtomicUsize>,
}

impl Transport {
    /// Listens on `listen` and hands every decoded message from a peer to `deliver`; with
    /// `tls`, every connection is TLS and a peer must show a certificate of the cluster's CA;
    /// with `compress`, what this member sends with writesets in it goes deflated (it reads
    /// both either way).
    pub fn start(
        me: MemberId,
        cluster_name: &str,
        listen: &str,
        limit_bytes: u32,
        tls: Option<Arc<Tls>>,
        compress: bool,
        deliver: impl Fn(Message) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            hello: Hello { protocol: PROTOCOL_VERSION, cluster_name: cluster_name.to_owned(), member: me },
            limit_bytes,
            addresses: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
            tls,
            refusals: Refusals::default(),
            unauthenticated: AtomicUsize::new(0),
            isolated: AtomicBool::new(false),
            compress,
        });
        let deliver: Deliver = Arc::new(deliver);
        let acceptor_shared = shared.clone();
        let acceptor = thread::Builder::new().name(format!("{me}-accept")).spawn(move || {
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
    /// and reports its id to `found`. Our own address is recognised by our own id and not
    /// reported.
    pub fn discover(&self, address: &str, found: impl FnOnce(MemberId) + Send + 'static) {
        let (shared, seed) = (self.shared.clone(), address.to_owned());
        let me = shared.hello.member;
        let spawned = thread::Builder::new().name(format!("{me}-discover")).spawn(move || {
            let mut last_error = String::new();
            while !shared.stopping.load(Ordering::SeqCst) {
                // A panic in an attempt is retried like any other failure to connect.
                let text = match crate::guarded(|| dial(&seed, &shared)) {
                    Ok(Ok((_, theirs))) => {
                        if theirs.member != me {
                            log::info!("{me}: seed {seed} is {}", theirs.member);
                            shared.set_address(theirs.member, &seed);
                            found(theirs.member);
                        }
                        return;
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(panic) => format!("panic: {panic}"),
                };
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
            // Their threads end with their queues, closing the connections.
            self.writers.lock().expect("not poisoned").clear();
        }
    }

    /// Queues a message; drops it if the peer's queue is full or it has no address.
    pub fn send(&self, to: MemberId, message: Message) {
        if self.shared.isolated.load(Ordering::SeqCst) {
            return;
        }
        let mut writers = self.writers.lock().expect("not poisoned");
        let writer = writers.entry(to).or_insert_with(|| self.start_writer(to));
        if writer.queued_bytes.load(Ordering::Relaxed) >= OUTBOUND_QUEUE_BYTES {
            log::debug!("queue to {to} full, message dropped");
            return;
        }
        let len = message.payload_bytes();
        writer.queued_bytes.fetch_add(len, Ordering::Relaxed);
        match writer.queue.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                writer.queued_bytes.fetch_sub(len, Ordering::Relaxed);
                log::debug!("queue to {to} full, message dropped");
            }
            Err(TrySendError::Disconnected(_)) => {
                // Its thread ended (a panic, logged there): the next message starts another.
                writers.remove(&to);
            }
        }
    }

    fn start_writer(&self, to: MemberId) -> Writer {
        let (queue, rx) = mpsc::sync_channel(OUTBOUND_QUEUE_RECORDS);
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let (shared, queued) = (self.shared.clone(), queued_bytes.clone());
        let spawned = thread::Builder::new().name(format!("{}-to-{to}", shared.hello.member)).spawn(move || {
            // A panic drops the connection and what was queued: Raft resends.
            let _ = crate::guarded(|| write_loop(to, rx, shared, queued));
        });
        if let Err(e) = spawned {
            log::error!("cannot start writer to {to}: {e}");
        }
        Writer { queue, queued_bytes }
    }

    /// Stops accepting and sending. Once it returns the listening port is free again, so
    /// a node restarted at once can bind it (found by a test restarting on one port).
    pub fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.writers.lock().expect("not poisoned").clear();
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
        let spawned = thread::Builder::new().name(format!("{}-recv", shared.hello.member)).spawn(move || {
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
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let peer = tcp.peer_addr().ok();
    tcp.set_nodelay(true)?;
    let mut stream = secure(shared.tls.as_deref(), Side::Acceptor, tcp, deadline)?;
    let theirs = read_hello(&mut stream, &shared.hello, deadline)?;
    stream.write_all(&shared.hello.encode())?;
    stream.flush()?;
    drop(pending);
    shared.refusals.authenticated(peer);
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
        deliver(message);
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
    Ok(BufWriter::with_capacity(1 << 16, stream))
}

/// Connects to `address` (resolving a host name, trying each of its addresses), opens TLS
/// when configured and exchanges hellos.
fn dial(address: &str, shared: &Shared) -> Result<(Stream, Hello), TransportError> {
    if shared.isolated.load(Ordering::SeqCst) {
        return Err(TransportError::Unexpected("connection while isolated (gmcast.isolate)"));
    }
    let mut last = TransportError::Unexpected("peer address resolves to nothing");
    for socket in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&socket, CONNECT_TIMEOUT) {
            Ok(tcp) => {
                let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
                tcp.set_nodelay(true)?;
                let mut stream = secure(shared.tls.as_deref(), Side::Dialer, tcp, deadline)?;
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

fn write_loop(to: MemberId, queue: Receiver<Message>, shared: Arc<Shared>, queued: Arc<AtomicUsize>) {
    let take = |message: Message| {
        queued.fetch_sub(message.payload_bytes(), Ordering::Relaxed);
        message
    };
    let encode = |message: Message| {
        if shared.compress && message.payload_bytes() >= COMPRESS_MIN_BYTES {
            let body = message.encode();
            let deflated = miniz_oxide::deflate::compress_to_vec(&body, COMPRESS_LEVEL);
            // Not worth the receiver's work under an eighth saved (data already compressed).
            if deflated.len() < body.len() - body.len() / 8 {
                return record::encode(RecordKind::CompressedMessage, &deflated);
            }
            return record::encode(RecordKind::Message, &body);
        }
        record::encode_with(RecordKind::Message, message.payload_bytes() + 256, |w| message.encode_into(w))
    };
    let mut connection: Option<BufWriter<Stream>> = None;
    // One line per outage: a peer that refuses or resets in turn would otherwise alternate.
    let mut outage_logged = false;
    while let Ok(first) = queue.recv().map(take) {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        if connection.is_none() {
            match connect(to, &shared) {
                Ok(c) => connection = Some(c),
                Err(e) => {
                    // Peers come and go with membership: the view change is what matters.
                    if !outage_logged {
                        log::info!("{} cannot reach {to}: {e} (retrying)", shared.hello.member);
                        outage_logged = true;
                    }
                    // Drop what queued meanwhile: Raft resends, and stale votes are noise.
                    thread::sleep(RECONNECT_PAUSE);
                    while queue.try_recv().map(take).is_ok() {}
                    continue;
                }
            }
            outage_logged = false;
        }
        let stream = connection.as_mut().expect("connected above");
        let mut result = stream.write_all(&encode(first));
        while result.is_ok() {
            match queue.try_recv().map(take) {
                Ok(next) => result = stream.write_all(&encode(next)),
                Err(_) => break,
            }
        }
        if let Err(e) = result.and_then(|_| stream.flush()) {
            log::info!("{} lost connection to {to}: {e}", shared.hello.member);
            connection = None;
        }
    }
}

#[cfg(test)]
mod tests;
