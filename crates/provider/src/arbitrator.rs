//! The arbitrator (`lockstep arbitrator`, Galera's garbd): a member of the group that votes
//! and holds no data. Two data nodes and an arbitrator keep a primary component when either
//! data node dies. It takes the order like any member (so it can vote on what is committed)
//! and throws each delivery away; it leads only to hand the lead over, and never donates,
//! votes on a failed commit or reports a commit cut (`MemberInfo::arbitrator`; see
//! docs/design/arbitrator.md).

use crate::addresses::{AddressSettings, GroupAddresses};
use crate::application::ThreadSchedule;
use crate::options::{NodeSite, Options};
use crate::types::Uuid;
use lockstep_group::{Delivered, DeliveredKind, DeliverySink, GroupNode, MemberInfo, NodeConfig, Outbox, Status};
use lockstep_group::{Seqno, SubmitError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a leaving arbitrator waits for the group to confirm it is out.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(100);

/// garbd's settings.
#[derive(Debug, Clone)]
pub struct ArbitratorSettings {
    /// `gcomm://host[:port],...`: members of the running cluster (an arbitrator never starts one).
    pub address: String,
    /// The cluster's name (`wsrep_cluster_name` of its nodes).
    pub group: String,
    /// Provider options, `key=value;...` (`gmcast.listen_addr`, `socket.ssl*`, `evs.*`, ...).
    pub options: String,
    /// How it appears in views (`wsrep_node_name`).
    pub name: String,
    /// Gives the calling thread a scheduling, for `gcomm.thread_prio` (the system call is
    /// the ABI crate's).
    pub set_thread_schedule: fn(ThreadSchedule) -> Result<(), String>,
}

pub struct Arbitrator {
    node: GroupNode,
    /// Where its copy of the order lives while it runs; removed when it stops, unless it is
    /// the `gcache.dir` the operator named.
    cache_dir: PathBuf,
    temporary: bool,
}

impl Arbitrator {
    /// Joins the cluster. Errors name the setting at fault.
    pub fn start(settings: &ArbitratorSettings) -> Result<Arbitrator, String> {
        if settings.group.is_empty() {
            return Err("an arbitrator needs the cluster's name (--group)".into());
        }
        let mut options = Options::new(&NodeSite { data_dir: "", node_address: "" });
        options.apply(&settings.options).map_err(|e| e.to_string())?;
        let from_address = crate::addresses::address_options(&settings.address);
        options.apply(&from_address).map_err(|e| format!("cluster address '{}': {e}", settings.address))?;
        let addresses = GroupAddresses::resolve(&AddressSettings {
            cluster_url: &settings.address,
            node_address: "",
            listen_addr: options.get("gmcast.listen_addr"),
            base_host: options.get("base_host"),
            base_port: options.get("base_port"),
            ist_recv_addr: "",
            ist_recv_bind: "",
        })
        .map_err(|e| e.to_string())?;
        if addresses.peers.is_empty() {
            return Err(format!(
                "an arbitrator joins a running cluster and never starts one: name its members in --address \
                 (gcomm://host:port,...), not '{}'",
                settings.address
            ));
        }
        let tls = crate::tls_options::load(&options)?;
        let mut group = crate::provider::group_config(&settings.group, &options);
        if let Some(schedule) = options.schedule("gcomm.thread_prio") {
            group.thread_start = crate::provider::group_thread_start(schedule, settings.set_thread_schedule)?;
        }
        let named = options.get("gcache.dir");
        let (cache_dir, temporary) = match named {
            "./" | "" => {
                let tag = u64::from_le_bytes(Uuid::random().0[..8].try_into().expect("8 bytes"));
                (std::env::temp_dir().join(format!("lockstep-arbitrator-{}-{tag:016x}", std::process::id())), true)
            }
            dir => (PathBuf::from(dir), false),
        };
        std::fs::create_dir_all(&cache_dir).map_err(|e| format!("cannot create {}: {e}", cache_dir.display()))?;
        let started = Self::join(settings, &options, &addresses, group, tls, &cache_dir);
        match started {
            Ok(node) => Ok(Arbitrator { node, cache_dir, temporary }),
            Err(e) => {
                if temporary {
                    let _ = std::fs::remove_dir_all(&cache_dir);
                }
                Err(e)
            }
        }
    }

    /// The member, started in `cache_dir`.
    fn join(
        settings: &ArbitratorSettings,
        options: &Options,
        addresses: &GroupAddresses,
        group: lockstep_group::GroupConfig,
        tls: Option<std::sync::Arc<lockstep_group::transport::Tls>>,
        cache_dir: &std::path::Path,
    ) -> Result<GroupNode, String> {
        // A new member every start unless the operator keeps its state (`gcache.dir`): one that
        // lost its log must not vote as the member it was.
        let id = lockstep_group::load_or_create_member_id(cache_dir)
            .map_err(|e| format!("cannot read or create the member id in {}: {e}", cache_dir.display()))?;
        let name = if settings.name.is_empty() { "garb".to_string() } else { settings.name.clone() };
        let config = NodeConfig {
            group,
            info: MemberInfo {
                id,
                name,
                address: addresses.advertised.clone(),
                incoming_address: String::new(),
                incarnation: u64::from_le_bytes(Uuid::random().0[..8].try_into().expect("8 bytes")),
                arbitrator: true,
                weight: crate::provider::weight(options),
                segment: crate::provider::segment(options),
            },
            listen: addresses.listen.clone(),
            data_dir: cache_dir.to_path_buf(),
            fsync: options.flag("gcache.sync"),
            bootstrap: None,
            peers: addresses.peers.clone(),
            resume_after: 0,
            application_position: 0,
        };
        let node = GroupNode::start_with_sink_and_tls(config, Box::new(Discard { last_view: 0 }), tls)
            .map_err(|e| format!("cannot start group communication on {}: {e}", addresses.listen))?;
        log::info!(
            "arbitrator {id} joining cluster '{}' through {:?}, group traffic on {}",
            settings.group,
            addresses.peers,
            node.local_addr()
        );
        Ok(node)
    }

    /// Runs until `stop` is set (then leaves the group cleanly) or the member fails.
    pub fn run(self, stop: &AtomicBool) -> Result<(), String> {
        let failed = loop {
            if stop.load(Ordering::SeqCst) {
                break None;
            }
            if let Some(why) = self.node.status().failed {
                break Some(why);
            }
            thread::sleep(POLL);
        };
        if failed.is_none() {
            log::info!("leaving the cluster");
            self.node.leave();
            let deadline = Instant::now() + LEAVE_TIMEOUT;
            while !self.node.status().left && Instant::now() < deadline {
                thread::sleep(POLL);
            }
        }
        let Arbitrator { node, cache_dir, temporary } = self;
        drop(node);
        if temporary {
            if let Err(e) = std::fs::remove_dir_all(&cache_dir) {
                log::warn!("cannot remove {}: {e}", cache_dir.display());
            }
        }
        failed.map_or(Ok(()), |why| Err(format!("group communication failed: {why}")))
    }
}

/// Takes every delivery and keeps none; logs each view as garbd does (the current ones: not
/// those of the history it receives when it joins).
struct Discard {
    last_view: u64,
}

impl DeliverySink for Discard {
    fn deliver(&mut self, delivered: Delivered, _: bool, status: &Status, _: &mut Outbox) -> bool {
        if let DeliveredKind::View(view) = &delivered.kind {
            if view.view_id != self.last_view && view.view_id >= status.view.view_id {
                self.last_view = view.view_id;
                let names: Vec<&str> = view.members.iter().map(|m| m.name.as_str()).collect();
                log::info!(
                    "view {} at seqno {}: {} member(s): {}{}",
                    view.view_id,
                    delivered.seqno,
                    names.len(),
                    names.join(", "),
                    if status.primary { "" } else { " (non-primary)" }
                );
            }
        }
        true
    }

    fn submit_failed(&mut self, _: u64, _: SubmitError, _: &mut Outbox) {}

    fn barrier_reached(&mut self, _: u64, _: Seqno, _: &mut Outbox) {}

    fn round(&mut self, _: &Status, _: &mut Outbox) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The threads `scheduled` was called on.
    static SCHEDULED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn scheduled(schedule: ThreadSchedule) -> Result<(), String> {
        let name = thread::current().name().unwrap_or("?").to_string();
        SCHEDULED.lock().unwrap().push(format!("{schedule} on {name}"));
        Ok(())
    }

    fn refused(_: ThreadSchedule) -> Result<(), String> {
        Err("Operation not permitted".into())
    }

    /// An arbitrator pointed at a cluster nobody runs: it starts and keeps trying.
    fn settings(
        thread_prio: &str,
        set_thread_schedule: fn(ThreadSchedule) -> Result<(), String>,
    ) -> ArbitratorSettings {
        ArbitratorSettings {
            address: "gcomm://127.0.0.1:9".into(),
            group: "test".into(),
            options: format!("gmcast.listen_addr=tcp://127.0.0.1:0; gcomm.thread_prio={thread_prio}"),
            name: String::new(),
            set_thread_schedule,
        }
    }

    #[test]
    fn the_arbitrators_group_threads_start_with_gcomm_thread_prio_and_one_refused_fails_its_start() {
        let arbitrator = Arbitrator::start(&settings("rr:5", scheduled)).unwrap();
        // The group's threads run the hook as they start, soon after.
        let deadline = Instant::now() + Duration::from_secs(5);
        let all_on = || {
            let calls = SCHEDULED.lock().unwrap();
            let on = |name: &str| calls.iter().any(|c| c.starts_with("rr:5 on ") && c.ends_with(name));
            on("lockstep-prio-check") && on("-ticker") && on("-accept")
        };
        while !all_on() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(all_on(), "{:?}", SCHEDULED.lock().unwrap());
        arbitrator.run(&AtomicBool::new(true)).unwrap();

        // Refused before anything is left on disk: no cache directory of this process remains.
        let err = Arbitrator::start(&settings("fifo:1", refused)).err().expect("refused");
        assert!(err.contains("gcomm.thread_prio = fifo:1") && err.contains("CAP_SYS_NICE"), "{err}");
        let ours = format!("lockstep-arbitrator-{}-", std::process::id());
        let left = std::fs::read_dir(std::env::temp_dir()).unwrap().flatten();
        assert!(!left.into_iter().any(|e| e.file_name().to_string_lossy().starts_with(&ours)), "a directory left");
    }

    #[test]
    fn a_bad_option_in_the_arbitrators_cluster_address_fails_its_start() {
        let in_address =
            ArbitratorSettings { address: "gcomm://127.0.0.1:9?gmcast.segment=256".into(), ..settings("", scheduled) };
        let err = Arbitrator::start(&in_address).err().expect("refused");
        assert!(err.contains("cluster address") && err.contains("gmcast.segment"), "{err}");
    }
}
