use super::*;
use crate::types::DeliveredKind;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn config(id: u64, ports: &[u16], dir: &std::path::Path, bootstrap: bool) -> NodeConfig {
    let mut group = GroupConfig::new("test-cluster");
    group.election_timeout_min_ms = 300;
    group.election_timeout_max_ms = 600;
    group.heartbeat_interval_ms = 50;
    group.join_retry_ms = 200;
    NodeConfig {
        group,
        info: MemberInfo {
            id: MemberId(id),
            name: format!("node{id}"),
            address: format!("127.0.0.1:{}", ports[id as usize - 1]),
            incoming_address: String::new(),
        },
        data_dir: dir.join(format!("node{id}")),
        fsync: false,
        bootstrap,
        peers: ports.iter().enumerate().map(|(i, p)| (MemberId(i as u64 + 1), format!("127.0.0.1:{p}"))).collect(),
        resume_after: 0,
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_nodes_over_tcp_order_writesets_and_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("lockstep-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<GroupNode> =
        (1..=3).map(|id| GroupNode::start(config(id, &ports, &dir, id == 1)).unwrap()).collect();
    wait_for("a view of three", || nodes.iter().all(|n| n.status().primary && n.status().view.members.len() == 3));
    let mut seqnos = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        seqnos.push(node.submit(format!("ws from {i}").into_bytes()).unwrap());
    }
    assert!(seqnos.windows(2).all(|w| w[0] < w[1]), "{seqnos:?}");
    let last = *seqnos.last().unwrap();
    // Everyone delivers the same writesets at the same seqnos.
    let histories: Vec<Vec<(Seqno, Vec<u8>)>> = nodes
        .iter()
        .map(|n| {
            let mut h = Vec::new();
            while h.last().map_or(0, |(s, _)| *s) < last {
                let d = n.recv_delivered(Duration::from_secs(10)).unwrap();
                if let DeliveredKind::Writeset { .. } = d.kind {
                    h.push((d.seqno, d.bytes));
                } else {
                    h.push((d.seqno, Vec::new()));
                }
            }
            h
        })
        .collect();
    assert_eq!(histories[0], histories[1]);
    assert_eq!(histories[1], histories[2]);
    // The cache serves the same range back, as delivered.
    let served: Vec<(Seqno, Vec<u8>)> = nodes[1]
        .cached_range(1, last)
        .unwrap()
        .into_iter()
        .map(|d| match d.kind {
            DeliveredKind::Writeset { .. } => (d.seqno, d.bytes),
            _ => (d.seqno, Vec::new()),
        })
        .collect();
    assert_eq!(served, histories[0]);

    // Member 3 restarts from its cache and catches up on what it missed.
    drop(nodes.pop());
    let more = nodes[0].submit(b"while 3 was down".to_vec()).unwrap();
    nodes.push(GroupNode::start(config(3, &ports, &dir, false)).unwrap());
    wait_for("member 3 to catch up", || nodes[2].status().last_seqno >= more);
    assert!(nodes[2].status().view.members.len() == 3);
    drop(nodes);
    std::fs::remove_dir_all(&dir).unwrap();
}
