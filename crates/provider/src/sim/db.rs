//! The simulated server's storage: rows of one table, committed in seqno order, that survive
//! a crash of the node; what a state transfer by snapshot copies.
use crate::types::{Gtid, Seqno, Uuid};
use std::collections::BTreeMap;

/// One row write: key, value.
pub type Write = (u8, u64);

/// One commit: its content hash (0: rolled back), its writes, and whether it was an isolated
/// statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub hash: u64,
    pub writes: Vec<Write>,
}

/// The rows of one table, committed in the global order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Db {
    pub history: Uuid,
    /// The newest seqno whose outcome this database holds.
    pub committed: Seqno,
    /// Every commit this database holds, by seqno (a snapshot carries them along).
    pub log: BTreeMap<Seqno, Commit>,
}

impl Db {
    /// An empty database: it needs a snapshot, or it is where a new cluster starts.
    pub fn new(history: Uuid, committed: Seqno) -> Self {
        Db { history, committed, log: BTreeMap::new() }
    }

    /// Where recovery finds this database (what `mariadbd --wsrep-recover` reports).
    pub fn position(&self) -> Gtid {
        if self.history.is_nil() {
            Gtid::UNDEFINED
        } else {
            Gtid::new(self.history, self.committed)
        }
    }

    /// Commits `writes` at `seqno` (`None`: rolled back, only the position moves). `Err` if
    /// the commit order is broken.
    pub fn commit(
        &mut self,
        history: Uuid,
        seqno: Seqno,
        writes: Option<&[Write]>,
        isolation: bool,
    ) -> Result<(), String> {
        if history != self.history && !self.history.is_nil() {
            return Err(format!("commit of seqno {seqno} of history {history} into a database of {}", self.history));
        }
        if seqno <= self.committed {
            return Err(format!("seqno {seqno} committed after seqno {}", self.committed));
        }
        self.history = history;
        self.committed = seqno;
        let commit = match writes {
            Some(writes) => Commit { hash: hash_writes(writes, isolation), writes: writes.to_vec() },
            None => Commit { hash: 0, writes: Vec::new() },
        };
        self.log.insert(seqno, commit);
        Ok(())
    }

    /// Whether this database holds seqno `seqno`'s outcome.
    pub fn holds(&self, seqno: Seqno) -> bool {
        self.log.contains_key(&seqno)
    }

    /// The database as of `at` (a consistent snapshot: what a donor sends).
    pub fn snapshot(&self, at: Seqno) -> Db {
        Db { history: self.history, committed: at, log: self.log.range(..=at).map(|(s, c)| (*s, c.clone())).collect() }
    }

    /// The table's rows.
    pub fn rows(&self) -> BTreeMap<u8, u64> {
        let mut rows = BTreeMap::new();
        for commit in self.log.values() {
            rows.extend(commit.writes.iter().copied());
        }
        rows
    }
}

pub fn encode_writes(writes: &[Write]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(writes.len() * 9);
    for &(key, value) in writes {
        bytes.push(key);
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

pub fn decode_writes(bytes: &[u8]) -> Result<Vec<Write>, String> {
    if !bytes.len().is_multiple_of(9) {
        return Err(format!("writeset data of {} bytes is not whole rows", bytes.len()));
    }
    Ok(bytes.chunks(9).map(|c| (c[0], u64::from_le_bytes(c[1..].try_into().expect("8 bytes")))).collect())
}

/// FNV-1a of a commit's content, never 0 (0 means rolled back).
pub fn hash_writes(writes: &[Write], isolation: bool) -> u64 {
    let bytes = encode_writes(writes);
    std::iter::once(u8::from(isolation))
        .chain(bytes)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
        | 1
}
