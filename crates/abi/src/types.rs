//! Our own definitions of the wsrep v26 C types (x86_64 SysV layout), with compile-time
//! checks of every size and offset MariaDB relies on.
#![allow(non_camel_case_types)]
use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

pub type wsrep_status_t = c_int;
pub type wsrep_seqno_t = i64;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct wsrep_uuid_t {
    pub data: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsrep_gtid_t {
    pub uuid: wsrep_uuid_t,
    pub seqno: wsrep_seqno_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsrep_stid_t {
    pub node: wsrep_uuid_t,
    pub trx: u64,
    pub conn: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsrep_trx_meta_t {
    pub gtid: wsrep_gtid_t,
    pub stid: wsrep_stid_t,
    pub depends_on: wsrep_seqno_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsrep_buf_t {
    pub ptr: *const c_void,
    pub len: usize,
}

#[repr(C)]
pub struct wsrep_ws_handle_t {
    pub trx_id: u64,
    pub opaque: *mut c_void,
}

#[repr(C)]
pub struct wsrep_key_t {
    pub key_parts: *const wsrep_buf_t,
    pub key_parts_num: usize,
}

pub const MEMBER_NAME_LEN: usize = 32;
pub const INCOMING_LEN: usize = 256;

#[repr(C)]
pub struct wsrep_member_info_t {
    pub id: wsrep_uuid_t,
    pub name: [c_char; MEMBER_NAME_LEN],
    pub incoming: [c_char; INCOMING_LEN],
}

/// Header of `wsrep_view_info_t`; `memb_num` member records follow at `VIEW_MEMBERS_OFFSET`.
#[repr(C)]
pub struct wsrep_view_info_t {
    pub state_id: wsrep_gtid_t,
    pub view: wsrep_seqno_t,
    pub status: c_int,
    pub capabilities: u32,
    pub my_idx: c_int,
    pub memb_num: c_int,
    pub proto_ver: c_int,
    pub members: [wsrep_member_info_t; 1],
}

pub type wsrep_log_cb_t = unsafe extern "C-unwind" fn(level: c_int, msg: *const c_char);
pub type wsrep_connected_cb_t =
    unsafe extern "C-unwind" fn(app_ctx: *mut c_void, view: *const wsrep_view_info_t) -> c_int;
pub type wsrep_view_cb_t = unsafe extern "C-unwind" fn(
    app_ctx: *mut c_void,
    recv_ctx: *mut c_void,
    view: *const wsrep_view_info_t,
    state: *const c_char,
    state_len: usize,
) -> c_int;
pub type wsrep_apply_cb_t = unsafe extern "C-unwind" fn(
    recv_ctx: *mut c_void,
    ws_handle: *const wsrep_ws_handle_t,
    flags: u32,
    data: *const wsrep_buf_t,
    meta: *const wsrep_trx_meta_t,
    exit_loop: *mut bool,
) -> c_int;
pub type wsrep_synced_cb_t = unsafe extern "C-unwind" fn(app_ctx: *mut c_void) -> c_int;
pub type wsrep_sst_request_cb_t =
    unsafe extern "C-unwind" fn(app_ctx: *mut c_void, sst_req: *mut *mut c_void, sst_req_len: *mut usize) -> c_int;
pub type wsrep_sst_donate_cb_t = unsafe extern "C-unwind" fn(
    app_ctx: *mut c_void,
    recv_ctx: *mut c_void,
    str_msg: *const wsrep_buf_t,
    state_id: *const wsrep_gtid_t,
    state: *const wsrep_buf_t,
    bypass: bool,
) -> c_int;
/// Callbacks this version does not make (encryption, unordered events).
pub type unused_cb_t = Option<unsafe extern "C-unwind" fn()>;

#[repr(C)]
pub struct wsrep_init_args {
    pub app_ctx: *mut c_void,
    pub node_name: *const c_char,
    pub node_address: *const c_char,
    pub node_incoming: *const c_char,
    pub data_dir: *const c_char,
    pub options: *const c_char,
    pub proto_ver: c_int,
    pub state_id: *const wsrep_gtid_t,
    pub state: *const wsrep_buf_t,
    pub logger_cb: Option<wsrep_log_cb_t>,
    pub connected_cb: Option<wsrep_connected_cb_t>,
    pub view_cb: Option<wsrep_view_cb_t>,
    pub sst_request_cb: Option<wsrep_sst_request_cb_t>,
    pub encrypt_cb: unused_cb_t,
    pub apply_cb: Option<wsrep_apply_cb_t>,
    pub unordered_cb: unused_cb_t,
    pub sst_donate_cb: Option<wsrep_sst_donate_cb_t>,
    pub synced_cb: Option<wsrep_synced_cb_t>,
}

pub const STATS_INT64: c_int = 1;
pub const STATS_DOUBLE: c_int = 2;
pub const STATS_STRING: c_int = 0;

#[repr(C)]
#[derive(Clone, Copy)]
pub union wsrep_stats_value {
    pub int64: i64,
    pub double: f64,
    pub string: *const c_char,
}

#[repr(C)]
pub struct wsrep_stats_var {
    pub name: *const c_char,
    pub kind: c_int,
    pub value: wsrep_stats_value,
}

#[repr(C)]
pub struct wsrep_allowlist_service_v1_t {
    pub allowlist_cb: *mut c_void,
    pub context: *mut c_void,
}

type W = *mut wsrep_t;

/// The provider function table, in v26 order.
#[repr(C)]
pub struct wsrep_t {
    pub version: *const c_char,
    pub init: unsafe extern "C" fn(W, *const wsrep_init_args) -> wsrep_status_t,
    pub capabilities: unsafe extern "C" fn(W) -> u32,
    pub options_set: unsafe extern "C" fn(W, *const c_char) -> wsrep_status_t,
    pub options_get: unsafe extern "C" fn(W) -> *mut c_char,
    pub enc_set_key: unsafe extern "C" fn(W, *const wsrep_buf_t) -> wsrep_status_t,
    pub connect: unsafe extern "C" fn(W, *const c_char, *const c_char, *const c_char, bool) -> wsrep_status_t,
    pub disconnect: unsafe extern "C" fn(W) -> wsrep_status_t,
    pub recv: unsafe extern "C" fn(W, *mut c_void) -> wsrep_status_t,
    pub assign_read_view: unsafe extern "C" fn(W, *mut wsrep_ws_handle_t, *const wsrep_gtid_t) -> wsrep_status_t,
    pub certify: unsafe extern "C" fn(W, u64, *mut wsrep_ws_handle_t, u32, *mut wsrep_trx_meta_t) -> wsrep_status_t,
    pub commit_order_enter:
        unsafe extern "C" fn(W, *const wsrep_ws_handle_t, *const wsrep_trx_meta_t) -> wsrep_status_t,
    pub commit_order_leave: unsafe extern "C" fn(
        W,
        *const wsrep_ws_handle_t,
        *const wsrep_trx_meta_t,
        *const wsrep_buf_t,
    ) -> wsrep_status_t,
    pub release: unsafe extern "C" fn(W, *mut wsrep_ws_handle_t) -> wsrep_status_t,
    pub replay_trx: unsafe extern "C" fn(W, *const wsrep_ws_handle_t, *mut c_void) -> wsrep_status_t,
    pub abort_certification: unsafe extern "C" fn(W, wsrep_seqno_t, u64, *mut wsrep_seqno_t) -> wsrep_status_t,
    pub rollback: unsafe extern "C" fn(W, u64, *const wsrep_buf_t) -> wsrep_status_t,
    pub append_key:
        unsafe extern "C" fn(W, *mut wsrep_ws_handle_t, *const wsrep_key_t, usize, c_int, bool) -> wsrep_status_t,
    pub append_data:
        unsafe extern "C" fn(W, *mut wsrep_ws_handle_t, *const wsrep_buf_t, usize, c_int, bool) -> wsrep_status_t,
    pub sync_wait: unsafe extern "C" fn(W, *mut wsrep_gtid_t, c_int, *mut wsrep_gtid_t) -> wsrep_status_t,
    pub last_committed_id: unsafe extern "C" fn(W, *mut wsrep_gtid_t) -> wsrep_status_t,
    pub free_connection: unsafe extern "C" fn(W, u64) -> wsrep_status_t,
    pub to_execute_start: unsafe extern "C" fn(
        W,
        u64,
        *const wsrep_key_t,
        usize,
        *const wsrep_buf_t,
        usize,
        u32,
        *mut wsrep_trx_meta_t,
    ) -> wsrep_status_t,
    pub to_execute_end: unsafe extern "C" fn(W, u64, *const wsrep_buf_t) -> wsrep_status_t,
    pub preordered_collect: unsafe extern "C" fn(W, *mut c_void, *const wsrep_buf_t, usize, bool) -> wsrep_status_t,
    pub preordered_commit:
        unsafe extern "C" fn(W, *mut c_void, *const wsrep_uuid_t, u32, c_int, bool) -> wsrep_status_t,
    pub sst_sent: unsafe extern "C" fn(W, *const wsrep_gtid_t, c_int) -> wsrep_status_t,
    pub sst_received: unsafe extern "C" fn(W, *const wsrep_gtid_t, *const wsrep_buf_t, c_int) -> wsrep_status_t,
    pub snapshot: unsafe extern "C" fn(W, *const wsrep_buf_t, *const c_char) -> wsrep_status_t,
    pub stats_get: unsafe extern "C" fn(W) -> *mut wsrep_stats_var,
    pub stats_free: unsafe extern "C" fn(W, *mut wsrep_stats_var),
    pub stats_reset: unsafe extern "C" fn(W),
    pub pause: unsafe extern "C" fn(W) -> wsrep_seqno_t,
    pub resume: unsafe extern "C" fn(W) -> wsrep_status_t,
    pub desync: unsafe extern "C" fn(W) -> wsrep_status_t,
    pub resync: unsafe extern "C" fn(W) -> wsrep_status_t,
    pub lock: unsafe extern "C" fn(W, *const c_char, bool, u64, i64) -> wsrep_status_t,
    pub unlock: unsafe extern "C" fn(W, *const c_char, u64) -> wsrep_status_t,
    pub is_locked: unsafe extern "C" fn(W, *const c_char, *mut u64, *mut wsrep_uuid_t) -> bool,
    pub provider_name: *const c_char,
    pub provider_version: *const c_char,
    pub provider_vendor: *const c_char,
    pub free: unsafe extern "C" fn(W),
    pub dlh: *mut c_void,
    pub ctx: *mut c_void,
}

// The layout MariaDB 10.11 was compiled against (shared/spec/wsrep-abi.md §2.4, §3).
const _: () = {
    assert!(size_of::<wsrep_uuid_t>() == 16 && std::mem::align_of::<wsrep_uuid_t>() == 8);
    assert!(size_of::<wsrep_gtid_t>() == 24 && offset_of!(wsrep_gtid_t, seqno) == 16);
    assert!(size_of::<wsrep_stid_t>() == 32);
    assert!(size_of::<wsrep_trx_meta_t>() == 64 && offset_of!(wsrep_trx_meta_t, depends_on) == 56);
    assert!(size_of::<wsrep_buf_t>() == 16 && size_of::<wsrep_ws_handle_t>() == 16 && size_of::<wsrep_key_t>() == 16);
    assert!(size_of::<wsrep_member_info_t>() == 304 && offset_of!(wsrep_member_info_t, incoming) == 48);
    assert!(size_of::<wsrep_view_info_t>() == 360 && offset_of!(wsrep_view_info_t, members) == 56);
    assert!(offset_of!(wsrep_view_info_t, proto_ver) == 48);
    assert!(size_of::<wsrep_init_args>() == 144);
    assert!(offset_of!(wsrep_init_args, state_id) == 56 && offset_of!(wsrep_init_args, logger_cb) == 72);
    assert!(offset_of!(wsrep_init_args, apply_cb) == 112 && offset_of!(wsrep_init_args, synced_cb) == 136);
    assert!(size_of::<wsrep_stats_var>() == 24 && offset_of!(wsrep_stats_var, value) == 16);
    assert!(size_of::<wsrep_allowlist_service_v1_t>() == 16);
    assert!(size_of::<wsrep_t>() == 360);
    assert!(offset_of!(wsrep_t, certify) == 80 && offset_of!(wsrep_t, abort_certification) == 120);
    assert!(offset_of!(wsrep_t, to_execute_start) == 176 && offset_of!(wsrep_t, stats_get) == 232);
    assert!(offset_of!(wsrep_t, pause) == 256 && offset_of!(wsrep_t, provider_name) == 312);
    assert!(offset_of!(wsrep_t, free) == 336 && offset_of!(wsrep_t, dlh) == 344 && offset_of!(wsrep_t, ctx) == 352);
};
