//! Certification keys: an ordered chain of parts (database, table, row) and an access type.

use lockstep_group::codec::{DecodeError, Reader};

/// Access types in increasing strength (wsrep v26 values).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub enum KeyType {
    Shared = 0,
    Reference = 1,
    Update = 2,
    Exclusive = 3,
}

impl KeyType {
    pub const ALL: [KeyType; 4] = [KeyType::Shared, KeyType::Reference, KeyType::Update, KeyType::Exclusive];

    pub fn from_raw(raw: u32) -> Option<KeyType> {
        Self::ALL.get(raw as usize).copied()
    }
}

/// One key with parts of its own: the form tests, the simulator and isolated statements
/// build. Writesets hold their keys as a [`KeySet`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Key {
    pub parts: Vec<Vec<u8>>,
    pub kind: KeyType,
}

impl Key {
    pub fn new(parts: Vec<Vec<u8>>, kind: KeyType) -> Key {
        Key { parts, kind }
    }
}

/// Keys as one buffer: per key its type (u8), its part count (u32), then each part
/// length-prefixed (u32). What the server appends in one call, and an isolated statement's
/// keys, on their way to becoming chains (`ChainsBuilder::of`); writesets of the first
/// format carried their keys so. A key costs its bytes plus nine, where a vector of parts
/// cost about 200 bytes in four allocations (docs/design/certification.md).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeySet {
    bytes: Vec<u8>,
    count: usize,
    /// Sum over the keys' parts of length + 1: the size Galera counts (`repl_keys_bytes`).
    part_bytes: usize,
}

impl KeySet {
    pub fn push(&mut self, kind: KeyType, parts: &[&[u8]]) {
        self.bytes.push(kind as u8);
        self.bytes.extend_from_slice(&length(parts.len()).to_le_bytes());
        for part in parts {
            self.bytes.extend_from_slice(&length(part.len()).to_le_bytes());
            self.bytes.extend_from_slice(part);
            self.part_bytes += part.len() + 1;
        }
        self.count += 1;
    }

    pub fn push_key(&mut self, key: &Key) {
        let parts: Vec<&[u8]> = key.parts.iter().map(Vec::as_slice).collect();
        self.push(key.kind, &parts);
    }

    #[cfg(test)]
    pub fn append(&mut self, other: &KeySet) {
        self.bytes.extend_from_slice(&other.bytes);
        self.count += other.count;
        self.part_bytes += other.part_bytes;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size, for `repl_keys_bytes` and size limits.
    pub fn byte_len(&self) -> usize {
        self.part_bytes
    }

    pub fn iter(&self) -> impl Iterator<Item = KeyRef<'_>> {
        self.as_slice().iter()
    }

    /// The keys, borrowed.
    pub fn as_slice(&self) -> KeySlice<'_> {
        KeySlice { bytes: &self.bytes, count: self.count, part_bytes: self.part_bytes }
    }

    /// The keys as a writeset of the first format carried them after their count.
    #[cfg(test)]
    pub fn encoded_keys(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
impl From<KeySlice<'_>> for KeySet {
    fn from(keys: KeySlice<'_>) -> KeySet {
        KeySet { bytes: keys.bytes.to_vec(), count: keys.count, part_bytes: keys.part_bytes }
    }
}

/// Keys borrowed from a [`KeySet`] or, checked, from a writeset of the first format where
/// it was received: what `ChainsBuilder::of` hashes.
#[derive(Clone, Copy)]
pub struct KeySlice<'a> {
    bytes: &'a [u8],
    count: usize,
    part_bytes: usize,
}

impl<'a> KeySlice<'a> {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size, as [`KeySet::byte_len`].
    pub fn byte_len(&self) -> usize {
        self.part_bytes
    }

    /// Reads keys as a writeset of the first format carried them (count, then keys),
    /// checking every key, in place.
    pub fn decode(r: &mut Reader<'a>) -> Result<KeySlice<'a>, DecodeError> {
        let count = r.len(5)?;
        let mut walk = r.clone();
        let mut part_bytes = 0;
        for _ in 0..count {
            KeyType::from_raw(u32::from(walk.u8()?)).ok_or(DecodeError("unknown key type"))?;
            for _ in 0..walk.len(4)? {
                part_bytes += walk.bytes_in_place()?.len() + 1;
            }
        }
        let bytes = r.fixed(r.remaining() - walk.remaining())?;
        Ok(KeySlice { bytes, count, part_bytes })
    }

    pub fn iter(self) -> impl Iterator<Item = KeyRef<'a>> {
        let mut rest = self.bytes;
        std::iter::from_fn(move || {
            let (&kind, tail) = rest.split_first()?;
            let kind = KeyType::from_raw(u32::from(kind)).expect("checked when pushed or decoded");
            let (count, mut tail) = split_length(tail);
            let parts = tail;
            for _ in 0..count {
                let (len, after) = split_length(tail);
                tail = &after[len..];
            }
            rest = tail;
            Some(KeyRef { kind, count, parts: &parts[..parts.len() - tail.len()] })
        })
    }
}

impl FromIterator<Key> for KeySet {
    fn from_iter<I: IntoIterator<Item = Key>>(keys: I) -> KeySet {
        let mut set = KeySet::default();
        for key in keys {
            set.push_key(&key);
        }
        set
    }
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|k| (k.kind, k.parts().collect::<Vec<_>>()))).finish()
    }
}

/// One key of a [`KeySet`].
pub struct KeyRef<'a> {
    pub kind: KeyType,
    count: usize,
    /// The parts, each length-prefixed.
    parts: &'a [u8],
}

impl<'a> KeyRef<'a> {
    pub fn part_count(&self) -> usize {
        self.count
    }

    pub fn parts(&self) -> impl Iterator<Item = &'a [u8]> {
        let mut rest = self.parts;
        (0..self.count).map(move |_| {
            let (len, tail) = split_length(rest);
            let (part, tail) = tail.split_at(len);
            rest = tail;
            part
        })
    }

    /// The chain of each prefix of the key, the whole key last.
    pub(crate) fn chain_ids(&self) -> impl Iterator<Item = ChainId> + 'a {
        chain_ids(self.parts())
    }
}

fn length(n: usize) -> u32 {
    u32::try_from(n).expect("bounded by repl.max_ws_size")
}

/// A u32 length at the front of a checked key buffer, and what follows it.
fn split_length(bytes: &[u8]) -> (usize, &[u8]) {
    let (len, rest) = bytes.split_at(4);
    (u32::from_le_bytes(len.try_into().expect("four bytes")) as usize, rest)
}

/// The identity of a part chain in the index: the high 64 bits of a 128-bit FNV-1a hash of
/// its parts, each length-prefixed so that no two different chains hash the same bytes, its
/// two low bits cleared (the index keeps a key's type there: [`Reference`]). Two chains that
/// collide count as one: that can add a conflict or a dependency, never hide one. The chance
/// is that of Galera's default 8-byte key hashes (`repl.key_format=FLAT8`): about 2^-62 per
/// chain held, 10^-12 for a lookup in an index of 2.5 million chains. A hash instead of the
/// bytes keeps a million-row writeset's chains at 8 bytes each, with no allocation.
pub(crate) type ChainId = u64;

/// A chain and the type a writeset gives it, in one `u64`: the chain with the type in its
/// two low bits. Ordered by chain, then type. A big writeset's references take 8 bytes each
/// where a (chain, type) pair took 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Reference(u64);

impl Reference {
    pub(crate) fn new(chain: ChainId, kind: KeyType) -> Reference {
        debug_assert_eq!(chain & 3, 0, "a chain id leaves its low bits for the type");
        Reference(chain | kind as u64)
    }

    pub(crate) fn chain(self) -> ChainId {
        self.0 & !3
    }

    pub(crate) fn kind(self) -> KeyType {
        KeyType::ALL[(self.0 & 3) as usize]
    }

    /// As a writeset carries it: every `u64` is a chain and a type.
    pub(crate) fn to_raw(self) -> u64 {
        self.0
    }

    pub(crate) fn from_raw(raw: u64) -> Reference {
        Reference(raw)
    }
}

/// The chain of every prefix of `parts`, in one pass (FNV-1a goes byte by byte, so the
/// hash of a prefix is a step on the way to the next). The high half: the multiplication
/// carries every byte upwards, so those bits are the best mixed.
pub(crate) fn chain_ids<'p>(parts: impl Iterator<Item = &'p [u8]> + 'p) -> impl Iterator<Item = ChainId> + 'p {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut hash = OFFSET;
    parts.map(move |part| {
        for &byte in (part.len() as u32).to_le_bytes().iter().chain(part) {
            hash = (hash ^ u128::from(byte)).wrapping_mul(PRIME);
        }
        (hash >> 64) as u64 & !3
    })
}

/// Hashes a `ChainId` for the index's map: it is a hash already, so its bits serve as they
/// are (no second hash of every chain of a big writeset).
#[derive(Default)]
pub(crate) struct ChainHasher(u64);

impl std::hash::Hasher for ChainHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // The table takes a bucket from the low bits: the type's two are always clear.
        self.0 = id ^ (id >> 32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_group::codec::Writer;

    fn chain_id(parts: &[Vec<u8>]) -> ChainId {
        chain_ids(parts.iter().map(Vec::as_slice)).last().expect("a part at least")
    }

    #[test]
    fn chains_differ_by_where_their_parts_end() {
        let ab_c = chain_id(&[b"ab".to_vec(), b"c".to_vec()]);
        let a_bc = chain_id(&[b"a".to_vec(), b"bc".to_vec()]);
        assert_ne!(ab_c, a_bc);
        assert_ne!(chain_id(&[b"ab".to_vec()]), ab_c);
        assert_eq!(ab_c, chain_id(&[b"ab".to_vec(), b"c".to_vec()]));
    }

    #[test]
    fn each_prefix_has_the_chain_of_that_prefix_alone() {
        let parts = [b"db".to_vec(), b"t".to_vec(), vec![0, 1]];
        let prefixes: Vec<ChainId> = chain_ids(parts.iter().map(Vec::as_slice)).collect();
        assert_eq!(prefixes, vec![chain_id(&parts[..1]), chain_id(&parts[..2]), chain_id(&parts)]);
    }

    #[test]
    fn a_key_set_gives_its_keys_back_and_survives_the_trip() {
        let keys = vec![
            Key::new(vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]], KeyType::Update),
            Key::new(vec![], KeyType::Shared),
            Key::new(vec![b"db".to_vec()], KeyType::Exclusive),
        ];
        let set: KeySet = keys.iter().cloned().collect();
        assert_eq!(set.len(), 3);
        assert_eq!(set.byte_len(), 3 + 2 + 3 + 3, "each part's length plus one");
        let back: Vec<Key> = set.iter().map(|k| Key::new(k.parts().map(<[u8]>::to_vec).collect(), k.kind)).collect();
        assert_eq!(back, keys);
        let mut joined = set.clone();
        joined.append(&set);
        assert_eq!(joined.len(), 6);
        assert_eq!(joined.byte_len(), 2 * set.byte_len());

        let mut w = Writer::default();
        w.len(set.len()).fixed(set.encoded_keys());
        let mut r = Reader::new(&w.bytes);
        assert_eq!(KeySet::from(KeySlice::decode(&mut r).unwrap()), set);
        assert!(r.at_end());
        for cut in 0..w.bytes.len() {
            assert!(KeySlice::decode(&mut Reader::new(&w.bytes[..cut])).is_err(), "cut at {cut}");
        }
        let mut bad_type = w.bytes.clone();
        bad_type[4] = 9;
        assert!(KeySlice::decode(&mut Reader::new(&bad_type)).is_err());
    }

    #[test]
    fn a_reference_keeps_its_chain_and_type_and_sorts_by_chain_first() {
        let [low, high] = [[b"a".to_vec()], [b"b".to_vec()]].map(|parts| chain_id(&parts));
        let (low, high) = (low.min(high), low.max(high));
        for kind in KeyType::ALL {
            let reference = Reference::new(low, kind);
            assert_eq!((reference.chain(), reference.kind()), (low, kind));
            assert!(reference < Reference::new(high, KeyType::Shared));
        }
        assert!(Reference::new(low, KeyType::Shared) < Reference::new(low, KeyType::Exclusive));
    }
}
