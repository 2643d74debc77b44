//! State transfers in flight between simulated nodes: the donor's stream (the gap and its
//! certification state, through the real wire format of the preload) and the server's
//! snapshot or position-only confirmation, each arriving after a delay.
use super::db::Db;
use super::invariants::Checks;
use super::node::Node;
use crate::core::phase::{CatchUp, Handshake, Phase};
use crate::core::{StreamStart, Transferred};
use crate::ist::{last_writeset, Item, Preload};
use crate::types::{Gtid, Seqno};
use lockstep_group::sim::Sim as GroupSim;
use std::collections::VecDeque;

/// How long a stream may wait for the joiner to reach its own request.
const STREAM_PATIENCE_MS: u64 = 60_000;

#[derive(Debug)]
pub enum TransferKind {
    Stream {
        at: Seqno,
        from: Option<Seqno>,
        items: Vec<Item>,
        preload: Vec<u8>,
        donor_digest: u64,
    },
    /// The server's part: a snapshot of the donor's database, or none (the joiner keeps its
    /// own data and only its position is confirmed). `broken`: the scripts fail midway,
    /// on both sides. `script`: the joiner's script it goes to (`Node::script`).
    State {
        state_id: Gtid,
        snapshot: Option<Db>,
        broken: bool,
        script: u64,
    },
    /// The rest of a stream that is in, handed to the joiner's core a batch at a time as
    /// its receiver does from the gap it keeps on disk. `ahead`: the last writeset of each
    /// batch handed over and not known committed.
    Gap {
        generation: u64,
        batches: VecDeque<Vec<Item>>,
        ahead: VecDeque<Seqno>,
    },
}

/// Between two looks at a gap being fed.
const GAP_BATCH_DELAY_MS: u64 = 2;
/// Batches of a gap queued and not yet committed, at most (the runtime's bound, smaller so
/// that seeds wait for it).
const GAP_BATCHES_AHEAD: usize = 2;

#[derive(Debug)]
pub struct PendingTransfer {
    pub to: usize,
    /// The joiner's incarnation that asked: a restarted joiner asks again.
    pub incarnation: u64,
    pub since_ms: u64,
    pub at_ms: u64,
    pub donor: usize,
    pub donor_incarnation: u64,
    pub kind: TransferKind,
}

/// Delivers the transfers whose time has come; keeps the others. Returns how many were lost
/// because their donor died first.
pub fn deliver(
    transfers: &mut Vec<PendingTransfer>,
    nodes: &mut [Node],
    group: &mut GroupSim,
    now_ms: u64,
    checks: &mut Checks,
    trace: bool,
) -> Result<u64, String> {
    let mut kept = Vec::new();
    let mut lost = 0;
    for t in std::mem::take(transfers) {
        if now_ms < t.at_ms {
            kept.push(t);
            continue;
        }
        if let TransferKind::Gap { .. } = t.kind {
            // The stream is in: its donor no longer matters.
            feed_gap(t, nodes, group, now_ms, &mut kept, trace)?;
            continue;
        }
        let live = nodes[t.to].incarnation == t.incarnation && nodes[t.to].core_mut().is_some();
        // A donor that died before its transfer arrived sends nothing more. The joiner's
        // script keeps listening (rsync's daemon) or, for half of the snapshots, had taken
        // the stream that broke and fails (mariabackup's); its stream's connection breaks.
        let donor_lives = nodes[t.donor].incarnation == t.donor_incarnation && nodes[t.donor].core_mut().is_some();
        if !donor_lives {
            if trace {
                println!(
                    "[{now_ms:>6} ms] node {}'s transfer to node {} is lost: its donor died",
                    t.donor + 1,
                    t.to + 1
                );
            }
            if let TransferKind::State { snapshot: Some(_), script, .. } = &t.kind {
                if live && t.since_ms % 2 == 0 && listens(&nodes[t.to], *script) {
                    joiner_script_fails(&mut nodes[t.to], group, now_ms, trace);
                }
            }
            lost += 1;
            continue;
        }
        if !live {
            // The joiner is gone: the donor's script fails, and the donation ends all the same.
            if let TransferKind::State { state_id, .. } = t.kind {
                let failed = Gtid::new(state_id.uuid, crate::types::SEQNO_UNDEFINED);
                end_donation(nodes, group, t.donor, t.donor_incarnation, failed, super::node::BROKEN_PIPE);
            }
            continue;
        }
        let generation = nodes[t.to].generation;
        if trace {
            let what = match &t.kind {
                TransferKind::Stream { at, from, items, .. } => {
                    format!("stream at {at} from {from:?}, {} items", items.len())
                }
                TransferKind::State { state_id, snapshot, broken, .. } => {
                    format!(
                        "state {state_id} {}{}",
                        snapshot.as_ref().map_or("position only".into(), |s| format!("snapshot at {}", s.committed)),
                        if *broken { ", broken midway" } else { "" }
                    )
                }
                TransferKind::Gap { .. } => unreachable!("fed above"),
            };
            println!("[{now_ms:>6} ms] node {} receives from node {}: {what}", t.to + 1, t.donor + 1);
        }
        match t.kind {
            TransferKind::Stream { at, from, items, preload, donor_digest } => {
                let core = nodes[t.to].core_mut().expect("checked");
                match core.catch_up(generation) {
                    Some(CatchUp::Waiting) if now_ms < t.since_ms + STREAM_PATIENCE_MS => {
                        kept.push(PendingTransfer {
                            kind: TransferKind::Stream { at, from, items, preload, donor_digest },
                            ..t
                        });
                        continue;
                    }
                    Some(CatchUp::AtRequest(point)) if point == at => {
                        let optimistic = core.settings().optimistic_pa;
                        let preload = Preload::decode(&preload, optimistic)
                            .map_err(|e| format!("preload does not decode: {}", e.0))?
                            .ok_or("the preload frame is another part")?;
                        checks.transfer_sent(t.to, at, donor_digest);
                        let failed = items
                            .iter()
                            .filter_map(|item| match item {
                                Item::Writeset { seqno, failed: true, .. } => Some(*seqno),
                                _ => None,
                            })
                            .collect();
                        let events = items.len();
                        let mut batches = gap_batches(items, t.since_ms);
                        let first = batches.pop_front().unwrap_or_default();
                        let ahead = last_writeset(&first).into_iter().collect();
                        let gap = decode(first)?;
                        let more = !batches.is_empty();
                        let stream = StreamStart { at, from, gap, failed, events, more };
                        match core.install_stream(generation, stream, preload) {
                            Err(e) => core.fail_stream(generation, &e),
                            Ok(()) if more => kept.push(PendingTransfer {
                                at_ms: now_ms + GAP_BATCH_DELAY_MS,
                                kind: TransferKind::Gap { generation, batches, ahead },
                                ..t
                            }),
                            Ok(()) => {}
                        }
                    }
                    // Not for this node's request (a donor acting on an old one): refused.
                    _ => {}
                }
            }
            TransferKind::Gap { .. } => unreachable!("fed above"),
            TransferKind::State { state_id, script, .. } if !listens(&nodes[t.to], script) => {
                // That script failed or was replaced: the donor's finds nobody listening.
                donation_broke(nodes, group, t.donor, t.donor_incarnation, state_id);
            }
            TransferKind::State { state_id, broken: true, .. } => {
                joiner_script_fails(&mut nodes[t.to], group, now_ms, trace);
                donation_broke(nodes, group, t.donor, t.donor_incarnation, state_id);
            }
            TransferKind::State { state_id, snapshot, broken: false, .. } => {
                // After a bypass (no snapshot) MariaDB reports the position its storage
                // recovered, which may be below the one asked for: views it was not shown.
                let stored = nodes[t.to].db.position();
                let reported = if snapshot.is_none() && stored.uuid == state_id.uuid { stored } else { state_id };
                let core = nodes[t.to].core_mut().expect("checked");
                if matches!(core.phase(), Phase::Joining(Handshake::Received { .. })) {
                    // The joiner's script ended with an earlier donor's state: this donor's
                    // script finds nobody listening and fails (seed 5304: a request asked
                    // again while the first donor still served the first one).
                    donation_broke(nodes, group, t.donor, t.donor_incarnation, state_id);
                    nodes[t.to].after_call(group);
                    continue;
                }
                // The server's script takes the snapshot only while it waits for one.
                let waiting = matches!(core.phase(), Phase::Joining(_));
                core.sst_received(reported, 0);
                if let Some(snapshot) = snapshot.filter(|_| waiting) {
                    nodes[t.to].db = snapshot;
                }
                end_donation(nodes, group, t.donor, t.donor_incarnation, state_id, 0);
            }
        }
        nodes[t.to].after_call(group);
    }
    transfers.extend(kept);
    Ok(lost)
}

/// Whether the joiner's script `script` still listens.
fn listens(joiner: &Node, script: u64) -> bool {
    joiner.script == script && !joiner.script_failed
}

/// The joiner's script failed midway; it reports the failure only while the server waits.
fn joiner_script_fails(joiner: &mut Node, group: &mut GroupSim, now_ms: u64, trace: bool) {
    joiner.script_failed = true;
    let core = joiner.core_mut().expect("live");
    if matches!(core.phase(), Phase::Joining(_)) {
        core.sst_received(Gtid::UNDEFINED, super::node::BROKEN_PIPE);
        // The runtime ends the process inside `sst_received` (Galera's abort).
        if core.transfer_failed().is_some() {
            if trace {
                println!("[{now_ms:>6} ms] node {} will never receive state: aborts", joiner.index + 1);
            }
            joiner.fatal = true;
        }
    }
    joiner.after_call(group);
}

/// The donor's script failed (broken pipe): MariaDB reports it with the history and no seqno.
fn donation_broke(nodes: &mut [Node], group: &mut GroupSim, donor: usize, incarnation: u64, state_id: Gtid) {
    let failed = Gtid::new(state_id.uuid, crate::types::SEQNO_UNDEFINED);
    end_donation(nodes, group, donor, incarnation, failed, super::node::BROKEN_PIPE);
}

/// The donor's `sst_sent`.
fn end_donation(nodes: &mut [Node], group: &mut GroupSim, donor: usize, incarnation: u64, sent: Gtid, rcode: i32) {
    let donor = &mut nodes[donor];
    if donor.incarnation == incarnation {
        if let Some(core) = donor.core_mut() {
            core.donation_ended(sent, rcode);
        }
        donor.after_call(group);
    }
}

/// A stream's gap cut into the batches its joiner's core is handed: from one batch to one
/// per event, as `seed` (the request's time) falls.
fn gap_batches(items: Vec<Item>, seed: u64) -> VecDeque<Vec<Item>> {
    let size = match seed % 4 {
        0 => items.len().max(1),
        1 => 1,
        n => (items.len() / n as usize).max(1),
    };
    let mut batches = VecDeque::new();
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        batches.push_back(items.by_ref().take(size).collect());
    }
    batches
}

/// Hands the joiner the next batch of a gap that is in, unless the joiner restarted or its
/// connection ended or failed meanwhile.
fn feed_gap(
    mut t: PendingTransfer,
    nodes: &mut [Node],
    group: &mut GroupSim,
    now_ms: u64,
    kept: &mut Vec<PendingTransfer>,
    trace: bool,
) -> Result<(), String> {
    let TransferKind::Gap { generation, batches, ahead } = &mut t.kind else { unreachable!("a gap") };
    let node = &mut nodes[t.to];
    if node.incarnation != t.incarnation || node.generation != *generation {
        return Ok(());
    }
    let Some(core) = node.core_mut().filter(|c| matches!(c.catch_up(*generation), Some(CatchUp::Feeding(_)))) else {
        return Ok(());
    };
    let committed = core.last_committed().seqno;
    while ahead.front().is_some_and(|&seqno| seqno <= committed) {
        ahead.pop_front();
    }
    if ahead.len() >= GAP_BATCHES_AHEAD {
        t.at_ms = now_ms + GAP_BATCH_DELAY_MS;
        kept.push(t);
        return Ok(());
    }
    let items = batches.pop_front().unwrap_or_default();
    ahead.extend(last_writeset(&items));
    let batch = decode(items)?;
    let last = batches.is_empty();
    if trace {
        println!(
            "[{now_ms:>6} ms] node {} is handed {} more events of its gap{}",
            t.to + 1,
            batch.len(),
            if last { ", the last" } else { "" }
        );
    }
    if let Err(e) = core.feed_stream(*generation, batch, last) {
        core.fail_stream(*generation, &e);
    }
    node.after_call(group);
    if !last {
        t.at_ms = now_ms + GAP_BATCH_DELAY_MS;
        kept.push(t);
    }
    Ok(())
}

fn decode(items: Vec<Item>) -> Result<Vec<Transferred>, String> {
    items.into_iter().map(Transferred::decode).collect()
}
