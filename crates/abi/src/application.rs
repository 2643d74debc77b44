//! The server's callbacks (`wsrep_init_args`) behind the provider's `Application` trait.
use crate::types::*;
use lockstep_provider::application::{
    Application, Applied, ApplyRequest, CallbackFailed, RecvCtx, ThreadSchedule, View,
};
use lockstep_provider::types::{Gtid, TrxMeta, Uuid};
use std::ffi::{c_char, c_void};

pub struct ServerCallbacks {
    pub app_ctx: *mut c_void,
    pub connected_cb: wsrep_connected_cb_t,
    pub view_cb: wsrep_view_cb_t,
    pub apply_cb: wsrep_apply_cb_t,
    pub synced_cb: wsrep_synced_cb_t,
    pub sst_request_cb: Option<wsrep_sst_request_cb_t>,
    pub sst_donate_cb: Option<wsrep_sst_donate_cb_t>,
}

// SAFETY: `app_ctx` is MariaDB's server state object, which it lets any thread use through
// these callbacks for the provider's whole life.
unsafe impl Send for ServerCallbacks {}
unsafe impl Sync for ServerCallbacks {}

pub fn c_uuid(uuid: Uuid) -> wsrep_uuid_t {
    wsrep_uuid_t { data: uuid.0 }
}

pub fn c_gtid(gtid: Gtid) -> wsrep_gtid_t {
    wsrep_gtid_t { uuid: c_uuid(gtid.uuid), seqno: gtid.seqno }
}

pub fn rust_gtid(gtid: &wsrep_gtid_t) -> Gtid {
    Gtid::new(Uuid(gtid.uuid.data), gtid.seqno)
}

pub fn c_meta(meta: &TrxMeta) -> wsrep_trx_meta_t {
    wsrep_trx_meta_t {
        gtid: c_gtid(meta.gtid),
        stid: wsrep_stid_t { node: c_uuid(meta.source.node), trx: meta.source.trx_id, conn: meta.source.conn_id },
        depends_on: meta.depends_on,
    }
}

/// Copies `text` into a fixed C array, truncated and NUL-terminated.
fn fill(dst: &mut [c_char], text: &str) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(dst.len() - 1);
    for (d, s) in dst.iter_mut().zip(&bytes[..n]) {
        *d = *s as c_char;
    }
    dst[n..].fill(0);
}

/// A `wsrep_view_info_t` with its trailing member array, in 8-byte aligned storage.
struct ViewInfoBuffer {
    words: Vec<u64>,
}

impl ViewInfoBuffer {
    fn new(view: &View) -> ViewInfoBuffer {
        const HEADER: usize = std::mem::offset_of!(wsrep_view_info_t, members);
        let member_size = std::mem::size_of::<wsrep_member_info_t>();
        let bytes = HEADER + member_size * view.members.len().max(1);
        let mut buffer = ViewInfoBuffer { words: vec![0u64; bytes.div_ceil(8)] };
        let info = buffer.words.as_mut_ptr() as *mut wsrep_view_info_t;
        // SAFETY: the buffer is zeroed, 8-byte aligned and large enough for the header plus
        // `members.len()` records; all fields are plain data for which zero is valid.
        unsafe {
            (*info).state_id = c_gtid(view.state_id);
            (*info).view = view.conf_id;
            (*info).status = view.status as i32;
            (*info).capabilities = view.capabilities;
            (*info).my_idx = view.my_index;
            (*info).memb_num = view.members.len() as i32;
            (*info).proto_ver = view.proto_ver;
            let members = std::ptr::addr_of_mut!((*info).members) as *mut wsrep_member_info_t;
            for (i, member) in view.members.iter().enumerate() {
                let record = &mut *members.add(i);
                record.id = c_uuid(member.id);
                fill(&mut record.name, &member.name);
                fill(&mut record.incoming, &member.incoming);
            }
        }
        buffer
    }

    fn as_ptr(&self) -> *const wsrep_view_info_t {
        self.words.as_ptr() as *const wsrep_view_info_t
    }
}

impl Application for ServerCallbacks {
    fn connected(&self, view: &View) -> Result<(), CallbackFailed> {
        let info = ViewInfoBuffer::new(view);
        // SAFETY: a callback MariaDB supplied in init, with a view that outlives the call.
        let rc = unsafe { (self.connected_cb)(self.app_ctx, info.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(CallbackFailed("connected"))
        }
    }

    fn view(&self, recv: RecvCtx, view: &View) -> Result<(), CallbackFailed> {
        let info = ViewInfoBuffer::new(view);
        // SAFETY: as above; `recv` is the context MariaDB passed to this thread's `recv`.
        let rc = unsafe { (self.view_cb)(self.app_ctx, recv.0 as *mut c_void, info.as_ptr(), std::ptr::null(), 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(CallbackFailed("view"))
        }
    }

    fn synced(&self) -> Result<(), CallbackFailed> {
        // SAFETY: a callback MariaDB supplied in init.
        let rc = unsafe { (self.synced_cb)(self.app_ctx) };
        if rc == 0 {
            Ok(())
        } else {
            Err(CallbackFailed("synced"))
        }
    }

    fn apply(&self, recv: RecvCtx, request: &ApplyRequest<'_>) -> Result<Applied, CallbackFailed> {
        let handle =
            wsrep_ws_handle_t { trx_id: request.handle.trx_id, opaque: request.handle.opaque as usize as *mut c_void };
        let data = wsrep_buf_t {
            ptr: if request.data.is_empty() { std::ptr::null() } else { request.data.as_ptr().cast() },
            len: request.data.len(),
        };
        let meta = c_meta(&request.meta);
        let mut exit_loop = false;
        let raised = crate::priority::Raised::by(request.boost);
        // SAFETY: every pointer refers to a local that outlives the call.
        let rc =
            unsafe { (self.apply_cb)(recv.0 as *mut c_void, &handle, request.flags, &data, &meta, &mut exit_loop) };
        drop(raised);
        if rc == 0 {
            Ok(Applied { exit_loop })
        } else {
            Err(CallbackFailed("apply"))
        }
    }

    fn sst_request(&self) -> Result<Vec<u8>, CallbackFailed> {
        let Some(cb) = self.sst_request_cb else { return Err(CallbackFailed("sst_request (not supplied)")) };
        let mut request: *mut c_void = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: a callback MariaDB supplied in init; both out-pointers are locals.
        let rc = unsafe { cb(self.app_ctx, &mut request, &mut len) };
        let bytes = if request.is_null() || len == 0 {
            Vec::new()
        } else {
            // SAFETY: the application returned `len` bytes at `request`.
            unsafe { std::slice::from_raw_parts(request as *const u8, len).to_vec() }
        };
        if !request.is_null() {
            // SAFETY: wsrep-lib allocates the request with malloc and hands it over to us.
            unsafe { libc::free(request) };
        }
        if rc == 0 {
            Ok(bytes)
        } else {
            Err(CallbackFailed("sst_request"))
        }
    }

    fn sst_donate(&self, recv: RecvCtx, request: &[u8], state_id: Gtid, bypass: bool) -> Result<(), CallbackFailed> {
        let Some(cb) = self.sst_donate_cb else { return Err(CallbackFailed("sst_donate (not supplied)")) };
        let message = wsrep_buf_t { ptr: request.as_ptr().cast(), len: request.len() };
        let gtid = c_gtid(state_id);
        // SAFETY: a callback MariaDB supplied in init; every pointer refers to a local or to
        // `request`, which outlive the call.
        let rc = unsafe { cb(self.app_ctx, recv.0 as *mut c_void, &message, &gtid, std::ptr::null(), bypass) };
        if rc == 0 {
            Ok(())
        } else {
            Err(CallbackFailed("sst_donate"))
        }
    }

    fn abort_process(&self) -> ! {
        // As Galera's abort: no core file for an end that is no crash, and the default action
        // of SIGABRT, so that the server's crash handler does not report a bug in its log.
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain libc calls with valid arguments; nothing is dereferenced afterwards.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(libc::SIGABRT, libc::SIG_DFL);
        }
        std::process::abort()
    }

    fn set_thread_schedule(&self, schedule: ThreadSchedule) -> Result<(), String> {
        crate::priority::set_schedule(schedule)
    }

    fn peer_allowed(&self, ip: std::net::IpAddr) -> bool {
        crate::allowlist::allows(ip)
    }

    fn release_free_memory(&self) {
        // glibc keeps freed chunks of big writesets in its arenas once its mmap threshold has
        // grown past their size; other C libraries are left to their own policy.
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim takes no pointer and is safe to call from any thread.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
