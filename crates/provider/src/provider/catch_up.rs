//! Incremental state transfer between a donor and a joiner: the sockets and threads (the
//! byte format is in `crate::ist`, the state changes in the core). The joiner's deliveries
//! stop at its own state request until the donor's stream is in: the events of the gap with
//! the donor's verdicts replace what the joiner certified itself, and the donor's
//! certification state replaces the joiner's, so every member certifies what follows alike.
//! See docs/design/replication.md.
use super::gap_spool::{GapReader, GapSpool};
use super::Provider;
use crate::core::{phase::CatchUp, Donation, StreamStart, Transferred};
use crate::ist::{self, Header, Incoming, Item, Part};
use crate::types::Seqno;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a joiner waits for the donor's connection once its request is ordered.
const DONOR_CONNECT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a joiner whose stream broke waits for the group to drop its donor (then the core
/// asks another member) before it gives up: a crashed donor breaks the connection at once,
/// the group drops it after `evs.suspect_timeout` (5 s, 10 s in mtr) and an election.
const BROKEN_STREAM_GRACE: Duration = Duration::from_secs(60);
/// The gap goes to the appliers in batches of at most this many bytes and events, and at
/// most this many batches are queued and not yet committed: what the gap holds in memory.
const GAP_BATCH_BYTES: usize = 4 << 20;
const GAP_BATCH_EVENTS: usize = 1024;
const GAP_BATCHES_AHEAD: usize = 8;

/// What became of one donor connection.
enum Taken {
    /// Received (or no longer wanted: the connection changed).
    Done,
    /// Its header is not for our request: refused, the wait goes on.
    NotOurs(String),
}

impl Provider {
    /// The joiner's receiver thread: takes one donor stream for this connection.
    pub(super) fn receive_transfers(self: Arc<Self>, generation: u64, receiver: ist::Receiver) {
        // Since when the current request waits for its donor.
        let mut waiting_since: Option<(CatchUp, Instant)> = None;
        // A stream that broke: failed for good unless the core asks another donor in time.
        let mut broken: Option<(String, Instant)> = None;
        loop {
            let Some(state) = self.lock_core().catch_up(generation) else { return };
            let deadline = match state {
                CatchUp::Waiting => {
                    broken = None;
                    Instant::now() + Duration::from_secs(1)
                }
                CatchUp::AtRequest(_) => {
                    let since = match waiting_since {
                        Some((request, since)) if request == state => since,
                        _ => {
                            broken = None;
                            Instant::now()
                        }
                    };
                    waiting_since = Some((state, since));
                    let connect = since + DONOR_CONNECT_TIMEOUT;
                    broken.as_ref().map_or(connect, |(_, at)| connect.min(*at + BROKEN_STREAM_GRACE))
                }
                CatchUp::Feeding(_) | CatchUp::Done | CatchUp::Failed => return,
            };
            let accepted = receiver.accept(deadline, || self.lock_core().catch_up(generation) == Some(state));
            match accepted {
                Ok(Some(incoming)) => {
                    let peer = incoming.peer.clone();
                    match self.take_transfer(generation, incoming) {
                        Ok(Taken::Done) => return,
                        // Another member's stream for an older request (a donor re-reading
                        // old requests after its restart): an expected race, so a Note; wait on.
                        Ok(Taken::NotOurs(why)) => log::info!("state transfer from {peer} refused: {why}"),
                        Err(e) => {
                            // A Note: if its donor crashed, the group drops it and another is asked.
                            log::info!("state transfer from {peer} broke: {e}; waiting to see whether its donor left");
                            broken = Some((format!("state transfer from {peer} failed: {e}"), Instant::now()));
                        }
                    }
                }
                Ok(None) if matches!(state, CatchUp::AtRequest(_)) && Instant::now() >= deadline => {
                    let secs = DONOR_CONNECT_TIMEOUT.as_secs();
                    let why = match broken.take() {
                        Some((why, _)) => why,
                        None => format!("no donor sent the state transfer within {secs} s"),
                    };
                    self.with_core(|core| core.fail_stream(generation, &why));
                    return;
                }
                Ok(None) => {}
                Err(e) => {
                    self.with_core(|core| {
                        core.fail_stream(generation, &format!("state transfer receiver failed: {e}"))
                    });
                    return;
                }
            }
        }
    }

    fn take_transfer(&self, generation: u64, mut incoming: Incoming) -> Result<Taken, String> {
        let Header { group, at, from } = incoming.header().map_err(|e| e.to_string())?;
        // The donor may connect before our own delivery of the request tells us where it stands.
        let point =
            self.wait_for(Some(Instant::now() + DONOR_CONNECT_TIMEOUT), |core, me| core.request_point(generation, me));
        let (expected_group, optimistic_pa) = {
            let core = self.lock_core();
            (core.group(), core.settings().optimistic_pa)
        };
        let Some(point) = point else {
            return Err(format!(
                "a donor connected, but this node's request was not ordered within {DONOR_CONNECT_TIMEOUT:?}"
            ));
        };
        // The connection ended, or its stream is no longer awaited.
        if point.is_none() || !self.lock_core().is_current(generation) {
            return Ok(Taken::Done);
        }
        if point != Some(at) || expected_group != group {
            return Ok(Taken::NotOurs(format!(
                "it carries history {group} after seqno {at}, but this node waits in {expected_group} at {:?}",
                self.lock_core().catch_up(generation)
            )));
        }
        // The gap goes to disk as it comes: none of it may be applied before the donor's
        // certification state, which comes last (docs/design/joiner-gap-on-disk.md).
        let dir = super::connection::cache_dir(&super::lock(&self.options));
        let cannot_keep = |e: std::io::Error| format!("cannot keep the gap in {}: {e}", dir.display());
        let mut spool: Option<GapSpool> = None;
        let mut preload = None;
        let mut next = from;
        while let Some(part) = incoming.next_part(optimistic_pa).map_err(|e| e.to_string())? {
            match part {
                Part::Item(item) if Some(item.seqno()) == next && item.seqno() <= at => {
                    next = Some(item.seqno() + 1);
                    let spool = match &mut spool {
                        Some(spool) => spool,
                        None => spool.insert(GapSpool::create(&dir).map_err(cannot_keep)?),
                    };
                    spool.push(&item).map_err(cannot_keep)?;
                }
                Part::Item(item) => return Err(format!("unexpected seqno {} in the transfer", item.seqno())),
                Part::Preload(p) => preload = Some(*p),
            }
        }
        let preload = preload.ok_or("the transfer ended without the donor's certification state")?;
        if from.is_some() && next != Some(at + 1) {
            return Err(format!("the transfer ended at seqno {next:?}, before {at}"));
        }
        let Some(spool) = spool else {
            let stream = StreamStart { at, from, gap: Vec::new(), failed: Vec::new(), events: 0, more: false };
            return self.with_core(|core| core.install_stream(generation, stream, preload)).map(|()| Taken::Done);
        };
        let (events, failed) = (spool.events(), spool.failed().to_vec());
        let mut gap = spool.into_reader().map_err(|e| format!("cannot read the gap back: {e}"))?;
        let (first, first_writeset) = next_batch(&mut gap)?;
        let more = !gap.is_done();
        let stream = StreamStart { at, from, gap: first, failed, events, more };
        self.with_core(|core| core.install_stream(generation, stream, preload))?;
        if more {
            if let Err(e) = self.feed_gap(generation, gap, first_writeset) {
                self.with_core(|core| core.fail_stream(generation, &format!("the state transfer's gap: {e}")));
            }
        }
        Ok(Taken::Done)
    }

    /// Hands the rest of the gap to the core a batch at a time, keeping at most
    /// `GAP_BATCHES_AHEAD` batches queued and not yet committed, the first one
    /// (`first_writeset`: its last writeset) included.
    fn feed_gap(&self, generation: u64, mut gap: GapReader, first_writeset: Option<Seqno>) -> Result<(), String> {
        // The last writeset of each batch handed over and not known committed.
        let mut ahead: VecDeque<Seqno> = first_writeset.into_iter().collect();
        while !gap.is_done() {
            while ahead.len() >= GAP_BATCHES_AHEAD {
                let seqno = ahead[0];
                // Re-asked every second: the wait lasts as long as the connection and its
                // appliers make progress, and ends with either.
                let deadline = Some(Instant::now() + Duration::from_secs(1));
                match self.wait_for(deadline, |core, me| core.feed_turn(generation, seqno, me)) {
                    Some(true) => {
                        ahead.pop_front();
                    }
                    Some(false) => return Ok(()),
                    None => {}
                }
            }
            let (batch, last_writeset) = next_batch(&mut gap)?;
            let last = gap.is_done();
            self.with_core(|core| core.feed_stream(generation, batch, last))?;
            ahead.extend(last_writeset);
        }
        Ok(())
    }

    /// The donor's half: sends the gap (when our cache and verdicts cover it) and our
    /// certification state to the joiner, then runs the server's donor script. Returns
    /// whether the joiner only needs its own position confirmed (`bypass`).
    pub(super) fn send_transfer(&self, generation: u64, d: &Donation) -> bool {
        let group = self.lock_core().group();
        let tls = self.node_of(generation).and_then(|link| link.node.tls().cloned());
        // Read from the cache a batch at a time while the stream goes out, so a gap of
        // gigabytes holds neither the group nor the memory (docs/design/group-cache-read-in-batches.md).
        let gap = match (d.failed.clone(), self.node_of(generation)) {
            (Some(failed), Some(link)) => {
                link.node.read_cache((d.position.seqno + 1) as u64, d.after as u64).ok().and_then(|mut reader| {
                    // What the cache cannot serve shows at its start (purged, or never ordered
                    // by this cluster): then the data goes by snapshot.
                    let first = match reader.next() {
                        Some(Err(_)) => return None,
                        first => first,
                    };
                    let events = first.into_iter().chain(reader).filter_map(move |read| {
                        let delivered = match read {
                            Ok(delivered) => delivered,
                            Err(seqno) => {
                                return Some(Err(format!("the cache cannot serve the gap after seqno {seqno}")))
                            }
                        };
                        let seqno = delivered.seqno as Seqno;
                        match delivered.kind {
                            lockstep_group::DeliveredKind::Writeset { .. } => Some(Ok(Item::Writeset {
                                seqno,
                                bytes: delivered.bytes,
                                failed: failed.contains(&seqno),
                            })),
                            lockstep_group::DeliveredKind::View(_) => Some(Ok(Item::Skipped { seqno })),
                            _ => None,
                        }
                    });
                    Some(events)
                })
            }
            _ => None,
        };
        if gap.is_none() && d.position.uuid == group && d.position.seqno >= 0 {
            // Galera's words, which MariaDB's tests look for.
            log::info!(
                "IST request {}: first seqno {} not found from cache, falling back to SST",
                d.position,
                d.position.seqno + 1
            );
        }
        let header = Header { group, at: d.after, from: gap.as_ref().map(|_| d.position.seqno + 1) };
        // Galera's words, which MariaDB's tests count (galera_3nodes.galera_ipv6_mariabackup).
        log::info!(
            "async IST sender starting to serve {} sending {}-{}, preload starting from {}",
            ist_url(&d.ist_addr, tls.is_some()),
            header.from.unwrap_or(d.after + 1),
            d.after,
            d.after + 1
        );
        // Position only when the gap travels with the group's verdicts, or the joiner certified
        // it with the group's state itself (`Donation::position_only`).
        let bypass = d.position_only(gap.is_some());
        let (address, preload) = (d.ist_addr.clone(), d.preload.clone());
        let spawned = std::thread::Builder::new().name("lockstep-ist-send".into()).spawn(move || {
            let what = match &header.from {
                Some(from) => format!("seqnos {from}..={}", header.at),
                None => format!("certification state at seqno {}", header.at),
            };
            let sent = std::panic::catch_unwind(|| {
                ist::send_with_tls(tls.as_deref(), &address, &header, gap.into_iter().flatten(), &preload)
            });
            match sent {
                Ok(Ok(count)) => log::info!("state transfer stream to {address} sent: {what} ({count} events)"),
                Ok(Err(e)) => log::error!("state transfer stream to {address} failed ({what}): {e}"),
                Err(panic) => log::error!(
                    "state transfer stream to {address} failed ({what}): the sender panicked: {}",
                    super::connection::panic_message(&panic)
                ),
            }
        });
        if let Err(e) = spawned {
            log::error!("cannot start the state transfer sender: {e}");
        }
        bypass
    }
}

/// The next batch of the spooled gap, decoded (outside the core's lock), with the seqno of
/// its last writeset.
fn next_batch(gap: &mut GapReader) -> Result<(Vec<Transferred>, Option<Seqno>), String> {
    let items =
        gap.next_batch(GAP_BATCH_BYTES, GAP_BATCH_EVENTS).map_err(|e| format!("cannot read the gap back: {e}"))?;
    let last_writeset = ist::last_writeset(&items);
    let batch = items.into_iter().map(Transferred::decode).collect::<Result<_, String>>()?;
    Ok((batch, last_writeset))
}

/// An incremental-transfer address as Galera writes it in its log: with its scheme.
pub(super) fn ist_url(address: &str, tls: bool) -> String {
    if address.contains("://") {
        address.to_string()
    } else {
        format!("{}://{address}", if tls { "ssl" } else { "tcp" })
    }
}
