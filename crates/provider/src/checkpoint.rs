//! The certification checkpoint: the group's certification state as this node held it right
//! after a given point of the order, kept in the cache directory so that a node restarted
//! after its log was purged past the group's first view can still certify what follows like
//! every member (docs/design/certification-checkpoint.md).
//!
//! One checked record (`lockstep_group::record`: length and CRC-32C), written aside and
//! renamed over the old file, so a crash leaves the old checkpoint or the new one, and a
//! damaged file is refused, never used.
use crate::ist::Preload;
use crate::types::{Seqno, Uuid};
use lockstep_group::codec::{DecodeError, Reader, Writer};
use lockstep_group::record::{self, RecordKind};
use lockstep_group::transport;
use lockstep_group::MemberId;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// A cache file: a bootstrap's wipe of the cache (a new history) removes it too.
pub const FILE_NAME: &str = "lockstep-cache.certification.galera.cache";
/// Version 6: the preload names the request each donor was chosen for; version 5, the
/// members donating; version 4, the inconsistency votes
/// (version 3 had key chains as 64-bit
/// hashes, version 2 128-bit ones, version 1 their bytes); an older file is refused like a
/// damaged one.
const MAGIC: &[u8; 8] = b"LSCERT\x00\x06";
/// Far above any index a node holds; anything longer is corrupt.
const MAX_BYTES: u32 = 1 << 31;

#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub history: Uuid,
    /// Taken after the numbered delivery at this seqno and `controls` control messages
    /// ordered after it.
    pub at: Seqno,
    pub controls: u32,
    /// This node's committed seqno then. Its data is at least there after a crash, so
    /// verdicts are kept from the seqno after it.
    pub committed: Seqno,
    /// The seqnos in `committed + 1..=at` that failed certification.
    pub failed: Vec<Seqno>,
    /// The members of the view then (their commit cuts purge the index).
    pub members: Vec<MemberId>,
    pub preload: Preload,
    /// Their incarnations in that view, in the same order: a restored member tells from them
    /// which members connected again since (docs/design/donor-choice-of-a-guessing-joiner.md).
    pub incarnations: Vec<u64>,
}

impl Checkpoint {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.fixed(MAGIC).fixed(&self.history.0).u64(self.at as u64).u32(self.controls).u64(self.committed as u64);
        w.len(self.failed.len());
        for seqno in &self.failed {
            w.u64(*seqno as u64);
        }
        w.len(self.members.len());
        for member in &self.members {
            w.u64(member.0);
        }
        w.bytes(&self.preload.encode());
        w.len(self.incarnations.len());
        for incarnation in &self.incarnations {
            w.u64(*incarnation);
        }
        record::encode(RecordKind::StateTransfer, &w.bytes)
    }

    pub fn decode(bytes: &[u8], optimistic_pa: bool) -> Result<Checkpoint, DecodeError> {
        let (kind, body) = transport::read_record(&mut &bytes[..], MAX_BYTES)
            .map_err(|_| DecodeError("not a whole checked record"))?;
        if kind != RecordKind::StateTransfer {
            return Err(DecodeError("not a certification checkpoint"));
        }
        let mut r = Reader::new(&body);
        if &r.array::<8>()? != MAGIC {
            return Err(DecodeError("not a certification checkpoint of this version"));
        }
        let history = Uuid(r.array()?);
        let (at, controls, committed) = (r.u64()? as Seqno, r.u32()?, r.u64()? as Seqno);
        let failed = (0..r.len(8)?).map(|_| r.u64().map(|s| s as Seqno)).collect::<Result<_, _>>()?;
        let members: Vec<MemberId> = (0..r.len(8)?).map(|_| r.u64().map(MemberId)).collect::<Result<_, _>>()?;
        let preload = Preload::decode(&r.bytes()?, optimistic_pa)?.ok_or(DecodeError("checkpoint without index"))?;
        let incarnations: Vec<u64> = (0..r.len(8)?).map(|_| r.u64()).collect::<Result<_, _>>()?;
        if incarnations.len() != members.len() {
            return Err(DecodeError("a checkpoint's members and incarnations differ in number"));
        }
        r.finish()?;
        Ok(Checkpoint { history, at, controls, committed, failed, members, preload, incarnations })
    }

    /// Replaces the checkpoint in `dir`; `sync`: on disk before the rename (`gcache.sync`).
    pub fn write(&self, dir: &Path, sync: bool) -> io::Result<()> {
        let path = dir.join(FILE_NAME);
        let aside = dir.join(format!("{FILE_NAME}.new"));
        let mut file = fs::File::create(&aside)?;
        file.write_all(&self.encode())?;
        if sync {
            file.sync_all()?;
        }
        fs::rename(&aside, &path)?;
        if sync {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The checkpoint in `dir`, if there is one. A damaged one is an error (the caller goes
    /// without: the node then needs a donor, as without a checkpoint).
    pub fn read(dir: &Path, optimistic_pa: bool) -> io::Result<Option<Checkpoint>> {
        let bytes = match fs::read(dir.join(FILE_NAME)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Checkpoint::decode(&bytes, optimistic_pa).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        let votes = crate::ist::Votes {
            open: vec![(10, vec![(MemberId(8), 5)])],
            decided: vec![7],
            snapshot_joiners: vec![(MemberId(8), 9)],
        };
        let preload = Preload { votes, ..crate::ist::tests::preload() };
        let members = vec![MemberId(7), MemberId(8)];
        let incarnations = vec![1, 4];
        Checkpoint {
            history: Uuid([3; 16]),
            at: 11,
            controls: 2,
            committed: 9,
            failed: vec![10],
            members,
            preload,
            incarnations,
        }
    }

    #[test]
    fn survives_the_file_and_a_damaged_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("lockstep-checkpoint-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(Checkpoint::read(&dir, false).unwrap().is_none());
        let written = checkpoint();
        written.write(&dir, true).unwrap();
        let read = Checkpoint::read(&dir, false).unwrap().expect("written");
        assert_eq!((read.history, read.at, read.controls, read.committed), (Uuid([3; 16]), 11, 2, 9));
        assert_eq!((read.failed, read.members), (vec![10], vec![MemberId(7), MemberId(8)]));
        assert_eq!(read.incarnations, [1, 4]);
        assert_eq!(read.preload.index.digest(), written.preload.index.digest());
        let (cuts, synced, barrier) = (written.preload.cuts, written.preload.synced, written.preload.barrier);
        assert_eq!((read.preload.cuts, read.preload.synced, read.preload.barrier), (cuts, synced, barrier));
        assert_eq!(read.preload.votes, written.preload.votes);
        let mut bytes = fs::read(dir.join(FILE_NAME)).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(dir.join(FILE_NAME), &bytes).unwrap();
        assert!(Checkpoint::read(&dir, false).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
