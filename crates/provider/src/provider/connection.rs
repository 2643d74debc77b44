//! Joining and leaving the group: starting the group member with the core as its delivery
//! sink, the state-transfer receiver, and the final view.
use super::memory::{self, MemoryRelease};
use super::sink::CoreSink;
use super::{lock, Link, Provider};
use crate::addresses::{AddressSettings, GroupAddresses};
use crate::application::{SchedulePolicy, ThreadSchedule};
use crate::checkpoint::Checkpoint;
use crate::core::{member_uuid, Opening};
use crate::options::Options;
use crate::types::{Status, Uuid};
use lockstep_group::config::{Allowlist, ThreadStart, Tuning};
use lockstep_group::{Genesis, GroupConfig, GroupNode, MemberInfo, NodeConfig};
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long leaving waits for the group to confirm a graceful leave.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

impl Provider {
    /// `donors`: `wsrep_sst_donor`, the members to ask for state, in order of preference.
    pub fn connect(self: &Arc<Self>, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Status {
        // Options in the cluster address count as if given at load (`wsrep_provider_options`).
        let from_address = crate::addresses::address_options(url);
        if !from_address.is_empty() {
            let applied = {
                let mut o = lock(&self.options);
                o.apply(&from_address).map(|()| super::settings(&o))
            };
            match applied {
                Ok(settings) => self.with_core(|core| core.configure(settings)),
                Err(e) => {
                    log::error!("cluster address '{url}': {e}");
                    return Status::NodeFail;
                }
            }
        }
        let (addresses, mut group_config, cache_dir, tls, sync_log, schedule) = {
            let o = lock(&self.options);
            let settings = AddressSettings {
                cluster_url: url,
                node_address: &self.node_address,
                listen_addr: o.get("gmcast.listen_addr"),
                base_host: o.get("base_host"),
                base_port: o.get("base_port"),
                ist_recv_addr: o.get("ist.recv_addr"),
                ist_recv_bind: o.get("ist.recv_bind"),
            };
            let addresses = match GroupAddresses::resolve(&settings) {
                Ok(a) => a,
                Err(e) => {
                    log::error!("{e}");
                    return Status::NodeFail;
                }
            };
            let cache_dir = cache_dir(&o);
            let tls = match crate::tls_options::load(&o) {
                Ok(tls) => tls,
                Err(e) => {
                    log::error!("{e}");
                    return Status::NodeFail;
                }
            };
            let schedule = o.schedule("gcomm.thread_prio");
            (addresses, group_config(cluster_name, &o), cache_dir, tls, o.flag("gcache.sync"), schedule)
        };
        let bootstrap = bootstrap || addresses.peers.is_empty();
        let position = {
            let core = self.lock_core();
            if let Err(status) = core.may_connect(bootstrap) {
                return status;
            }
            core.position()
        };
        let app = self.app.clone();
        group_config.allowlist = Allowlist::new(move |ip| app.peer_allowed(ip));
        if let Some(schedule) = schedule {
            let app = self.app.clone();
            match group_thread_start(schedule, move |s| app.set_thread_schedule(s)) {
                Ok(start) => group_config.thread_start = start,
                Err(e) => {
                    log::error!("{e}");
                    return Status::NodeFail;
                }
            }
        }
        // A joiner receives its state transfer there; a port already taken is a clear error
        // now rather than a failed transfer later.
        let receiver = if bootstrap {
            None
        } else {
            match bind_receiver(&addresses.ist_bind, tls.clone(), &group_config.allowlist) {
                Ok(r) => Some(r),
                Err(e) => {
                    log::error!("cannot listen for state transfers on {} (ist.recv_addr): {e}", addresses.ist_bind);
                    return Status::NodeFail;
                }
            }
        };
        let me = match lockstep_group::load_or_create_member_id(&cache_dir) {
            Ok(id) => id,
            Err(e) => {
                log::error!("cannot read or create the member id in {}: {e}", cache_dir.display());
                return Status::NodeFail;
            }
        };
        // After the member id: reading it renames an earlier version's files.
        let optimistic_pa = self.lock_core().settings().optimistic_pa;
        let checkpoint = match Checkpoint::read(&cache_dir, optimistic_pa) {
            Ok(checkpoint) => checkpoint.map(Box::new),
            Err(e) => {
                // Only a restart past a purged log needs it; without it such a node asks a donor.
                log::warn!("ignoring the certification checkpoint in {}: {e}", cache_dir.display());
                None
            }
        };
        let incarnation = u64::from_le_bytes(Uuid::random().0[..8].try_into().expect("8 bytes"));
        let genesis = bootstrap.then(|| {
            let history = if position.uuid.is_nil() {
                log::info!("starting a new group history for cluster '{cluster_name}'");
                Uuid::random()
            } else {
                position.uuid
            };
            Genesis::new(history.0, position.seqno.max(0) as u64)
        });
        // Asked for any port (`ist.recv_addr=…:0`): donors are told the one it took.
        let bound_ist_port = receiver.as_ref().and_then(|r| r.local_addr().ok()).map(|a| a.port());
        let ist_addr = match (addresses.ist_advertised.strip_suffix(":0"), bound_ist_port) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            _ => addresses.ist_advertised.clone(),
        };
        let generation = self.with_core(|core| {
            core.open(Opening {
                me,
                member: member_uuid(me, incarnation),
                bootstrap_history: genesis.map(|g| Uuid(g.history)),
                ist_addr,
                donors: donors.to_string(),
                checkpoint,
            })
        });
        let (weight, segment) = {
            let options = lock(&self.options);
            (weight(&options), segment(&options))
        };
        let config = NodeConfig {
            group: group_config,
            info: MemberInfo {
                id: me,
                name: self.node_name.clone(),
                address: addresses.advertised.clone(),
                incoming_address: self.node_incoming.clone(),
                incarnation,
                arbitrator: false,
                weight,
                segment,
            },
            listen: addresses.listen.clone(),
            data_dir: cache_dir.clone(),
            fsync: sync_log,
            bootstrap: genesis,
            peers: addresses.peers.clone(),
            resume_after: 0,
            application_position: position.seqno.max(0) as u64,
        };
        let sink = CoreSink {
            provider: Arc::downgrade(self),
            generation,
            started: Instant::now(),
            failure_reported: false,
            history_forked_reported: false,
        };
        let node = match GroupNode::start_with_sink_and_tls(config, Box::new(sink), tls) {
            Ok(node) => node,
            Err(e) => {
                log::error!("cannot start group communication on {}: {e}", addresses.listen);
                self.with_core(|core| core.close("group communication did not start"));
                return Status::NodeFail;
            }
        };
        // The port it took, where `gmcast.listen_addr` asked for any (port 0).
        let listening = node.local_addr();
        let (checkpoints, to_write) = std::sync::mpsc::sync_channel::<Box<Checkpoint>>(1);
        node.set_isolated(lock(&self.options).integer("gmcast.isolate") != 0);
        let (_memory_thread, link_dropped) = std::sync::mpsc::channel::<()>();
        *lock(&self.link) = Some(Arc::new(Link { generation, node, checkpoints, _memory_thread }));
        // Ends when the connection's link (the sender) is dropped.
        self.spawn_guarded("lockstep-checkpoint", generation, move || {
            for checkpoint in to_write {
                if let Err(e) = checkpoint.write(&cache_dir, sync_log) {
                    log::warn!("cannot keep the certification checkpoint in {}: {e}", cache_dir.display());
                }
            }
        });
        // Ends when the connection's link is dropped.
        self.spawn_guarded("lockstep-memory", generation, {
            let provider = Arc::downgrade(self);
            let ordered = self.lock_core().counters().received_large_bytes;
            move || {
                let mut release = MemoryRelease::starting_at(ordered);
                while let Err(RecvTimeoutError::Timeout) = link_dropped.recv_timeout(memory::LOOK_EVERY) {
                    let Some(provider) = provider.upgrade() else { break };
                    let (bytes, queued) =
                        provider.with_core(|core| (core.counters().received_large_bytes, core.queued_events()));
                    if release.due(bytes, queued) {
                        provider.app.release_free_memory();
                    }
                }
            }
        });
        log::info!(
            "connecting to cluster '{cluster_name}' as member {} ({me}, {}): group traffic on {}, {}",
            member_uuid(me, incarnation),
            self.node_name,
            listening,
            if bootstrap {
                "bootstrapping a new primary component".to_string()
            } else {
                format!("peers {:?}", addresses.peers)
            }
        );
        if let Some(receiver) = receiver {
            self.spawn_guarded("lockstep-ist-recv", generation, {
                let provider = self.clone();
                move || provider.receive_transfers(generation, receiver)
            });
        }
        Status::Ok
    }

    /// Starts a thread of ours; a panic on it is caught, logged, and stops the node rather
    /// than leaving a wait that nobody will end.
    pub(super) fn spawn_guarded(self: &Arc<Self>, name: &str, generation: u64, body: impl FnOnce() + Send + 'static) {
        let provider = Arc::downgrade(self);
        let thread_name = name.to_string();
        let spawned = std::thread::Builder::new().name(name.to_string()).spawn(move || {
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
                let what = panic_message(&panic);
                if let Some(provider) = provider.upgrade() {
                    provider.with_core(|core| {
                        if core.is_current(generation) {
                            core.fail(&format!("thread {thread_name} panicked: {what}"));
                        }
                    });
                } else {
                    log::error!("thread {thread_name} panicked: {what}");
                }
            }
        });
        if let Err(e) = spawned {
            self.with_core(|core| core.fail(&format!("cannot start thread {name}: {e}")));
        }
    }

    /// Leaves the group gracefully (so the others keep their quorum), then lets an applier
    /// deliver the final view, after which every `recv` returns. MariaDB waits for that view.
    pub fn disconnect(&self) -> Status {
        let Some(alone) = self.with_core(|core| core.begin_leave()) else { return Status::Ok };
        if let Some(link) = self.link() {
            leave_group(&link.node, alone);
        }
        self.with_core(|core| core.push_final_view());
        Status::Ok
    }

    /// This node stopped serving: it leaves the group, so the others go on without it.
    pub(super) fn leave_after_failure(&self) {
        if let Some(link) = self.link() {
            log::info!("leaving the cluster after a failure of this node");
            leave_group(&link.node, false);
        }
    }

    /// Ends the connection: saves where the history stands, then stops the group member (so
    /// a new connection may reuse the port and the cache).
    pub(super) fn close_connection(&self, why: &str) {
        self.with_core(|core| core.close(why));
        let link = lock(&self.link).take();
        drop(link);
    }

    /// Unload: a connection whose final view was never delivered (no applier thread ran)
    /// still leaves its position behind.
    pub fn shut_down(&self) {
        self.close_connection("unloaded while connected");
    }

    pub(super) fn callback_failed(&self, name: &str) -> Status {
        log::error!("the application's {name} callback failed; this node stops applying");
        Status::Fatal
    }

    /// The current connection's group member, if `generation` is still current.
    pub(super) fn node_of(&self, generation: u64) -> Option<Arc<Link>> {
        self.link().filter(|l| l.generation == generation)
    }
}

fn leave_group(node: &GroupNode, alone: bool) {
    node.leave();
    let deadline = Instant::now() + LEAVE_TIMEOUT;
    while !alone && !node.status().left && node.status().failed.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(super) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The previous connection's receiver may still be closing (it polls): wait for it briefly.
fn bind_receiver(
    address: &str,
    tls: Option<Arc<lockstep_group::transport::Tls>>,
    allowlist: &Allowlist,
) -> std::io::Result<crate::ist::Receiver> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match crate::ist::Receiver::bind(address, tls.clone(), allowlist.clone()) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

/// The largest writeset this node replicates: `repl.max_ws_size`, capped by what the group
/// carries in one entry (a bigger one is refused before it is ordered, with a clear error).
pub(super) fn max_writeset_bytes(options: &Options) -> u64 {
    options.size("repl.max_ws_size").min(u64::from(lockstep_group::config::WRITESET_LIMIT_BYTES))
}

/// How often (in writeset bytes) the certification checkpoint is kept: often enough that the
/// cache, which drops its oldest eighth at a time, still holds the order after it.
pub(super) fn checkpoint_bytes(options: &Options) -> u64 {
    (options.size("gcache.size") / 16).max(64 << 10)
}

/// `pc.weight`, checked to be 0-255 when set.
pub(crate) fn weight(options: &Options) -> u8 {
    options.integer("pc.weight").clamp(0, 255) as u8
}

/// `gmcast.segment`, read when the node connects.
pub(crate) fn segment(options: &Options) -> u8 {
    options.integer("gmcast.segment").clamp(0, 255) as u8
}

/// `gcomm.thread_prio`: the group's threads start with `schedule`, given by `set` on the
/// calling thread. Tried first on a thread of its own, so that a schedule the process may not
/// take (a real-time policy without CAP_SYS_NICE or RLIMIT_RTPRIO) fails the connection with
/// one clear error, as Galera's does, instead of each thread logging it.
pub(crate) fn group_thread_start(
    schedule: ThreadSchedule,
    set: impl Fn(ThreadSchedule) -> Result<(), String> + Clone + Send + Sync + 'static,
) -> Result<ThreadStart, String> {
    let trial_set = set.clone();
    let refused = |e: String| {
        let needs = match schedule.policy {
            SchedulePolicy::Other => "",
            _ => " (a real-time policy needs CAP_SYS_NICE, or an RLIMIT_RTPRIO that allows it: LimitRTPRIO in systemd)",
        };
        format!("gcomm.thread_prio = {schedule}: the group's threads cannot be given it: {e}{needs}")
    };
    let trial = std::thread::Builder::new()
        .name("lockstep-prio-check".into())
        .spawn(move || trial_set(schedule))
        .map_err(|e| refused(format!("cannot start a thread to try it: {e}")))?;
    trial.join().map_err(|_| refused("trying it panicked".to_string()))?.map_err(refused)?;
    // Readers and writers start with every peer connection: said once per connection.
    let refusal_logged = std::sync::atomic::AtomicBool::new(false);
    Ok(ThreadStart::new(move || {
        if let Err(e) = set(schedule) {
            if !refusal_logged.swap(true, std::sync::atomic::Ordering::Relaxed) {
                let thread = std::thread::current();
                log::warn!(
                    "gcomm.thread_prio = {schedule}: thread {} keeps its scheduling, and so may others: {e}",
                    thread.name().unwrap_or("?")
                );
            }
        }
    }))
}

/// Group timeouts and sizes from the Galera options of the same meaning.
pub(crate) fn group_config(cluster_name: &str, options: &Options) -> GroupConfig {
    let mut config = GroupConfig::new(cluster_name);
    config.tune(tuning(options));
    config.gcache_bytes = options.size("gcache.size").max(1 << 20);
    config.ignore_split_brain = ignores_split_brain(options);
    config.newer_primary_overrides = options.flag("pc.npvo");
    config.compress = options.flag("socket.compression");
    config
}

/// What the group takes from the options when the node connects, and again when they change
/// at runtime.
pub(super) fn tuning(options: &Options) -> Tuning {
    // At most `options::MAX_PERIOD`, some 9.2e12 ms: no sum of times the member makes with it
    // overflows.
    Tuning {
        suspect_timeout_ms: options.period("evs.suspect_timeout").as_millis() as u64,
        max_writeset_bytes: max_writeset_bytes(options) as u32,
        recv_queue_bytes_limit: apply_queue_bytes(options) as usize,
    }
}

/// `gcs.recv_q_hard_limit`, at most `APPLY_QUEUE_BYTES`: the bytes waiting in memory to be
/// applied, in the group's queue and again in the core's (docs/design/flow-control.md).
pub(super) fn apply_queue_bytes(options: &Options) -> u64 {
    // 0 would take nothing at all: one byte takes one delivery at a time.
    options.size("gcs.recv_q_hard_limit").clamp(1, crate::core::APPLY_QUEUE_BYTES)
}

/// `pc.ignore_sb` or `pc.ignore_quorum`: a member that lost the primary component makes one of
/// the members it still hears from (docs/design/group-forced-primary.md).
pub(super) fn ignores_split_brain(options: &Options) -> bool {
    options.flag("pc.ignore_sb") || options.flag("pc.ignore_quorum")
}

/// Where the group's cache lives (`gcache.dir`, else `base_dir`), and our other files with it.
pub(super) fn cache_dir(o: &Options) -> PathBuf {
    let dir = o.get("gcache.dir");
    PathBuf::from(if dir.is_empty() { o.get("base_dir") } else { dir })
}
