//! The table driven through raw C calls, in the orders the spec documents, with callbacks
//! that stand in for MariaDB.
use super::*;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

static VIEWS: AtomicUsize = AtomicUsize::new(0);
static SYNCED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C-unwind" fn log_cb(_level: c_int, _msg: *const c_char) {}
unsafe extern "C-unwind" fn connected_cb(_app: *mut c_void, view: *const wsrep_view_info_t) -> c_int {
    assert_eq!((*view).memb_num, 1);
    0
}
unsafe extern "C-unwind" fn view_cb(
    _app: *mut c_void,
    recv_ctx: *mut c_void,
    view: *const wsrep_view_info_t,
    _state: *const c_char,
    _len: usize,
) -> c_int {
    assert!(!recv_ctx.is_null(), "views carry the applier's context");
    assert_eq!((*view).proto_ver, 4);
    if (*view).memb_num == 1 {
        let name = CStr::from_ptr((*view).members[0].name.as_ptr());
        assert_eq!(name.to_str().unwrap(), "node-a");
    }
    VIEWS.fetch_add(1, Ordering::SeqCst);
    0
}
unsafe extern "C-unwind" fn apply_cb(
    _recv: *mut c_void,
    _h: *const wsrep_ws_handle_t,
    _flags: u32,
    _data: *const wsrep_buf_t,
    _meta: *const wsrep_trx_meta_t,
    _exit: *mut bool,
) -> c_int {
    0
}
unsafe extern "C-unwind" fn synced_cb(_app: *mut c_void) -> c_int {
    SYNCED.fetch_add(1, Ordering::SeqCst);
    0
}

struct Table(Box<MaybeUninit<wsrep_t>>);

impl Table {
    fn load() -> Table {
        let mut table = Table(Box::new(MaybeUninit::uninit()));
        assert_eq!(unsafe { wsrep_loader(table.ptr()) }, 0);
        table
    }

    fn ptr(&mut self) -> W {
        self.0.as_mut_ptr()
    }

    fn get(&mut self) -> &wsrep_t {
        unsafe { &*self.ptr() }
    }

    fn init(&mut self, dir: &CStr, options: &CStr) -> wsrep_status_t {
        let args = wsrep_init_args {
            app_ctx: std::ptr::null_mut(),
            node_name: c"node-a".as_ptr(),
            node_address: c"127.0.0.1".as_ptr(),
            node_incoming: c"AUTO".as_ptr(),
            data_dir: dir.as_ptr(),
            options: options.as_ptr(),
            proto_ver: 4,
            state_id: std::ptr::null(),
            state: std::ptr::null(),
            logger_cb: Some(log_cb),
            connected_cb: Some(connected_cb),
            view_cb: Some(view_cb),
            sst_request_cb: None,
            encrypt_cb: None,
            apply_cb: Some(apply_cb),
            unordered_cb: None,
            sst_donate_cb: None,
            synced_cb: Some(synced_cb),
        };
        let w = self.ptr();
        unsafe { (self.get().init)(w, &args) }
    }
}

fn data_dir(name: &str) -> CString {
    let dir = std::env::temp_dir().join(format!("lockstep-abi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    CString::new(format!("{}/", dir.display())).unwrap()
}

#[test]
fn loader_fills_the_table_and_entry_points_survive_every_documented_call_order() {
    assert_eq!(unsafe { wsrep_loader(std::ptr::null_mut()) }, libc::EINVAL);
    let mut t = Table::load();
    let w = t.ptr();
    let table = t.get();
    assert_eq!(unsafe { CStr::from_ptr(table.version) }, c"26");
    assert_eq!(unsafe { CStr::from_ptr(table.provider_name) }.to_str().unwrap(), PROVIDER_NAME);
    assert!(table.ctx.is_null());
    unsafe {
        // Calls before init find no instance and fail cleanly.
        assert_eq!((table.connect)(w, c"c".as_ptr(), c"gcomm://".as_ptr(), c"".as_ptr(), true), NODE_FAIL);
        assert_eq!((table.recv)(w, std::ptr::null_mut()), FATAL);
        let opts = (table.options_get)(w);
        assert!(!opts.is_null());
        libc::free(opts.cast());
        assert!((table.stats_get)(w).is_null());
        assert_eq!((table.pause)(w), -1);
    }
    let dir = data_dir("orders");
    assert_eq!(t.init(&dir, c"gcs.fc_limit=20"), OK);
    let table = t.get();
    unsafe {
        assert_eq!((table.connect)(w, c"c".as_ptr(), c"gcomm://".as_ptr(), c"".as_ptr(), true), OK);
        let w_addr = w as usize;
        let applier = std::thread::spawn(move || recv(w_addr as W, std::ptr::dangling_mut::<c_void>()));
        while SYNCED.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Release of handles we never saw, including a NULL handle.
        let mut unknown = wsrep_ws_handle_t { trx_id: u64::MAX, opaque: std::ptr::null_mut() };
        assert_eq!((table.release)(w, &mut unknown), OK);
        assert_eq!((table.release)(w, std::ptr::null_mut()), OK);
        assert_eq!((table.commit_order_enter)(w, std::ptr::null(), std::ptr::null()), Status::TrxMissing as c_int);
        // A row change that is rolled back: keys, then release without certify.
        let part = wsrep_buf_t { ptr: b"db".as_ptr().cast(), len: 2 };
        let key = wsrep_key_t { key_parts: &part, key_parts_num: 1 };
        let mut h = wsrep_ws_handle_t { trx_id: 5, opaque: std::ptr::null_mut() };
        assert_eq!((table.append_key)(w, &mut h, &key, 1, 2, true), OK);
        assert!(!h.opaque.is_null());
        assert_eq!((table.append_key)(w, &mut h, &key, 1, 42, true), WARNING, "unknown key type");
        assert_eq!((table.release)(w, &mut h), OK);
        assert!(h.opaque.is_null());
        // A committed one.
        let mut h = wsrep_ws_handle_t { trx_id: 6, opaque: std::ptr::null_mut() };
        assert_eq!((table.append_key)(w, &mut h, &key, 1, 3, true), OK);
        let data = wsrep_buf_t { ptr: b"events".as_ptr().cast(), len: 6 };
        assert_eq!((table.append_data)(w, &mut h, &data, 1, 0, true), OK);
        let mut meta = MaybeUninit::<wsrep_trx_meta_t>::uninit();
        assert_eq!((table.certify)(w, 1, &mut h, 0x41, meta.as_mut_ptr()), OK);
        let meta = meta.assume_init();
        assert_eq!(meta.gtid.seqno, 2);
        let no_error = wsrep_buf_t { ptr: std::ptr::null(), len: 0 };
        assert_eq!((table.commit_order_enter)(w, &h, &meta), OK);
        assert_eq!((table.commit_order_leave)(w, &h, &meta, &no_error), OK);
        assert_eq!((table.release)(w, &mut h), OK);
        let mut last = MaybeUninit::<wsrep_gtid_t>::uninit();
        assert_eq!((table.last_committed_id)(w, last.as_mut_ptr()), OK);
        assert_eq!(last.assume_init().seqno, 2);
        // Stats arrays stay valid until freed and are terminated by a NULL name.
        let stats = (table.stats_get)(w);
        let mut n = 0;
        while !(*stats.add(n)).name.is_null() {
            n += 1;
        }
        assert!(n > 40);
        (table.stats_free)(w, stats);
        assert_eq!(
            (table.options_set)(w, c"not.an.option=1".as_ptr()),
            NODE_FAIL,
            "Galera's status for a refused option"
        );
        assert_eq!((table.disconnect)(w), OK);
        assert_eq!((table.disconnect)(w), OK, "idempotent");
        assert_eq!(applier.join().unwrap(), OK);
        assert_eq!(VIEWS.load(Ordering::SeqCst), 2, "primary view, then the final view");
        // free twice, as the server and then the loader do.
        (table.free)(w);
        (table.free)(w);
        assert!(t.get().ctx.is_null());
    }
}

#[test]
fn init_refuses_an_unknown_option_and_leaves_no_instance() {
    let mut t = Table::load();
    let dir = data_dir("bad-option");
    assert_eq!(t.init(&dir, c"no.such.option=1"), NODE_FAIL);
    assert!(t.get().ctx.is_null());
}

#[test]
fn panics_become_error_statuses() {
    assert_eq!(guard("test", NODE_FAIL, || panic!("boom")), NODE_FAIL);
    assert_eq!(guard("test", 0, || 7), 7);
}
