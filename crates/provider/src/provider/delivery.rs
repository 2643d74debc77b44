//! The one thread that reads the group's total order. Certification happens here, in
//! order, on every member alike (Galera's local monitor); what needs the application
//! becomes an [`Event`] for the applier threads in `recv`.
use super::catch_up::CatchUp;
use super::connection::member_uuid;
use super::{Event, MemberState, Provider, Shared, Transfer};
use crate::application::{Member, View, ViewStatus};
use crate::certification::{Candidate, CertificationIndex, Verdict};
use crate::state_transfer::choose_donor;
use crate::types::{flags, Gtid, Seqno, Uuid};
use crate::writeset::{Control, Writeset};
use lockstep_group::{Delivered, DeliveredKind, GroupNode, MemberId};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Poll interval for membership changes when nothing is delivered.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// A member reports its commit cut when it moved this far, or after `CUT_INTERVAL`.
const CUT_STEP: Seqno = 256;
const CUT_INTERVAL: Duration = Duration::from_secs(1);
/// Deliveries buffered for appliers before this thread stops taking more from the group
/// (the group then holds them, and its queue length is what flow control sees).
const MAX_BUFFERED_EVENTS: usize = 16384;

impl Provider {
    pub(super) fn deliver_from_group(self: Arc<Self>, generation: u64, node: Arc<GroupNode>) {
        let mut last_cut: (Seqno, Instant) = (Seqno::MIN, Instant::now());
        let mut history = None;
        loop {
            {
                let shared = self.lock();
                // A joiner reads on until the view that makes it ready, however far behind.
                let (shared, _) = self.wait_until(shared, None, |s| {
                    s.events.len() < MAX_BUFFERED_EVENTS
                        || !s.is_current(generation)
                        || s.connection.as_ref().is_some_and(|c| !c.app_ready)
                });
                if !shared.is_current(generation) {
                    return;
                }
            }
            let delivered = node.recv_delivered(IDLE_POLL);
            if delivered.is_some() && history.is_none() {
                history = Some(group_history(&node));
            }
            let primary = node.status().primary;
            let mut shared = self.lock();
            if !shared.is_current(generation) {
                return;
            }
            if let Some(d) = delivered {
                shared.on_delivered(&self, d, history.unwrap_or_default());
            }
            // At our own state request: what follows is certified with the donor's state.
            let (mut shared, _) = self.wait_until(shared, None, |s| {
                !s.is_current(generation)
                    || !s.connection.as_ref().is_some_and(|c| matches!(c.catch_up, CatchUp::AtRequest(_)))
            });
            if !shared.is_current(generation) {
                return;
            }
            shared.track_primary(&self, primary);
            if let Some(cut) = shared.commit_cut_due(&mut last_cut) {
                drop(shared);
                // Fire and forget: a lost cut only delays purging.
                drop(node.send_message(Control::CommitCut { seqno: cut }.encode()));
                continue;
            }
            drop(shared);
            self.notify();
        }
    }
}

/// The group's history id; the member publishes it right after the delivery that made it
/// known, so a first delivery may briefly precede it.
fn group_history(node: &GroupNode) -> Uuid {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let history = node.status().history;
        if history != [0; 16] || Instant::now() >= deadline {
            return Uuid(history);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Shared {
    pub(super) fn is_current(&self, generation: u64) -> bool {
        self.connection.as_ref().is_some_and(|c| c.generation == generation)
    }

    fn me(&self) -> MemberId {
        self.connection.as_ref().map_or(MemberId(0), |c| c.me)
    }

    fn on_delivered(&mut self, provider: &Provider, d: Delivered, history: Uuid) {
        self.learn_history(&d, history);
        match d.kind {
            DeliveredKind::Writeset { .. } => match Writeset::decode(&d.bytes) {
                Ok(ws) => self.on_writeset(d.seqno as Seqno, ws),
                Err(e) => {
                    // Ordered everywhere alike, so skipped everywhere alike.
                    log::error!("skipping undecodable writeset at seqno {}: {}", d.seqno, e.0);
                    self.finish_unused(d.seqno as Seqno);
                }
            },
            DeliveredKind::View(view) => self.on_view(provider, d.seqno as Seqno, view),
            DeliveredKind::Message { origin, .. } => match Control::decode(&d.bytes) {
                Ok(control) => self.on_control(d.seqno as Seqno, origin, control),
                Err(e) => log::error!("skipping undecodable control message from {origin}: {}", e.0),
            },
            DeliveredKind::StateGap => {
                log::info!("the group no longer holds seqnos up to {}", d.seqno);
                self.ordering.delivered = self.ordering.delivered.max(d.seqno as Seqno);
            }
        }
    }

    /// The first delivery tells which history the group is in and whether what we hold
    /// continues it; if not, we need a state transfer.
    fn learn_history(&mut self, d: &Delivered, history: Uuid) {
        let position = self.position;
        let Some(c) = self.connection.as_mut() else { return };
        if c.history_known {
            return;
        }
        c.history_known = true;
        c.group = history;
        let first = d.seqno as Seqno - if matches!(d.kind, DeliveredKind::StateGap) { 0 } else { 1 };
        c.has_state = position.uuid == history && position.seqno >= first;
        let start = if c.has_state { position.seqno } else { first };
        log::info!(
            "group history {history}, first delivery at seqno {}; local position {position}: {}",
            d.seqno,
            if c.has_state { "continuing from it" } else { "state transfer needed" }
        );
        let mut index = CertificationIndex::new(first);
        index.set_optimistic_pa(self.options.flag("cert.optimistic_pa"));
        self.certification = index;
        // A joiner knows the group's verdicts and donors only from its donor.
        if c.bootstrapped {
            self.ordering.verdicts.known_from(first + 1, []);
        }
        self.ordering.synced_unknown = !c.bootstrapped;
        self.ordering.delivered = first;
        self.ordering.barrier = first;
        self.restart_windows(start);
    }

    pub(super) fn has_state(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| c.has_state)
    }

    /// A seqno that needs no applier (already in our state, or a view we were not in).
    fn finish_unused(&mut self, seqno: Seqno) {
        self.ordering.delivered = seqno;
        if self.has_state() {
            self.commit_order.finish(seqno);
            self.committed.finish(seqno);
        }
    }

    fn on_writeset(&mut self, seqno: Seqno, ws: Writeset) {
        let candidate = Candidate {
            seqno,
            last_seen: ws.last_seen,
            source: ws.source.node,
            keys: &ws.keys,
            isolation: ws.flags & flags::ISOLATION != 0,
            pa_unsafe: ws.flags & flags::PA_UNSAFE != 0,
            implicit_deps: ws.flags & flags::IMPLICIT_DEPS != 0,
        };
        let verdict = match self.certification.certify(&candidate) {
            Verdict::Pass { depends_on } => Verdict::Pass { depends_on: depends_on.max(self.ordering.barrier) },
            Verdict::Fail => Verdict::Fail,
        };
        self.ordering.delivered = seqno;
        self.ordering.verdicts.record(seqno, verdict == Verdict::Fail);
        if candidate.isolation || candidate.pa_unsafe {
            self.ordering.barrier = seqno;
        }
        let bytes = ws.byte_len() as i64;
        let c = &mut self.counters;
        c.received += 1;
        c.received_bytes += bytes;
        if let Verdict::Pass { depends_on } = verdict {
            c.certified += 1;
            c.deps_distance_sum += seqno - depends_on;
            c.interval_sum += seqno - ws.last_seen - 1;
        }
        let mine = ws.source.node == self.member() && self.ordering.awaiting.remove(&ws.local_id).is_some();
        if mine {
            self.ordering.arrived.insert(ws.local_id, (seqno, verdict));
            return;
        }
        if self.has_state() && seqno <= self.committed.last_contiguous() {
            return;
        }
        let (depends_on, failed) = match verdict {
            Verdict::Pass { depends_on } => (depends_on, false),
            Verdict::Fail => (seqno - 1, true),
        };
        if failed && self.options.flag("cert.log_conflicts") {
            log::info!(
                "writeset of trx {} from {} failed certification at seqno {seqno}",
                ws.source.trx_id,
                ws.source.node
            );
        }
        self.events.push_back(Event::Apply { seqno, writeset: Box::new(ws), depends_on, failed });
    }

    fn on_view(&mut self, provider: &Provider, seqno: Seqno, view: lockstep_group::View) {
        let me = self.me();
        self.ordering.barrier = seqno;
        self.ordering.cuts.retain(|id, _| view.contains(*id));
        self.ordering.synced.retain(|id| view.contains(*id));
        if self.ordering.synced_unknown && view.contains(me) {
            // Announcements before our first delivery are lost to us: take the others as
            // synced until a donor's state says otherwise.
            self.ordering.synced = view.members.iter().map(|m| m.id).filter(|id| *id != me).collect();
            self.ordering.synced_unknown = false;
        }
        let Some(c) = self.connection.as_mut() else { return };
        c.view = view.clone();
        if !view.contains(me) {
            if c.closing {
                // The view that removes us after we left: the server never sees it, so
                // our saved position must not include it.
                return;
            }
            self.finish_unused(seqno);
            return;
        }
        if self.has_state() && seqno <= self.committed.last_contiguous() {
            self.ordering.delivered = seqno;
            return;
        }
        self.ordering.delivered = seqno;
        let c = self.connection.as_mut().expect("checked above");
        c.primary = true;
        let first_in_connection = c.joined_at.is_none();
        c.joined_at = c.joined_at.or(Some(seqno));
        // A joining server must see this view before anything is applied: it starts its
        // storage engines only after the state-transfer handshake the view triggers.
        let handshake = first_in_connection && !c.bootstrapped;
        let group = c.group;
        let wsrep_view = provider.primary_view(group, seqno, &view, me);
        log::info!(
            "view {} at seqno {seqno}: {} member(s) [{}]",
            view.view_id,
            view.members.len(),
            view.members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        let event = Event::View { view: wsrep_view, first_in_connection };
        if handshake {
            self.events.push_front(event);
        } else {
            self.events.push_back(event);
        }
    }

    fn on_control(&mut self, after: Seqno, origin: MemberId, control: Control) {
        let me = self.me();
        // A restarted member reads its old history again: bookkeeping yes, actions no.
        let live = !(self.has_state() && after < self.committed.last_contiguous());
        match control {
            Control::Barrier => {}
            Control::CommitCut { seqno } => {
                self.ordering.cuts.insert(origin, seqno);
                let view = self.connection.as_ref().map(|c| c.view.members.clone()).unwrap_or_default();
                let horizon = view.iter().map(|m| self.ordering.cuts.get(&m.id).copied()).min().flatten();
                if let Some(horizon) = horizon {
                    self.certification.purge_upto(horizon);
                }
                self.ordering.verdicts.forget_before(self.ordering.delivered);
            }
            Control::Synced => {
                self.ordering.synced.insert(origin);
                if origin == me && live {
                    self.events.push_back(Event::Synced { after });
                }
            }
            Control::StateRequest { sst_request, position, donors, has_state, ist_addr, id } => {
                let Some(c) = self.connection.as_ref() else { return };
                let ours = origin == me && id == c.request_id;
                let donor = choose_donor(&c.view.members, &self.ordering.synced, origin, &donors);
                let joiner_name = c.view.members.iter().find(|m| m.id == origin).map_or("?", |m| m.name.as_str());
                let Some(donor) = donor else {
                    if live {
                        log::warn!("member {joiner_name} requested state transfer but no member can donate now");
                        if ours {
                            if let Some(c) = self.connection.as_mut() {
                                c.transfer = Transfer::NoDonor;
                            }
                        }
                    }
                    return;
                };
                self.ordering.synced.remove(&donor);
                self.ordering.synced.remove(&origin);
                if !live {
                    return;
                }
                let donor_name = c.view.members.iter().find(|m| m.id == donor).map_or("?", |m| m.name.as_str());
                log::info!(
                    "member {joiner_name} (position {position}) requested state transfer from '{}'; \
                     selected {donor_name} as donor",
                    if donors.is_empty() { "*any*" } else { donors.as_str() }
                );
                if ours {
                    if let Some(c) = self.connection.as_mut().filter(|c| c.catch_up == CatchUp::Waiting) {
                        c.catch_up = CatchUp::AtRequest(after);
                    }
                }
                if donor == me {
                    let donation = self.donation(sst_request, after, position, has_state, ist_addr);
                    self.events.push_back(Event::Donate(Box::new(donation)));
                }
            }
        }
    }

    /// Non-primary is reported to the application at once; the way back is a new view.
    fn track_primary(&mut self, provider: &Provider, primary: bool) {
        let Some(c) = self.connection.as_mut() else { return };
        // Only a loss counts: a member that just joined may not see the primary component
        // confirmed yet, and the group delivers a new view only after a real loss.
        let lost = c.group_primary && !primary;
        c.group_primary = primary;
        if !lost || !c.primary || c.closing {
            return;
        }
        c.primary = false;
        let group = c.group;
        let me = c.me;
        let name = c.view.members.iter().find(|m| m.id == me).map_or(String::new(), |m| m.name.clone());
        self.member_state = MemberState::Initialized;
        // A note, as Galera logs its non-primary view: partitions are an operating condition.
        log::info!("lost the primary component: this node refuses writes until it rejoins one");
        let view = View {
            state_id: Gtid::new(group, self.committed.last_contiguous()),
            conf_id: -1,
            status: ViewStatus::NonPrimary,
            capabilities: super::CAPABILITIES,
            my_index: 0,
            members: vec![Member { id: member_uuid(me), name, incoming: provider.node_incoming.clone() }],
            proto_ver: super::APPLICATION_PROTOCOL,
        };
        self.events.push_back(Event::NonPrimary { view });
    }

    /// Our commit cut: nothing we will still replicate saw less than this.
    fn commit_cut_due(&mut self, last: &mut (Seqno, Instant)) -> Option<Seqno> {
        if !self.has_state() {
            return None;
        }
        let committed = self.committed.last_contiguous();
        let cut = self.ordering.awaiting.values().copied().min().map_or(committed, |s| s.min(committed));
        let due = cut >= last.0 + CUT_STEP || (cut > last.0 && last.1.elapsed() >= CUT_INTERVAL);
        if !due {
            return None;
        }
        *last = (cut, Instant::now());
        Some(cut)
    }
}
