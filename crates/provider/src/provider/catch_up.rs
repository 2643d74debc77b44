//! Incremental state transfer between a donor and a joiner (the byte format and sockets
//! are in `crate::ist`). The joiner's delivery thread stops at its own state request until
//! the donor's stream is in: the events of the gap with the donor's verdicts replace what
//! the joiner certified itself, and the donor's certification state replaces the joiner's,
//! so every member certifies what follows alike. See docs/design/replication.md.
use super::{Event, Provider, Shared};
use crate::ist::{self, Header, Incoming, Item, Part, Preload};
use crate::types::{Gtid, Seqno, Status};
use crate::writeset::Writeset;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a joiner waits for the donor's connection once its request is ordered.
const DONOR_CONNECT_TIMEOUT: Duration = Duration::from_secs(300);
/// Failed verdicts kept for donating: this many seqnos back from the newest.
const VERDICT_HISTORY: Seqno = 1 << 22;

/// The joiner's side of the transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CatchUp {
    /// Listening; the request is not ordered yet (or found no donor).
    Waiting,
    /// Our request was ordered after this seqno: delivery stops there until the donor's
    /// stream is in.
    AtRequest(Seqno),
    /// Nothing more to receive (bootstrapped, received, or reconnected without transfer).
    Done,
    /// The donor's stream failed: this node cannot continue.
    Failed,
}

impl CatchUp {
    /// Applying may go on (nothing from the donor is still to replace it).
    pub(super) fn settled(self) -> bool {
        matches!(self, CatchUp::Done | CatchUp::Failed)
    }
}

/// Which seqnos this member saw fail certification, from `known_from` on.
#[derive(Debug)]
pub(super) struct Verdicts {
    known_from: Seqno,
    failed: BTreeSet<Seqno>,
}

impl Default for Verdicts {
    fn default() -> Self {
        Verdicts { known_from: Seqno::MAX, failed: BTreeSet::new() }
    }
}

impl Verdicts {
    /// Verdicts are known from `seqno` on (this member certifies from there with the group's state).
    pub(super) fn known_from(&mut self, seqno: Seqno, failed: impl IntoIterator<Item = Seqno>) {
        self.known_from = seqno;
        self.failed = failed.into_iter().filter(|s| *s >= seqno).collect();
    }

    pub(super) fn record(&mut self, seqno: Seqno, failed: bool) {
        if failed && seqno >= self.known_from {
            self.failed.insert(seqno);
        }
    }

    pub(super) fn forget_before(&mut self, newest: Seqno) {
        let floor = newest - VERDICT_HISTORY;
        if self.known_from != Seqno::MAX && self.known_from < floor {
            self.known_from = floor;
            self.failed = self.failed.split_off(&floor);
        }
    }

    /// The failed seqnos in `from..=to`, if every verdict there is known.
    fn failed_in(&self, from: Seqno, to: Seqno) -> Option<BTreeSet<Seqno>> {
        (from >= self.known_from).then(|| self.failed.range(from..=to).copied().collect())
    }
}

/// What a donor needs, captured when the request was delivered.
pub(super) struct Donation {
    pub request: Vec<u8>,
    pub after: Seqno,
    /// Where the joiner's data stands (undefined: not in this history).
    pub position: Gtid,
    pub joiner_has_state: bool,
    pub ist_addr: String,
    pub preload: Preload,
    /// Failed seqnos after `position` up to `after`, if all verdicts there are known.
    pub failed: Option<BTreeSet<Seqno>>,
}

impl Shared {
    /// The donor's half at delivery time: its ordering state at `after`.
    pub(super) fn donation(
        &self,
        request: Vec<u8>,
        after: Seqno,
        position: Gtid,
        joiner_has_state: bool,
        ist_addr: String,
    ) -> Donation {
        let in_history = position.uuid == self.group() && position.seqno >= 0;
        let failed = if in_history { self.ordering.verdicts.failed_in(position.seqno + 1, after) } else { None };
        let preload = Preload {
            index: self.certification.clone(),
            cuts: self.ordering.cuts.iter().map(|(id, cut)| (*id, *cut)).collect(),
            synced: self.ordering.synced.iter().copied().collect(),
        };
        Donation { request, after, position, joiner_has_state, ist_addr, preload, failed }
    }

    /// The joiner's ordering state continues from the donor's at `at`.
    fn install_preload(&mut self, at: Seqno, preload: Preload) {
        self.certification = preload.index;
        let optimistic = self.options.flag("cert.optimistic_pa");
        self.certification.set_optimistic_pa(optimistic);
        self.ordering.cuts = preload.cuts.into_iter().collect();
        self.ordering.synced = preload.synced.into_iter().collect();
        self.ordering.synced_unknown = false;
        self.ordering.barrier = self.ordering.barrier.max(at);
    }

    /// The gap's events from the donor replace the ones we certified ourselves, in seqno
    /// order among the events still queued (views, donations). Nothing changes on an error.
    fn merge_transferred(&mut self, at: Seqno, items: Vec<Item>) -> Result<(), String> {
        let joined_at = self.connection.as_ref().and_then(|c| c.joined_at).unwrap_or(Seqno::MAX);
        let mut transferred = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Item::Writeset { seqno, bytes, failed } => {
                    let writeset =
                        Writeset::decode(&bytes).map_err(|e| format!("writeset at seqno {seqno}: {}", e.0))?;
                    let depends_on = seqno - 1;
                    transferred.push(Event::Apply { seqno, writeset: Box::new(writeset), depends_on, failed });
                }
                // Our own views reach the application as views, in order.
                Item::Skipped { seqno } if seqno >= joined_at => {}
                Item::Skipped { seqno } => transferred.push(Event::Skipped { seqno }),
            }
        }
        let mut kept: VecDeque<Event> = std::mem::take(&mut self.events)
            .into_iter()
            .filter(|e| !matches!(e, Event::Apply { seqno, .. } if *seqno <= at))
            .collect();
        let place = |e: &Event| match e {
            Event::Synced { after } => Some(*after),
            Event::Donate(d) => Some(d.after),
            other => other.seqno(),
        };
        for event in transferred {
            let seqno = event.seqno().expect("transferred events have seqnos");
            while kept.front().is_some_and(|e| place(e).is_none_or(|s| s < seqno)) {
                self.events.extend(kept.pop_front());
            }
            self.events.push_back(event);
        }
        self.events.extend(kept);
        Ok(())
    }
}

impl Provider {
    /// The joiner's receiver thread: takes one donor stream for this connection.
    pub(super) fn receive_transfers(self: Arc<Self>, generation: u64, receiver: ist::Receiver) {
        let mut waiting_since: Option<Instant> = None;
        loop {
            let state = {
                let shared = self.lock();
                match shared.connection.as_ref().filter(|c| c.generation == generation) {
                    Some(c) => c.catch_up,
                    None => return,
                }
            };
            let deadline = match state {
                CatchUp::Waiting => Instant::now() + Duration::from_secs(1),
                CatchUp::AtRequest(_) => *waiting_since.get_or_insert_with(Instant::now) + DONOR_CONNECT_TIMEOUT,
                CatchUp::Done | CatchUp::Failed => return,
            };
            let accepted = receiver.accept(deadline, || {
                self.lock().connection.as_ref().is_some_and(|c| c.generation == generation && c.catch_up == state)
            });
            match accepted {
                Ok(Some(incoming)) => {
                    let peer = incoming.peer.clone();
                    if let Err(e) = self.take_transfer(generation, incoming) {
                        self.fail_transfer(generation, &format!("state transfer from {peer} failed: {e}"));
                    }
                    return;
                }
                Ok(None) if matches!(state, CatchUp::AtRequest(_)) && Instant::now() >= deadline => {
                    let secs = DONOR_CONNECT_TIMEOUT.as_secs();
                    self.fail_transfer(generation, &format!("no donor sent the state transfer within {secs} s"));
                    return;
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail_transfer(generation, &format!("state transfer receiver failed: {e}"));
                    return;
                }
            }
        }
    }

    fn take_transfer(&self, generation: u64, mut incoming: Incoming) -> Result<(), String> {
        let header = incoming.header().map_err(|e| e.to_string())?;
        let Header { group, at, from } = header;
        let shared = self.lock();
        let (shared, paused) = self.wait_until(shared, Some(Instant::now() + DONOR_CONNECT_TIMEOUT), |s| {
            s.connection.as_ref().is_none_or(|c| c.generation != generation || c.catch_up != CatchUp::Waiting)
        });
        let Some(c) = shared.connection.as_ref().filter(|c| c.generation == generation) else { return Ok(()) };
        if !paused || c.catch_up != CatchUp::AtRequest(at) || c.group != group {
            return Err(format!(
                "the donor sent history {group} after seqno {at}, but this node is in {} at {:?}",
                c.group, c.catch_up
            ));
        }
        let optimistic_pa = shared.options.flag("cert.optimistic_pa");
        drop(shared);
        let mut items = Vec::new();
        let mut preload = None;
        let mut next = from;
        while let Some(part) = incoming.next_part(optimistic_pa).map_err(|e| e.to_string())? {
            match part {
                Part::Item(item) if Some(item.seqno()) == next && item.seqno() <= at => {
                    next = Some(item.seqno() + 1);
                    items.push(item);
                }
                Part::Item(item) => return Err(format!("unexpected seqno {} in the transfer", item.seqno())),
                Part::Preload(p) => preload = Some(p),
            }
        }
        let preload = preload.ok_or("the transfer ended without the donor's certification state")?;
        if from.is_some() && next != Some(at + 1) {
            return Err(format!("the transfer ended at seqno {next:?}, before {at}"));
        }
        let mut shared = self.lock();
        if !shared.is_current(generation) {
            return Ok(());
        }
        let count = items.len();
        let failed: Vec<Seqno> =
            items.iter().filter(|i| matches!(i, Item::Writeset { failed: true, .. })).map(Item::seqno).collect();
        if from.is_some() {
            shared.merge_transferred(at, items)?;
        }
        shared.ordering.verdicts.known_from(from.unwrap_or(at + 1), failed);
        shared.install_preload(at, preload);
        if let Some(c) = shared.connection.as_mut() {
            c.catch_up = CatchUp::Done;
        }
        drop(shared);
        self.notify();
        match from {
            Some(from) => log::info!("incremental state transfer received: seqnos {from}..={at} ({count} events)"),
            None => log::info!("certification state received at seqno {at}; the data comes by snapshot"),
        }
        Ok(())
    }

    pub(super) fn fail_transfer(&self, generation: u64, message: &str) {
        log::error!("{message}: this node cannot continue without the group's state");
        let mut shared = self.lock();
        if let Some(c) = shared.connection.as_mut().filter(|c| c.generation == generation) {
            c.catch_up = CatchUp::Failed;
        }
        drop(shared);
        self.notify();
    }

    /// The donor's half: sends the gap (when our cache and verdicts cover it) and our
    /// certification state to the joiner, then runs the server's donor script. Returns
    /// whether the joiner only needs its own position confirmed (`bypass`).
    pub(super) fn send_transfer(&self, d: &Donation) -> bool {
        let (node, group) = {
            let shared = self.lock();
            (shared.group_node(), shared.group())
        };
        let gap = match (&d.failed, node) {
            (Some(failed), Some(node)) => {
                node.cached_range((d.position.seqno + 1) as u64, d.after as u64).ok().map(|range| {
                    range
                        .into_iter()
                        .filter_map(|delivered| {
                            let seqno = delivered.seqno as Seqno;
                            match delivered.kind {
                                lockstep_group::DeliveredKind::Writeset { .. } => Some(Item::Writeset {
                                    seqno,
                                    bytes: delivered.bytes,
                                    failed: failed.contains(&seqno),
                                }),
                                lockstep_group::DeliveredKind::View(_) => Some(Item::Skipped { seqno }),
                                _ => None,
                            }
                        })
                        .collect::<Vec<_>>()
                })
            }
            _ => None,
        };
        let header = Header { group, at: d.after, from: gap.as_ref().map(|_| d.position.seqno + 1) };
        let bypass = gap.is_some() || d.joiner_has_state;
        let (address, preload) = (d.ist_addr.clone(), d.preload.clone());
        let spawned = std::thread::Builder::new().name("lockstep-ist-send".into()).spawn(move || {
            let what = match &header.from {
                Some(from) => format!("seqnos {from}..={}", header.at),
                None => format!("certification state at seqno {}", header.at),
            };
            match ist::send(&address, &header, gap.unwrap_or_default(), &preload) {
                Ok(count) => log::info!("state transfer stream to {address} sent: {what} ({count} events)"),
                Err(e) => log::error!("state transfer stream to {address} failed ({what}): {e}"),
            }
        });
        if let Err(e) = spawned {
            log::error!("cannot start the state transfer sender: {e}");
        }
        bypass
    }

    /// An event only the state transfer knew about: its seqno is consumed in order.
    pub(super) fn skip_transferred(&self, generation: u64, seqno: Seqno) -> Result<bool, Status> {
        if !self.wait_turn(generation, seqno - 1, seqno) {
            return Ok(false);
        }
        let mut shared = self.lock();
        shared.commit_order.finish(seqno);
        shared.committed.finish(seqno);
        drop(shared);
        self.notify();
        Ok(false)
    }
}
