//! Certification keys: an ordered chain of parts (database, table, row) and an access type.

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

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Key {
    pub parts: Vec<Vec<u8>>,
    pub kind: KeyType,
}

impl Key {
    pub fn new(parts: Vec<Vec<u8>>, kind: KeyType) -> Key {
        Key { parts, kind }
    }

    /// Encoded size, for `repl_keys_bytes` and size limits.
    pub fn byte_len(&self) -> usize {
        self.parts.iter().map(|p| p.len() + 1).sum()
    }
}

/// The identity of a part chain in the index: a 128-bit FNV-1a hash of its parts, each
/// length-prefixed so that no two different chains hash the same bytes. Two chains that
/// collide count as one: that can add a conflict or a dependency, never hide one (and with
/// a billion chains in the index the chance is about 10^-21). A hash instead of the bytes
/// keeps a million-row writeset's chains at 16 bytes each, with no allocation.
pub(crate) type ChainId = u128;

pub(crate) fn chain_id(parts: &[Vec<u8>]) -> ChainId {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut hash = OFFSET;
    for part in parts {
        for &byte in (part.len() as u32).to_le_bytes().iter().chain(part) {
            hash = (hash ^ u128::from(byte)).wrapping_mul(PRIME);
        }
    }
    hash
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

    fn write_u128(&mut self, id: u128) {
        self.0 = (id as u64) ^ ((id >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_differ_by_where_their_parts_end() {
        let ab_c = chain_id(&[b"ab".to_vec(), b"c".to_vec()]);
        let a_bc = chain_id(&[b"a".to_vec(), b"bc".to_vec()]);
        assert_ne!(ab_c, a_bc);
        assert_ne!(chain_id(&[b"ab".to_vec()]), ab_c);
        assert_eq!(ab_c, chain_id(&[b"ab".to_vec(), b"c".to_vec()]));
    }
}
