//! The provider driven the way wsrep-lib drives it, with a fake application that records
//! callbacks and re-enters the provider as MariaDB does (commit order inside apply,
//! `last_committed_id` inside the view callback).
use super::*;
use crate::application::{Applied, ApplyRequest, CallbackFailed, RecvCtx, ThreadSchedule, View, WsHandle};
use crate::certification::{Key, KeySet, KeyType};
use crate::grastate::FILE_NAME;
use crate::types::{flags, Status, TrxMeta};
use crate::types::{Seqno, Uuid, SEQNO_UNDEFINED};
use std::sync::{Arc, OnceLock, Weak};
use std::thread;
use std::time::Duration;

#[derive(Default)]
struct FakeServer {
    provider: OnceLock<Weak<Provider>>,
    calls: Mutex<Vec<String>>,
    /// A joiner's request for its donor (none: `trivial`); `Err`: its SST script fails to start.
    sst_request: Mutex<Option<Result<Vec<u8>, CallbackFailed>>>,
    /// The server refuses to donate (MariaDB: "Bad remote auth string. SST canceled.").
    refuse_donation: std::sync::atomic::AtomicBool,
    /// A thread schedule the process may not take (no CAP_SYS_NICE).
    refuse_schedule: std::sync::atomic::AtomicBool,
}

impl FakeServer {
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn provider(&self) -> Arc<Provider> {
        self.provider.get().and_then(Weak::upgrade).expect("provider alive")
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Application for FakeServer {
    fn connected(&self, view: &View) -> Result<(), CallbackFailed> {
        self.record(format!("connected {}", view.state_id.seqno));
        Ok(())
    }

    fn view(&self, _recv: RecvCtx, view: &View) -> Result<(), CallbackFailed> {
        let committed = self.provider().last_committed_id().seqno;
        self.record(format!("view {} members {} last_committed {committed}", view.state_id.seqno, view.members.len()));
        Ok(())
    }

    fn synced(&self) -> Result<(), CallbackFailed> {
        self.record("synced".into());
        Ok(())
    }

    fn sst_request(&self) -> Result<Vec<u8>, CallbackFailed> {
        self.record("sst_request".into());
        self.sst_request.lock().unwrap().clone().unwrap_or(Ok(b"trivial\0".to_vec()))
    }

    fn sst_donate(&self, _recv: RecvCtx, _request: &[u8], state_id: Gtid, _bypass: bool) -> Result<(), CallbackFailed> {
        self.record(format!("sst_donate {}", state_id.seqno));
        if self.refuse_donation.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(CallbackFailed("sst_donate"));
        }
        Ok(())
    }

    fn set_thread_schedule(&self, schedule: ThreadSchedule) -> Result<(), String> {
        self.record(format!("schedule {schedule} on {}", thread::current().name().unwrap_or("?")));
        if self.refuse_schedule.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("Operation not permitted".into());
        }
        Ok(())
    }

    /// The test's thread ends instead of the process.
    fn abort_process(&self) -> ! {
        self.record("abort_process".into());
        panic!("the process would end here");
    }

    fn apply(&self, _recv: RecvCtx, request: &ApplyRequest<'_>) -> Result<Applied, CallbackFailed> {
        let provider = self.provider();
        assert_eq!(provider.commit_order_enter(request.handle, &request.meta), Status::Ok);
        assert_eq!(provider.commit_order_leave(request.handle, &request.meta, b""), Status::Ok);
        self.record(format!("apply {} {:?}", request.meta.gtid.seqno, String::from_utf8_lossy(request.data)));
        if request.boost != 0 {
            self.record(format!("boost {} {}", request.meta.gtid.seqno, request.boost));
        }
        Ok(Applied { exit_loop: false })
    }
}

struct Node {
    provider: Arc<Provider>,
    server: Arc<FakeServer>,
    dir: PathBuf,
    applier: Option<thread::JoinHandle<Status>>,
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-provider-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start_in(dir: PathBuf, options: &str) -> Result<Node, String> {
    let server = Arc::new(FakeServer::default());
    let args = InitArgs {
        node_name: "n1".into(),
        node_address: "127.0.0.1".into(),
        node_incoming: "AUTO".into(),
        data_dir: format!("{}/", dir.display()),
        // Tests run in parallel: every node takes a free port.
        options: format!("gmcast.listen_addr=tcp://127.0.0.1:0;{options}"),
        start_position: Gtid::UNDEFINED,
    };
    let provider = Arc::new(Provider::init(args, server.clone())?);
    server.provider.set(Arc::downgrade(&provider)).unwrap();
    Ok(Node { provider, server, dir, applier: None })
}

impl Node {
    fn bootstrap(name: &str) -> Node {
        let mut node = start_in(temp_dir(name), "").unwrap();
        node.connect();
        node
    }

    fn connect(&mut self) {
        assert_eq!(self.provider.connect("test", "gcomm://", "", true), Status::Ok);
        let provider = self.provider.clone();
        self.applier = Some(thread::spawn(move || provider.recv(RecvCtx(1))));
        self.wait_for(|calls| calls.iter().any(|c| c == "synced"));
    }

    fn wait_for(&self, done: impl Fn(&[String]) -> bool) {
        for _ in 0..2000 {
            if done(&self.server.calls()) {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("timed out; calls so far: {:?}", self.server.calls());
    }

    fn last_committed(&self) -> Seqno {
        self.provider.last_committed_id().seqno
    }

    fn disconnect(&mut self) {
        assert_eq!(self.provider.disconnect(), Status::Ok);
        let applier = self.applier.take().expect("connected");
        assert_eq!(applier.join().unwrap(), Status::Ok);
    }

    fn saved_state(&self) -> String {
        std::fs::read_to_string(self.dir.join(FILE_NAME)).unwrap()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn handle(trx_id: u64) -> WsHandle {
    WsHandle { trx_id, opaque: 0 }
}

fn row_key(id: u8) -> KeySet {
    table_row_key(b"t", id)
}

fn table_row_key(table: &[u8], id: u8) -> KeySet {
    [Key::new(vec![b"db".to_vec(), table.to_vec(), vec![id]], KeyType::Update)].into_iter().collect()
}

/// Appends a row change and certifies it; returns the handle as the server keeps it.
fn certified(node: &Node, trx_id: u64, row: u8) -> (WsHandle, TrxMeta) {
    certified_keys(node, trx_id, row_key(row))
}

fn certified_keys(node: &Node, trx_id: u64, keys: KeySet) -> (WsHandle, TrxMeta) {
    let opaque = node.provider.append_key(handle(trx_id), &keys);
    let h = WsHandle { trx_id, opaque };
    node.provider.append_data(h, &[b"row events"]);
    let (status, meta) = node.provider.certify(7, h, flags::TRX_START | flags::TRX_END);
    assert_eq!(status, Status::Ok);
    (h, meta)
}

fn commit(node: &Node, h: WsHandle, meta: &TrxMeta) {
    assert_eq!(node.provider.commit_order_enter(h, meta), Status::Ok);
    assert_eq!(node.provider.commit_order_leave(h, meta, b""), Status::Ok);
    assert_eq!(node.provider.release(h), Status::Ok);
}

#[test]
fn bootstrap_delivers_connected_view_and_synced_in_order() {
    let node = Node::bootstrap("bootstrap");
    assert_eq!(node.server.calls(), ["connected 1", "view 1 members 1 last_committed 0", "synced"]);
    assert_eq!(node.last_committed(), 1);
    assert!(node.saved_state().contains("seqno:   -1"), "running nodes keep their position in the engine");
}

#[test]
fn each_commit_advances_last_committed_by_one() {
    let node = Node::bootstrap("commit");
    let (h, meta) = certified(&node, 10, 1);
    assert_eq!(meta.gtid.seqno, 2);
    assert_eq!(meta.source.trx_id, 10);
    assert!(meta.depends_on < 2);
    assert_eq!(node.last_committed(), 1, "not committed before release");
    commit(&node, h, &meta);
    assert_eq!(node.last_committed(), 2);
    // Read-only and rolled-back transactions never reach the order.
    assert_eq!(node.provider.release(handle(11)), Status::Ok);
    assert_eq!(node.provider.release(WsHandle { trx_id: crate::application::TRX_ID_UNDEFINED, opaque: 0 }), Status::Ok);
    let opaque = node.provider.append_key(handle(12), &row_key(2));
    assert_eq!(node.provider.release(WsHandle { trx_id: 12, opaque }), Status::Ok);
    assert_eq!(node.last_committed(), 2);
}

#[test]
fn isolation_waits_for_earlier_commits_and_holds_later_ones() {
    let node = Node::bootstrap("toi");
    let (h, meta) = certified(&node, 20, 1);
    let provider = node.provider.clone();
    let toi = thread::spawn(move || {
        provider.to_execute_start(99, vec![vec![b"db".to_vec(), b"t".to_vec()]], &[b"ALTER"], 0x41)
    });
    thread::sleep(Duration::from_millis(50));
    assert!(!toi.is_finished(), "the DDL waits until seqno 2 commits");
    commit(&node, h, &meta);
    let (status, toi_meta) = toi.join().unwrap();
    assert_eq!((status, toi_meta.gtid.seqno, toi_meta.depends_on), (Status::Ok, 3, 2));
    assert!(node.saved_state().contains("00000000-0000-0000-0000-000000000000"), "unsafe while DDL runs");
    // A change to that table which had not seen the DDL fails certification, and still
    // passes its seqno (4) through commit order, as the server does.
    let failed = WsHandle { trx_id: 22, opaque: node.provider.append_key(handle(22), &row_key(9)) };
    let (status, failed_meta) = node.provider.certify(1, failed, 0x41);
    assert_eq!((status, failed_meta.gtid.seqno), (Status::TrxFail, 4));
    // One on another table, ordered after the DDL (seqno 5), cannot commit before it ends.
    let (h2, meta2) = certified_keys(&node, 21, table_row_key(b"other", 9));
    let provider = node.provider.clone();
    let later = thread::spawn(move || provider.commit_order_enter(h2, &meta2));
    thread::sleep(Duration::from_millis(50));
    assert!(!later.is_finished());
    assert_eq!(node.provider.to_execute_end(99, b""), Status::Ok);
    commit(&node, failed, &failed_meta);
    assert_eq!(later.join().unwrap(), Status::Ok);
    assert_eq!(node.provider.to_execute_end(99, b""), Status::ConnFail, "no second end");
}

#[test]
fn brute_force_abort_of_an_ordered_transaction_leads_to_replay() {
    let node = Node::bootstrap("replay");
    // A DDL at seqno 2 holds the commit order; the victim is ordered at 3 behind it.
    let (status, toi) = node.provider.to_execute_start(5, vec![vec![b"otherdb".to_vec()]], &[], 0x41);
    assert_eq!(status, Status::Ok);
    let (h, meta) = certified(&node, 30, 1);
    let provider = node.provider.clone();
    let victim = thread::spawn(move || provider.commit_order_enter(h, &meta));
    thread::sleep(Duration::from_millis(30));
    assert_eq!(node.provider.abort_certification(toi.gtid.seqno, 30), (Status::Ok, 3));
    assert_eq!(victim.join().unwrap(), Status::BfAbort);
    assert_eq!(node.provider.abort_certification(toi.gtid.seqno, 30).0, Status::NotAllowed, "already aborted");
    assert_eq!(node.provider.to_execute_end(5, b""), Status::Ok);
    // The server rolls back and replays on the victim's thread; apply re-enters commit order.
    assert_eq!(node.provider.replay_trx(h, RecvCtx(2)), Status::Ok);
    assert_eq!(node.provider.release(h), Status::Ok);
    assert!(node.server.calls().contains(&"apply 3 \"row events\"".to_string()));
    assert_eq!(node.last_committed(), 3);
}

#[test]
fn abort_rules_for_unordered_and_earlier_transactions() {
    let node = Node::bootstrap("abort-rules");
    assert_eq!(node.provider.abort_certification(10, 777), (Status::Ok, -1), "unknown victims are fine");
    let opaque = node.provider.append_key(handle(40), &row_key(1));
    assert_eq!(node.provider.abort_certification(10, 40), (Status::Ok, -1));
    let (status, meta) = node.provider.certify(1, WsHandle { trx_id: 40, opaque }, 0x41);
    assert_eq!((status, meta.gtid), (Status::TrxFail, Gtid::UNDEFINED), "aborted before ordering: not replicated");
    node.provider.release(WsHandle { trx_id: 40, opaque });
    let (h, meta) = certified(&node, 41, 2);
    assert_eq!(node.provider.abort_certification(meta.gtid.seqno + 5, 41), (Status::NotAllowed, meta.gtid.seqno));
    commit(&node, h, &meta);
}

#[test]
fn causal_wait_covers_everything_ordered_before_it() {
    let node = Node::bootstrap("sync-wait");
    let (h, meta) = certified(&node, 50, 1);
    let (status, _) = node.provider.sync_wait(None, 0);
    assert_eq!(status, Status::TrxFail, "seqno 2 is ordered but not committed");
    let provider = node.provider.clone();
    let reader = thread::spawn(move || provider.sync_wait(None, 5));
    thread::sleep(Duration::from_millis(30));
    commit(&node, h, &meta);
    let (status, gtid) = reader.join().unwrap();
    assert_eq!((status, gtid.seqno), (Status::Ok, 2));
    let other_history = Gtid::new(Uuid([9; 16]), 1);
    assert_eq!(node.provider.sync_wait(Some(other_history), 1).0, Status::TrxMissing);
    // wait_for_gtid (MariaDB's set_position after an ordered rollback) on a reached GTID.
    assert_eq!(node.provider.sync_wait(Some(gtid), 1), (Status::Ok, gtid));
    let (h, meta) = certified(&node, 51, 2);
    let provider = node.provider.clone();
    let waiter = thread::spawn(move || provider.sync_wait(Some(meta.gtid), 5));
    thread::sleep(Duration::from_millis(30));
    commit(&node, h, &meta);
    assert_eq!(waiter.join().unwrap().0, Status::Ok);
}

#[test]
fn pause_drains_and_saves_the_position() {
    let node = Node::bootstrap("pause");
    let (h, meta) = certified(&node, 60, 1);
    let provider = node.provider.clone();
    let pause = thread::spawn(move || provider.pause());
    thread::sleep(Duration::from_millis(30));
    assert!(!pause.is_finished(), "waits for seqno 2");
    commit(&node, h, &meta);
    assert_eq!(pause.join().unwrap(), 2);
    assert!(node.saved_state().contains("seqno:   2"));
    // New writes wait while paused.
    let opaque = node.provider.append_key(handle(61), &row_key(2));
    let provider = node.provider.clone();
    let writer = thread::spawn(move || provider.certify(1, WsHandle { trx_id: 61, opaque }, 0x41));
    thread::sleep(Duration::from_millis(30));
    assert!(!writer.is_finished());
    assert_eq!(node.provider.resume(), Status::Ok);
    assert_eq!(writer.join().unwrap().0, Status::Ok);
}

#[test]
fn clean_close_saves_position_and_restart_continues_the_history() {
    let mut node = Node::bootstrap("restart");
    let (h, meta) = certified(&node, 70, 1);
    commit(&node, h, &meta);
    let group = node.provider.last_committed_id().uuid;
    node.disconnect();
    assert!(node.server.calls().iter().any(|c| c == "view 2 members 0 last_committed 2"), "final view");
    let saved = node.saved_state();
    assert!(saved.contains(&format!("uuid:    {group}")) && saved.contains("seqno:   2"), "{saved}");
    assert!(saved.contains("safe_to_bootstrap: 1"));
    // Reconnecting the same instance (SET GLOBAL wsrep_cluster_address) and restarting
    // both continue at seqno 3.
    node.server.calls.lock().unwrap().clear();
    node.connect();
    assert_eq!(node.provider.last_committed_id(), Gtid::new(group, 3));
    node.disconnect();
    // A new instance on the same data directory (the old one stays alive to keep it).
    let mut again = start_in(node.dir.clone(), "").unwrap();
    again.connect();
    assert_eq!(again.provider.last_committed_id(), Gtid::new(group, 4));
    again.disconnect();
    std::mem::forget(again); // `node` removes the directory
}

#[test]
fn bootstrap_is_refused_when_not_safe_and_bad_addresses_are_refused() {
    let dir = temp_dir("unsafe");
    let state = format!("version: 2.1\nuuid: {}\nseqno: 5\nsafe_to_bootstrap: 0\n", Uuid::random());
    std::fs::write(dir.join(FILE_NAME), state).unwrap();
    let node = start_in(dir, "").unwrap();
    assert_eq!(node.provider.connect("test", "gcomm://", "", true), Status::NodeFail);
    assert_eq!(node.provider.connect("test", "gcomm://10.0.0.1:notaport", "", false), Status::NodeFail);
    assert_eq!(node.provider.connect("test", "not empty but invalid", "", false), Status::NodeFail);
    assert_eq!(node.provider.recv(RecvCtx(1)), Status::Fatal, "recv without a connection");
}

#[test]
fn unknown_options_fail_init_naming_the_option() {
    let err = start_in(temp_dir("bad-option"), "gcs.fc_limit=32;no.such.option=1").err().expect("refused");
    assert!(err.contains("no.such.option"), "{err}");
    let node = start_in(temp_dir("good-option"), "gcs.fc_limit=32").unwrap();
    assert!(node.provider.options_get().contains("gcs.fc_limit = 32"));
    assert!(node.provider.options_set("bogus=1").is_err());
}

#[test]
fn oversized_writesets_are_refused_before_ordering() {
    let node = start_in(temp_dir("max-ws"), "repl.max_ws_size=16").map(|mut n| {
        n.connect();
        n
    });
    let node = node.unwrap();
    let opaque = node.provider.append_data(handle(80), &[&[0u8; 64]]);
    let (status, meta) = node.provider.certify(1, WsHandle { trx_id: 80, opaque }, 0x41);
    assert_eq!((status, meta.gtid), (Status::SizeExceeded, Gtid::UNDEFINED));
}

#[test]
fn a_repl_max_ws_size_raised_at_runtime_holds_in_the_group_too() {
    let mut node = start_in(temp_dir("max-ws-runtime"), "repl.max_ws_size=16").unwrap();
    node.connect();
    assert_eq!(node.provider.options_set("repl.max_ws_size=1M"), Ok(()));
    let (h, meta) = certified(&node, 81, 1);
    commit(&node, h, &meta);
}

#[test]
fn a_node_runs_with_the_longest_suspect_timeout_accepted() {
    let options = Options::new(&NodeSite { data_dir: "/d/", node_address: "127.0.0.1" });
    let mut longest = options.clone();
    longest.apply("evs.suspect_timeout=P106751D").unwrap();
    assert_eq!(group_config("c", &longest).suspect_timeout_ms, 106_751 * 86_400_000);
    assert_eq!(group_config("c", &options).suspect_timeout_ms, 5_000);
    let mut node = start_in(temp_dir("longest-period"), "evs.suspect_timeout=P106751D").unwrap();
    node.connect();
    let (h, meta) = certified(&node, 10, 1);
    commit(&node, h, &meta);
}

#[test]
fn options_in_the_cluster_address_are_applied_at_connect_and_a_bad_one_fails_it() {
    let mut node = start_in(temp_dir("address-options"), "").unwrap();
    for bad in ["gcomm://?no.such.option=1", "gcomm://?gmcast.segment=300"] {
        assert_eq!(node.provider.connect("test", bad, "", true), Status::NodeFail, "{bad}");
    }
    assert_eq!(node.provider.connect("test", "gcomm://?gmcast.segment=3&gcs.fc_limit=40", "", true), Status::Ok);
    let provider = node.provider.clone();
    node.applier = Some(thread::spawn(move || provider.recv(RecvCtx(1))));
    node.wait_for(|calls| calls.iter().any(|c| c == "synced"));
    assert!(node.provider.options_get().contains("gmcast.segment = 3;"));
    assert_eq!(node.provider.lock_core().settings().flow.limit, 40);
    let link = node.provider.link().expect("connected");
    node.wait_for(|_| !link.node.status().view.members.is_empty());
    assert_eq!(link.node.status().view.members.iter().map(|m| m.segment).collect::<Vec<_>>(), [3]);
    let segment = node.provider.stats().into_iter().find(|s| s.name == "gmcast_segment").map(|s| s.value);
    assert_eq!(segment, Some(StatValue::Text("3".into())));
}

/// The transport's test certificates (`a-node1` of CA `a`, `b-node1` of `b`).
fn pem(name: &str) -> String {
    format!("{}/../group/src/transport/tls/testdata/{name}.pem", env!("CARGO_MANIFEST_DIR"))
}

fn tls_files(node: &str, ca: &str) -> String {
    let (key, cert, ca) = (pem(&format!("{node}-key")), pem(&format!("{node}-cert")), pem(&format!("{ca}-ca")));
    format!("socket.ssl_key={key};socket.ssl_cert={cert};socket.ssl_ca={ca}")
}

/// mtr galera_ssl_reload sets new files, then `socket.ssl_reload=1`.
#[test]
fn ssl_reload_reads_the_files_named_now_and_a_failed_one_changes_no_option() {
    let mut node = start_in(temp_dir("ssl-reload"), &tls_files("a-node1", "a")).unwrap();
    node.connect();
    let in_use = || node.provider.link().expect("connected").node.tls().expect("TLS").config().cert;
    let before = node.provider.options_get();
    let mismatched = format!("socket.ssl_cert={};gcs.fc_limit=40;socket.ssl_reload=1", pem("b-node1-cert"));
    let refused = node.provider.options_set(&mismatched).unwrap_err();
    assert!(refused.contains("socket.ssl_reload failed"), "{refused}");
    assert_eq!(node.provider.options_get(), before, "all or nothing");
    assert_eq!(in_use(), PathBuf::from(pem("a-node1-cert")));
    assert_eq!(node.provider.options_set(&tls_files("b-node1", "b")), Ok(()));
    assert_eq!(in_use(), PathBuf::from(pem("a-node1-cert")), "read at the reload");
    assert_eq!(node.provider.options_set("socket.ssl_reload=1"), Ok(()));
    assert_eq!(in_use(), PathBuf::from(pem("b-node1-cert")));
    let off = node.provider.options_set("socket.ssl_key=;socket.ssl_cert=;socket.ssl_reload=1").unwrap_err();
    assert!(off.contains("cannot be turned off"), "{off}");
}

/// Certifies one fragment of streaming transaction `trx_id` (the server passes the handle
/// back with its `opaque` cleared by the previous release).
fn fragment(node: &Node, trx_id: u64, row: u8, ws_flags: u32) -> (WsHandle, Status, TrxMeta) {
    let opaque = node.provider.append_key(handle(trx_id), &row_key(row));
    let h = WsHandle { trx_id, opaque };
    node.provider.append_data(h, &[format!("fragment {row}").as_bytes()]);
    let (status, meta) = node.provider.certify(7, h, ws_flags);
    (h, status, meta)
}

#[test]
fn a_streaming_transaction_lives_across_fragments_and_commits_with_the_last() {
    let node = Node::bootstrap("streaming");
    let (h, status, first) = fragment(&node, 50, 1, flags::TRX_START);
    assert_eq!((status, first.gtid.seqno), (Status::Ok, 2));
    commit(&node, h, &first);
    // Released, but still open: the next fragment continues it and applies after it.
    let (h, status, second) = fragment(&node, 50, 2, 0);
    assert_eq!((status, second.gtid.seqno, second.depends_on), (Status::Ok, 3, 2));
    commit(&node, h, &second);
    let (h, status, last) = fragment(&node, 50, 3, flags::TRX_END | flags::PA_UNSAFE);
    assert_eq!((status, last.gtid.seqno), (Status::Ok, 4));
    commit(&node, h, &last);
    assert_eq!(node.last_committed(), 4);
    assert!(!node.server.calls().iter().any(|c| c.starts_with("apply")), "the origin applies none of its fragments");
}

#[test]
fn a_rollback_fragment_is_applied_everywhere_including_its_origin() {
    let node = Node::bootstrap("streaming-rollback");
    let (h, status, first) = fragment(&node, 60, 1, flags::TRX_START);
    assert_eq!(status, Status::Ok);
    commit(&node, h, &first);
    assert_eq!(node.provider.rollback(60, Vec::new()), Status::Ok);
    node.wait_for(|calls| calls.iter().any(|c| c == "apply 3 \"\""));
    assert_eq!(node.last_committed(), 3);
    assert_eq!(node.provider.release(handle(60)), Status::Ok);
}

#[test]
fn a_rollback_fragment_is_applied_with_the_boost_set_at_the_time() {
    let node = Node::bootstrap("applier-boost");
    assert!(node.provider.options_get().contains("repl.applier_boost = 10;"));
    assert_eq!(node.provider.options_set("repl.applier_boost=7"), Ok(()));
    for (trx, boost) in [(70, Some(7)), (71, None)] {
        let (h, status, first) = fragment(&node, trx, 1, flags::TRX_START);
        assert_eq!(status, Status::Ok);
        commit(&node, h, &first);
        assert_eq!(node.provider.rollback(trx, Vec::new()), Status::Ok);
        let rollback = first.gtid.seqno + 1;
        node.wait_for(|calls| calls.iter().any(|c| *c == format!("apply {rollback} \"\"")));
        let boosted =
            node.server.calls().iter().find_map(|c| c.strip_prefix(&format!("boost {rollback} ")).map(str::to_owned));
        assert_eq!(boosted, boost.map(|b: i32| b.to_string()), "trx {trx}");
        assert_eq!(node.provider.release(handle(trx)), Status::Ok);
        assert_eq!(node.provider.options_set("repl.applier_boost=0"), Ok(()));
    }
}

#[test]
fn a_streaming_transaction_is_aborted_even_behind_its_own_earlier_fragment() {
    let node = Node::bootstrap("streaming-abort");
    // Between fragments: aborted, its next fragment is refused.
    let (h, _, first) = fragment(&node, 70, 1, flags::TRX_START);
    commit(&node, h, &first);
    assert_eq!(node.provider.abort_certification(first.gtid.seqno + 5, 70), (Status::Ok, -1));
    let (h, status, _) = fragment(&node, 70, 2, 0);
    assert_eq!(status, Status::TrxFail);
    assert_eq!(node.provider.release(h), Status::Ok);
    // A fragment ordered before the aborter: unlike a commit, it does not free the
    // aborter's rows by committing, so it is aborted all the same.
    let (h, status, fragment_meta) = fragment(&node, 71, 3, flags::TRX_START);
    assert_eq!(status, Status::Ok);
    let seqno = fragment_meta.gtid.seqno;
    assert_eq!(node.provider.abort_certification(seqno + 5, 71), (Status::Ok, seqno));
    assert_eq!(node.provider.commit_order_enter(h, &fragment_meta), Status::BfAbort);
    assert_eq!(node.provider.release(h), Status::Ok);
    assert_eq!(node.last_committed(), seqno, "the aborted fragment's seqno passes at release");
    // Committing a fragment when aborted: it ends, then release says the transaction is over.
    let (h, _, meta) = fragment(&node, 72, 4, flags::TRX_START);
    assert_eq!(node.provider.commit_order_enter(h, &meta), Status::Ok);
    assert_eq!(node.provider.abort_certification(meta.gtid.seqno + 5, 72).0, Status::Ok);
    assert_eq!(node.provider.commit_order_leave(h, &meta, b""), Status::Ok);
    assert_eq!(node.provider.release(h), Status::BfAbort);
    let (h, status, _) = fragment(&node, 72, 5, 0);
    assert_eq!(status, Status::TrxFail);
    assert_eq!(node.provider.release(h), Status::Ok);
    assert_eq!(node.last_committed(), meta.gtid.seqno);
}

/// Options for a node of a cluster of several: any free ports for its group traffic and its
/// state-transfer receiver; its peers and donors are told the ones it took.
fn reachable() -> String {
    "gmcast.listen_addr=tcp://127.0.0.1:0;ist.recv_addr=127.0.0.1:0".to_owned()
}

/// A one-node cluster that others can join.
fn first_of_several(name: &str) -> Node {
    let mut node = start_in(temp_dir(name), &reachable()).unwrap();
    node.connect();
    node
}

/// A second node that joins `donor`'s cluster and asks for a state transfer with `request`;
/// returns it with the thread of its applier.
fn joiner_of(donor: &Node, name: &str, request: Result<Vec<u8>, CallbackFailed>) -> (Node, thread::JoinHandle<Status>) {
    let port = donor.provider.link().expect("connected").node.local_addr().port();
    let joiner = start_in(temp_dir(name), &reachable()).unwrap();
    *joiner.server.sst_request.lock().unwrap() = Some(request);
    assert_eq!(joiner.provider.connect("test", &format!("gcomm://127.0.0.1:{port}"), "", false), Status::Ok);
    let provider = joiner.provider.clone();
    let applier = thread::spawn(move || provider.recv(RecvCtx(1)));
    (joiner, applier)
}

const SST_REQUEST: &[u8] = b"mariabackup\x00127.0.0.1:1/sst\x00";

#[test]
fn a_joiner_whose_donor_refuses_ends_its_process() {
    let donor = first_of_several("refusing-donor");
    donor.server.refuse_donation.store(true, std::sync::atomic::Ordering::SeqCst);
    let (joiner, applier) = joiner_of(&donor, "refused-joiner", Ok(SST_REQUEST.to_vec()));
    assert!(applier.join().is_err(), "the joiner's applier ends the process");
    assert_eq!(joiner.server.calls().last().map(String::as_str), Some("abort_process"));
    assert!(donor.server.calls().iter().any(|c| c.starts_with("sst_donate")));
    // The donor goes on: synced again once its refusal is ordered.
    donor.wait_for(|calls| calls.iter().filter(|c| *c == "synced").count() >= 2);
}

#[test]
fn a_joiner_whose_own_transfer_fails_ends_its_process() {
    let donor = first_of_several("donor-of-failing-joiner");
    let (joiner, _applier) = joiner_of(&donor, "failing-joiner", Ok(SST_REQUEST.to_vec()));
    donor.wait_for(|calls| calls.iter().any(|c| c.starts_with("sst_donate")));
    // The joiner knows its donor once it has taken its own request from the order (a script
    // that fails before then cannot be the donor's doing, and ends the process at once).
    let knows_its_donor = || joiner.provider.lock_core().connection().is_some_and(|c| c.donor.is_some());
    joiner.wait_for(|_| knows_its_donor());
    // The joiner's SST script failed while its donor stays in the group: the joiner waits
    // for the group's word on the donor. The donor's side fails too (the stream's other end
    // closed) and says so through the order: the process ends then, in the applier or in a
    // call (whichever comes first; the other one waits for the end, which never comes in a
    // test).
    let provider = joiner.provider.clone();
    thread::spawn(move || provider.sst_received(Gtid::UNDEFINED, -32));
    thread::sleep(Duration::from_millis(200));
    assert!(!joiner.server.calls().iter().any(|c| c == "abort_process"), "its donor may have crashed");
    let history = donor.provider.last_committed_id().uuid;
    assert_eq!(donor.provider.sst_sent(Gtid::new(history, SEQNO_UNDEFINED), -32), Status::Ok);
    joiner.wait_for(|calls| calls.iter().any(|c| c == "abort_process"));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(joiner.server.calls().iter().filter(|c| *c == "abort_process").count(), 1);
}

#[test]
fn a_joiner_whose_sst_script_cannot_start_ends_its_process() {
    let donor = first_of_several("donor-of-scriptless-joiner");
    let (joiner, applier) = joiner_of(&donor, "scriptless-joiner", Err(CallbackFailed("sst_request")));
    assert!(applier.join().is_err());
    assert_eq!(joiner.server.calls().last().map(String::as_str), Some("abort_process"));
    assert!(!donor.server.calls().iter().any(|c| c.starts_with("sst_donate")), "nothing was requested");
}

#[test]
fn the_groups_threads_start_with_gcomm_thread_prio_and_one_refused_fails_the_connection() {
    let mut node = start_in(temp_dir("thread-prio"), "gcomm.thread_prio=rr:5").unwrap();
    node.connect();
    let calls = node.server.calls();
    let scheduled = |name: &str| calls.iter().any(|c| c.starts_with("schedule rr:5 on ") && c.ends_with(name));
    assert!(scheduled("lockstep-prio-check") && scheduled("-ticker") && scheduled("-accept"), "{calls:?}");

    let refused = start_in(temp_dir("thread-prio-refused"), "gcomm.thread_prio=fifo:1").unwrap();
    refused.server.refuse_schedule.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(refused.provider.connect("test", "gcomm://", "", true), Status::NodeFail);
    assert_eq!(refused.server.calls(), ["schedule fifo:1 on lockstep-prio-check"], "no group started");
}

/// Nodes asked for any ports (`reachable`): the donor reaches the joiner on the group port it
/// took (the joiner's request arrives), and the joiner's state request names the port its
/// transfer receiver took.
#[test]
fn a_node_on_any_ports_tells_its_peers_and_donors_the_ones_it_took() {
    let donor = first_of_several("any-port-donor");
    let (joiner, _applier) = joiner_of(&donor, "any-port-joiner", Ok(SST_REQUEST.to_vec()));
    donor.wait_for(|calls| calls.iter().any(|c| c.starts_with("sst_donate")));
    let ist_addr = joiner.provider.lock_core().connection().expect("connected").ist_addr.clone();
    let port: u16 = ist_addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).expect("host:port");
    assert!(ist_addr.starts_with("127.0.0.1:") && port != 0, "{ist_addr}");
}
