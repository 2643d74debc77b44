//! Joining and leaving the group: starting the group member, the thread that reads its
//! deliveries, and the final view.
use super::catch_up::CatchUp;
use super::{Connection, Event, MemberState, Provider, Transfer, APPLICATION_PROTOCOL, CAPABILITIES};
use crate::addresses::{AddressSettings, GroupAddresses};
use crate::application::{Member, View, ViewStatus};
use crate::types::{Gtid, Status, Uuid, SEQNO_UNDEFINED};
use lockstep_group::{Genesis, GroupConfig, GroupNode, MemberId, MemberInfo, NodeConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `disconnect` waits for the group to confirm a graceful leave.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Member UUIDs in views are derived from the group's stable member ids.
pub(super) fn member_uuid(id: MemberId) -> Uuid {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&id.0.to_be_bytes());
    bytes[8..].copy_from_slice(b"lockstep");
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid(bytes)
}

impl Provider {
    /// `donors`: `wsrep_sst_donor`, the members to ask for state, in order of preference.
    pub fn connect(self: &Arc<Self>, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Status {
        let shared = self.lock();
        if shared.connection.as_ref().is_some() {
            log::error!("connect called while already connected");
            return Status::NodeFail;
        }
        let o = &shared.options;
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
        let bootstrap = bootstrap || addresses.peers.is_empty();
        if bootstrap && !shared.safe_to_bootstrap {
            log::error!(
                "It may not be safe to bootstrap the cluster from this node. It was not the last one to leave the \
                 cluster and may not contain all the updates. To force cluster bootstrap with this node, edit the \
                 grastate.dat file manually and set safe_to_bootstrap to 1 ."
            );
            return Status::NodeFail;
        }
        // A joiner receives its state transfer there; a port already taken is a clear error
        // now rather than a failed transfer later.
        drop(shared);
        let receiver = if bootstrap {
            None
        } else {
            match bind_receiver(&addresses.ist_bind) {
                Ok(r) => Some(r),
                Err(e) => {
                    log::error!("cannot listen for state transfers on {} (ist.recv_addr): {e}", addresses.ist_bind);
                    return Status::NodeFail;
                }
            }
        };
        let mut shared = self.lock();
        if shared.connection.as_ref().is_some() {
            log::error!("connect called while already connected");
            return Status::NodeFail;
        }
        let o = &shared.options;
        let cache_dir = {
            let dir = o.get("gcache.dir");
            PathBuf::from(if dir.is_empty() { o.get("base_dir") } else { dir })
        };
        let me = match lockstep_group::load_or_create_member_id(&cache_dir) {
            Ok(id) => id,
            Err(e) => {
                log::error!("cannot read or create the member id in {}: {e}", cache_dir.display());
                return Status::NodeFail;
            }
        };
        let genesis = bootstrap.then(|| {
            let history = if shared.position.uuid.is_nil() {
                log::info!("starting a new group history for cluster '{cluster_name}'");
                Uuid::random()
            } else {
                shared.position.uuid
            };
            Genesis { history: history.0, base_seqno: shared.position.seqno.max(0) as u64 }
        });
        let config = NodeConfig {
            group: group_config(cluster_name, &shared.options),
            info: MemberInfo {
                id: me,
                name: self.node_name.clone(),
                address: addresses.advertised.clone(),
                incoming_address: self.node_incoming.clone(),
            },
            listen: addresses.listen.clone(),
            data_dir: cache_dir,
            fsync: shared.options.flag("gcache.sync"),
            bootstrap: genesis,
            peers: addresses.peers.clone(),
            resume_after: 0,
        };
        let node = match GroupNode::start(config) {
            Ok(node) => Arc::new(node),
            Err(e) => {
                log::error!("cannot start group communication on {}: {e}", addresses.listen);
                return Status::NodeFail;
            }
        };
        if let Some(g) = genesis {
            // The new cluster's history starts from what this node holds.
            shared.position = Gtid::new(Uuid(g.history), g.base_seqno as i64);
        }
        shared.generation += 1;
        let generation = shared.generation;
        shared.connection = Some(Connection {
            generation,
            group: genesis.map_or(shared.position.uuid, |g| Uuid(g.history)),
            member: member_uuid(me),
            me,
            node: node.clone(),
            view: lockstep_group::View::default(),
            has_state: false,
            history_known: false,
            bootstrapped: bootstrap,
            app_ready: bootstrap,
            apply_failed: None,
            primary: false,
            group_primary: false,
            joined_at: None,
            transfer: Transfer::None,
            request_id: 0,
            catch_up: if bootstrap { CatchUp::Done } else { CatchUp::Waiting },
            ist_addr: addresses.ist_advertised.clone(),
            donors: donors.to_string(),
            closing: false,
            delivery: None,
        });
        shared.member_state = MemberState::Initialized;
        shared.events.clear();
        if bootstrap {
            shared.safe_to_bootstrap = true;
        }
        shared.save_state(Gtid::new(shared.position.uuid, SEQNO_UNDEFINED));
        log::info!(
            "connecting to cluster '{cluster_name}' as member {} ({me}, {}): group traffic on {}, {}",
            member_uuid(me),
            self.node_name,
            addresses.listen,
            if bootstrap {
                "bootstrapping a new primary component".to_string()
            } else {
                format!("peers {:?}", addresses.peers)
            }
        );
        drop(shared);
        let provider = self.clone();
        let spawned = std::thread::Builder::new()
            .name("lockstep-delivery".into())
            .spawn(move || provider.deliver_from_group(generation, node));
        let mut shared = self.lock();
        match spawned {
            Ok(handle) => shared.connection.as_mut().expect("set above").delivery = Some(handle),
            Err(e) => {
                log::error!("cannot start the delivery thread: {e}");
                shared.connection = None;
                return Status::NodeFail;
            }
        }
        drop(shared);
        if let Some(receiver) = receiver {
            let provider = self.clone();
            let spawned = std::thread::Builder::new()
                .name("lockstep-ist-recv".into())
                .spawn(move || provider.receive_transfers(generation, receiver));
            if let Err(e) = spawned {
                log::error!("cannot start the state transfer receiver: {e}");
                self.fail_transfer(generation, "no state transfer receiver");
            }
        }
        self.notify();
        Status::Ok
    }

    /// Leaves the group gracefully (so the others keep their quorum), then lets an applier
    /// deliver the final view, after which every `recv` returns. MariaDB waits for that view.
    pub fn disconnect(&self) -> Status {
        let mut shared = self.lock();
        let Some((node, alone)) = shared.connection.as_mut().filter(|c| !c.closing).map(|c| {
            c.closing = true;
            (c.node.clone(), c.view.members.len() <= 1)
        }) else {
            return Status::Ok;
        };
        log::info!("closing connection: last committed {}", shared.last_committed());
        drop(shared);
        self.notify();
        node.leave();
        let deadline = Instant::now() + LEAVE_TIMEOUT;
        while !alone && !node.status().left && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut shared = self.lock();
        let view = View {
            state_id: shared.last_committed(),
            conf_id: -1,
            status: ViewStatus::NonPrimary,
            capabilities: CAPABILITIES,
            my_index: -1,
            members: Vec::new(),
            proto_ver: APPLICATION_PROTOCOL,
        };
        shared.events.push_back(Event::Final { view });
        drop(shared);
        self.notify();
        Status::Ok
    }

    pub(super) fn deliver_final_view(&self, ctx: crate::application::RecvCtx, view: &View) -> Result<(), Status> {
        if let Err(e) = self.app.view(ctx, view) {
            log::warn!("{} callback failed for the final view", e.0);
        }
        self.close_connection("closed");
        Ok(())
    }

    /// Ends the connection: saves where the history stands, then stops the delivery thread
    /// and the group member (so a new connection may reuse the port and the cache).
    fn close_connection(&self, why: &str) {
        let mut shared = self.lock();
        let Some(mut c) = shared.connection.take() else { return };
        let position =
            if c.has_state { Gtid::new(c.group, shared.committed.last_contiguous()) } else { shared.position };
        shared.position = position;
        shared.member_state = MemberState::Initialized;
        shared.desync_count = 0;
        shared.save_state(position);
        log::info!("{why}; saved state {position}, safe_to_bootstrap: {}", u8::from(shared.safe_to_bootstrap));
        drop(shared);
        self.notify();
        if let Some(delivery) = c.delivery.take() {
            if delivery.thread().id() != std::thread::current().id() {
                let _ = delivery.join();
            }
        }
    }

    /// Unload: a connection whose final view was never delivered (no applier thread ran)
    /// still leaves its position behind.
    pub fn shut_down(&self) {
        self.close_connection("unloaded while connected");
    }

    /// View of the group as MariaDB sees it.
    pub(super) fn primary_view(&self, group: Uuid, seqno: i64, view: &lockstep_group::View, me: MemberId) -> View {
        let members: Vec<Member> = view
            .members
            .iter()
            .map(|m| Member { id: member_uuid(m.id), name: m.name.clone(), incoming: m.incoming_address.clone() })
            .collect();
        View {
            state_id: Gtid::new(group, seqno),
            conf_id: view.view_id as i64,
            status: ViewStatus::Primary,
            capabilities: CAPABILITIES,
            my_index: view.members.iter().position(|m| m.id == me).map_or(-1, |i| i as i32),
            members,
            proto_ver: APPLICATION_PROTOCOL,
        }
    }

    pub(super) fn callback_failed(&self, name: &str) -> Status {
        log::error!("the application's {name} callback failed; this node stops applying");
        Status::Fatal
    }
}

/// Group timeouts and sizes from the Galera options of the same meaning.
/// The previous connection's receiver may still be closing (it polls): wait for it briefly.
fn bind_receiver(address: &str) -> std::io::Result<crate::ist::Receiver> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match crate::ist::Receiver::bind(address) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

fn group_config(cluster_name: &str, options: &crate::options::Options) -> GroupConfig {
    let mut config = GroupConfig::new(cluster_name);
    let ms = |key: &str| options.period(key).as_millis() as u64;
    config.suspect_timeout_ms = ms("evs.suspect_timeout").max(config.election_timeout_max_ms);
    config.inactive_timeout_ms = ms("evs.inactive_timeout").max(config.suspect_timeout_ms);
    config.gcache_bytes = options.size("gcache.size").max(1 << 20);
    config.max_writeset_bytes = options.size("repl.max_ws_size").min(u64::from(u32::MAX >> 1)) as u32;
    config
}
