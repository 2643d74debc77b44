//! What the provider sends through the group's total order, and its byte format (ours,
//! not Galera's: only MariaDB-visible behaviour must match Galera).
//!
//! Writesets take a global seqno; control messages are ordered among them but take none
//! (see docs/design/replication.md).
use crate::certification::{Chains, ChainsBuilder, KeySlice};
use crate::types::{flags, Gtid, Seqno, SourceTrx, Uuid};
use lockstep_group::codec::{extend_in_small_steps, trim_slack, DecodeError, Reader, Writer};
use lockstep_group::MemberId;

/// Format 2 carries a writeset's chains, not its keys. Format 1, where a writeset carried its
/// keys before its data (control messages are the same in both), is still read: the logs and
/// caches of earlier builds hold it.
const FORMAT_VERSION: u8 = 2;
const FORMAT_WITH_KEYS: u8 = 1;

/// A transaction's or an isolated statement's writeset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writeset {
    pub source: SourceTrx,
    /// Origin-local number that lets the origin recognise its own writeset when delivered.
    pub local_id: u64,
    /// The origin's last committed seqno when it replicated: certification looks for
    /// conflicts only after it.
    pub last_seen: Seqno,
    pub flags: u32,
    /// What certification takes of its keys; the keys themselves do not travel.
    pub chains: Chains,
    /// Its keys' size as Galera counts it (`KeySet::byte_len`: `wsrep_replicated_bytes`,
    /// `wsrep_received_bytes`).
    pub key_bytes: usize,
    pub data: Vec<u8>,
}

/// Ordered messages that take no seqno.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Causal-read barrier: its delivery position is the causal point; `id` tells the
    /// sender which of its reads it ends.
    Barrier { id: u64 },
    /// The sender will never again replicate a writeset that saw less than `seqno`, so
    /// certification history at or below the minimum over members may be purged.
    CommitCut { seqno: Seqno },
    /// A member without usable state asks for a state transfer.
    StateRequest(StateRequest),
    /// The sender has the group's state and has caught up with the order. `since`: it was
    /// already synced when it sent this, and has been since its own announcement ordered
    /// after that seqno (none: it was not synced yet; this announcement makes it so).
    /// `ends_donation`: sent as a donation of the sender ended, and which; while the sender
    /// donates, only the end of that donation makes it a donor candidate again
    /// (docs/design/donor-chosen-twice.md). `stateless`: the sender runs with `gcs.stateless`
    /// and is never chosen to donate.
    Synced { since: Option<Seqno>, ends_donation: Option<DonationEnd>, stateless: bool },
    /// How committing `seqno` ended on the sender: 0 committed, else a hash of its error
    /// (core/vote.rs).
    Vote { seqno: Seqno, outcome: u64 },
    /// Flow control: the sender's apply queue passed its limit and it asks the writers to stop
    /// or to keep to `rate` writesets a second, or it drained (`core::flow::Ask::to_wire`);
    /// `number` orders the sender's requests (0 from an earlier version: unnumbered).
    Flow { ask: u8, rate: u32, number: u64 },
    /// The sender, chosen to donate for `joiner`'s state request `id`, could not: its server
    /// refused to donate, or the transfer ended with an error. `rcode` is a negative errno
    /// (Galera's JOIN with a negative code): every member logs it, and the joiner, which will
    /// never receive that state, stops.
    TransferFailed { joiner: MemberId, id: u64, rcode: i32 },
    /// The sender's donor choice for `joiner`'s state request `id` (none: no member could
    /// donate), sent by members that know which members are synced when the request says
    /// its sender only guesses it (docs/design/donor-choice-of-a-guessing-joiner.md).
    DonorChoice { joiner: MemberId, id: u64, donor: Option<MemberId> },
}

/// A state request. `position`: where the sender's data stands in this history (undefined
/// if not in it); `donors`: `wsrep_sst_donor`; `has_state`: it also holds the order from
/// there; `ist_addr`: where the donor sends the incremental transfer; `id`: tells this
/// request from the sender's earlier ones (a restarted member reads those again);
/// `own_order`: the sender also certified that order with the group's certification state
/// (a restarted member that could catch up alone), so a donor confirms its position whether
/// or not its cache holds the gap (docs/design/restart-from-own-log.md); `guessing`: the
/// sender guesses which members are synced (it joined after their announcements), so the
/// members that know answer with their donor choice (`Control::DonorChoice`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateRequest {
    pub sst_request: Vec<u8>,
    pub position: Gtid,
    pub donors: String,
    pub has_state: bool,
    pub ist_addr: String,
    pub id: u64,
    pub own_order: bool,
    pub guessing: bool,
}

const WRITESET: u8 = 1;
const BARRIER: u8 = 2;
const COMMIT_CUT: u8 = 3;
const STATE_REQUEST: u8 = 4;
const SYNCED: u8 = 5;
const VOTE: u8 = 6;
const FLOW: u8 = 7;
const TRANSFER_FAILED: u8 = 8;
const DONOR_CHOICE: u8 = 9;
const SYNCED_STATELESS: u8 = 10;

fn put_uuid(w: &mut Writer, uuid: &Uuid) {
    w.bytes(&uuid.0);
}

fn get_uuid(r: &mut Reader<'_>) -> Result<Uuid, DecodeError> {
    let bytes = r.bytes()?;
    <[u8; 16]>::try_from(bytes.as_slice()).map(Uuid).map_err(|_| DecodeError("uuid of wrong length"))
}

/// A writeset's encoding before its data: format and kind, the source's node
/// (length-prefixed), four u64 ids and positions, the flags, the keys' size, the number of
/// chains and the data's length. The chains follow the data, 8 bytes each, largest first
/// (`Chains::put_descending`): a receiver cuts them off the end of the buffer as it reads
/// them, so a big writeset's chains are not held twice.
const ENCODED_HEAD_BYTES: usize = 2 + 4 + 16 + 8 * 4 + 4 + 8 + 4 + 4;

fn header(kind: u8) -> Writer {
    let mut w = Writer::default();
    w.u8(FORMAT_VERSION).u8(kind);
    w
}

/// Opens a message of one of `kinds`; returns its format and kind.
fn open<'a>(bytes: &'a [u8], kinds: &[u8]) -> Result<(Reader<'a>, u8, u8), DecodeError> {
    let mut r = Reader::new(bytes);
    let format = r.u8()?;
    if format != FORMAT_VERSION && format != FORMAT_WITH_KEYS {
        return Err(DecodeError("unknown format version"));
    }
    let kind = r.u8()?;
    if !kinds.contains(&kind) {
        return Err(DecodeError("unexpected message kind"));
    }
    Ok((r, format, kind))
}

/// A local transaction's writeset collected straight into the bytes that travel: room for
/// the head, then its data; its keys as chains beside them, which `Outgoing::encode` puts
/// after the data. The origin of a big writeset holds it once: joining a key set and data
/// at the end held the keys twice besides the data (65 MB of 0.36 GB for a
/// 2.5-million-row `UPDATE`), and its keys' bytes took 26 bytes a row where a chain takes 8.
#[derive(Debug, Default)]
pub struct WritesetBuilder {
    /// Empty until the first data.
    bytes: Vec<u8>,
    chains: ChainsBuilder,
}

impl WritesetBuilder {
    /// Adds the chains of keys the server appended (`ChainsBuilder::of`).
    pub fn append_keys(&mut self, chains: ChainsBuilder) {
        self.chains.append(chains);
    }

    pub fn append_data(&mut self, data: &[u8]) {
        if self.bytes.is_empty() {
            self.bytes.resize(ENCODED_HEAD_BYTES, 0);
        }
        extend_in_small_steps(&mut self.bytes, data);
    }

    pub fn key_count(&self) -> usize {
        self.chains.key_count()
    }

    /// The keys' size as Galera counts it.
    pub fn key_bytes(&self) -> usize {
        self.chains.key_bytes()
    }

    pub fn data_len(&self) -> usize {
        self.bytes.len().saturating_sub(ENCODED_HEAD_BYTES)
    }
}

/// A local transaction's writeset on its way to the group: what goes in front of its
/// collected data and chains.
#[derive(Debug)]
pub struct Outgoing {
    pub source: SourceTrx,
    pub local_id: u64,
    pub last_seen: Seqno,
    pub flags: u32,
    pub body: WritesetBuilder,
}

impl Outgoing {
    /// The bytes that travel, as `Writeset::encode` writes them: the head is written into
    /// the room left for it and the chains moved after the data (outside the core's lock:
    /// sorting a big writeset's chains takes a while).
    pub fn encode(self) -> Vec<u8> {
        let Outgoing { source, local_id, last_seen, flags, body } = self;
        let WritesetBuilder { mut bytes, chains } = body;
        let key_bytes = chains.key_bytes();
        // A writeset without data still has a head.
        bytes.resize(bytes.len().max(ENCODED_HEAD_BYTES), 0);
        let data_len = bytes.len() - ENCODED_HEAD_BYTES;
        let chains = chains.finish();
        let mut w = header(WRITESET);
        put_uuid(&mut w, &source.node);
        w.u64(source.trx_id).u64(source.conn_id).u64(local_id);
        w.u64(last_seen as u64).u32(flags).u64(key_bytes as u64).len(chains.len());
        w.u32(u32::try_from(data_len).expect("bounded by repl.max_ws_size"));
        bytes[..ENCODED_HEAD_BYTES].copy_from_slice(&w.bytes);
        chains.put_descending(&mut bytes);
        // Held until delivered: without the room left by growing.
        trim_slack(&mut bytes);
        bytes
    }
}

/// A writeset of at least this many bytes takes long enough to apply (thousands of rows,
/// milliseconds at least) that what is ordered after it notices the wait.
const LONG_APPLY_BYTES: usize = 1 << 20;

impl Writeset {
    /// Whether applying it holds commit order long: a streaming fragment that does not
    /// commit its transaction (one after another, each applied before anything ordered after
    /// it commits; a rollback fragment undoes all of them) or a big writeset. Appliers run
    /// these at a higher priority (`repl.applier_boost`, docs/design/applier-priority.md).
    pub fn holds_commit_order_long(&self) -> bool {
        self.flags & flags::TRX_END == 0 || self.data.len() >= LONG_APPLY_BYTES
    }

    /// The bytes that travel. A local transaction's writeset, however big, is collected in
    /// them from the start (`WritesetBuilder`); this copies the data of the few others
    /// (rollback fragments, tests).
    pub fn encode(self) -> Vec<u8> {
        let Writeset { source, local_id, last_seen, flags, chains, key_bytes, data } = self;
        let mut body = WritesetBuilder::default();
        body.append_keys(ChainsBuilder::resume(chains, key_bytes));
        body.append_data(&data);
        Outgoing { source, local_id, last_seen, flags, body }.encode()
    }

    /// Decodes a writeset from the bytes it takes, outside the core's lock. Its data (nearly
    /// all of a big writeset) stays in their buffer, moved to its front rather than copied to
    /// another; its chains are cut off the buffer's end as they are read (a writeset of the
    /// earlier format has its keys made into chains), so a big writeset is held once.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Writeset, DecodeError> {
        let (mut ws, format, data_at, data_len) = {
            let (mut r, format, _) = open(&bytes, &[WRITESET])?;
            let source = SourceTrx { node: get_uuid(&mut r)?, trx_id: r.u64()?, conn_id: r.u64()? };
            let local_id = r.u64()?;
            let last_seen = r.u64()? as Seqno;
            let flags = r.u32()?;
            let mut ws = Writeset {
                source,
                local_id,
                last_seen,
                flags,
                chains: Chains::default(),
                key_bytes: 0,
                data: Vec::new(),
            };
            if format == FORMAT_WITH_KEYS {
                let keys = KeySlice::decode(&mut r)?;
                (ws.chains, ws.key_bytes) = (Chains::of(keys), keys.byte_len());
                let data_len = r.u32()? as usize;
                if r.remaining() != data_len {
                    return Err(DecodeError("writeset data length does not match the record"));
                }
                (ws, format, bytes.len() - data_len, data_len)
            } else {
                ws.key_bytes = usize::try_from(r.u64()?).map_err(|_| DecodeError("key size out of range"))?;
                let chains = r.len(8)?;
                let data_len = r.u32()? as usize;
                if chains.checked_mul(8).and_then(|c| c.checked_add(data_len)) != Some(r.remaining()) {
                    return Err(DecodeError("writeset data length and chains do not match the record"));
                }
                (ws, format, bytes.len() - r.remaining(), data_len)
            }
        };
        if format == FORMAT_VERSION {
            ws.chains = Chains::take_descending(&mut bytes, data_at + data_len)?;
        }
        bytes.drain(..data_at);
        trim_slack(&mut bytes);
        ws.data = bytes;
        Ok(ws)
    }

    pub fn byte_len(&self) -> usize {
        // `key_bytes` is read from the wire.
        self.data.len().saturating_add(self.key_bytes)
    }
}

/// Which donation of its sender an announcement ends (`Control::Synced::ends_donation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DonationEnd {
    /// The donation for `joiner`'s state request `id`.
    Of { joiner: MemberId, id: u64 },
    /// One its sender could not name (its server named no state of a donation it listed), or
    /// an end written before ends named theirs: it ends whichever runs.
    Unnamed,
}

impl Control {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Control::Barrier { id } => {
                let mut w = header(BARRIER);
                w.u64(*id);
                w.bytes
            }
            Control::CommitCut { seqno } => {
                let mut w = header(COMMIT_CUT);
                w.u64(*seqno as u64);
                w.bytes
            }
            Control::StateRequest(r) => {
                let mut w = header(STATE_REQUEST);
                w.bytes(&r.sst_request);
                put_uuid(&mut w, &r.position.uuid);
                w.u64(r.position.seqno as u64).str(&r.donors).bool(r.has_state).str(&r.ist_addr).u64(r.id);
                // Trailing and only when set: an older member reads the rest as before.
                if r.own_order || r.guessing {
                    w.bool(r.own_order);
                }
                if r.guessing {
                    w.bool(true);
                }
                w.bytes
            }
            Control::Synced { since, ends_donation, stateless } => {
                // Its own kind, so that the plain announcement reads as before.
                let mut w = header(if *stateless { SYNCED_STATELESS } else { SYNCED });
                if let Some(since) = since {
                    w.u64(*since as u64);
                }
                // Last, and only when set: a log written before it was known reads the same.
                if let Some(end) = ends_donation {
                    w.bool(true);
                    if let DonationEnd::Of { joiner, id } = end {
                        w.u64(joiner.0).u64(*id);
                    }
                }
                w.bytes
            }
            Control::Vote { seqno, outcome } => {
                let mut w = header(VOTE);
                w.u64(*seqno as u64).u64(*outcome);
                w.bytes
            }
            Control::Flow { ask, rate, number } => {
                let mut w = header(FLOW);
                w.u8(*ask).u32(*rate);
                // Last, and only when set: an earlier version's request reads the same.
                if *number > 0 {
                    w.u64(*number);
                }
                w.bytes
            }
            Control::TransferFailed { joiner, id, rcode } => {
                let mut w = header(TRANSFER_FAILED);
                w.u64(joiner.0).u64(*id).u32(*rcode as u32);
                w.bytes
            }
            Control::DonorChoice { joiner, id, donor } => {
                let mut w = header(DONOR_CHOICE);
                w.u64(joiner.0).u64(*id);
                if let Some(donor) = donor {
                    w.u64(donor.0);
                }
                w.bytes
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Control, DecodeError> {
        let (mut r, _, kind) = open(
            bytes,
            &[BARRIER, COMMIT_CUT, STATE_REQUEST, SYNCED, VOTE, FLOW, TRANSFER_FAILED, DONOR_CHOICE, SYNCED_STATELESS],
        )?;
        let control = match kind {
            BARRIER => Control::Barrier { id: r.u64()? },
            COMMIT_CUT => Control::CommitCut { seqno: r.u64()? as Seqno },
            STATE_REQUEST => {
                let sst_request = r.bytes()?;
                let position = Gtid::new(get_uuid(&mut r)?, r.u64()? as Seqno);
                let donors = r.str()?;
                let (has_state, ist_addr, id) = (r.bool()?, r.str()?, r.u64()?);
                let own_order = if r.remaining() > 0 { r.bool()? } else { false };
                let guessing = if r.remaining() > 0 { r.bool()? } else { false };
                Control::StateRequest(StateRequest {
                    sst_request,
                    position,
                    donors,
                    has_state,
                    ist_addr,
                    id,
                    own_order,
                    guessing,
                })
            }
            VOTE => Control::Vote { seqno: r.u64()? as Seqno, outcome: r.u64()? },
            FLOW => {
                let ask = r.u8()?;
                // An earlier version sent no rate.
                let rate = if r.remaining() > 0 { r.u32()? } else { 0 };
                let number = if r.remaining() > 0 { r.u64()? } else { 0 };
                Control::Flow { ask, rate, number }
            }
            TRANSFER_FAILED => {
                let (joiner, id, rcode) = (MemberId(r.u64()?), r.u64()?, r.u32()? as i32);
                if rcode >= 0 {
                    return Err(DecodeError("a failed state transfer without an error code"));
                }
                Control::TransferFailed { joiner, id, rcode }
            }
            SYNCED | SYNCED_STATELESS => {
                // Optional `since` (8 bytes), then optional end (1, then 16 if named): the
                // length left tells which are there.
                let since = if matches!(r.remaining(), 8 | 9 | 25) { Some(r.u64()? as Seqno) } else { None };
                let stateless = kind == SYNCED_STATELESS;
                let ends_donation = if r.remaining() > 0 && r.bool()? {
                    Some(if r.remaining() > 0 {
                        DonationEnd::Of { joiner: MemberId(r.u64()?), id: r.u64()? }
                    } else {
                        DonationEnd::Unnamed
                    })
                } else {
                    None
                };
                Control::Synced { since, ends_donation, stateless }
            }
            DONOR_CHOICE => {
                let (joiner, id) = (MemberId(r.u64()?), r.u64()?);
                let donor = if r.remaining() > 0 { Some(MemberId(r.u64()?)) } else { None };
                Control::DonorChoice { joiner, id, donor }
            }
            _ => return Err(DecodeError("unexpected message kind")),
        };
        r.finish()?;
        Ok(control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::{Key, KeySet, KeyType};

    fn keys(keys: &[Key]) -> KeySet {
        keys.iter().cloned().collect()
    }

    fn chains_of(keys: &KeySet) -> ChainsBuilder {
        ChainsBuilder::of(keys.as_slice())
    }

    #[test]
    fn fragments_that_do_not_end_their_transaction_and_big_writesets_hold_commit_order_long() {
        let ws = |flags: u32, bytes: usize| Writeset {
            source: SourceTrx { node: Uuid::random(), trx_id: 7, conn_id: 9 },
            local_id: 1,
            last_seen: -1,
            flags,
            chains: Chains::default(),
            key_bytes: 0,
            data: vec![0; bytes],
        };
        let whole = flags::TRX_START | flags::TRX_END;
        assert!(!ws(whole, 100).holds_commit_order_long());
        assert!(!ws(whole | flags::ISOLATION, 100).holds_commit_order_long());
        assert!(ws(whole, LONG_APPLY_BYTES).holds_commit_order_long());
        // A streaming transaction's first and middle fragments; its last commits it.
        assert!(ws(flags::TRX_START, 100).holds_commit_order_long());
        assert!(ws(0, 100).holds_commit_order_long());
        assert!(!ws(flags::TRX_END | flags::PA_UNSAFE, 100).holds_commit_order_long());
        // A rollback fragment, as a streaming transaction's origin sends it.
        assert!(ws(flags::ROLLBACK | flags::PA_UNSAFE, 0).holds_commit_order_long());
    }

    #[test]
    fn writesets_and_controls_survive_the_trip() {
        let row = keys(&[Key::new(vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]], KeyType::Update)]);
        let ws = Writeset {
            source: SourceTrx { node: Uuid::random(), trx_id: 7, conn_id: 9 },
            local_id: 3,
            last_seen: -1,
            flags: 0x41,
            chains: Chains::of(row.as_slice()),
            key_bytes: row.byte_len(),
            data: b"rows".to_vec(),
        };
        let bytes = ws.clone().encode();
        // Three chains: the database and the table (SHARED prefixes) and the row.
        assert_eq!(ws.chains.len(), 3);
        assert_eq!(bytes.len(), ENCODED_HEAD_BYTES + 8 * ws.chains.len() + ws.data.len());
        assert_eq!(Writeset::decode(bytes).unwrap(), ws);
        // Collected where it travels: the same bytes, the head written in place.
        let late_key = keys(&[Key::new(vec![b"db".to_vec(), b"u".to_vec()], KeyType::Shared)]);
        let mut body = WritesetBuilder::default();
        body.append_keys(chains_of(&row));
        body.append_data(b"ro");
        body.append_keys(chains_of(&late_key));
        body.append_data(b"ws");
        assert_eq!((body.key_count(), body.key_bytes(), body.data_len()), (2, row.byte_len() + late_key.byte_len(), 4));
        let outgoing = Outgoing { source: ws.source, local_id: 3, last_seen: -1, flags: 0x41, body };
        let mut both = row.clone();
        both.append(&late_key);
        let decoded = Writeset::decode(outgoing.encode()).unwrap();
        assert_eq!(decoded, Writeset { chains: Chains::of(both.as_slice()), key_bytes: both.byte_len(), ..ws.clone() });
        let empty =
            Outgoing { source: ws.source, local_id: 4, last_seen: 2, flags: 0, body: WritesetBuilder::default() };
        let decoded = Writeset::decode(empty.encode()).unwrap();
        assert_eq!((decoded.chains.len(), decoded.data.len(), decoded.local_id), (0, 0, 4));
        let controls = [
            Control::Barrier { id: 9 },
            Control::CommitCut { seqno: 42 },
            Control::StateRequest(StateRequest {
                sst_request: b"rsync\x00127.0.0.1:4444/rsync_sst\x00".to_vec(),
                position: Gtid::UNDEFINED,
                donors: "node1,".into(),
                has_state: true,
                ist_addr: "127.0.0.1:4568".into(),
                id: 77,
                own_order: false,
                guessing: false,
            }),
            Control::StateRequest(StateRequest {
                sst_request: b"rsync\x00127.0.0.1:4444/rsync_sst\x00".to_vec(),
                position: Gtid::new(Uuid([3; 16]), 12),
                donors: String::new(),
                has_state: true,
                ist_addr: "127.0.0.1:4568".into(),
                id: 78,
                own_order: true,
                guessing: false,
            }),
            Control::StateRequest(StateRequest {
                sst_request: Vec::new(),
                position: Gtid::UNDEFINED,
                donors: String::new(),
                has_state: false,
                ist_addr: "127.0.0.1:4568".into(),
                id: 79,
                own_order: false,
                guessing: true,
            }),
            Control::DonorChoice { joiner: MemberId(2), id: 79, donor: Some(MemberId(3)) },
            Control::DonorChoice { joiner: MemberId(2), id: 80, donor: None },
            Control::Synced { since: None, ends_donation: None, stateless: false },
            Control::Synced { since: Some(0), ends_donation: None, stateless: false },
            Control::Synced { since: Some(1234), ends_donation: Some(DonationEnd::Unnamed), stateless: false },
            Control::Synced { since: None, ends_donation: Some(DonationEnd::Unnamed), stateless: false },
            Control::Synced {
                since: Some(7),
                ends_donation: Some(DonationEnd::Of { joiner: MemberId(3), id: 0x5eed }),
                stateless: true,
            },
            Control::Synced {
                since: None,
                ends_donation: Some(DonationEnd::Of { joiner: MemberId(2), id: 1 }),
                stateless: false,
            },
            Control::Synced { since: None, ends_donation: None, stateless: true },
            Control::Vote { seqno: 12, outcome: 0x5eed },
            Control::Flow { ask: u8::MAX, rate: 0, number: 0 },
            Control::Flow { ask: 1, rate: 2_500, number: 7 },
            Control::Flow { ask: 0, rate: 0, number: 0 },
            Control::TransferFailed { joiner: MemberId(3), id: 0x5eed_0001, rcode: -125 },
            Control::TransferFailed { joiner: MemberId(u64::MAX), id: 1, rcode: i32::MIN },
        ];
        for c in controls {
            assert_eq!(Control::decode(&c.encode()).unwrap(), c);
        }
    }

    #[test]
    fn corrupted_writesets_and_control_messages_are_refused_or_decoded_never_a_panic() {
        let keys = keys(&[
            Key::new(vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]], KeyType::Update),
            Key::new(vec![b"db".to_vec(), b"u".to_vec()], KeyType::Shared),
        ]);
        let ws = Writeset {
            source: SourceTrx { node: Uuid([3; 16]), trx_id: 17, conn_id: 4 },
            local_id: 2,
            last_seen: 40,
            flags: 0x41,
            chains: Chains::of(keys.as_slice()),
            key_bytes: keys.byte_len(),
            data: vec![9; 64],
        };
        let control = Control::StateRequest(StateRequest {
            sst_request: b"rsync\x00127.0.0.1:4444/rsync_sst\x00".to_vec(),
            position: Gtid::new(Uuid([3; 16]), 12),
            donors: "node1,".into(),
            has_state: true,
            ist_addr: "127.0.0.1:4568".into(),
            id: 77,
            own_order: true,
            guessing: true,
        });
        let samples = [
            ws.encode(),
            control.encode(),
            Control::Vote { seqno: 12, outcome: 5 }.encode(),
            Control::TransferFailed { joiner: MemberId(2), id: 77, rcode: -125 }.encode(),
            Control::DonorChoice { joiner: MemberId(2), id: 77, donor: Some(MemberId(1)) }.encode(),
        ];
        let mut decoded = 0;
        for bytes in lockstep_group::fuzz::corruptions(&samples, 20_000, 5) {
            decoded += usize::from(Writeset::decode(bytes.clone()).is_ok());
            decoded += usize::from(Control::decode(&bytes).is_ok());
        }
        assert!(decoded > 0, "some corruptions still decode (a flipped data byte)");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let ws = Writeset {
            source: SourceTrx { node: Uuid::NIL, trx_id: 1, conn_id: 1 },
            local_id: 1,
            last_seen: 5,
            flags: 0,
            chains: Chains::default(),
            key_bytes: 0,
            data: vec![1, 2, 3],
        }
        .encode();
        for cut in 0..ws.len() {
            assert!(Writeset::decode(ws[..cut].to_vec()).is_err());
        }
        assert!(Control::decode(&ws).is_err());
        assert!(
            Writeset::decode(Control::Synced { since: None, ends_donation: None, stateless: false }.encode()).is_err()
        );
    }

    #[test]
    fn a_transfer_failure_needs_an_error_code_and_unknown_kinds_are_refused() {
        let mut w = header(TRANSFER_FAILED);
        w.u64(2).u64(77).u32(0);
        assert!(Control::decode(&w.bytes).is_err(), "rcode 0 is no failure");
        let failure = Control::TransferFailed { joiner: MemberId(2), id: 77, rcode: -125 }.encode();
        for cut in 0..failure.len() {
            assert!(Control::decode(&failure[..cut]).is_err());
        }
        // What a member that predates a kind reads: an error, never another message.
        let mut unknown = failure.clone();
        unknown[1] = 200;
        assert!(Control::decode(&unknown).is_err());
    }

    #[test]
    fn a_big_writesets_chains_travel_after_its_data_and_are_checked_in_order() {
        // More chains than are moved at a time, and their rows' keys twice each (the two
        // images of an UPDATE), as the server appends them.
        let rows = 300_000u32;
        let mut body = WritesetBuilder::default();
        let mut all = KeySet::default();
        for row in 0..rows {
            let key =
                keys(&[Key::new(vec![b"db".to_vec(), b"t".to_vec(), row.to_le_bytes().to_vec()], KeyType::Update)]);
            body.append_keys(chains_of(&key));
            body.append_keys(chains_of(&key));
            all.append(&key);
        }
        body.append_data(&vec![7; 1 << 20]);
        let source = SourceTrx { node: Uuid([5; 16]), trx_id: 1, conn_id: 1 };
        let bytes = Outgoing { source, local_id: 1, last_seen: 0, flags: 0, body }.encode();
        let ws = Writeset::decode(bytes.clone()).unwrap();
        assert_eq!(ws.chains.len(), rows as usize + 2, "each row once, the database and the table");
        assert_eq!(ws.data, vec![7; 1 << 20]);
        assert_eq!(ws.key_bytes, 2 * rows as usize * (2 + 1 + 4 + 3));
        assert_eq!(ws.chains, Chains::of(all.as_slice()));
        // Two chains swapped, or one twice: refused, never certified as something else.
        let chains_at = bytes.len() - 8 * ws.chains.len();
        let mut swapped = bytes.clone();
        swapped[chains_at..chains_at + 16].rotate_left(8);
        assert!(Writeset::decode(swapped).is_err());
        let mut repeated = bytes;
        repeated.copy_within(chains_at..chains_at + 8, chains_at + 8);
        assert!(Writeset::decode(repeated).is_err());
    }

    #[test]
    fn a_writeset_and_a_control_message_of_the_first_format_are_still_read() {
        let keys = keys(&[
            Key::new(vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]], KeyType::Update),
            Key::new(vec![b"db".to_vec(), b"t".to_vec(), vec![0, 2]], KeyType::Exclusive),
        ]);
        let mut w = Writer::default();
        w.u8(FORMAT_WITH_KEYS).u8(WRITESET);
        put_uuid(&mut w, &Uuid([4; 16]));
        w.u64(8).u64(9).u64(10).u64(11).u32(0x41).len(keys.len()).fixed(keys.encoded_keys());
        w.bytes(b"rows");
        let ws = Writeset::decode(w.bytes).unwrap();
        assert_eq!(ws.chains, Chains::of(keys.as_slice()));
        let mut vote = Control::Vote { seqno: 12, outcome: 5 }.encode();
        vote[0] = FORMAT_WITH_KEYS;
        assert_eq!(Control::decode(&vote), Ok(Control::Vote { seqno: 12, outcome: 5 }));
        assert_eq!(
            (ws.key_bytes, ws.data.as_slice(), ws.local_id, ws.last_seen),
            (keys.byte_len(), &b"rows"[..], 10, 11)
        );
    }
}
