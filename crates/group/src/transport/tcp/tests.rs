use super::*;
use crate::message::Body;
use crate::transport::{Hello, PROTOCOL_VERSION};
use std::io::Read;
use std::sync::mpsc::{self, channel};

fn message(from: u64) -> Message {
    Message {
        from: MemberId(from),
        group: 5,
        term: 2,
        recv_queue: 3,
        applied: 4,
        forks: 0,
        fork_term: 0,
        leader_primary: false,
        primary: false,
        queue_table: vec![],
        body: Body::Forward { request: 9, data: b"writeset".to_vec() },
    }
}

fn listening(id: u64, cluster: &str) -> (Transport, mpsc::Receiver<Message>) {
    listening_with(id, cluster, None, false)
}

/// With the test certificates of `crate::transport::tls` (`a-node1` of CA `a`, ...).
fn listening_tls(id: u64, node: &str, ca: &str) -> (Transport, mpsc::Receiver<Message>) {
    listening_with(id, "c", Some(Arc::new(test_tls(node, ca))), false)
}

fn test_tls(node: &str, ca: &str) -> Tls {
    let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport/tls/testdata");
    let config = crate::transport::TlsConfig {
        key: testdata.join(format!("{node}-key.pem")),
        cert: testdata.join(format!("{node}-cert.pem")),
        ca: testdata.join(format!("{ca}-ca.pem")),
        ciphers: String::new(),
    };
    Tls::load(config).unwrap()
}

fn listening_with(
    id: u64,
    cluster: &str,
    tls: Option<Arc<Tls>>,
    compress: bool,
) -> (Transport, mpsc::Receiver<Message>) {
    let group = GroupConfig { compress, ..GroupConfig::new(cluster) };
    listening_on(id, &group, "127.0.0.1:0", tls)
}

/// Member `id` listening on `address`, its messages received on the channel.
fn listening_on(
    id: u64,
    group: &GroupConfig,
    address: &str,
    tls: Option<Arc<Tls>>,
) -> (Transport, mpsc::Receiver<Message>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let t = Transport::start(MemberId(id), group, address, 1 << 20, tls, move |inbound| {
        if let Inbound::Message(m) = inbound {
            let _ = tx.lock().unwrap().send(*m);
        }
    })
    .unwrap();
    (t, rx)
}

#[test]
fn members_with_certificates_of_one_ca_exchange_messages_over_tls() {
    let (a, _) = listening_tls(1, "a-node1", "a");
    let (b, b_rx) = listening_tls(2, "a-node2", "a");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    // Over TLS the wire carries no record in the clear.
    let mut raw = TcpStream::connect(b.local_addr()).unwrap();
    let hello = Hello { protocol: PROTOCOL_VERSION, cluster_name: "c".into(), member: MemberId(1) };
    raw.write_all(&hello.encode()).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0, "a plain hello is refused");
}

#[test]
fn members_of_another_ca_or_without_tls_are_refused() {
    let (b, b_rx) = listening_tls(2, "a-node2", "a");
    let (other_ca, _) = listening_tls(3, "b-node1", "b");
    other_ca.set_address(MemberId(2), &b.local_addr().to_string());
    other_ca.send(MemberId(2), message(3));
    let (plain, plain_rx) = listening(4, "c");
    plain.set_address(MemberId(2), &b.local_addr().to_string());
    plain.send(MemberId(2), message(4));
    b.set_address(MemberId(4), &plain.local_addr().to_string());
    b.send(MemberId(4), message(2));
    assert!(b_rx.recv_timeout(Duration::from_millis(700)).is_err());
    assert!(plain_rx.try_recv().is_err());
}

/// `socket.dynamic`: a member with certificates talks TLS to its own CA's members and plain
/// TCP to members without certificates, both ways; it still refuses another CA's.
#[test]
fn a_dynamic_member_talks_tls_to_tls_members_and_plain_tcp_to_plain_ones() {
    let dynamic_tls = Some(Arc::new(test_tls("a-node1", "a").with_dynamic(true)));
    let (dynamic, dynamic_rx) = listening_on(1, &GroupConfig::new("c"), "127.0.0.1:0", dynamic_tls);
    let (tls, tls_rx) = listening_tls(2, "a-node2", "a");
    let (plain, plain_rx) = listening(3, "c");
    let (other_ca, _) = listening_tls(4, "b-node1", "b");
    for (id, peer) in [(2, &tls), (3, &plain)] {
        dynamic.set_address(MemberId(id), &peer.local_addr().to_string());
        dynamic.send(MemberId(id), message(1));
        peer.set_address(MemberId(1), &dynamic.local_addr().to_string());
        peer.send(MemberId(1), message(id));
    }
    assert_eq!(tls_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    assert_eq!(plain_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    let mut got: Vec<Message> = (0..2).map(|_| dynamic_rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
    got.sort_by_key(|m| m.from);
    assert_eq!(got, [message(2), message(3)]);
    other_ca.set_address(MemberId(1), &dynamic.local_addr().to_string());
    other_ca.send(MemberId(1), message(4));
    assert!(dynamic_rx.recv_timeout(Duration::from_millis(700)).is_err());
}

#[test]
fn unauthenticated_connections_are_capped_and_the_cap_frees_up() {
    let (b, b_rx) = listening(2, "c");
    let silent: Vec<TcpStream> =
        (0..MAX_UNAUTHENTICATED).map(|_| TcpStream::connect(b.local_addr()).unwrap()).collect();
    // The acceptor counts them as it takes them: wait until one more is closed at once.
    let started = std::time::Instant::now();
    loop {
        let mut extra = TcpStream::connect(b.local_addr()).unwrap();
        extra.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut buf = [0u8; 1];
        if matches!(extra.read(&mut buf), Ok(0)) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "the cap never closed a connection");
    }
    drop(silent);
    while b.shared.unauthenticated.load(Ordering::SeqCst) > 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "closed connections still counted");
        thread::sleep(Duration::from_millis(10));
    }
    let (a, _) = listening(1, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
}

#[test]
fn peers_of_one_cluster_exchange_messages() {
    let (a, _) = listening(1, "c");
    let (b, b_rx) = listening(2, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    let got = b_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, message(1));
}

#[test]
fn the_end_of_a_peers_last_connection_is_reported_once_after_its_messages() {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let b = Transport::start(MemberId(2), &GroupConfig::new("c"), "127.0.0.1:0", 1 << 20, None, move |inbound| {
        let _ = tx.lock().unwrap().send(inbound);
    })
    .unwrap();
    let (a, _) = listening(1, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Inbound::Message(Box::new(message(1))));
    // A process that ends closes its sockets.
    drop(a);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Inbound::Closed(MemberId(1)));
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn a_peer_of_another_cluster_is_refused() {
    let (a, _) = listening(1, "other");
    let (b, b_rx) = listening(2, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert!(b_rx.recv_timeout(Duration::from_millis(500)).is_err());

    // Seen from a raw socket: the refusing side closes without answering.
    let mut raw = TcpStream::connect(b.local_addr()).unwrap();
    let hello = Hello { protocol: PROTOCOL_VERSION, cluster_name: "other".into(), member: MemberId(7) };
    raw.write_all(&hello.encode()).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0);
}

/// The sending thread writes small messages itself, but a peer that stops reading holds up
/// neither it nor the order: what the socket cannot take waits in the queue, and arrives in
/// order once the peer reads again. Over TLS, where a write that times out leaves the rest in
/// the TLS layer's buffer.
#[test]
fn a_peer_that_stops_reading_holds_up_no_sender_and_gets_everything_in_order() {
    let (a, _) = listening_tls(1, "a-node1", "a");
    let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport/tls/testdata");
    let config = crate::transport::TlsConfig {
        key: testdata.join("a-node2-key.pem"),
        cert: testdata.join("a-node2-cert.pem"),
        ca: testdata.join("a-ca.pem"),
        ciphers: String::new(),
    };
    let (tx, rx) = channel();
    let gate = Arc::new(Mutex::new(()));
    let closed = gate.lock().unwrap();
    let reading = gate.clone();
    let b = Transport::start(
        MemberId(2),
        &GroupConfig::new("c"),
        "127.0.0.1:0",
        1 << 20,
        Some(Arc::new(Tls::load(config).unwrap())),
        {
            let tx = Mutex::new(tx);
            move |inbound| {
                drop(reading.lock().unwrap());
                if let Inbound::Message(m) = inbound {
                    let _ = tx.lock().unwrap().send(*m);
                }
            }
        },
    )
    .unwrap();
    a.set_address(MemberId(2), &b.local_addr().to_string());
    let numbered = |request| {
        let mut m = message(1);
        m.body = Body::Forward { request, data: vec![request as u8; 8 << 10] };
        m
    };
    // Connected (the first message goes through the writer thread, which connects).
    a.send(MemberId(2), numbered(0));
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.writers.lock().unwrap()[&MemberId(2)].connection.lock().unwrap().is_none() {
        assert!(Instant::now() < deadline, "never connected");
        thread::sleep(Duration::from_millis(10));
    }
    // 16 MiB: more than the sockets hold while b reads nothing.
    let sent = 2_000;
    for request in 1..sent {
        a.send(MemberId(2), numbered(request));
    }
    drop(closed);
    for request in 0..sent {
        let m = rx.recv_timeout(Duration::from_secs(30)).expect("every message arrives");
        assert_eq!(m, numbered(request));
    }
}

#[test]
fn a_compressing_member_sends_writesets_deflated_and_a_deflate_bomb_is_refused() {
    let (a, _) = listening_with(1, "c", None, true);
    let mut big = message(1);
    big.body = Body::Forward { request: 9, data: b"a row image ".repeat(1000) };
    // Seen from a raw peer: the record is deflated, and inflates to the message.
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    a.set_address(MemberId(2), &peer.local_addr().unwrap().to_string());
    a.send(MemberId(2), big.clone());
    let (mut raw, _) = peer.accept().unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_record(&mut raw, 1 << 20).unwrap().0, RecordKind::Hello);
    let hello = Hello { protocol: PROTOCOL_VERSION, cluster_name: "c".into(), member: MemberId(2) };
    raw.write_all(&hello.encode()).unwrap();
    let (kind, body) = read_record(&mut raw, 1 << 20).unwrap();
    assert_eq!(kind, RecordKind::CompressedMessage);
    assert!(body.len() < 1_000, "{} bytes for 12 000", body.len());
    assert_eq!(Message::decode(&miniz_oxide::inflate::decompress_to_vec(&body).unwrap()).unwrap(), big);
    // A member that does not compress reads it all the same.
    let (b, b_rx) = listening(2, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    drop(raw);
    while b_rx.try_recv().is_err() {
        a.send(MemberId(2), big.clone());
        if let Ok(received) = b_rx.recv_timeout(Duration::from_millis(500)) {
            assert_eq!(received, big);
            break;
        }
    }
    // A small record that would inflate past the limit (1 MiB here) drops the connection.
    let mut raw = TcpStream::connect(b.local_addr()).unwrap();
    let hello = Hello { protocol: PROTOCOL_VERSION, cluster_name: "c".into(), member: MemberId(3) };
    raw.write_all(&hello.encode()).unwrap();
    let mut reply = [0u8; 64];
    assert!(raw.read(&mut reply).unwrap() > 0);
    let bomb = miniz_oxide::deflate::compress_to_vec(&vec![0u8; 4 << 20], 6);
    assert!(bomb.len() < 64 << 10);
    raw.write_all(&record::encode(RecordKind::CompressedMessage, &bomb)).unwrap();
    assert_eq!(raw.read(&mut reply).unwrap_or(0), 0, "connection closed");
}

#[test]
fn a_malformed_record_drops_the_connection_and_nothing_else() {
    let (b, b_rx) = listening(2, "c");
    let mut raw = TcpStream::connect(b.local_addr()).unwrap();
    let hello = Hello { protocol: PROTOCOL_VERSION, cluster_name: "c".into(), member: MemberId(1) };
    raw.write_all(&hello.encode()).unwrap();
    let mut reply = [0u8; 64];
    assert!(raw.read(&mut reply).unwrap() > 0);
    let mut bad = record::encode(RecordKind::Message, &message(1).encode());
    let last = bad.len() - 1;
    bad[last] ^= 1;
    raw.write_all(&bad).unwrap();
    assert_eq!(raw.read(&mut reply).unwrap_or(0), 0, "connection closed");
    // A forged length is refused by the header checksum before any allocation.
    let mut raw = TcpStream::connect(b.local_addr()).unwrap();
    raw.write_all(&hello.encode()).unwrap();
    assert!(raw.read(&mut reply).unwrap() > 0);
    raw.write_all(&[0xff; 64]).unwrap();
    assert_eq!(raw.read(&mut reply).unwrap_or(0), 0);
    assert!(b_rx.try_recv().is_err());

    // The transport still serves well-formed peers.
    let (a, _) = listening(1, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert!(b_rx.recv_timeout(Duration::from_secs(5)).is_ok());
}

#[test]
fn a_seed_address_is_resolved_to_its_member_our_own_to_us_and_an_empty_one_reported_once() {
    let (a, a_rx) = listening(1, "c");
    let (b, b_rx) = listening(2, "c");
    let (found_tx, found_rx) = channel();
    // By host name: the transport learns the id from the hello, then routes by it.
    let by_name = format!("localhost:{}", b.local_addr().port());
    let tx = found_tx.clone();
    a.discover(&by_name, move |id| tx.send(id).unwrap());
    assert_eq!(found_rx.recv_timeout(Duration::from_secs(5)).unwrap(), Some(MemberId(2)));
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    // Our own address in the seed list is recognised by our own id.
    a.discover(&a.local_addr().to_string(), move |id| found_tx.send(id).unwrap());
    assert_eq!(found_rx.recv_timeout(Duration::from_secs(5)).unwrap(), Some(MemberId(1)));
    // A seed that is not up yet is reported so once, then found once it is.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (late_tx, late_rx) = channel();
    b.discover(&format!("127.0.0.1:{port}"), move |id| late_tx.send(id).unwrap());
    assert_eq!(late_rx.recv_timeout(Duration::from_secs(5)).unwrap(), None);
    thread::sleep(Duration::from_millis(700));
    let (tx, _) = channel();
    let tx = Mutex::new(tx);
    let _c = Transport::start(
        MemberId(3),
        &GroupConfig::new("c"),
        &format!("127.0.0.1:{port}"),
        1 << 20,
        None,
        move |inbound| {
            if let Inbound::Message(m) = inbound {
                let _ = tx.lock().unwrap().send(*m);
            }
        },
    )
    .unwrap();
    assert_eq!(late_rx.recv_timeout(Duration::from_secs(5)).unwrap(), Some(MemberId(3)));
    assert!(a_rx.try_recv().is_err());
}

#[test]
fn an_isolated_member_neither_sends_nor_receives_until_isolation_ends() {
    let (a, a_rx) = listening(1, "c");
    let (b, b_rx) = listening(2, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    b.set_address(MemberId(1), &a.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    b.set_isolated(true);
    // The open connection from a is closed at its next message, which is not delivered.
    a.send(MemberId(2), message(1));
    b.send(MemberId(1), message(2));
    assert!(b_rx.recv_timeout(Duration::from_millis(300)).is_err());
    assert!(a_rx.try_recv().is_err());
    b.set_isolated(false);
    // a's writer reconnects at its next message; the first after the drop may be lost.
    let delivered = (0..50).any(|_| {
        a.send(MemberId(2), message(1));
        b_rx.recv_timeout(Duration::from_millis(200)).is_ok()
    });
    assert!(delivered, "a reaches b again once isolation ends");
    b.send(MemberId(1), message(2));
    assert_eq!(a_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(2));
}

/// Plays a peer on `listener`: accepts one connection within 5 s and answers its hello.
fn accept_as(listener: &std::net::TcpListener, id: u64) -> Option<Stream> {
    let deadline = Instant::now() + Duration::from_secs(5);
    listener.set_nonblocking(true).unwrap();
    let tcp = loop {
        match listener.accept() {
            Ok((tcp, _)) => break tcp,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    };
    tcp.set_nonblocking(false).unwrap();
    let mut stream = Stream::Plain(tcp);
    let ours = Hello { protocol: PROTOCOL_VERSION, cluster_name: "c".into(), member: MemberId(id) };
    read_hello(&mut stream, &ours, deadline).unwrap();
    stream.write_all(&ours.encode()).unwrap();
    Some(stream)
}

fn read_message(stream: &mut Stream) -> Message {
    let (_, body) = crate::transport::read_record(stream, 1 << 20).unwrap();
    Message::decode(&body).unwrap()
}

#[test]
fn a_message_after_a_pause_reaches_a_peer_that_restarted_meanwhile() {
    let (a, _) = listening(1, "c");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    a.set_address(MemberId(2), &listener.local_addr().unwrap().to_string());
    a.send(MemberId(2), message(1));
    let mut first = accept_as(&listener, 2).expect("a dials");
    assert_eq!(read_message(&mut first), message(1));
    // The peer's process ends (its socket closes) and a new one listens on its port.
    drop(first);
    thread::sleep(IDLE_CHECK * 2);
    a.send(MemberId(2), message(1));
    // Written to the closed connection it would be lost, and nothing dials again until a
    // later message fails.
    let mut second = accept_as(&listener, 2).expect("a dials the restarted peer");
    assert_eq!(read_message(&mut second), message(1));
}

#[test]
fn an_idle_tls_connection_to_a_live_peer_is_kept() {
    let (a, _) = listening_tls(1, "a-node1", "a");
    let (b, b_rx) = listening_tls(2, "a-node2", "a");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    let our_port = || {
        let outbound = a.writers.lock().unwrap()[&MemberId(2)].clone();
        let connection = outbound.connection.lock().unwrap();
        connection.as_ref().map(|c| c.stream.get_ref().tcp().local_addr().unwrap().port())
    };
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    let before = our_port().expect("connected");
    // Whatever TLS sent after the handshake is not taken for the peer's close.
    thread::sleep(IDLE_CHECK * 2);
    a.send(MemberId(2), message(1));
    assert_eq!(b_rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    assert_eq!(our_port(), Some(before));
}

#[test]
fn every_thread_of_the_transport_runs_the_thread_start_first() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let record = started.clone();
    let group = GroupConfig {
        thread_start: ThreadStart::new(move || {
            record.lock().unwrap().push(thread::current().name().unwrap_or("?").to_owned());
        }),
        ..GroupConfig::new("c")
    };
    let (b, rx) = listening_on(2, &group, "127.0.0.1:0", None);
    let (a, _) = listening(1, "c");
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), message(1));
    b.set_address(MemberId(1), &a.local_addr().to_string());
    b.send(MemberId(1), message(2));
    let deadline = Instant::now() + Duration::from_secs(5);
    let wanted = ["m2-accept", "m2-recv", "m2-to-m1"];
    while !wanted.iter().all(|name| started.lock().unwrap().iter().any(|n| n == name)) {
        assert!(Instant::now() < deadline, "started: {:?}", started.lock().unwrap());
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_peer_the_allowlist_refuses_by_its_listen_address_is_dropped_before_its_hello_and_admitted_once_allowed() {
    let allowed = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (allowed_now, record) = (allowed.clone(), asked.clone());
    let group = GroupConfig {
        allowlist: Allowlist::new(move |ip| {
            record.lock().unwrap().push(ip);
            allowed_now.load(Ordering::SeqCst)
        }),
        ..GroupConfig::new("c")
    };
    let (b, rx) = listening_on(2, &group, "127.0.0.1:0", None);
    // Listening on an address of its own, it connects from there.
    let (a, _) = listening_on(1, &GroupConfig::new("c"), "127.0.0.2:0", None);
    a.set_address(MemberId(2), &b.local_addr().to_string());
    a.send(MemberId(2), message(1));
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err());
    assert_eq!(asked.lock().unwrap().first(), Some(&"127.0.0.2".parse::<std::net::IpAddr>().unwrap()));

    allowed.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        a.send(MemberId(2), message(1));
        if let Ok(got) = rx.recv_timeout(Duration::from_millis(200)) {
            assert_eq!(got, message(1));
            break;
        }
        assert!(Instant::now() < deadline, "never admitted once allowed");
    }
}
