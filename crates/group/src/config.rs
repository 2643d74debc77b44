//! Tunables of the group layer. Timeouts follow Galera's defaults where one exists.

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
    /// contact to a quorum.
    pub suspect_timeout_ms: u64,
    /// Galera `evs.inactive_timeout` (15 s): the leader removes a member silent this long
    /// from the quorum, so the survivors keep a primary component through further failures.
    pub inactive_timeout_ms: u64,
    /// A joining member repeats its join request this often until it is in a view.
    pub join_retry_ms: u64,
    /// A submission without a seqno after this long completes as `SubmitError::Unknown`.
    pub submit_timeout_ms: u64,
    /// Largest writeset accepted by `submit`.
    pub max_writeset_bytes: u32,
    /// Payload bytes per replication message (at least one entry is always sent).
    pub max_batch_bytes: usize,
    /// Deliveries waiting for the application; applying stops while it is full.
    pub recv_queue_limit: usize,
    /// Submissions waiting for their seqno.
    pub max_pending_submits: usize,
    /// Galera `gcache.size`: bytes of ordered entries the cache retains.
    pub gcache_bytes: u64,
}

impl GroupConfig {
    pub fn new(cluster_name: &str) -> Self {
        Self {
            cluster_name: cluster_name.to_owned(),
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            suspect_timeout_ms: 5000,
            inactive_timeout_ms: 15000,
            join_retry_ms: 1000,
            submit_timeout_ms: 10000,
            max_writeset_bytes: 16 << 20,
            max_batch_bytes: 1 << 20,
            recv_queue_limit: 16384,
            max_pending_submits: 8192,
            gcache_bytes: 128 << 20,
        }
    }

    /// Largest wire or disk record body this configuration produces.
    pub fn max_record_bytes(&self) -> u32 {
        let batch = u32::try_from(self.max_batch_bytes).unwrap_or(u32::MAX);
        self.max_writeset_bytes.saturating_add(batch).saturating_add(1 << 16)
    }
}
