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

/// The identity of a part chain in the index: parts length-prefixed, so that no two
/// different chains encode alike.
pub(crate) fn chain_id(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut id = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        id.extend_from_slice(&(part.len() as u32).to_le_bytes());
        id.extend_from_slice(part);
    }
    id
}
