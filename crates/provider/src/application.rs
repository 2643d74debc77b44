//! What the provider needs from the server that loaded it (MariaDB through wsrep-lib). The
//! ABI layer implements this trait over the C callbacks of `wsrep_init_args`.
use crate::types::{Gtid, TrxMeta, Uuid};

/// The applier context MariaDB passes to `recv` and expects back in callbacks made on
/// that thread. Opaque to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCtx(pub usize);

/// `wsrep_ws_handle_t`: the application's transaction id and our handle for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WsHandle {
    pub trx_id: u64,
    /// Our per-transaction token; 0 = none yet.
    pub opaque: u64,
}

/// Transaction id meaning "no transaction" (wsrep-lib's undefined id).
pub const TRX_ID_UNDEFINED: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewStatus {
    Primary = 0,
    NonPrimary = 1,
    Disconnected = 2,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: Uuid,
    pub name: String,
    pub incoming: String,
}

/// A configuration of the group as delivered to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub state_id: Gtid,
    /// Primary-component counter (`wsrep_cluster_conf_id`), -1 when not primary.
    pub conf_id: i64,
    pub status: ViewStatus,
    pub capabilities: u32,
    /// Our index in `members`, -1 when we are not a member (the final view).
    pub my_index: i32,
    pub members: Vec<Member>,
    pub proto_ver: i32,
}

/// A writeset handed to the application to apply (remote writesets and replays).
pub struct ApplyRequest<'a> {
    pub handle: WsHandle,
    pub flags: u32,
    pub data: &'a [u8],
    pub meta: TrxMeta,
    /// Nice levels above its own the applying thread runs at until the apply returns
    /// (`repl.applier_boost`, for writesets that hold commit order long); 0: as it is.
    pub boost: i32,
}

/// The application's answer to an apply: whether this applier thread should leave `recv`.
pub struct Applied {
    pub exit_loop: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackFailed(pub &'static str);

/// A thread's scheduling (`gcomm.thread_prio`, for the group layer's threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadSchedule {
    pub policy: SchedulePolicy,
    /// 0 for `Other`, 1-99 for the real-time policies.
    pub priority: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulePolicy {
    Other,
    Fifo,
    RoundRobin,
}

impl std::fmt::Display for ThreadSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policy = match self.policy {
            SchedulePolicy::Other => "other",
            SchedulePolicy::Fifo => "fifo",
            SchedulePolicy::RoundRobin => "rr",
        };
        write!(f, "{policy}:{}", self.priority)
    }
}

pub trait Application: Send + Sync {
    fn connected(&self, view: &View) -> Result<(), CallbackFailed>;
    fn view(&self, recv: RecvCtx, view: &View) -> Result<(), CallbackFailed>;
    fn synced(&self) -> Result<(), CallbackFailed>;
    fn apply(&self, recv: RecvCtx, request: &ApplyRequest<'_>) -> Result<Applied, CallbackFailed>;
    /// Joiner: prepare to receive a state transfer; returns the request for the donor
    /// (`<method>\0<address>\0`, or `trivial\0`, or empty when only IST is acceptable).
    fn sst_request(&self) -> Result<Vec<u8>, CallbackFailed>;
    /// Donor: start sending state `state_id` as `request` asks; must not block for the
    /// transfer (the result comes back through `Provider::sst_sent`).
    fn sst_donate(&self, recv: RecvCtx, request: &[u8], state_id: Gtid, bypass: bool) -> Result<(), CallbackFailed>;
    /// Ends the server's process at once, as Galera does when a joiner can never receive the
    /// group's state: the server must not go on starting (or report errors of its own)
    /// without it. The ABI layer first restores the default action of SIGABRT, so that the
    /// server's crash report stays out of its log (a shell sees exit status 134).
    fn abort_process(&self) -> ! {
        std::process::abort()
    }
    /// Gives the calling thread `schedule`; the error says why it cannot. Called on the
    /// group layer's threads as they start (the system calls live in the ABI layer).
    fn set_thread_schedule(&self, schedule: ThreadSchedule) -> Result<(), String> {
        Err(format!("{schedule}: not supported by this application"))
    }
    /// Whether a peer connecting from `ip` to this node's group port may join it: the
    /// server's allowlist (`wsrep_allowlist`). Called on that connection's own thread.
    fn peer_allowed(&self, _ip: std::net::IpAddr) -> bool {
        true
    }
    /// Hands the memory the allocator keeps free back to the system (see
    /// docs/design/apply-queue-memory.md, "Memory kept after a burst").
    fn release_free_memory(&self) {}
}
