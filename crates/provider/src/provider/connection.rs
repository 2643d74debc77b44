//! Joining and leaving the group, and the applier loop that delivers ordered events.
//!
//! This build orders everything on the local node: a bootstrapped one-member primary
//! component. Joining other members arrives with the group layer (crates/group).
use super::{Connection, Event, MemberState, Provider, APPLICATION_PROTOCOL, CAPABILITIES};
use crate::application::{Member, RecvCtx, View, ViewStatus};
use crate::types::{Gtid, Status, Uuid, SEQNO_UNDEFINED};

const URL_SCHEME: &str = "gcomm://";

impl Provider {
    pub fn connect(&self, cluster_name: &str, url: &str, bootstrap: bool) -> Status {
        let Some(peers) = url.strip_prefix(URL_SCHEME) else {
            log::error!("invalid cluster address '{url}': expected {URL_SCHEME}[host[:port],...]");
            return Status::NodeFail;
        };
        let peers: Vec<&str> =
            peers.split('?').next().unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        if !bootstrap {
            log::error!(
                "cannot join cluster '{cluster_name}' at {url}: this build of {} runs one-member clusters only \
                 (bootstrap with {URL_SCHEME} or --wsrep-new-cluster)",
                super::PROVIDER_NAME
            );
            return Status::NodeFail;
        }
        let mut shared = self.lock();
        if shared.connection.as_ref().is_some_and(|c| !c.closed) {
            log::error!("connect called while already connected");
            return Status::NodeFail;
        }
        if !shared.safe_to_bootstrap {
            log::error!(
                "It may not be safe to bootstrap the cluster from this node. It was not the last one to leave the \
                 cluster and may not contain all the updates. To force cluster bootstrap with this node, edit the \
                 grastate.dat file manually and set safe_to_bootstrap to 1 ."
            );
            return Status::NodeFail;
        }
        let group = if shared.position.uuid.is_nil() {
            log::info!("starting a new group history for cluster '{cluster_name}'");
            Uuid::random()
        } else {
            shared.position.uuid
        };
        let view_seqno = shared.position.seqno.max(0) + 1;
        shared.generation += 1;
        let member = Uuid::random();
        shared.connection = Some(Connection {
            generation: shared.generation,
            group,
            member,
            members: 1,
            closing: false,
            closed: false,
        });
        shared.last_ordered = view_seqno;
        shared.member_state = MemberState::Joined;
        shared.safe_to_bootstrap = true;
        let view = View {
            state_id: Gtid::new(group, view_seqno),
            conf_id: 1,
            status: ViewStatus::Primary,
            capabilities: CAPABILITIES,
            my_index: 0,
            members: vec![Member { id: member, name: self.node_name.clone(), incoming: self.node_incoming.clone() }],
            proto_ver: APPLICATION_PROTOCOL,
        };
        shared.events.push_back(Event::View { view, first_in_connection: true, then_synced: true });
        shared.save_state(Gtid::new(group, SEQNO_UNDEFINED));
        log::info!(
            "connected to cluster '{cluster_name}' as member {member} ({}), bootstrapping a primary component \
             with {} configured peer(s); group {group}, view seqno {view_seqno}",
            self.node_name,
            peers.len()
        );
        drop(shared);
        self.notify();
        Status::Ok
    }

    /// Leaves the group: an applier delivers the final view, then every `recv` returns.
    /// Returns without waiting for that (MariaDB waits for the final view itself).
    pub fn disconnect(&self) -> Status {
        let mut shared = self.lock();
        let members = match shared.connection.as_mut() {
            Some(c) if !c.closing => {
                c.closing = true;
                c.members
            }
            _ => return Status::Ok,
        };
        let view = View {
            state_id: shared.last_committed(),
            conf_id: -1,
            status: ViewStatus::NonPrimary,
            capabilities: CAPABILITIES,
            my_index: -1,
            members: Vec::new(),
            proto_ver: APPLICATION_PROTOCOL,
        };
        log::info!("closing connection: {members} member(s), last committed {}", shared.last_committed());
        shared.events.push_back(Event::Final { view });
        drop(shared);
        self.notify();
        Status::Ok
    }

    /// The applier loop of one MariaDB applier thread.
    pub fn recv(&self, ctx: RecvCtx) -> Status {
        let mut shared = self.lock();
        let Some(generation) = shared.connection.as_ref().filter(|c| !c.closed).map(|c| c.generation) else {
            log::error!("recv called while not connected");
            return Status::Fatal;
        };
        loop {
            let current = shared.connection.as_ref().filter(|c| c.generation == generation && !c.closed);
            if current.is_none() {
                return Status::Ok;
            }
            let Some(event) = shared.events.pop_front() else {
                shared = self.wait(shared);
                continue;
            };
            drop(shared);
            let outcome = match event {
                Event::View { view, first_in_connection, then_synced } => {
                    self.deliver_view(ctx, &view, first_in_connection, then_synced)
                }
                Event::Final { view } => self.deliver_final_view(ctx, &view),
            };
            if let Err(status) = outcome {
                return status;
            }
            shared = self.lock();
        }
    }

    fn deliver_view(&self, ctx: RecvCtx, view: &View, first: bool, then_synced: bool) -> Result<(), Status> {
        let seqno = view.state_id.seqno;
        // A configuration change is processed alone: everything before it committed first.
        let shared = self.lock();
        let (shared, _) = self.wait_until(shared, None, |s| s.committed.last_contiguous() >= seqno - 1);
        drop(shared);
        if first {
            self.app.connected(view).map_err(|e| self.callback_failed(e.0))?;
        }
        self.app.view(ctx, view).map_err(|e| self.callback_failed(e.0))?;
        let mut shared = self.lock();
        shared.commit_order.finish(seqno);
        shared.committed.finish(seqno);
        shared.counters.received += 1;
        if then_synced {
            shared.member_state = MemberState::Synced;
        }
        drop(shared);
        self.notify();
        if then_synced {
            self.app.synced().map_err(|e| self.callback_failed(e.0))?;
            log::info!("synced with group at {}", self.last_committed_id());
        }
        Ok(())
    }

    fn deliver_final_view(&self, ctx: RecvCtx, view: &View) -> Result<(), Status> {
        if let Err(e) = self.app.view(ctx, view) {
            log::warn!("{} callback failed for the final view", e.0);
        }
        let mut shared = self.lock();
        let position = shared.last_committed();
        if let Some(c) = shared.connection.as_mut() {
            c.closed = true;
        }
        shared.position = position;
        shared.member_state = MemberState::Initialized;
        shared.desync_count = 0;
        shared.save_state(position);
        log::info!("closed; saved state {position}, safe_to_bootstrap: {}", u8::from(shared.safe_to_bootstrap));
        drop(shared);
        self.notify();
        Ok(())
    }

    /// Unload: a connection whose final view was never delivered (no applier thread ran)
    /// still leaves its position behind.
    pub fn shut_down(&self) {
        let mut shared = self.lock();
        let open = shared.connection.as_ref().is_some_and(|c| !c.closed);
        if open {
            let position = shared.last_committed();
            if let Some(c) = shared.connection.as_mut() {
                c.closed = true;
            }
            shared.position = position;
            shared.save_state(position);
            log::info!("unloaded while connected; saved state {position}");
        }
        drop(shared);
        self.notify();
    }

    fn callback_failed(&self, name: &str) -> Status {
        log::error!("the application's {name} callback failed; this node stops applying");
        Status::Fatal
    }
}
