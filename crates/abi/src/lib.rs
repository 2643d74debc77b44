//! The wsrep API v26 boundary of Lockstep: `liblockstep.so`, loaded by MariaDB 10.11 as
//! `wsrep_provider`. This crate holds all of Lockstep's `unsafe` and `extern "C"` code: it
//! converts C arguments into Rust values, calls `lockstep_provider::Provider`, converts the
//! results back and catches every panic (logged, turned into an error status).
mod allowlist;
mod application;
mod logger;
mod priority;
mod types;

/// For `lockstep arbitrator`, whose group threads take `gcomm.thread_prio` as a node's do.
pub use priority::set_schedule;

use application::{c_gtid, c_meta, rust_gtid, ServerCallbacks};
use lockstep_provider::application::{RecvCtx, WsHandle};
use lockstep_provider::certification::{KeySet, KeyType};
use lockstep_provider::types::{Gtid, Status};
use lockstep_provider::{InitArgs, Provider, StatValue, PROVIDER_NAME, PROVIDER_VENDOR, PROVIDER_VERSION};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use types::*;

type W = *mut wsrep_t;

const OK: wsrep_status_t = Status::Ok as wsrep_status_t;
const NODE_FAIL: wsrep_status_t = Status::NodeFail as wsrep_status_t;
const CONN_FAIL: wsrep_status_t = Status::ConnFail as wsrep_status_t;
const FATAL: wsrep_status_t = Status::Fatal as wsrep_status_t;
const NOT_IMPLEMENTED: wsrep_status_t = Status::NotImplemented as wsrep_status_t;
const WARNING: wsrep_status_t = Status::Warning as wsrep_status_t;
const TRX_FAIL: wsrep_status_t = Status::TrxFail as wsrep_status_t;

/// Data exported for the loader, which reads it as `char**` and expects "26".
#[repr(transparent)]
pub struct InterfaceVersion(*const c_char);
// SAFETY: points to an immutable static string.
unsafe impl Sync for InterfaceVersion {}

#[no_mangle]
pub static wsrep_interface_version: InterfaceVersion = InterfaceVersion(c"26".as_ptr());

/// Provider instance behind `wsrep_t::ctx`.
struct Instance {
    provider: Arc<Provider>,
    /// `stats_get` arrays and their strings, kept until `stats_free`.
    stats: Mutex<HashMap<usize, StatsBlock>>,
}

struct StatsBlock {
    _vars: Vec<wsrep_stats_var>,
    _strings: Vec<CString>,
}

// SAFETY: the raw pointers in a block point into the block's own strings; blocks are only
// moved between threads whole.
unsafe impl Send for StatsBlock {}

static STAT_NAMES: OnceLock<Mutex<HashMap<&'static str, &'static CStr>>> = OnceLock::new();

/// Runs an entry point, turning a panic into a logged error and `on_panic`.
fn guard<R>(entry: &str, on_panic: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            logger::write(logger::ERROR, &format!("internal error in {entry}: {what}"));
            on_panic
        }
    }
}

/// The instance behind a table, if `init` succeeded and `free` has not run.
///
/// # Safety
/// `wsrep` is null or the table the loader gave us.
unsafe fn instance<'a>(wsrep: W) -> Option<&'a Instance> {
    if wsrep.is_null() {
        return None;
    }
    ((*wsrep).ctx as *const Instance).as_ref()
}

/// # Safety
/// `ptr` is null or a NUL-terminated string valid for the call.
unsafe fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

/// # Safety
/// `ptr` is null or points to `len` readable bytes valid for the call.
unsafe fn bytes<'a>(ptr: *const c_void, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr.cast(), len)
    }
}

/// # Safety
/// `bufs` is null or points to `count` valid buffers.
unsafe fn buffers<'a>(bufs: *const wsrep_buf_t, count: usize) -> Vec<&'a [u8]> {
    if bufs.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(bufs, count).iter().map(|b| bytes(b.ptr, b.len)).collect()
}

/// # Safety
/// `keys` is null or points to `count` valid keys whose parts are valid.
unsafe fn key_parts(keys: *const wsrep_key_t, count: usize) -> Vec<Vec<Vec<u8>>> {
    if keys.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(keys, count)
        .iter()
        .map(|k| buffers(k.key_parts, k.key_parts_num).into_iter().map(<[u8]>::to_vec).collect())
        .collect()
}

/// # Safety
/// `handle` is null or valid for the call.
unsafe fn ws_handle(handle: *const wsrep_ws_handle_t) -> Option<WsHandle> {
    handle.as_ref().map(|h| WsHandle { trx_id: h.trx_id, opaque: h.opaque as usize as u64 })
}

fn status(s: Status) -> wsrep_status_t {
    s as wsrep_status_t
}

unsafe extern "C" fn init(wsrep: W, args: *const wsrep_init_args) -> wsrep_status_t {
    guard("init", NODE_FAIL, || {
        let Some(args) = args.as_ref() else { return NODE_FAIL };
        if wsrep.is_null() {
            return NODE_FAIL;
        }
        logger::install(args.logger_cb);
        let (Some(connected_cb), Some(view_cb), Some(apply_cb), Some(synced_cb)) =
            (args.connected_cb, args.view_cb, args.apply_cb, args.synced_cb)
        else {
            log::error!("init: the application did not supply the connected, view, apply and synced callbacks");
            return NODE_FAIL;
        };
        let start_position = args.state_id.as_ref().map_or(Gtid::UNDEFINED, rust_gtid);
        let init_args = InitArgs {
            node_name: text(args.node_name),
            node_address: text(args.node_address),
            node_incoming: text(args.node_incoming),
            data_dir: text(args.data_dir),
            options: text(args.options),
            start_position,
        };
        let app = Arc::new(ServerCallbacks {
            app_ctx: args.app_ctx,
            connected_cb,
            view_cb,
            apply_cb,
            synced_cb,
            sst_request_cb: args.sst_request_cb,
            sst_donate_cb: args.sst_donate_cb,
        });
        match Provider::init(init_args, app) {
            Ok(provider) => {
                let provider = Arc::new(provider);
                let instance = Box::new(Instance { provider, stats: Mutex::new(HashMap::new()) });
                (*wsrep).ctx = Box::into_raw(instance).cast();
                OK
            }
            Err(message) => {
                log::error!("{PROVIDER_NAME} failed to initialize: {message}");
                NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn capabilities(_wsrep: W) -> u32 {
    lockstep_provider::CAPABILITIES
}

unsafe extern "C" fn options_set(wsrep: W, conf: *const c_char) -> wsrep_status_t {
    guard("options_set", NODE_FAIL, || {
        let Some(i) = instance(wsrep) else { return NODE_FAIL };
        match i.provider.options_set(&text(conf)) {
            Ok(()) => OK,
            Err(message) => {
                // Galera's status for a refused option: the server reports "Set options
                // returned 7" and the SET fails; nothing changed.
                log::warn!("{message}");
                NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn options_get(wsrep: W) -> *mut c_char {
    let rendered =
        guard("options_get", String::new(), || instance(wsrep).map(|i| i.provider.options_get()).unwrap_or_default());
    let c = CString::new(rendered).unwrap_or_default();
    // The application frees this with libc free().
    libc::strdup(c.as_ptr())
}

unsafe extern "C" fn enc_set_key(_wsrep: W, _key: *const wsrep_buf_t) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

unsafe extern "C" fn connect(
    wsrep: W,
    cluster_name: *const c_char,
    cluster_url: *const c_char,
    state_donor: *const c_char,
    bootstrap: bool,
) -> wsrep_status_t {
    guard("connect", NODE_FAIL, || {
        let Some(i) = instance(wsrep) else { return NODE_FAIL };
        status(i.provider.connect(&text(cluster_name), &text(cluster_url), &text(state_donor), bootstrap))
    })
}

unsafe extern "C" fn disconnect(wsrep: W) -> wsrep_status_t {
    guard("disconnect", NODE_FAIL, || instance(wsrep).map_or(OK, |i| status(i.provider.disconnect())))
}

unsafe extern "C" fn recv(wsrep: W, recv_ctx: *mut c_void) -> wsrep_status_t {
    guard("recv", FATAL, || instance(wsrep).map_or(FATAL, |i| status(i.provider.recv(RecvCtx(recv_ctx as usize)))))
}

unsafe extern "C" fn assign_read_view(
    _wsrep: W,
    _handle: *mut wsrep_ws_handle_t,
    _rv: *const wsrep_gtid_t,
) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

unsafe extern "C" fn certify(
    wsrep: W,
    conn_id: u64,
    handle: *mut wsrep_ws_handle_t,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    guard("certify", NODE_FAIL, || {
        let (Some(i), Some(h)) = (instance(wsrep), ws_handle(handle)) else { return CONN_FAIL };
        let (result, trx_meta) = i.provider.certify(conn_id, h, flags);
        if let Some(meta) = meta.as_mut() {
            *meta = c_meta(&trx_meta);
        }
        status(result)
    })
}

unsafe extern "C" fn commit_order_enter(
    wsrep: W,
    handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
) -> wsrep_status_t {
    guard("commit_order_enter", NODE_FAIL, || {
        let (Some(i), Some(h), Some(m)) = (instance(wsrep), ws_handle(handle), meta.as_ref()) else {
            return status(Status::TrxMissing);
        };
        status(i.provider.commit_order_enter(h, &rust_meta(m)))
    })
}

unsafe extern "C" fn commit_order_leave(
    wsrep: W,
    handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
    error: *const wsrep_buf_t,
) -> wsrep_status_t {
    guard("commit_order_leave", NODE_FAIL, || {
        let (Some(i), Some(h), Some(m)) = (instance(wsrep), ws_handle(handle), meta.as_ref()) else {
            return status(Status::TrxMissing);
        };
        let error = error.as_ref().map_or(&[][..], |e| bytes(e.ptr, e.len));
        status(i.provider.commit_order_leave(h, &rust_meta(m), error))
    })
}

fn rust_meta(m: &wsrep_trx_meta_t) -> lockstep_provider::types::TrxMeta {
    use lockstep_provider::types::{SourceTrx, TrxMeta, Uuid};
    TrxMeta {
        gtid: rust_gtid(&m.gtid),
        source: SourceTrx { node: Uuid(m.stid.node.data), trx_id: m.stid.trx, conn_id: m.stid.conn },
        depends_on: m.depends_on,
    }
}

unsafe extern "C" fn release(wsrep: W, handle: *mut wsrep_ws_handle_t) -> wsrep_status_t {
    guard("release", NODE_FAIL, || {
        let (Some(i), Some(h)) = (instance(wsrep), ws_handle(handle)) else { return OK };
        let result = i.provider.release(h);
        (*handle).opaque = std::ptr::null_mut();
        status(result)
    })
}

unsafe extern "C" fn replay_trx(wsrep: W, handle: *const wsrep_ws_handle_t, trx_ctx: *mut c_void) -> wsrep_status_t {
    // Anything but OK or TRX_FAIL makes the server shut down: map every failure to TRX_FAIL.
    guard("replay_trx", TRX_FAIL, || {
        let (Some(i), Some(h)) = (instance(wsrep), ws_handle(handle)) else { return TRX_FAIL };
        match i.provider.replay_trx(h, RecvCtx(trx_ctx as usize)) {
            Status::Ok => OK,
            _ => TRX_FAIL,
        }
    })
}

unsafe extern "C" fn abort_certification(
    wsrep: W,
    bf_seqno: i64,
    victim_trx: u64,
    victim_seqno: *mut i64,
) -> wsrep_status_t {
    guard("abort_certification", NODE_FAIL, || {
        let (result, seqno) =
            instance(wsrep).map_or((Status::Ok, -1), |i| i.provider.abort_certification(bf_seqno, victim_trx));
        if let Some(out) = victim_seqno.as_mut() {
            *out = seqno;
        }
        status(result)
    })
}

unsafe extern "C" fn rollback(wsrep: W, trx: u64, data: *const wsrep_buf_t) -> wsrep_status_t {
    guard("rollback", NODE_FAIL, || {
        let Some(i) = instance(wsrep) else { return CONN_FAIL };
        let data = data.as_ref().map_or(&[][..], |d| bytes(d.ptr, d.len));
        status(i.provider.rollback(trx, data.to_vec()))
    })
}

unsafe extern "C" fn append_key(
    wsrep: W,
    handle: *mut wsrep_ws_handle_t,
    keys: *const wsrep_key_t,
    count: usize,
    key_type: c_int,
    _copy: bool,
) -> wsrep_status_t {
    guard("append_key", NODE_FAIL, || {
        let (Some(i), Some(h)) = (instance(wsrep), ws_handle(handle)) else { return CONN_FAIL };
        let Some(kind) = u32::try_from(key_type).ok().and_then(KeyType::from_raw) else {
            log::warn!("append_key: unknown key type {key_type}");
            return WARNING;
        };
        let mut set = KeySet::default();
        if !keys.is_null() {
            for key in std::slice::from_raw_parts(keys, count) {
                set.push(kind, &buffers(key.key_parts, key.key_parts_num));
            }
        }
        (*handle).opaque = i.provider.append_key(h, &set) as usize as *mut c_void;
        OK
    })
}

unsafe extern "C" fn append_data(
    wsrep: W,
    handle: *mut wsrep_ws_handle_t,
    data: *const wsrep_buf_t,
    count: usize,
    _data_type: c_int,
    _copy: bool,
) -> wsrep_status_t {
    guard("append_data", NODE_FAIL, || {
        let (Some(i), Some(h)) = (instance(wsrep), ws_handle(handle)) else { return CONN_FAIL };
        (*handle).opaque = i.provider.append_data(h, &buffers(data, count)) as usize as *mut c_void;
        OK
    })
}

unsafe extern "C" fn sync_wait(
    wsrep: W,
    upto: *mut wsrep_gtid_t,
    tout: c_int,
    gtid: *mut wsrep_gtid_t,
) -> wsrep_status_t {
    guard("sync_wait", TRX_FAIL, || {
        let Some(i) = instance(wsrep) else { return CONN_FAIL };
        let (result, reached) = i.provider.sync_wait(upto.as_ref().map(rust_gtid), tout);
        if let Some(out) = gtid.as_mut() {
            *out = c_gtid(reached);
        }
        status(result)
    })
}

unsafe extern "C" fn last_committed_id(wsrep: W, gtid: *mut wsrep_gtid_t) -> wsrep_status_t {
    guard("last_committed_id", OK, || {
        let committed = instance(wsrep).map_or(Gtid::UNDEFINED, |i| i.provider.last_committed_id());
        if let Some(out) = gtid.as_mut() {
            *out = c_gtid(committed);
        }
        OK
    })
}

unsafe extern "C" fn free_connection(_wsrep: W, _conn_id: u64) -> wsrep_status_t {
    OK
}

unsafe extern "C" fn to_execute_start(
    wsrep: W,
    conn_id: u64,
    keys: *const wsrep_key_t,
    keys_num: usize,
    action: *const wsrep_buf_t,
    count: usize,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    guard("to_execute_start", NODE_FAIL, || {
        let Some(i) = instance(wsrep) else { return CONN_FAIL };
        let (result, trx_meta) =
            i.provider.to_execute_start(conn_id, key_parts(keys, keys_num), &buffers(action, count), flags);
        if let Some(meta) = meta.as_mut() {
            *meta = c_meta(&trx_meta);
        }
        status(result)
    })
}

unsafe extern "C" fn to_execute_end(wsrep: W, conn_id: u64, error: *const wsrep_buf_t) -> wsrep_status_t {
    guard("to_execute_end", NODE_FAIL, || {
        let Some(i) = instance(wsrep) else { return CONN_FAIL };
        let error = error.as_ref().map_or(&[][..], |e| bytes(e.ptr, e.len));
        status(i.provider.to_execute_end(conn_id, error))
    })
}

unsafe extern "C" fn preordered_collect(
    _w: W,
    _h: *mut c_void,
    _d: *const wsrep_buf_t,
    _c: usize,
    _copy: bool,
) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

unsafe extern "C" fn preordered_commit(
    _w: W,
    _h: *mut c_void,
    _source: *const wsrep_uuid_t,
    _flags: u32,
    _pa_range: c_int,
    _commit: bool,
) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

unsafe extern "C" fn sst_sent(wsrep: W, state_id: *const wsrep_gtid_t, rcode: c_int) -> wsrep_status_t {
    guard("sst_sent", FATAL, || {
        let Some(i) = instance(wsrep) else { return FATAL };
        let position = state_id.as_ref().map_or(Gtid::UNDEFINED, rust_gtid);
        status(i.provider.sst_sent(position, rcode))
    })
}

unsafe extern "C" fn sst_received(
    wsrep: W,
    state_id: *const wsrep_gtid_t,
    _state: *const wsrep_buf_t,
    rcode: c_int,
) -> wsrep_status_t {
    guard("sst_received", FATAL, || {
        let Some(i) = instance(wsrep) else { return FATAL };
        let position = state_id.as_ref().map_or(Gtid::UNDEFINED, rust_gtid);
        status(i.provider.sst_received(position, rcode))
    })
}

unsafe extern "C" fn snapshot(_wsrep: W, _msg: *const wsrep_buf_t, _donor: *const c_char) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

/// Names are static and shared by every array we hand out.
fn stat_name(name: &'static str) -> *const c_char {
    let names = STAT_NAMES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut names = names.lock().unwrap_or_else(|p| p.into_inner());
    names.entry(name).or_insert_with(|| Box::leak(CString::new(name).unwrap_or_default().into_boxed_c_str())).as_ptr()
}

unsafe extern "C" fn stats_get(wsrep: W) -> *mut wsrep_stats_var {
    guard("stats_get", std::ptr::null_mut(), || {
        let Some(i) = instance(wsrep) else { return std::ptr::null_mut() };
        let stats = i.provider.stats();
        let mut strings = Vec::new();
        let mut vars: Vec<wsrep_stats_var> = stats
            .into_iter()
            .map(|var| {
                let (kind, value) = match var.value {
                    StatValue::Int(v) => (STATS_INT64, wsrep_stats_value { int64: v }),
                    StatValue::Double(v) => (STATS_DOUBLE, wsrep_stats_value { double: v }),
                    StatValue::Text(s) => {
                        let s = CString::new(s).unwrap_or_default();
                        let ptr = s.as_ptr();
                        strings.push(s);
                        (STATS_STRING, wsrep_stats_value { string: ptr })
                    }
                };
                wsrep_stats_var { name: stat_name(var.name), kind, value }
            })
            .collect();
        vars.push(wsrep_stats_var { name: std::ptr::null(), kind: STATS_INT64, value: wsrep_stats_value { int64: 0 } });
        let ptr = vars.as_mut_ptr();
        i.stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr as usize, StatsBlock { _vars: vars, _strings: strings });
        ptr
    })
}

unsafe extern "C" fn stats_free(wsrep: W, vars: *mut wsrep_stats_var) {
    guard("stats_free", (), || {
        if let Some(i) = instance(wsrep) {
            i.stats.lock().unwrap_or_else(|p| p.into_inner()).remove(&(vars as usize));
        }
    })
}

unsafe extern "C" fn stats_reset(wsrep: W) {
    guard("stats_reset", (), || {
        if let Some(i) = instance(wsrep) {
            i.provider.stats_reset();
        }
    })
}

unsafe extern "C" fn pause(wsrep: W) -> i64 {
    // wsrep-lib reads exactly -1 as a failed pause.
    guard("pause", -1, || instance(wsrep).map_or(-1, |i| i.provider.pause()))
}

unsafe extern "C" fn resume(wsrep: W) -> wsrep_status_t {
    guard("resume", NODE_FAIL, || instance(wsrep).map_or(NODE_FAIL, |i| status(i.provider.resume())))
}

unsafe extern "C" fn desync(wsrep: W) -> wsrep_status_t {
    guard("desync", NODE_FAIL, || instance(wsrep).map_or(CONN_FAIL, |i| status(i.provider.desync())))
}

unsafe extern "C" fn resync(wsrep: W) -> wsrep_status_t {
    guard("resync", NODE_FAIL, || instance(wsrep).map_or(CONN_FAIL, |i| status(i.provider.resync())))
}

unsafe extern "C" fn lock(_w: W, _name: *const c_char, _shared: bool, _owner: u64, _tout: i64) -> wsrep_status_t {
    NOT_IMPLEMENTED
}

unsafe extern "C" fn unlock(_w: W, _name: *const c_char, _owner: u64) -> wsrep_status_t {
    OK
}

unsafe extern "C" fn is_locked(_w: W, _name: *const c_char, _conn: *mut u64, _node: *mut wsrep_uuid_t) -> bool {
    false
}

/// Called twice at unload (by the application, then by the loader): the second is a no-op.
unsafe extern "C" fn free(wsrep: W) {
    guard("free", (), || {
        if wsrep.is_null() {
            return;
        }
        let ctx = std::mem::replace(&mut (*wsrep).ctx, std::ptr::null_mut());
        if !ctx.is_null() {
            let instance = Box::from_raw(ctx as *mut Instance);
            instance.provider.shut_down();
        }
    })
}

static NAME: OnceLock<CString> = OnceLock::new();
static VERSION: OnceLock<CString> = OnceLock::new();
static VENDOR: OnceLock<CString> = OnceLock::new();

/// The only symbol the loader calls: fills the whole (uninitialised) function table.
///
/// # Safety
/// `wsrep` is null or points to writable memory for a `wsrep_t`.
#[no_mangle]
pub unsafe extern "C" fn wsrep_loader(wsrep: *mut wsrep_t) -> c_int {
    if wsrep.is_null() {
        return libc::EINVAL;
    }
    guard("wsrep_loader", libc::EINVAL, || {
        let name = NAME.get_or_init(|| CString::new(PROVIDER_NAME).unwrap_or_default());
        let version = VERSION.get_or_init(|| CString::new(PROVIDER_VERSION).unwrap_or_default());
        let vendor = VENDOR.get_or_init(|| CString::new(PROVIDER_VENDOR).unwrap_or_default());
        std::ptr::write(
            wsrep,
            wsrep_t {
                version: c"26".as_ptr(),
                init,
                capabilities,
                options_set,
                options_get,
                enc_set_key,
                connect,
                disconnect,
                recv,
                assign_read_view,
                certify,
                commit_order_enter,
                commit_order_leave,
                release,
                replay_trx,
                abort_certification,
                rollback,
                append_key,
                append_data,
                sync_wait,
                last_committed_id,
                free_connection,
                to_execute_start,
                to_execute_end,
                preordered_collect,
                preordered_commit,
                sst_sent,
                sst_received,
                snapshot,
                stats_get,
                stats_free,
                stats_reset,
                pause,
                resume,
                desync,
                resync,
                lock,
                unlock,
                is_locked,
                provider_name: name.as_ptr(),
                provider_version: version.as_ptr(),
                provider_vendor: vendor.as_ptr(),
                free,
                dlh: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            },
        );
        0
    })
}

/// The allowlist service (MariaDB 10.11 fails to load a provider without these symbols):
/// kept for the group transport, which asks it about every peer that connects to us.
///
/// # Safety
/// `service` is null (everybody is allowed) or points to a valid service struct, as MariaDB's
/// static one.
#[no_mangle]
pub unsafe extern "C" fn wsrep_init_allowlist_service_v1(service: *mut wsrep_allowlist_service_v1_t) -> c_int {
    // SAFETY: the caller's contract.
    guard("init_allowlist_service", (), || unsafe { allowlist::install(service) });
    0
}

#[no_mangle]
pub extern "C" fn wsrep_deinit_allowlist_service_v1() {
    guard("deinit_allowlist_service", (), allowlist::remove);
}

#[cfg(test)]
mod tests;
