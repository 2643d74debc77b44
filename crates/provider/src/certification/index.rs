//! The certification index: for each key chain and access type, the latest certified
//! writeset that used it. See docs/design/certification.md for the rule and its reasons.
use super::key::{ChainHasher, ChainId, KeySlice, KeyType, Reference};
use crate::types::{Seqno, Uuid, SEQNO_UNDEFINED};
use lockstep_group::codec::{extend_in_small_steps, trim_slack, DecodeError, Reader, Writer};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasherDefault;

/// A writeset whose `seqno - last_seen` exceeds this fails (Galera's `cert.max_length`).
pub const CERT_MAX_LENGTH: Seqno = 16384;
/// How far below `last_seen` a writeset's dependency floor may reach.
pub const PA_RANGE_MAX: Seqno = 65535;
/// Chains of purged writesets dropped from memory per call: a big writeset's million rows
/// go over many calls, never in one long hold of the core's lock.
const RECLAIM_CHAINS: usize = 16 << 10;
/// Tables up to this many buckets are kept as they are when they empty.
const SHRINK_ABOVE_CAPACITY: usize = 1 << 16;
/// A writeset with this many chains or more stays out of the table: certification searches
/// its sorted chains instead (`CertificationIndex::bulky`). Entering a 2.5 million-row
/// writeset's chains one by one cost 0.2 GB of table and most of a second of CPU on every
/// node, for a few later writesets to look up.
const BULK_CHAINS: usize = 1 << 16;

/// Who certified a writeset: what a conflict with it depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Origin {
    source: Uuid,
    isolation: bool,
}

/// A certified writeset still in the index: its origin and the chains it set, with their types.
#[derive(Debug, Clone)]
struct Certified {
    origin: Origin,
    chains: Vec<Reference>,
}

/// Per chain, the seqno of the latest certified writeset of each key type (`NO_WRITESET`:
/// none); its origin is in `certified`. 32 bytes a chain, where a reference carrying its
/// origin took 128: 2.5 million chains made a table of 0.6 GB (0.9 GB while it doubled).
#[derive(Debug, Clone)]
struct KeyEntry {
    latest: [Seqno; 4],
}

const NO_WRITESET: Seqno = SEQNO_UNDEFINED;

impl Default for KeyEntry {
    fn default() -> Self {
        KeyEntry { latest: [NO_WRITESET; 4] }
    }
}

/// What certification decided for one writeset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Passed; may be applied once every seqno up to `depends_on` has committed.
    Pass { depends_on: Seqno },
    /// Failed: it still consumes its seqno everywhere, but is rolled back.
    Fail,
}

/// A writeset's keys as certification takes them: each key's chain and every proper prefix
/// of it (a SHARED branch key), sorted by chain, one type a chain (the strongest seen).
/// The origin makes them as the server appends keys (`ChainsBuilder`) and sends them, not
/// the keys (docs/design/certification.md); the index keeps them while the writeset is in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chains(Vec<Reference>);

/// References moved between a writeset's bytes and its `Chains` at a time (1 MiB): the
/// one gives back its room as the other grows, so a big writeset's chains are never held
/// twice.
const MOVED_REFERENCES: usize = 1 << 17;

impl Chains {
    /// The chains of `keys`.
    pub fn of(keys: KeySlice<'_>) -> Chains {
        ChainsBuilder::of(keys).finish()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends the chains to `out` as a writeset carries them, 8 bytes each (`Reference`,
    /// little-endian), largest first; their own vector shrinks as `out` grows.
    pub fn put_descending(self, out: &mut Vec<u8>) {
        let Chains(mut chains) = self;
        let mut chunk = Vec::with_capacity(8 * chains.len().min(MOVED_REFERENCES));
        while !chains.is_empty() {
            let from = chains.len().saturating_sub(MOVED_REFERENCES);
            chunk.clear();
            for reference in chains[from..].iter().rev() {
                chunk.extend_from_slice(&reference.to_raw().to_le_bytes());
            }
            extend_in_small_steps(out, &chunk);
            chains.truncate(from);
            if chains.capacity() - chains.len() > MOVED_REFERENCES {
                chains.shrink_to_fit();
            }
        }
    }

    /// Takes the chains `put_descending` wrote at `bytes[from..]` (a multiple of 8 bytes),
    /// cutting them off `bytes` a megabyte at a time. Refused unless strictly descending by
    /// chain, as `ChainsBuilder::finish` leaves them: the index searches a big writeset's
    /// chains and takes one type a chain.
    pub fn take_descending(bytes: &mut Vec<u8>, from: usize) -> Result<Chains, DecodeError> {
        debug_assert_eq!((bytes.len() - from) % 8, 0, "the caller checked the count");
        let mut chains: Vec<Reference> = Vec::new();
        while bytes.len() > from {
            let start = bytes.len() - (bytes.len() - from).min(8 * MOVED_REFERENCES);
            let count = (bytes.len() - start) / 8;
            if chains.capacity() - chains.len() < count {
                // By a 32nd: what growing leaves stays under 3 %, and big blocks grow in place.
                chains.reserve_exact(count.max(chains.len() / 32));
            }
            for raw in bytes[start..].rchunks_exact(8) {
                let reference = Reference::from_raw(u64::from_le_bytes(raw.try_into().expect("eight bytes")));
                if chains.last().is_some_and(|last| last.chain() >= reference.chain()) {
                    return Err(DecodeError("a writeset's chains out of order"));
                }
                chains.push(reference);
            }
            bytes.truncate(start);
            trim_slack(bytes);
        }
        if chains.capacity() - chains.len() > 1024 {
            chains.shrink_to_fit();
        }
        Ok(Chains(chains))
    }
}

/// A writeset's chains while its keys come in: full keys in arrival order, prefixes apart
/// (a database, a table: they repeat across a writeset's rows). `finish` sorts them once: a
/// million-row writeset builds no tree of a million nodes.
#[derive(Debug, Default)]
pub struct ChainsBuilder {
    /// Sorted, each once (SHARED): a few databases and tables.
    prefixes: Vec<ChainId>,
    chains: Vec<Reference>,
    keys: usize,
    /// The keys' size as Galera counts it (`KeySlice::byte_len`).
    key_bytes: usize,
}

impl ChainsBuilder {
    /// The chains of `keys`: hashing, which the origin does before it takes the core's lock
    /// to `append` them.
    pub fn of(keys: KeySlice<'_>) -> ChainsBuilder {
        // Sized for the keys: one call of the server's is a key or a few.
        let chains = Vec::with_capacity(keys.len());
        let mut builder = ChainsBuilder { chains, keys: keys.len(), key_bytes: keys.byte_len(), ..Default::default() };
        for key in keys.iter() {
            let whole = key.part_count();
            for (len, chain) in (1..).zip(key.chain_ids()) {
                if len < whole {
                    builder.add_prefix(chain);
                } else {
                    builder.push(Reference::new(chain, key.kind));
                }
            }
        }
        builder
    }

    /// A finished writeset's chains and its keys' size, to encode it again.
    pub fn resume(Chains(chains): Chains, key_bytes: usize) -> ChainsBuilder {
        ChainsBuilder { chains, key_bytes, ..ChainsBuilder::default() }
    }

    /// Adds what `other` gathered.
    pub fn append(&mut self, other: ChainsBuilder) {
        for chain in other.prefixes {
            self.add_prefix(chain);
        }
        if self.chains.is_empty() {
            // A transaction's first key: taken as it is.
            self.chains = other.chains;
        } else {
            for reference in other.chains {
                self.push(reference);
            }
        }
        self.keys += other.keys;
        self.key_bytes += other.key_bytes;
    }

    /// How many keys were added.
    pub fn key_count(&self) -> usize {
        self.keys
    }

    /// The keys' size as Galera counts it.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    fn add_prefix(&mut self, chain: ChainId) {
        if let Err(at) = self.prefixes.binary_search(&chain) {
            self.prefixes.insert(at, chain);
        }
    }

    fn push(&mut self, reference: Reference) {
        // A row's key comes twice in a row when the server appends both images of an
        // UPDATE: skipping the repeat halves what is held and sorted (2.5 million such
        // rows, in a unit probe: 0.19 s instead of 0.44 s to sort).
        if self.chains.last() == Some(&reference) {
            return;
        }
        if self.chains.len() == self.chains.capacity() {
            // By an eighth: doubling held up to twice a big writeset's chains (big blocks
            // grow in place).
            self.chains.reserve_exact((self.chains.len() / 8).max(16));
        }
        self.chains.push(reference);
    }

    /// The chains, sorted, one type a chain.
    pub fn finish(self) -> Chains {
        let ChainsBuilder { prefixes, mut chains, .. } = self;
        // Exactly: doubling for a few prefixes would hold twice a big writeset's chains.
        chains.reserve_exact(prefixes.len());
        chains.extend(prefixes.into_iter().map(|chain| Reference::new(chain, KeyType::Shared)));
        chains.sort_unstable();
        // One type per chain, the strongest: the last of its run.
        chains.dedup_by(|later, kept| {
            let same = later.chain() == kept.chain();
            if same {
                *kept = *later;
            }
            same
        });
        // Keep only what is used (growing and merging types left room).
        if chains.capacity() > chains.len() + 1024 {
            chains.shrink_to_fit();
        }
        Chains(chains)
    }
}

/// What the writeset being certified looks like to the index.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub seqno: Seqno,
    pub last_seen: Seqno,
    pub source: Uuid,
    pub chains: Chains,
    pub isolation: bool,
    pub pa_unsafe: bool,
    pub implicit_deps: bool,
    /// A later fragment of a streaming transaction (no `TRX_START`): it is applied after
    /// everything ordered before it, so after its own earlier fragments, which the same
    /// streaming applier on every node must take in order.
    pub continues_stream: bool,
}

#[derive(Debug, Clone)]
pub struct CertificationIndex {
    entries: HashMap<ChainId, KeyEntry, BuildHasherDefault<ChainHasher>>,
    /// Certified writesets still in the index.
    certified: BTreeMap<Seqno, Certified>,
    /// Certified writesets whose chains are not in `entries` (`BULK_CHAINS` or more): a
    /// lookup searches each one's sorted chains, and takes the latest of what it finds
    /// there and in `entries`, as if they had been entered.
    bulky: BTreeSet<Seqno>,
    /// `BULK_CHAINS`; tests compare both ways of holding chains.
    bulk_from: usize,
    /// Writesets at or below this are purged: their references count for nothing, whether
    /// or not `reclaim` has dropped them from memory yet.
    purged_upto: Seqno,
    last_pa_unsafe: Seqno,
    /// Start of this member's certification history: older `last_seen` cannot be judged.
    initial_position: Seqno,
    optimistic_pa: bool,
}

enum Relation {
    None,
    Dependency,
    ConflictCandidate,
}

/// Galera's table: rows are the earlier reference's type, columns the new writeset's type.
fn relation(earlier: KeyType, new: KeyType) -> Relation {
    use KeyType::*;
    match (earlier, new) {
        (Shared | Reference, Shared | Reference) => Relation::None,
        (Shared, Update | Exclusive) | (Reference, Update) => Relation::Dependency,
        (Reference, Exclusive) => Relation::ConflictCandidate,
        (Update, Shared | Reference) => Relation::Dependency,
        (Update, Update | Exclusive) | (Exclusive, _) => Relation::ConflictCandidate,
    }
}

impl CertificationIndex {
    pub fn new(initial_position: Seqno) -> CertificationIndex {
        CertificationIndex {
            entries: HashMap::default(),
            certified: BTreeMap::new(),
            bulky: BTreeSet::new(),
            bulk_from: BULK_CHAINS,
            purged_upto: SEQNO_UNDEFINED,
            last_pa_unsafe: SEQNO_UNDEFINED,
            initial_position,
            optimistic_pa: true,
        }
    }

    pub fn set_optimistic_pa(&mut self, on: bool) {
        self.optimistic_pa = on;
    }

    /// Number of key chains held (`cert_index_size`).
    pub fn size(&self) -> usize {
        self.entries.len() + self.bulky_chains()
    }

    /// Chains held by writesets kept out of the table.
    fn bulky_chains(&self) -> usize {
        self.bulky.iter().filter_map(|seqno| self.certified.get(seqno)).map(|certified| certified.chains.len()).sum()
    }

    /// Per key type, the latest live writeset that set `chain` with that type.
    fn latest(&self, chain: ChainId) -> [Seqno; 4] {
        let mut latest = self.entries.get(&chain).map_or([NO_WRITESET; 4], |e| e.latest);
        for &seqno in self.bulky.range(self.purged_upto + 1..) {
            let Some(bulk) = self.certified.get(&seqno) else { continue };
            if let Ok(i) = bulk.chains.binary_search_by_key(&chain, |r| r.chain()) {
                let kind = bulk.chains[i].kind() as usize;
                latest[kind] = latest[kind].max(seqno);
            }
        }
        latest
    }

    /// Enters a certified writeset: its chains into the table, or, if it has many, as a
    /// sorted vector of its own.
    fn enter(&mut self, seqno: Seqno, certified: Certified) {
        if certified.chains.len() >= self.bulk_from {
            self.bulky.insert(seqno);
        } else {
            // At most one growth of the table for the whole writeset, not a doubling after
            // another (each one touching every bucket again).
            self.entries.reserve(certified.chains.len());
            for reference in &certified.chains {
                self.entries.entry(reference.chain()).or_default().latest[reference.kind() as usize] = seqno;
            }
        }
        self.certified.insert(seqno, certified);
    }

    /// Certifies the next writeset in the global order; on success it enters the index.
    pub fn certify(&mut self, w: Candidate) -> Verdict {
        if w.seqno - w.last_seen > CERT_MAX_LENGTH || w.last_seen < self.initial_position {
            return Verdict::Fail;
        }
        self.reclaim();
        let Chains(chains) = w.chains;
        let mut depends_on = if w.pa_unsafe || w.isolation || w.continues_stream {
            w.seqno - 1
        } else if w.implicit_deps {
            w.last_seen
        } else {
            (w.last_seen - PA_RANGE_MAX).max(SEQNO_UNDEFINED)
        };
        let oldest_certified = self.certified.range(self.purged_upto + 1..).next().map_or(w.seqno, |(s, _)| *s);
        depends_on = depends_on.max(oldest_certified - 1);
        if !self.optimistic_pa {
            depends_on = depends_on.max(w.last_seen);
        }
        for reference in &chains {
            let new_type = reference.kind();
            let latest = self.latest(reference.chain());
            for earlier_type in KeyType::ALL {
                let earlier = latest[earlier_type as usize];
                if earlier == NO_WRITESET || earlier <= self.purged_upto {
                    continue;
                }
                match relation(earlier_type, new_type) {
                    Relation::None => {}
                    Relation::Dependency => depends_on = depends_on.max(earlier),
                    Relation::ConflictCandidate => {
                        if earlier > w.last_seen && !w.isolation {
                            // Unseen: a conflict if it came from another member or was TOI.
                            // (A live reference's writeset is always in `certified`.)
                            let foreign = self
                                .certified
                                .get(&earlier)
                                .is_none_or(|c| c.origin.isolation || c.origin.source != w.source);
                            if foreign {
                                return Verdict::Fail;
                            }
                        }
                        depends_on = depends_on.max(earlier);
                    }
                }
            }
        }
        depends_on = depends_on.max(self.last_pa_unsafe);
        if w.isolation {
            depends_on = w.seqno - 1;
        }
        let origin = Origin { source: w.source, isolation: w.isolation };
        self.enter(w.seqno, Certified { origin, chains });
        if w.pa_unsafe {
            self.last_pa_unsafe = w.seqno;
        }
        Verdict::Pass { depends_on: depends_on.min(w.seqno - 1) }
    }

    /// The index as bytes, for a joiner that continues certifying where a donor stands (the
    /// per-key references follow from the certified writesets, so only those travel).
    pub fn encode(&self, w: &mut Writer) {
        let live = self.certified.range(self.purged_upto + 1..);
        w.u64(self.initial_position as u64).u64(self.last_pa_unsafe as u64).len(live.clone().count());
        for (seqno, Certified { origin, chains }) in live {
            w.u64(*seqno as u64).fixed(&origin.source.0).bool(origin.isolation).len(chains.len());
            for reference in chains {
                w.fixed(&reference.chain().to_le_bytes()).u8(reference.kind() as u8);
            }
        }
    }

    /// A hash of the index's content (FNV-1a of its encoding): equal indexes certify alike.
    pub fn digest(&self) -> u64 {
        let mut w = Writer::default();
        self.encode(&mut w);
        w.bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }

    pub fn decode(r: &mut Reader<'_>, optimistic_pa: bool) -> Result<CertificationIndex, DecodeError> {
        let mut index = CertificationIndex::new(r.u64()? as Seqno);
        index.optimistic_pa = optimistic_pa;
        index.last_pa_unsafe = r.u64()? as Seqno;
        let mut previous = None;
        for _ in 0..r.len(26)? {
            let seqno = r.u64()? as Seqno;
            if previous.is_some_and(|p| p >= seqno) {
                return Err(DecodeError("certified writesets out of order"));
            }
            previous = Some(seqno);
            let origin = Origin { source: Uuid(r.array()?), isolation: r.bool()? };
            let mut chains = Vec::new();
            for _ in 0..r.len(9)? {
                let chain = ChainId::from_le_bytes(r.array()?) & !3;
                let kind = KeyType::from_raw(u32::from(r.u8()?)).ok_or(DecodeError("unknown key type"))?;
                chains.push(Reference::new(chain, kind));
            }
            // A bulky writeset's chains are searched: they must be sorted, one type a chain.
            if chains.len() >= index.bulk_from && !chains.windows(2).all(|p| p[0].chain() < p[1].chain()) {
                return Err(DecodeError("a big writeset's chains out of order"));
            }
            index.enter(seqno, Certified { origin, chains });
        }
        Ok(index)
    }

    /// Drops every writeset at or below `upto`: no member can still conflict with them. At
    /// once for certification; from memory `RECLAIM_CHAINS` at a time (`reclaim`).
    pub fn purge_upto(&mut self, upto: Seqno) {
        self.purged_upto = self.purged_upto.max(upto);
        self.reclaim();
    }

    /// Drops up to `RECLAIM_CHAINS` chains of purged writesets from memory. Invisible to
    /// certification, so how far it got may differ between members.
    pub fn reclaim(&mut self) {
        let mut budget = RECLAIM_CHAINS;
        while budget > 0 {
            let Some(mut entry) = self.certified.first_entry() else { break };
            let seqno = *entry.key();
            if seqno > self.purged_upto {
                break;
            }
            if self.bulky.remove(&seqno) {
                // Its chains were never in the table: it goes in one step.
                entry.remove();
                budget = budget.saturating_sub(1);
                continue;
            }
            let chains = &mut entry.get_mut().chains;
            let take = chains.len().min(budget);
            budget -= take;
            for reference in chains.drain(chains.len() - take..) {
                let chain = reference.chain();
                if let Some(e) = self.entries.get_mut(&chain) {
                    if e.latest[reference.kind() as usize] == seqno {
                        e.latest[reference.kind() as usize] = NO_WRITESET;
                    }
                    if e.latest.iter().all(|&s| s == NO_WRITESET) {
                        self.entries.remove(&chain);
                    }
                }
            }
            if chains.is_empty() {
                entry.remove();
            }
            // An empty writeset (no keys) still counts a little, so the loop ends.
            budget = budget.saturating_sub(1);
        }
        // A big writeset's chains leave a table sized for them: give the memory back once
        // most are gone (a checkpoint copies the whole table, empty buckets included: after a
        // million-row writeset that was 16 % of a node's time). Rehashing what is left costs
        // at most a quarter of the table, and halves each time.
        if self.entries.capacity() > SHRINK_ABOVE_CAPACITY && self.entries.len() * 4 < self.entries.capacity() {
            self.entries.shrink_to(self.entries.len() * 2);
        }
    }

    /// What copying the index costs, in chains: the table's room, used or not, and the
    /// chains of writesets kept out of it (`bulky`).
    pub fn copy_cost(&self) -> usize {
        self.entries.capacity() + self.bulky_chains()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::{Key, KeySet};

    const A: Uuid = Uuid([1; 16]);
    const B: Uuid = Uuid([2; 16]);

    fn row(table: &str, id: u8, kind: KeyType) -> Key {
        Key::new(vec![b"db".to_vec(), table.as_bytes().to_vec(), vec![id]], kind)
    }

    fn table(name: &str) -> Key {
        Key::new(vec![b"db".to_vec(), name.as_bytes().to_vec()], KeyType::Exclusive)
    }

    fn set(keys: &[Key]) -> KeySet {
        keys.iter().cloned().collect()
    }

    fn chain_id(parts: &[Vec<u8>]) -> ChainId {
        super::super::key::chain_ids(parts.iter().map(Vec::as_slice)).last().expect("a part at least")
    }

    fn trx(seqno: Seqno, last_seen: Seqno, source: Uuid, keys: &KeySet) -> Candidate {
        Candidate {
            seqno,
            last_seen,
            source,
            chains: Chains::of(keys.as_slice()),
            isolation: false,
            pa_unsafe: false,
            implicit_deps: false,
            continues_stream: false,
        }
    }

    #[test]
    fn concurrent_updates_of_one_row_from_two_members_conflict() {
        let mut index = CertificationIndex::new(0);
        let k = set(&[row("t", 1, KeyType::Update)]);
        assert!(matches!(index.certify(trx(1, 0, A, &k)), Verdict::Pass { .. }));
        assert_eq!(index.certify(trx(2, 0, B, &k)), Verdict::Fail);
        // Having seen seqno 1, the same update certifies and depends on it.
        assert_eq!(index.certify(trx(3, 1, B, &k)), Verdict::Pass { depends_on: 1 });
    }

    #[test]
    fn a_later_fragment_applies_after_everything_before_it() {
        let mut index = CertificationIndex::new(0);
        assert!(matches!(index.certify(trx(1, 0, A, &set(&[row("t", 1, KeyType::Update)]))), Verdict::Pass { .. }));
        assert!(matches!(index.certify(trx(2, 0, B, &set(&[row("t", 2, KeyType::Update)]))), Verdict::Pass { .. }));
        // Unrelated keys, yet it waits for seqno 2: its own first fragment may be any earlier one.
        let keys = set(&[row("t", 3, KeyType::Update)]);
        let later = Candidate { continues_stream: true, ..trx(3, 1, A, &keys) };
        assert_eq!(index.certify(later), Verdict::Pass { depends_on: 2 });
    }

    #[test]
    fn writesets_of_one_member_never_conflict_with_each_other() {
        let mut index = CertificationIndex::new(0);
        let k = set(&[row("t", 1, KeyType::Exclusive)]);
        assert!(matches!(index.certify(trx(1, 0, A, &k)), Verdict::Pass { .. }));
        assert_eq!(index.certify(trx(2, 0, A, &k)), Verdict::Pass { depends_on: 1 });
    }

    #[test]
    fn references_do_not_conflict_but_exclusive_after_reference_does() {
        let mut index = CertificationIndex::new(0);
        let parent_ref = set(&[row("parent", 7, KeyType::Reference)]);
        assert!(matches!(index.certify(trx(1, 0, A, &parent_ref)), Verdict::Pass { .. }));
        assert!(matches!(index.certify(trx(2, 0, B, &parent_ref)), Verdict::Pass { .. }));
        let parent_delete = set(&[row("parent", 7, KeyType::Exclusive)]);
        assert_eq!(index.certify(trx(3, 0, A, &parent_delete)), Verdict::Fail);
    }

    #[test]
    fn isolation_wins_even_against_the_same_member() {
        let mut index = CertificationIndex::new(0);
        let ddl = set(&[table("t")]);
        let toi = Candidate { isolation: true, ..trx(1, 0, A, &ddl) };
        assert_eq!(index.certify(toi), Verdict::Pass { depends_on: 0 });
        // A row change on t from the same member that had not seen the DDL fails
        // through the branch key [db, t].
        assert_eq!(index.certify(trx(2, 0, A, &set(&[row("t", 1, KeyType::Update)]))), Verdict::Fail);
        assert_eq!(index.certify(trx(3, 1, A, &set(&[row("t", 1, KeyType::Update)]))), Verdict::Pass { depends_on: 1 });
    }

    #[test]
    fn unrelated_rows_may_apply_in_parallel() {
        let mut index = CertificationIndex::new(0);
        assert!(matches!(index.certify(trx(1, 0, A, &set(&[row("t", 1, KeyType::Update)]))), Verdict::Pass { .. }));
        // Depends only on what was still in the index below it (the floor), not on seqno 1.
        assert_eq!(index.certify(trx(2, 1, B, &set(&[row("t", 2, KeyType::Update)]))), Verdict::Pass { depends_on: 0 });
    }

    #[test]
    fn pa_unsafe_writesets_serialise_what_follows() {
        let mut index = CertificationIndex::new(0);
        let keys = set(&[row("t", 1, KeyType::Update)]);
        let unsafe_ws = Candidate { pa_unsafe: true, ..trx(1, 0, A, &keys) };
        assert_eq!(index.certify(unsafe_ws), Verdict::Pass { depends_on: 0 });
        assert_eq!(index.certify(trx(2, 1, B, &set(&[row("u", 9, KeyType::Update)]))), Verdict::Pass { depends_on: 1 });
    }

    #[test]
    fn windows_that_are_too_long_or_predate_the_history_fail() {
        let mut index = CertificationIndex::new(10);
        assert_eq!(index.certify(trx(11, 9, A, &set(&[]))), Verdict::Fail);
        assert_eq!(index.certify(trx(20_000, 11, A, &set(&[]))), Verdict::Fail);
    }

    #[test]
    fn an_index_sent_to_a_joiner_gives_the_same_verdicts() {
        let mut donor = CertificationIndex::new(3);
        let toi = set(&[table("u")]);
        donor.certify(trx(4, 3, A, &set(&[row("t", 1, KeyType::Update), row("t", 2, KeyType::Reference)])));
        donor.certify(Candidate { isolation: true, ..trx(5, 4, B, &toi) });
        donor.certify(Candidate { pa_unsafe: true, ..trx(6, 5, B, &set(&[row("t", 1, KeyType::Update)])) });
        donor.purge_upto(4);
        let mut w = Writer::default();
        donor.encode(&mut w);
        let mut joiner = CertificationIndex::decode(&mut Reader::new(&w.bytes), true).unwrap();
        assert_eq!(joiner.size(), donor.size());
        let probes: [(Seqno, Seqno, Uuid, KeySet); 4] = [
            (7, 5, A, set(&[row("t", 1, KeyType::Update)])),
            (8, 4, A, set(&[row("u", 3, KeyType::Update)])),
            (9, 6, B, set(&[row("t", 2, KeyType::Exclusive)])),
            (10, 2, B, set(&[])),
        ];
        for (seqno, last_seen, source, keys) in &probes {
            let probe = trx(*seqno, *last_seen, *source, keys);
            assert_eq!(joiner.certify(probe.clone()), donor.certify(probe), "seqno {seqno}");
        }
        for cut in 0..w.bytes.len() {
            assert!(CertificationIndex::decode(&mut Reader::new(&w.bytes[..cut]), true).is_err());
        }
    }

    #[test]
    fn purge_forgets_old_writesets() {
        let mut index = CertificationIndex::new(0);
        let k = set(&[row("t", 1, KeyType::Update)]);
        assert!(matches!(index.certify(trx(1, 0, A, &k)), Verdict::Pass { .. }));
        assert_eq!(index.size(), 3, "row key plus two branch keys");
        index.purge_upto(1);
        assert_eq!(index.size(), 0);
        // With seqno 1 purged, an old last_seen no longer sees the conflict; purging is
        // only safe below what every member has committed, so such a writeset cannot exist.
        assert!(matches!(index.certify(trx(2, 1, B, &k)), Verdict::Pass { .. }));
    }

    #[test]
    fn a_writeset_sets_each_chain_once_with_its_strongest_type_in_chain_order() {
        // Two rows of one table (their prefixes shared), the same row twice, and the table
        // itself as an exclusive key, stronger than the SHARED prefix the rows give it.
        let keys = set(&[
            row("t", 1, KeyType::Reference),
            row("t", 2, KeyType::Update),
            row("t", 1, KeyType::Update),
            table("t"),
        ]);
        let Chains(chains) = Chains::of(keys.as_slice());
        let mut expected = vec![
            Reference::new(chain_id(&[b"db".to_vec()]), KeyType::Shared),
            Reference::new(chain_id(&[b"db".to_vec(), b"t".to_vec()]), KeyType::Exclusive),
            Reference::new(chain_id(&row("t", 1, KeyType::Update).parts), KeyType::Update),
            Reference::new(chain_id(&row("t", 2, KeyType::Update).parts), KeyType::Update),
        ];
        expected.sort();
        assert_eq!(chains, expected);
    }

    #[test]
    fn a_big_writeset_reclaimed_gives_its_memory_back() {
        let mut index = CertificationIndex { bulk_from: usize::MAX, ..CertificationIndex::new(0) };
        let big: KeySet = (0..200_000u32).map(|i| Key::new(vec![i.to_be_bytes().to_vec()], KeyType::Update)).collect();
        assert!(matches!(index.certify(trx(1, 0, A, &big)), Verdict::Pass { .. }));
        let small = set(&[Key::new(vec![b"row".to_vec()], KeyType::Update)]);
        assert!(matches!(index.certify(trx(2, 1, A, &small)), Verdict::Pass { .. }));
        assert!(index.copy_cost() >= 200_000);
        index.purge_upto(1);
        while index.size() > 10 {
            index.reclaim();
        }
        assert!(index.copy_cost() <= SHRINK_ABOVE_CAPACITY, "room for {} chains kept", index.copy_cost());
    }

    #[test]
    fn a_purged_writeset_counts_for_nothing_at_once_and_leaves_memory_a_slice_at_a_time() {
        let mut index = CertificationIndex::new(0);
        let big: KeySet =
            (0..RECLAIM_CHAINS as u32 * 2).map(|i| Key::new(vec![i.to_be_bytes().to_vec()], KeyType::Update)).collect();
        assert!(matches!(index.certify(trx(1, 0, A, &big)), Verdict::Pass { .. }));
        let mut eager = index.clone();
        index.purge_upto(1);
        assert!(index.size() > RECLAIM_CHAINS / 2, "not all at once: {}", index.size());
        // Certification already sees it gone: a writeset of another member that had not seen
        // seqno 1 passes (with nothing certified left, it waits for what precedes it).
        let second = set(&[Key::new(vec![5u32.to_be_bytes().to_vec()], KeyType::Update)]);
        assert_eq!(index.certify(trx(2, 0, B, &second)), Verdict::Pass { depends_on: 1 });
        // As an index purged in one go would say, and its encoding is the same.
        while eager.certified.first_key_value().is_some_and(|(s, _)| *s <= 1) {
            eager.purged_upto = 1;
            eager.reclaim();
        }
        assert_eq!(eager.certify(trx(2, 0, B, &second)), Verdict::Pass { depends_on: 1 });
        assert_eq!(index.digest(), eager.digest());
        for _ in 0..4 {
            index.reclaim();
        }
        assert_eq!(index.size(), 1);
        assert_eq!(index.certified.len(), 1);
    }

    #[test]
    fn a_writeset_with_many_chains_stays_out_of_the_table_and_leaves_in_one_step() {
        let mut index = CertificationIndex::new(0);
        let rows = BULK_CHAINS as u32 * 3;
        let big: KeySet = (0..rows).map(|i| Key::new(vec![i.to_be_bytes().to_vec()], KeyType::Update)).collect();
        assert!(matches!(index.certify(trx(1, 0, A, &big)), Verdict::Pass { .. }));
        assert!(index.entries.capacity() < 1024, "{} buckets", index.entries.capacity());
        assert_eq!(index.size(), rows as usize);
        // A copy of the index (a checkpoint's) would copy them all.
        assert!(index.copy_cost() >= rows as usize);
        // Another member that had not seen it conflicts on any of its rows.
        let one_row = set(&[Key::new(vec![77u32.to_be_bytes().to_vec()], KeyType::Update)]);
        assert_eq!(index.certify(trx(2, 0, B, &one_row)), Verdict::Fail);
        let elsewhere = set(&[Key::new(vec![rows.to_be_bytes().to_vec()], KeyType::Update)]);
        assert_eq!(index.certify(trx(3, 0, B, &elsewhere)), Verdict::Pass { depends_on: 0 });
        index.purge_upto(1);
        assert_eq!(index.size(), 1, "gone at the first reclaim");
    }

    /// Holding chains in the table or searching a writeset's own sorted chains gives the same
    /// verdicts, dependencies and encoding, through purges and a transfer to a joiner.
    #[test]
    fn searched_chains_certify_exactly_as_chains_in_the_table() {
        let mut seed = 0x5eed_u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut in_table = CertificationIndex { bulk_from: usize::MAX, ..CertificationIndex::new(0) };
        let mut searched = CertificationIndex { bulk_from: 2, ..CertificationIndex::new(0) };
        let kinds = [KeyType::Shared, KeyType::Reference, KeyType::Update, KeyType::Exclusive];
        for seqno in 1..3_000 {
            let keys: KeySet = (0..1 + next(5))
                .map(|_| {
                    let name = if next(2) == 0 { "t" } else { "u" };
                    if next(20) == 0 {
                        table(name)
                    } else {
                        row(name, next(12) as u8, kinds[next(4) as usize])
                    }
                })
                .collect();
            let candidate = Candidate {
                isolation: next(50) == 0,
                pa_unsafe: next(40) == 0,
                continues_stream: next(30) == 0,
                ..trx(seqno, seqno - 1 - next(8) as Seqno, if next(2) == 0 { A } else { B }, &keys)
            };
            assert_eq!(in_table.certify(candidate.clone()), searched.certify(candidate), "seqno {seqno}");
            if next(10) == 0 {
                let upto = seqno - 1 - next(20) as Seqno;
                in_table.purge_upto(upto);
                searched.purge_upto(upto);
            }
            if seqno % 500 == 0 {
                assert_eq!(in_table.digest(), searched.digest());
                let mut w = Writer::default();
                searched.encode(&mut w);
                let joiner = CertificationIndex::decode(&mut Reader::new(&w.bytes), true).unwrap();
                searched = CertificationIndex { bulk_from: 2, ..joiner };
            }
        }
        assert!(!searched.bulky.is_empty() && searched.entries.len() < in_table.entries.len());
    }
}
