//! Tunables of the group layer. Timeouts follow Galera's defaults where one exists.

/// Largest single entry (an unnumbered message, or a part of a writeset) the group orders.
/// An entry travels whole, as one record, and the leader's heartbeats wait behind it in
/// each follower's stream, so it must arrive well within the election timeout (1 s at
/// least): 16 MiB reaches the two followers of a leader on 1 Gbit/s in about 0.3 s.
/// Writesets above `GroupConfig::part_bytes` travel as parts of that size
/// (docs/design/group-writeset-parts.md), so this bounds messages and parts only.
pub const ENTRY_LIMIT_BYTES: u32 = 16 << 20;

/// Largest writeset the group orders, whatever `max_writeset_bytes` says: Galera's
/// `repl.max_ws_size` maximum (2 GiB - 1).
pub const WRITESET_LIMIT_BYTES: u32 = i32::MAX as u32;

/// Largest record body a member sends or reads on the wire: one entry at the entry
/// limit with its envelope, or a batch of entries (see `GroupConfig::batch_limit`). A
/// constant, not derived from local settings: a reader must take whatever a peer with
/// other settings may send.
pub const RECORD_LIMIT_BYTES: u32 = ENTRY_LIMIT_BYTES + (1 << 20);

/// Configuration of one member; every member of a cluster should use the same values.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `wsrep_cluster_name`: a peer announcing another name is refused.
    pub cluster_name: String,
    /// Leader heartbeat; must be well below the election timeout.
    pub heartbeat_interval_ms: u64,
    /// Followers start an election after a random silence in this range.
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Galera `evs.suspect_timeout` (5 s): without contact to a leader holding quorum for
    /// this long, a member declares itself non-primary; a leader does the same without
    /// contact to a quorum, and removes a member silent this long from the quorum (Galera
    /// evicts a member all others suspect), so the survivors keep a primary component
    /// through further failures.
    pub suspect_timeout_ms: u64,
    /// A joining member repeats its join request this often until it is in a view.
    pub join_retry_ms: u64,
    /// A submission without a seqno after this long (or twice `suspect_timeout_ms`, see
    /// [`GroupConfig::submission_timeout_ms`]) completes as `SubmitError::Unknown`.
    pub submit_timeout_ms: u64,
    /// Largest writeset accepted by `submit` (`repl.max_ws_size`); above
    /// [`WRITESET_LIMIT_BYTES`] the constant applies.
    pub max_writeset_bytes: u32,
    /// Payload bytes per replication message (at least one entry is always sent); above
    /// half of [`ENTRY_LIMIT_BYTES`] that half applies.
    pub max_batch_bytes: usize,
    /// A writeset larger than this is ordered as parts of this size, then a last entry that
    /// takes its seqno; at most half of [`ENTRY_LIMIT_BYTES`].
    pub part_bytes: usize,
    /// Deliveries waiting for the application; applying stops while it is full.
    pub recv_queue_limit: usize,
    /// The same in bytes: applying stops while the waiting deliveries hold this much (one
    /// delivery alone may hold more). What is not applied waits in the log, on disk.
    pub recv_queue_bytes_limit: usize,
    /// Submissions waiting for their seqno.
    pub max_pending_submits: usize,
    /// Galera `gcache.size`: bytes of ordered entries the cache retains.
    pub gcache_bytes: u64,
    /// Galera `pc.ignore_sb` / `pc.ignore_quorum`: a member that lost the primary component
    /// makes the members it still hears from the whole group, without a quorum of the old
    /// one (docs/design/group-forced-primary.md). Split brain is then possible by design.
    pub ignore_split_brain: bool,
    /// Galera `pc.npvo`: when two primary components of one cluster meet, the newer one (the
    /// one forced last) goes on and the older one ends; by default the older goes on.
    pub newer_primary_overrides: bool,
    /// `socket.compression` (ours): what this member sends with writesets in it goes
    /// deflated, so a link between sites carries fewer bytes, for some CPU at both ends.
    /// Peers read compressed messages whatever their own setting.
    pub compress: bool,
    /// Run first on every thread this layer starts (`gcomm.thread_prio`).
    pub thread_start: ThreadStart,
    /// Who may connect to this member's group port (`wsrep_allowlist`).
    pub allowlist: Allowlist,
}

/// What a running member takes again when the provider options change (`SET GLOBAL
/// wsrep_provider_options`). Each is read where it is used, so a change counts from then on;
/// the rest of [`GroupConfig`] is fixed when the member starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// `evs.suspect_timeout`.
    pub suspect_timeout_ms: u64,
    /// `repl.max_ws_size`.
    pub max_writeset_bytes: u32,
    /// `gcs.recv_q_hard_limit`.
    pub recv_queue_bytes_limit: usize,
}

/// What every thread of the group layer runs before its work: the provider gives them the
/// scheduling policy `gcomm.thread_prio` asks for, as Galera gives its gcomm thread. Nothing
/// by default.
#[derive(Clone, Default)]
pub struct ThreadStart(Option<std::sync::Arc<dyn Fn() + Send + Sync>>);

impl ThreadStart {
    pub fn new(start: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Some(std::sync::Arc::new(start)))
    }

    /// Spawns a named thread that runs this first, then `body`.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        name: String,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<T>> {
        let start = self.0.clone();
        std::thread::Builder::new().name(name).spawn(move || {
            if let Some(start) = start {
                // A panic there is logged; the thread does its work all the same.
                let _ = crate::guarded(|| start());
            }
            body()
        })
    }
}

impl std::fmt::Debug for ThreadStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ThreadStart(set)" } else { "ThreadStart(none)" })
    }
}

/// Decides, for the address of a peer connecting to this member, whether the connection is
/// kept: the provider asks the server's allowlist service (`wsrep_allowlist`), as Galera
/// does. The check runs on the connection's own thread, before its handshake, because the
/// server may take a while to answer. Everybody by default.
#[derive(Clone, Default)]
pub struct Allowlist(Option<std::sync::Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>>);

impl Allowlist {
    pub fn new(allows: impl Fn(std::net::IpAddr) -> bool + Send + Sync + 'static) -> Self {
        Self(Some(std::sync::Arc::new(allows)))
    }

    pub fn allows(&self, peer: std::net::IpAddr) -> bool {
        self.0.as_ref().is_none_or(|allows| allows(peer))
    }
}

impl std::fmt::Debug for Allowlist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Allowlist(set)" } else { "Allowlist(everybody)" })
    }
}

impl GroupConfig {
    pub fn new(cluster_name: &str) -> Self {
        Self {
            cluster_name: cluster_name.to_owned(),
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            suspect_timeout_ms: 5000,
            join_retry_ms: 1000,
            submit_timeout_ms: 10000,
            max_writeset_bytes: WRITESET_LIMIT_BYTES,
            max_batch_bytes: 1 << 20,
            part_bytes: 1 << 20,
            recv_queue_limit: 16384,
            recv_queue_bytes_limit: 64 << 20,
            max_pending_submits: 8192,
            gcache_bytes: 128 << 20,
            ignore_split_brain: false,
            newer_primary_overrides: false,
            compress: false,
            thread_start: ThreadStart::default(),
            allowlist: Allowlist::default(),
        }
    }

    /// Takes `tuning`. The suspect timeout stays at least the longest election timeout: a
    /// member must not give up on a leader before the others could have elected another.
    pub fn tune(&mut self, tuning: Tuning) {
        self.suspect_timeout_ms = tuning.suspect_timeout_ms.max(self.election_timeout_max_ms);
        self.max_writeset_bytes = tuning.max_writeset_bytes;
        self.recv_queue_bytes_limit = tuning.recv_queue_bytes_limit;
    }

    /// Largest writeset `submit` accepts.
    pub fn writeset_limit(&self) -> usize {
        self.max_writeset_bytes.min(WRITESET_LIMIT_BYTES) as usize
    }

    /// Largest unnumbered message `send_message` accepts: it travels as one entry.
    pub fn message_limit(&self) -> usize {
        self.writeset_limit().min(ENTRY_LIMIT_BYTES as usize)
    }

    /// Payload bytes of a message of several entries. Each command entry adds 5 bytes of
    /// framing to an encoded operation of at least 9, so a batch of half the entry
    /// limit stays inside `RECORD_LIMIT_BYTES` however small its entries.
    pub fn batch_limit(&self) -> usize {
        self.max_batch_bytes.min(ENTRY_LIMIT_BYTES as usize / 2)
    }

    /// How long a submission waits for its seqno before it is `SubmitError::Unknown`: at
    /// least twice the suspect timeout, so that it outlives the loss of its component and
    /// the forming of the next (`pc.ignore_sb` reorders it there, as Galera sends its queued
    /// actions again in a new configuration; mtr sets `evs.suspect_timeout` to 10 s).
    pub fn submission_timeout_ms(&self) -> u64 {
        self.submit_timeout_ms.max(2 * self.suspect_timeout_ms)
    }

    /// Bytes of each part of a writeset that travels in parts.
    pub fn part_limit(&self) -> usize {
        self.part_bytes.clamp(1, ENTRY_LIMIT_BYTES as usize / 2)
    }
}
