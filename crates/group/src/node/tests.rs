use super::*;
use crate::cache::load_or_create_member_id;
use crate::types::DeliveredKind;
use std::path::Path;
use std::sync::atomic::AtomicU32;

/// Node tests run one at a time: the one with a writeset at the limit takes the machine
/// for a while, and the others' short timeouts would then see members fall silent.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static NODE_TESTS: Mutex<()> = Mutex::new(());
    NODE_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A port free now, below Linux's ephemeral range (32768 up): a port 0 bind of a test beside
/// this one, or the local end of a connection (this test's own nodes dialing each other),
/// would otherwise take it before its node listens (seen once: a node of a three-node test
/// failed to start). Above the ports mtr runs take here (`lockstep_cluster::ports`).
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const START: u32 = 23_000;
    const LEN: u32 = 9_700;
    let base = std::process::id() % LEN;
    for _ in 0..LEN {
        let port = (START + (base + NEXT.fetch_add(1, Ordering::Relaxed) % LEN) % LEN) as u16;
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {START}..{}", START + LEN)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-node-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Member `n` of a cluster on `ports`, its id from its directory, its peers by address only
/// (its own among them, as in a `gcomm://a,b,c` shared by every member).
fn config(n: usize, ports: &[u16], dir: &Path, bootstrap: Option<Genesis>, resume_after: Seqno) -> NodeConfig {
    let mut group = GroupConfig::new("test-cluster");
    group.election_timeout_min_ms = 300;
    group.election_timeout_max_ms = 600;
    group.heartbeat_interval_ms = 50;
    group.join_retry_ms = 200;
    group.suspect_timeout_ms = 1_000;
    let data_dir = dir.join(format!("node{n}"));
    NodeConfig {
        group,
        info: MemberInfo {
            id: load_or_create_member_id(&data_dir).unwrap(),
            name: format!("node{n}"),
            address: format!("127.0.0.1:{}", ports[n - 1]),
            incoming_address: String::new(),
            incarnation: 0,
            arbitrator: false,
            weight: 1,
            segment: 0,
        },
        listen: format!("0.0.0.0:{}", ports[n - 1]),
        data_dir,
        fsync: false,
        bootstrap,
        peers: ports.iter().map(|p| format!("localhost:{p}")).collect(),
        resume_after,
        application_position: 0,
    }
}

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    wait_for_nodes(&[], what, f);
}

/// As `wait_for`, and a timeout shows what each of `nodes` reports, to tell a lost join
/// from a slow machine.
fn wait_for_nodes(nodes: &[GroupNode], what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        if Instant::now() >= deadline {
            let statuses: Vec<_> = nodes.iter().map(GroupNode::status).collect();
            panic!("timed out waiting for {what}; the nodes report {statuses:#?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for a view of the three `nodes` with a leader; returns its index and a follower's.
fn leader_and_follower(nodes: &[GroupNode]) -> (usize, usize) {
    let leads = |n: &GroupNode| n.status().leader == Some(n.status().id);
    wait_for_nodes(nodes, "a view of three and a leader", || {
        nodes.iter().all(|n| n.status().primary && n.status().view.members.len() == 3) && nodes.iter().any(leads)
    });
    (nodes.iter().position(leads).unwrap(), nodes.iter().position(|n| !leads(n)).unwrap())
}

/// Deliveries up to and including seqno `last`, as (seqno, kind, bytes).
fn deliveries_until(node: &GroupNode, last: Seqno) -> Vec<(Seqno, &'static str, Vec<u8>)> {
    let mut out: Vec<(Seqno, &'static str, Vec<u8>)> = Vec::new();
    while out.last().is_none_or(|(s, _, _)| *s < last) {
        let d = node.recv_delivered(Duration::from_secs(10)).expect("a delivery");
        let kind = match d.kind {
            DeliveredKind::Writeset { .. } => "writeset",
            DeliveredKind::Message { .. } => "message",
            DeliveredKind::View(_) => "view",
            DeliveredKind::StateGap => "gap",
            DeliveredKind::ViewsMissed => "views missed",
            DeliveredKind::HistoryForked => "history forked",
        };
        out.push((d.seqno, kind, d.bytes));
    }
    out
}

#[test]
fn three_nodes_over_tcp_order_writesets_and_messages_and_an_evicted_member_rejoins() {
    let _serial = one_at_a_time();
    let dir = temp_dir("three");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let genesis = Genesis { history: [7; 16], base_seqno: 1000, group: 1 };
    let mut nodes: Vec<GroupNode> =
        (1..=3).map(|n| GroupNode::start(config(n, &ports, &dir, (n == 1).then_some(genesis), 0)).unwrap()).collect();
    wait_for_nodes(&nodes, "a view of three", || {
        nodes.iter().all(|n| n.status().primary && n.status().view.members.len() == 3)
    });
    assert!(nodes.iter().all(|n| n.status().history == genesis.history));

    let mut seqnos = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        seqnos.push(node.submit(format!("ws from {i}").into_bytes()).unwrap());
    }
    let after = nodes[1].send_message(b"barrier".to_vec()).recv().unwrap().unwrap();
    let last = nodes[2].submit(b"after the barrier".to_vec()).unwrap();
    assert!(seqnos.windows(2).all(|w| w[0] < w[1]) && seqnos[0] > 1001, "{seqnos:?}");
    assert!(after >= seqnos[2] && after < last, "message after {after}, writesets {seqnos:?} then {last}");
    // Everyone delivers the same events at the same seqnos; numbering continues from the
    // genesis (the first view is 1001) and the joiners are told they lack what precedes it.
    let histories: Vec<_> = nodes.iter().map(|n| deliveries_until(n, last)).collect();
    assert_eq!(histories[0][0].0, 1001);
    for h in &histories[1..] {
        assert_eq!(h[0], (1000, "gap", Vec::new()));
        assert_eq!(h[1..], histories[0][..]);
    }
    assert!(histories[0].contains(&(after, "message", b"barrier".to_vec())));
    // The cache serves writesets and views back as delivered, messages left out.
    let served: Vec<(Seqno, Vec<u8>)> = nodes[1]
        .read_cache(1001, last)
        .unwrap()
        .map(|d| d.map(|d| (d.seqno, d.bytes)))
        .collect::<Result<_, _>>()
        .unwrap();
    let numbered: Vec<(Seqno, Vec<u8>)> =
        histories[0].iter().filter(|(_, k, _)| *k != "message").map(|(s, _, b)| (*s, b.clone())).collect();
    assert_eq!(served, numbered);

    // Member 3 stays down past suspect_timeout: the others evict it. Restarted from its
    // cache, no longer a voter, it joins again by itself: here with no seed but itself,
    // through the members its cache names.
    let id3 = nodes[2].status().id;
    drop(nodes.pop());
    wait_for("member 3 evicted", || nodes[0].status().view.members.len() == 2);
    let more = nodes[0].submit(b"while 3 was out".to_vec()).unwrap();
    let mut restarted = config(3, &ports, &dir, None, last);
    restarted.peers = vec![restarted.info.address.clone()];
    nodes.push(GroupNode::start(restarted).unwrap());
    assert_eq!(nodes[2].status().id, id3, "the member id survives the restart");
    wait_for("member 3 back in the view", || {
        nodes.iter().all(|n| n.status().primary && n.status().view.contains(id3) && n.status().view.members.len() == 3)
    });
    let resumed = deliveries_until(&nodes[2], more);
    assert!(resumed[0].0 == last + 1, "resumes after {last}: {resumed:?}");
    assert_eq!(resumed.last().unwrap(), &(more, "writeset", b"while 3 was out".to_vec()));
    drop(nodes);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bootstrapping_over_an_old_cache_starts_a_new_cluster() {
    let _serial = one_at_a_time();
    let dir = temp_dir("rebootstrap");
    let ports = [free_port()];
    let old = Genesis { history: [1; 16], base_seqno: 0, group: 1 };
    let node = GroupNode::start(config(1, &ports, &dir, Some(old), 0)).unwrap();
    wait_for("primary", || node.status().primary);
    assert_eq!(node.submit(b"old history".to_vec()).unwrap(), 2);
    let id = node.status().id;
    drop(node);

    let new = Genesis { history: [2; 16], base_seqno: 41, group: 2 };
    let node = GroupNode::start(config(1, &ports, &dir, Some(new), 0)).unwrap();
    wait_for("primary", || node.status().primary);
    let status = node.status();
    assert_eq!((status.id, status.history, status.view.view_id, status.last_seqno), (id, new.history, 1, 42));
    // The application is at the base seqno: no gap, the first view follows it.
    let first = node.recv_delivered(Duration::from_secs(5)).unwrap();
    assert!(matches!(first.kind, DeliveredKind::View(_)) && first.seqno == 42, "{first:?}");
    let mut old_cache = node.read_cache(1, 42).unwrap();
    assert_eq!(old_cache.next().map(|d| d.map(|d| d.seqno)), Some(Err(42)), "nothing of the old cache is served");
    drop(node);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two nodes of one cluster bootstrapped separately (an operator bootstrapped a second node
/// while the first kept its group): they never mix. The member of the earlier bootstrap
/// stops with an error naming the later one; the later one stays primary alone.
#[test]
fn members_of_two_bootstraps_of_one_cluster_do_not_mix_and_both_go_on() {
    let dir = temp_dir("two-bootstraps");
    let ports = [free_port(), free_port()];
    let earlier = Genesis { history: [3; 16], base_seqno: 10, group: 100 };
    let first = GroupNode::start(config(1, &ports, &dir, Some(earlier), 10)).unwrap();
    wait_for("first primary", || first.status().primary);
    let later = Genesis { history: [3; 16], base_seqno: 8, group: 200 };
    let second = GroupNode::start(config(2, &ports, &dir, Some(later), 8)).unwrap();
    wait_for("second primary", || second.status().primary);
    // Both addresses name both nodes: they hear each other, and neither takes the other in
    // (mtr galera_wsrep_new_cluster: two clusters of size 1).
    std::thread::sleep(Duration::from_millis(1500));
    for status in [first.status(), second.status()] {
        assert!(status.primary && status.failed.is_none(), "{status:?}");
        assert_eq!(status.view.members.len(), 1, "{status:?}");
    }
    drop((first, second));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Members that asked for any port (`gmcast.listen_addr=tcp://127.0.0.1:0`) are known to
/// the others by the port they took, so each reaches the other.
#[test]
fn members_listening_on_any_port_are_reached_on_the_one_they_took() {
    let _serial = one_at_a_time();
    let dir = temp_dir("any-port");
    let any_port = |n: usize, bootstrap: Option<Genesis>, peers: Vec<String>| {
        let mut c = config(n, &[0, 0], &dir, bootstrap, 0);
        c.listen = "127.0.0.1:0".into();
        c.peers = peers;
        c
    };
    let genesis = Genesis { history: [6; 16], base_seqno: 0, group: 1 };
    let first = GroupNode::start(any_port(1, Some(genesis), Vec::new())).unwrap();
    wait_for("first primary", || first.status().primary);
    let second = GroupNode::start(any_port(2, None, vec![first.local_addr().to_string()])).unwrap();
    let both = [first, second];
    wait_for_nodes(&both, "a view of two", || {
        both.iter().all(|n| n.status().primary && n.status().view.members.len() == 2)
    });
    for member in both[0].status().view.members {
        let node = both.iter().find(|n| n.status().id == member.id).unwrap();
        assert_eq!(member.address, format!("127.0.0.1:{}", node.local_addr().port()));
    }
    drop(both);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A member restarted from a cache of two voters (so not primary alone) finds the cluster
/// bootstrapped again meanwhile: it discards its cache and joins the new cluster as a new
/// member, which hands its application the new order from its start.
#[test]
fn a_member_restarted_into_a_cluster_bootstrapped_again_joins_it_as_a_new_member() {
    let dir = temp_dir("bootstrapped-again");
    let ports = [free_port(), free_port(), free_port()];
    let earlier = Genesis { history: [4; 16], base_seqno: 0, group: 100 };
    let first = GroupNode::start(config(1, &ports, &dir, Some(earlier), 0)).unwrap();
    let second = GroupNode::start(config(2, &ports, &dir, None, 0)).unwrap();
    wait_for("two members", || first.status().view.members.len() == 2 && second.status().primary);
    drop((first, second));
    let later = Genesis { history: [4; 16], base_seqno: 5, group: 200 };
    let third = GroupNode::start(config(3, &ports, &dir, Some(later), 5)).unwrap();
    wait_for("third primary", || third.status().primary);
    let first = GroupNode::start(config(1, &ports, &dir, None, 2)).unwrap();
    wait_for("the restarted member in the new cluster", || {
        let s = first.status();
        s.primary && s.view.members.len() == 2 && s.history == later.history
    });
    assert!(third.status().failed.is_none() && first.status().failed.is_none());
    drop((first, third));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A restarted member that was its old group's only voter elects itself at once, and still
/// joins a later bootstrap running at its seed address: its cache counts only once that seed
/// answered its probe, which tells where to answer (mtr MDEV-29142 stopped once, its
/// election ahead of the later bootstrap's word).
#[test]
fn a_restarted_sole_voter_joins_a_later_bootstrap_at_its_seed_even_when_elected_first() {
    let dir = temp_dir("sole-voter-restarted");
    let ports = [free_port(), free_port()];
    let earlier = Genesis { history: [5; 16], base_seqno: 0, group: 100 };
    let first = GroupNode::start(config(1, &ports, &dir, Some(earlier), 0)).unwrap();
    wait_for("first primary", || first.status().primary);
    drop(first);
    let later = Genesis { history: [5; 16], base_seqno: 3, group: 200 };
    // Bootstrapped with `gcomm://` as mtr's node 1 is: it knows no address of the first.
    let second = GroupNode::start(NodeConfig { peers: Vec::new(), ..config(2, &ports, &dir, Some(later), 3) }).unwrap();
    wait_for("second primary", || second.status().primary);
    let mut restarted = config(1, &ports, &dir, None, 1);
    restarted.group.election_timeout_min_ms = 1;
    restarted.group.election_timeout_max_ms = 2;
    let first = GroupNode::start(restarted).unwrap();
    wait_for_nodes(&[], "the restarted member in the later cluster", || {
        let s = first.status();
        s.primary && s.view.members.len() == 2 && s.history == later.history
    });
    assert!(first.status().failed.is_none() && second.status().failed.is_none());
    drop((first, second));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The transport's test certificates (`a-node1`, `a-node2` of CA `a`; `b-node1` of `b`).
fn tls(node: &str, ca: &str) -> Option<Arc<Tls>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport/tls/testdata");
    let config = crate::transport::TlsConfig {
        key: dir.join(format!("{node}-key.pem")),
        cert: dir.join(format!("{node}-cert.pem")),
        ca: dir.join(format!("{ca}-ca.pem")),
        ciphers: String::new(),
    };
    Some(Arc::new(Tls::load(config).unwrap()))
}

#[test]
fn members_with_certificates_of_the_cluster_ca_form_a_group_and_others_stay_out() {
    let dir = temp_dir("tls");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let genesis = Genesis { history: [8; 16], base_seqno: 0, group: 1 };
    let first = GroupNode::start_with_tls(config(1, &ports, &dir, Some(genesis), 0), tls("a-node1", "a")).unwrap();
    let second = GroupNode::start_with_tls(config(2, &ports, &dir, None, 0), tls("a-node2", "a")).unwrap();
    let outsider = GroupNode::start_with_tls(config(3, &ports, &dir, None, 0), tls("b-node1", "b")).unwrap();
    wait_for("a view of two", || {
        [&first, &second].iter().all(|n| n.status().primary && n.status().view.members.len() == 2)
    });
    let seqno = second.submit(b"over tls".to_vec()).unwrap();
    assert!(deliveries_until(&first, seqno).contains(&(seqno, "writeset", b"over tls".to_vec())));
    assert!(!outsider.status().primary && !first.status().view.members.iter().any(|m| m.id == outsider.status().id));
    let same = first.tls().unwrap().config();
    assert!(first.reload_tls(same.clone()).unwrap(), "reloading the same files works");
    drop((first, second, outsider));
    let plain = GroupNode::start(config(1, &[free_port()], &dir.join("plain"), Some(genesis), 0)).unwrap();
    assert!(!plain.reload_tls(same).unwrap(), "plain TCP: nothing to reload");
    drop(plain);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_writeset_of_many_parts_reaches_everyone_whole_a_bigger_one_is_refused_and_the_order_goes_on() {
    let _serial = one_at_a_time();
    use crate::config::ENTRY_LIMIT_BYTES;
    let dir = temp_dir("big");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let genesis = Genesis { history: [8; 16], base_seqno: 0, group: 1 };
    let limit = 24 << 20;
    let nodes: Vec<GroupNode> = (1..=3)
        .map(|n| {
            let mut config = config(n, &ports, &dir, (n == 1).then_some(genesis), 0);
            config.group.max_writeset_bytes = limit as u32;
            // Carrying, not timing, is tested here: on a loaded machine the short timeouts of
            // these tests could elect another leader while 24 MiB are copied around.
            config.group.election_timeout_min_ms = 5_000;
            config.group.election_timeout_max_ms = 10_000;
            config.group.suspect_timeout_ms = 20_000;
            config.group.submit_timeout_ms = 60_000;
            GroupNode::start(config).unwrap()
        })
        .collect();
    let (leader, follower) = leader_and_follower(&nodes);
    let (leader, follower) = (&nodes[leader], &nodes[follower]);

    // From a follower its 24 parts go to the leader, and from there to both followers, while
    // small writesets are ordered among them.
    let big: Vec<u8> = (0..limit).map(|i| (i % 251) as u8).collect();
    let big_done = follower.submit_async(big.clone());
    let small: Vec<Seqno> = nodes.iter().map(|n| n.submit(b"small".to_vec()).unwrap()).collect();
    let at = big_done.recv().unwrap().unwrap();
    assert_eq!(follower.submit(vec![1; limit + 1]), Err(SubmitError::TooLarge));
    assert_eq!(leader.submit(vec![1; limit + 1]), Err(SubmitError::TooLarge));
    // A message travels as one entry: the entry limit applies to it.
    let message = vec![1; ENTRY_LIMIT_BYTES as usize + 1];
    assert_eq!(leader.send_message(message).recv().unwrap(), Err(SubmitError::TooLarge));
    let after = leader.submit(b"after".to_vec()).unwrap();
    assert!(after > at);

    for node in &nodes {
        let writesets: Vec<(Seqno, Vec<u8>)> = deliveries_until(node, after)
            .into_iter()
            .filter(|(_, kind, _)| *kind == "writeset")
            .map(|(seqno, _, bytes)| (seqno, bytes))
            .collect();
        assert_eq!(writesets.len(), 5);
        assert!(writesets.contains(&(at, big.clone())), "the big writeset, whole, at {at}");
        for &s in &small {
            assert!(writesets.contains(&(s, b"small".to_vec())));
        }
        assert_eq!(writesets.last(), Some(&(after, b"after".to_vec())));
    }
    drop(nodes);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_panic_in_the_member_fails_it_visibly_and_nothing_waits_for_it() {
    let _serial = one_at_a_time();
    let dir = temp_dir("panic");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let genesis = Genesis { history: [9; 16], base_seqno: 0, group: 1 };
    let mut nodes: Vec<GroupNode> = (1..=3)
        .map(|n| {
            let mut config = config(n, &ports, &dir, (n == 1).then_some(genesis), 0);
            // The leader stays primary a while after losing its followers.
            config.group.suspect_timeout_ms = 60_000;
            GroupNode::start(config).unwrap()
        })
        .collect();
    let leader = nodes.remove(leader_and_follower(&nodes).0);
    assert!(leader.submit(b"committed".to_vec()).is_ok());
    // Without its followers nothing commits: this one waits for its seqno when the panic
    // strikes.
    drop(nodes);
    let waiting = leader.submit_async(b"never committed".to_vec());
    leader.inject_panic();

    assert_eq!(waiting.recv_timeout(Duration::from_secs(5)), Ok(Err(SubmitError::Failed)));
    let status = leader.status();
    assert_eq!(status.failed.as_deref(), Some("group member panicked: injected by a test"));
    assert!(!status.primary);
    let started = Instant::now();
    assert_eq!(leader.submit(b"after".to_vec()), Err(SubmitError::Failed));
    assert!(!matches!(leader.send_message(b"after".to_vec()).recv(), Ok(Ok(_))));
    // The delivery stream ends: what was delivered before is still there, then nothing.
    while leader.recv_delivered(Duration::from_secs(5)).is_some() {}
    assert!(started.elapsed() < Duration::from_secs(4), "nothing waited for a timeout");
    drop(leader);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What a sink was given: (seqno, bytes).
type DeliveryLog = Arc<Mutex<Vec<(Seqno, usize)>>>;

/// Takes 2 s over a big delivery, as the provider decoding and certifying a big writeset
/// does, and records what it was given.
struct SlowSink(DeliveryLog);

impl DeliverySink for SlowSink {
    fn deliver(&mut self, d: Delivered, _: bool, _: &Status, _: &mut Outbox) -> bool {
        if d.bytes.len() >= AWAY_BYTES {
            thread::sleep(Duration::from_secs(2));
        }
        self.0.lock().unwrap().push((d.seqno, d.bytes.len()));
        true
    }
    fn submit_failed(&mut self, _: u64, _: SubmitError, _: &mut Outbox) {}
    fn barrier_reached(&mut self, _: u64, _: Seqno, _: &mut Outbox) {}
    fn round(&mut self, _: &Status, _: &mut Outbox) -> bool {
        true
    }
}

#[test]
fn a_sink_slow_over_a_big_delivery_holds_up_neither_heartbeats_nor_ordering() {
    let _serial = one_at_a_time();
    let dir = temp_dir("slow-sink");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let genesis = Genesis { history: [10; 16], base_seqno: 0, group: 1 };
    let logs: Vec<DeliveryLog> = (0..3).map(|_| Arc::default()).collect();
    let nodes: Vec<GroupNode> = (1..=3)
        .map(|n| {
            let config = config(n, &ports, &dir, (n == 1).then_some(genesis), 0);
            GroupNode::start_with_sink(config, Box::new(SlowSink(logs[n - 1].clone()))).unwrap()
        })
        .collect();
    let (leader, follower) = leader_and_follower(&nodes);
    let (leader, follower) = (&nodes[leader], &nodes[follower]);
    let term = leader.status().term;

    // Every sink is then 2 s into the big delivery, twice the suspect timeout: the members
    // go on heartbeating and ordering meanwhile.
    let big = follower.submit(vec![5; AWAY_BYTES]).unwrap();
    let small = leader.submit(b"small".to_vec()).unwrap();
    assert!(small > big);
    thread::sleep(Duration::from_millis(1_500));
    for node in &nodes {
        let status = node.status();
        assert!(status.primary && status.term == term, "{status:?}");
    }
    // And every sink gets both, in order, once the big one is done.
    wait_for_nodes(&nodes, "both deliveries everywhere", || {
        logs.iter().all(|log| log.lock().unwrap().iter().any(|(s, _)| *s == small))
    });
    for log in &logs {
        let log = log.lock().unwrap();
        let big_at = log.iter().position(|&(s, len)| s == big && len == AWAY_BYTES).unwrap();
        assert!(log.iter().position(|&(s, _)| s == small).unwrap() > big_at);
    }
    drop(nodes);
    std::fs::remove_dir_all(&dir).unwrap();
}
