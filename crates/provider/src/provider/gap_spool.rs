//! A joiner's copy of the donor's gap between receiving it and applying it: in a file
//! beside the group's cache, not in memory. The donor sends the whole gap before its
//! certification state, and none of it is applied before that state is in, so a gap of
//! gigabytes would otherwise sit whole in the joiner's memory
//! (docs/design/joiner-gap-on-disk.md).
//!
//! The file is removed from its directory as soon as it is created: only our open handle
//! keeps it, so a crash leaves nothing behind and a state transfer never copies it.
use crate::ist::Item;
use crate::types::Seqno;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Its name for the moment it has one (named like the rest of our files in the datadir).
const FILE_NAME: &str = "lockstep-ist-gap.galera.cache";
const WRITESET: u8 = 1;
const SKIPPED: u8 = 2;

/// The gap as it comes in, written behind.
pub struct GapSpool {
    file: BufWriter<File>,
    events: usize,
    /// Seqnos of the gap's writesets that failed certification.
    failed: Vec<Seqno>,
}

impl GapSpool {
    pub fn create(dir: &Path) -> io::Result<Self> {
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        fs::remove_file(&path)?;
        Ok(GapSpool { file: BufWriter::with_capacity(1 << 20, file), events: 0, failed: Vec::new() })
    }

    pub fn push(&mut self, item: &Item) -> io::Result<()> {
        let (kind, seqno, failed, bytes): (u8, Seqno, bool, &[u8]) = match item {
            Item::Writeset { seqno, bytes, failed } => (WRITESET, *seqno, *failed, bytes),
            Item::Skipped { seqno } => (SKIPPED, *seqno, false, &[]),
        };
        if failed {
            self.failed.push(seqno);
        }
        self.file.write_all(&[kind, u8::from(failed)])?;
        self.file.write_all(&seqno.to_le_bytes())?;
        self.file.write_all(&(bytes.len() as u64).to_le_bytes())?;
        self.file.write_all(bytes)?;
        self.events += 1;
        Ok(())
    }

    pub fn events(&self) -> usize {
        self.events
    }

    pub fn failed(&self) -> &[Seqno] {
        &self.failed
    }

    /// Done writing: the gap, read back from its start.
    pub fn into_reader(self) -> io::Result<GapReader> {
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        Ok(GapReader { file: BufReader::with_capacity(1 << 20, file), left: self.events })
    }
}

/// The spooled gap, read back in order.
pub struct GapReader {
    file: BufReader<File>,
    left: usize,
}

impl GapReader {
    /// The next events: at most `max_events`, and no more once they hold `max_bytes` (at
    /// least one while any is left).
    pub fn next_batch(&mut self, max_bytes: usize, max_events: usize) -> io::Result<Vec<Item>> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while self.left > 0 && batch.len() < max_events && (batch.is_empty() || bytes < max_bytes) {
            let item = self.read_one()?;
            bytes += match &item {
                Item::Writeset { bytes, .. } => bytes.len(),
                Item::Skipped { .. } => 0,
            };
            batch.push(item);
            self.left -= 1;
        }
        Ok(batch)
    }

    pub fn is_done(&self) -> bool {
        self.left == 0
    }

    fn read_one(&mut self) -> io::Result<Item> {
        let mut head = [0u8; 18];
        self.file.read_exact(&mut head)?;
        let seqno = Seqno::from_le_bytes(head[2..10].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(head[10..18].try_into().expect("8 bytes"));
        match head[0] {
            WRITESET => {
                let len = usize::try_from(len).map_err(|_| io::Error::other("spooled writeset too long"))?;
                let mut bytes = vec![0; len];
                self.file.read_exact(&mut bytes)?;
                Ok(Item::Writeset { seqno, bytes, failed: head[1] != 0 })
            }
            SKIPPED => Ok(Item::Skipped { seqno }),
            kind => Err(io::Error::other(format!("spooled event of unknown kind {kind}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spooled_gap_reads_back_in_order_in_batches_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("lockstep-gap-spool-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut spool = GapSpool::create(&dir).unwrap();
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "removed from its directory at once");
        fs::remove_dir(&dir).unwrap();
        let items = vec![
            Item::Writeset { seqno: 5, bytes: vec![1; 700], failed: false },
            Item::Skipped { seqno: 6 },
            Item::Writeset { seqno: 7, bytes: vec![2; 300], failed: true },
            Item::Writeset { seqno: 8, bytes: vec![], failed: false },
        ];
        for item in &items {
            spool.push(item).unwrap();
        }
        assert_eq!((spool.events(), spool.failed()), (4, &[7][..]));
        let mut reader = spool.into_reader().unwrap();
        assert_eq!(reader.next_batch(500, 10).unwrap(), items[..1], "a batch stops once it holds its bytes");
        assert_eq!(reader.next_batch(500, 1).unwrap(), items[1..2], "and once it holds its events");
        assert!(!reader.is_done());
        assert_eq!(reader.next_batch(500, 10).unwrap(), items[2..]);
        assert!(reader.is_done());
        assert!(reader.next_batch(500, 10).unwrap().is_empty());
    }
}
