//! The writeset cache on disk: segment files of entry records, plus one file each for
//! the Raft vote and the purge boundary. Entries are also kept in memory (like Galera's
//! mapped gcache), so reads of them never touch the disk; the files make them survive
//! restart. Big entries (the parts of a big writeset, docs/design/group-writeset-parts.md)
//! are only in their file and read back when asked for: a second copy in memory would
//! double what a big writeset costs every member.
//!
//! Every append is written to its file at once (a positioned write, no userspace
//! buffer), so what the member appended is the OS's before anything that depends on it
//! is sent: a process crash loses nothing. `sync` (`gcache.sync`) adds an fdatasync for
//! power loss. The vote and the purge boundary are always synced, file and directory:
//! losing either breaks Raft's safety (a vote given twice; a log missing its front).
//!
//! On open, a torn or corrupt tail (a crash mid-write) is cut off at the last whole
//! record: what was not synced may be lost, what was synced never is.
//!
//! The directory may be MariaDB's datadir: the cache is only top-level files named
//! `lockstep-cache.*.galera.cache` (plus `lockstep-member-id.galera.cache`), never a
//! subdirectory, and every other file is left alone. MariaDB's rsync SST copies the
//! datadir's subdirectories and skips its top-level files, so a state transfer never carries
//! a donor's cache or identity; its mariabackup SST keeps a joiner's files whose names end
//! in `galera.cache`. See docs/design/group-cache-in-datadir.md.

use super::{count_until, Entry, LogStore, Payload};
use crate::codec::{Reader, Writer};
use crate::raft::{HardState, Position};
use crate::record::{self, RecordKind};
use crate::state::AppliedState;
use crate::types::MemberId;
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Every file of ours ends so, as Galera's `galera.cache` does: MariaDB's mariabackup SST
/// empties a joiner's datadir before it fills it, except for files named like Galera's own
/// (its script's `cpat`); anything else of ours, vote and member id included, was deleted.
const KEPT_SUFFIX: &str = ".galera.cache";
/// Every cache file's name starts with this.
const CACHE_PREFIX: &str = "lockstep-cache.";
const HARD_STATE_FILE: &str = "lockstep-cache.hardstate.galera.cache";
const BOUNDARY_FILE: &str = "lockstep-cache.boundary.galera.cache";
/// Not part of the cache: discarding the cache keeps the member's identity.
const MEMBER_ID_FILE: &str = "lockstep-member-id.galera.cache";
/// The names before 2026-11-26, renamed when found (`adopt_earlier_names`).
const EARLIER_CACHE_PREFIX: &str = "lockstep.cache.";
const EARLIER_MEMBER_ID_FILE: &str = "lockstep.member-id";
/// Largest record the cache reads back; bigger means corruption.
const RECORD_LIMIT_BYTES: u32 = 1 << 30;
// Every entry the group accepts reads back.
const _: () = assert!(crate::config::RECORD_LIMIT_BYTES <= RECORD_LIMIT_BYTES);

/// An entry's payload at least this big stays on disk only.
const ON_DISK_BYTES: usize = 64 << 10;

/// A retained entry: in memory, or a big one only in its segment file.
enum Held {
    Memory(Entry),
    Disk { position: Position, size_bytes: u64, record_bytes: usize },
}

impl Held {
    fn new(entry: Entry, record_bytes: usize) -> Self {
        match &entry.payload {
            Payload::Command(data) if data.len() >= ON_DISK_BYTES => {
                Self::Disk { position: entry.position, size_bytes: entry.size_bytes(), record_bytes }
            }
            _ => Self::Memory(entry),
        }
    }

    fn position(&self) -> Position {
        match self {
            Self::Memory(entry) => entry.position,
            Self::Disk { position, .. } => *position,
        }
    }

    fn size_bytes(&self) -> u64 {
        match self {
            Self::Memory(entry) => entry.size_bytes(),
            Self::Disk { size_bytes, .. } => *size_bytes,
        }
    }
}

struct Segment {
    number: u64,
    file: File,
    bytes: u64,
    /// Index of the last entry written to it.
    last_index: u64,
}

pub struct FileStore {
    dir: PathBuf,
    fsync: bool,
    segment_limit_bytes: u64,
    hard: HardState,
    boundary: AppliedState,
    entries: VecDeque<Held>,
    /// Segment number and byte offset of each retained entry.
    locations: VecDeque<(u64, u64)>,
    retained: u64,
    segments: VecDeque<Segment>,
    dirty: bool,
}

impl FileStore {
    /// Opens (or creates) the cache in `dir`. With `fsync` off (`gcache.sync = no`),
    /// `sync` does nothing: the entries are already the OS's, so a process crash loses
    /// none, but a power loss may lose the log's tail, acknowledged entries included.
    pub fn open(dir: &Path, fsync: bool, segment_limit_bytes: u64) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        adopt_earlier_names(dir)?;
        let hard = match read_single(&dir.join(HARD_STATE_FILE), RecordKind::HardState)? {
            Some(body) => HardState::decode(&mut Reader::new(&body)).map_err(invalid)?,
            None => HardState::default(),
        };
        let boundary = match read_single(&dir.join(BOUNDARY_FILE), RecordKind::Snapshot)? {
            Some(body) => AppliedState::decode(&mut Reader::new(&body)).map_err(invalid)?,
            None => AppliedState::default(),
        };
        let mut store = Self {
            dir: dir.to_owned(),
            fsync,
            segment_limit_bytes: segment_limit_bytes.max(1 << 16),
            hard,
            boundary,
            entries: VecDeque::new(),
            locations: VecDeque::new(),
            retained: 0,
            segments: VecDeque::new(),
            dirty: false,
        };
        store.load_segments()?;
        Ok(store)
    }

    fn load_segments(&mut self) -> io::Result<()> {
        let mut numbers: Vec<u64> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                segment_number(&name)
            })
            .collect();
        numbers.sort_unstable();
        let mut torn = false;
        for number in numbers {
            let path = self.segment_path(number);
            if torn {
                fs::remove_file(&path)?;
                continue;
            }
            let bytes = fs::read(&path)?;
            let mut offset = 0usize;
            let mut last_index = self.last_index();
            while offset < bytes.len() {
                let Some(entry) = decode_entry(&bytes[offset..]) else {
                    log::warn!(
                        "cache {}: cutting torn tail of {} at byte {offset}",
                        self.dir.display(),
                        path.display()
                    );
                    torn = true;
                    break;
                };
                let (entry, len) = entry;
                let index = entry.position.index;
                if index > self.boundary.position.index {
                    let previous = self.held(index - 1).map_or(self.boundary.position.term, |h| h.position().term);
                    // Terms never go down along a Raft log: a lower one is a leftover of a
                    // truncation that a power loss undid (possible only without fsync).
                    if index > self.last_index() + 1 || entry.position.term < previous {
                        torn = true;
                        break;
                    }
                    if index <= self.last_index() {
                        // Replaced later in the same file: keep the newest.
                        self.truncate_memory(index - 1);
                    }
                    self.retained += entry.size_bytes();
                    self.entries.push_back(Held::new(entry, len));
                    self.locations.push_back((number, offset as u64));
                }
                last_index = last_index.max(index);
                offset += len;
            }
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            file.set_len(offset as u64)?;
            self.segments.push_back(Segment { number, file, bytes: offset as u64, last_index });
        }
        Ok(())
    }

    fn segment_path(&self, number: u64) -> PathBuf {
        self.dir.join(segment_name(number))
    }

    fn held(&self, index: u64) -> Option<&Held> {
        self.entries.get(index.checked_sub(self.boundary.position.index + 1)? as usize)
    }

    /// A big entry read back from its segment.
    fn read_back(&self, index: u64, record_bytes: usize) -> io::Result<Entry> {
        let (number, offset) = self.locations[(index - self.boundary.position.index - 1) as usize];
        let segment =
            self.segments.iter().find(|s| s.number == number).ok_or_else(|| io::Error::other("no segment"))?;
        let mut record = vec![0; record_bytes];
        std::os::unix::fs::FileExt::read_exact_at(&segment.file, &mut record, offset)?;
        match decode_entry(&record) {
            Some((entry, _)) if entry.position.index == index => Ok(entry),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "the record read back is not the entry")),
        }
    }

    fn truncate_memory(&mut self, after: u64) {
        let keep = after.saturating_sub(self.boundary.position.index) as usize;
        while self.entries.len() > keep {
            let e = self.entries.pop_back().expect("len checked");
            self.retained -= e.size_bytes();
            self.locations.pop_back();
        }
    }

    fn active_segment(&mut self) -> io::Result<&mut Segment> {
        let roll = self.segments.back().is_none_or(|s| s.bytes >= self.segment_limit_bytes);
        if roll {
            if let Some(full) = self.segments.back_mut() {
                if self.fsync {
                    full.file.sync_data()?;
                }
            }
            let number = self.segments.back().map_or(1, |s| s.number + 1);
            let file = OpenOptions::new()
                .create(true)
                .read(true)
                .write(true)
                .truncate(true)
                .open(self.segment_path(number))?;
            if self.fsync {
                File::open(&self.dir)?.sync_all()?;
            }
            self.segments.push_back(Segment { number, file, bytes: 0, last_index: self.last_index() });
        }
        Ok(self.segments.back_mut().expect("just ensured"))
    }
}

impl FileStore {
    /// Deletes the cache in `dir` (a bootstrap discards it), segments first so an
    /// interrupted wipe leaves no entries behind a missing boundary. Other files, the
    /// member id included, stay. Returns whether there was anything to delete.
    pub fn wipe(dir: &Path) -> io::Result<bool> {
        let names = match fs::read_dir(dir) {
            Ok(entries) => entries.filter_map(|e| e.ok()?.file_name().into_string().ok()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let mut names: Vec<String> = names.filter(|n| n.starts_with(CACHE_PREFIX)).collect();
        names.sort_by_key(|n| segment_number(n).is_none());
        for name in &names {
            fs::remove_file(dir.join(name))?;
        }
        Ok(!names.is_empty())
    }
}

fn segment_name(number: u64) -> String {
    format!("{CACHE_PREFIX}{number:012}{KEPT_SUFFIX}")
}

fn segment_number(name: &str) -> Option<u64> {
    name.strip_prefix(CACHE_PREFIX)?.strip_suffix(KEPT_SUFFIX)?.parse().ok()
}

/// Renames the files of a datadir written before their names ended in [`KEPT_SUFFIX`]
/// (`lockstep.cache.NNN.seg`, `lockstep.cache.hardstate`, `lockstep.member-id`...), so an
/// upgraded node keeps its log, vote and identity. Files being replaced (`.new`) are left.
fn adopt_earlier_names(dir: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut renamed_any = false;
    for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
        let renamed = if name == EARLIER_MEMBER_ID_FILE {
            MEMBER_ID_FILE.to_owned()
        } else if let Some(rest) = name.strip_prefix(EARLIER_CACHE_PREFIX).filter(|r| !r.ends_with(".new")) {
            format!("{CACHE_PREFIX}{}{KEPT_SUFFIX}", rest.strip_suffix(".seg").unwrap_or(rest))
        } else {
            continue;
        };
        fs::rename(dir.join(&name), dir.join(renamed))?;
        renamed_any = true;
    }
    // Every start reads the directory; only a rename needs it synced.
    if renamed_any {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// This member's id: drawn at random on first use and kept in `dir`
/// (`lockstep-member-id.galera.cache`), so restarts, and a bootstrap that discards the cache,
/// keep the member's identity. Renames the files of an earlier version first.
pub fn load_or_create_member_id(dir: &Path) -> io::Result<MemberId> {
    adopt_earlier_names(dir)?;
    let path = dir.join(MEMBER_ID_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(id) if id != 0 => Ok(MemberId(id)),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} holds no member id", path.display()))),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            let id = new_member_id();
            replace_file(dir, MEMBER_ID_FILE, format!("{}\n", id.0).as_bytes())?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}

/// Non-zero and below 2^63 (the vote file stores an id plus one): the creation time in
/// milliseconds, then 20 random bits. Views list members by id, so members made one after
/// another are listed (and numbered for MariaDB: `wsrep_local_index`, the auto-increment
/// offsets) in the order they were made, as Galera's time-based node UUIDs are. std's
/// hasher keys come from the OS's random source.
fn new_member_id() -> MemberId {
    MemberId(crate::types::time_ordered_id())
}

fn decode_entry(bytes: &[u8]) -> Option<(Entry, usize)> {
    let (kind, body, len) = record::decode(bytes, RECORD_LIMIT_BYTES).ok()?;
    if kind != RecordKind::Entry {
        return None;
    }
    let mut r = Reader::new(body);
    let entry = Entry::decode(&mut r).ok()?;
    r.finish().ok()?;
    Some((entry, len))
}

fn invalid(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn read_single(path: &Path, kind: RecordKind) -> io::Result<Option<Vec<u8>>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let (found, body, _) = record::decode(&bytes, RECORD_LIMIT_BYTES).map_err(invalid)?;
    if found != kind {
        return Err(invalid(record::RecordError::UnknownKind(found as u8)));
    }
    Ok(Some(body.to_vec()))
}

fn write_single(dir: &Path, name: &str, kind: RecordKind, body: &[u8]) -> io::Result<()> {
    replace_file(dir, name, &record::encode(kind, body))
}

/// Replaces a small file atomically and durably: write aside, sync, rename, sync the
/// directory. Only for files whose loss is not an option (vote, boundary, member id).
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let aside = dir.join(format!("{name}.new"));
    let mut file = File::create(&aside)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    fs::rename(&aside, dir.join(name))?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

impl LogStore for FileStore {
    fn hard_state(&self) -> HardState {
        self.hard
    }

    fn save_hard_state(&mut self, hard: HardState) -> io::Result<()> {
        if hard == self.hard {
            return Ok(());
        }
        let mut w = Writer::default();
        hard.encode(&mut w);
        // A vote must be durable before the reply that grants it leaves, whatever
        // `gcache.sync` says: forgotten, it could be given twice in one term.
        write_single(&self.dir, HARD_STATE_FILE, RecordKind::HardState, &w.bytes)?;
        self.hard = hard;
        Ok(())
    }

    fn boundary(&self) -> &AppliedState {
        &self.boundary
    }

    fn last_index(&self) -> u64 {
        self.boundary.position.index + self.entries.len() as u64
    }

    fn entry(&self, index: u64) -> Option<Entry> {
        match self.held(index)? {
            Held::Memory(entry) => Some(entry.clone()),
            Held::Disk { record_bytes, .. } => match self.read_back(index, *record_bytes) {
                Ok(entry) => Some(entry),
                Err(e) => {
                    log::error!("cache {}: cannot read entry {index} back: {e}", self.dir.display());
                    None
                }
            },
        }
    }

    fn append(&mut self, after: u64, entries: Vec<Entry>) -> io::Result<()> {
        if after < self.boundary.position.index || after > self.last_index() {
            return Err(io::Error::other(format!(
                "append after {after} outside retained log {}..={}",
                self.boundary.position.index,
                self.last_index()
            )));
        }
        if after < self.last_index() {
            let (number, offset) = self.locations[(after - self.boundary.position.index) as usize];
            while self.segments.back().is_some_and(|s| s.number > number) {
                let s = self.segments.pop_back().expect("checked");
                drop(s.file);
                fs::remove_file(self.segment_path(s.number))?;
            }
            if let Some(s) = self.segments.back_mut() {
                s.file.set_len(offset)?;
                s.bytes = offset;
                s.last_index = after;
            }
            if self.fsync {
                // The replaced entries go for good before their replacements are written:
                // brought back by a power loss, they would follow or displace them.
                File::open(&self.dir)?.sync_all()?;
                if let Some(s) = self.segments.back() {
                    s.file.sync_data()?;
                }
            }
            self.truncate_memory(after);
            self.dirty = true;
        }
        for entry in entries {
            let rec = record::encode_with(RecordKind::Entry, entry.size_bytes() as usize, |w| entry.encode(w));
            let index = entry.position.index;
            let segment = self.active_segment()?;
            let offset = segment.bytes;
            // Positioned write: the file offset is ours, a truncation may have moved it.
            std::os::unix::fs::FileExt::write_all_at(&segment.file, &rec, offset)?;
            segment.bytes += rec.len() as u64;
            segment.last_index = index;
            let number = segment.number;
            self.retained += entry.size_bytes();
            self.entries.push_back(Held::new(entry, rec.len()));
            self.locations.push_back((number, offset));
            self.dirty = true;
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.dirty && self.fsync {
            if let Some(s) = self.segments.back() {
                s.file.sync_data()?;
            }
        }
        self.dirty = false;
        Ok(())
    }

    fn purge(&mut self, boundary: AppliedState) -> io::Result<()> {
        self.sync()?;
        let mut w = Writer::default();
        boundary.encode(&mut w);
        // Durable before segments go, whatever `gcache.sync` says: an old boundary in front
        // of a log whose first segments are gone would lose the whole log on restart.
        write_single(&self.dir, BOUNDARY_FILE, RecordKind::Snapshot, &w.bytes)?;
        let index = boundary.position.index;
        while self.entries.front().is_some_and(|e| e.position().index <= index) {
            let e = self.entries.pop_front().expect("checked");
            self.retained -= e.size_bytes();
            self.locations.pop_front();
        }
        self.boundary = boundary;
        // Whole segments below the boundary go; the active one always stays.
        while self.segments.len() > 1 && self.segments[0].last_index <= index {
            let s = self.segments.pop_front().expect("checked");
            drop(s.file);
            fs::remove_file(self.segment_path(s.number))?;
        }
        Ok(())
    }

    fn retained_bytes(&self) -> u64 {
        self.retained
    }

    fn bytes_after(&self, index: u64, cap: u64) -> u64 {
        let newer = self.entries.iter().rev().take_while(|e| e.position().index > index);
        count_until(newer.map(Held::size_bytes), cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Payload;
    use crate::raft::Position;

    fn e(index: u64, term: u64, len: usize) -> Entry {
        Entry { position: Position { term, index }, payload: Payload::Command(vec![index as u8; len]) }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lockstep-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn survives_restart_with_overwrites_purge_and_a_torn_tail() {
        let dir = temp_dir("restart");
        {
            let mut s = FileStore::open(&dir, true, 1 << 16).unwrap();
            s.save_hard_state(HardState { term: 3, voted_for: Some(MemberId(2)) }).unwrap();
            s.append(0, (1..=40).map(|i| e(i, 1, 5000)).collect()).unwrap();
            // A new leader overwrites the tail from index 31.
            s.append(30, (31..=45).map(|i| e(i, 2, 5000)).collect()).unwrap();
            s.sync().unwrap();
            let boundary = AppliedState { position: Position { term: 1, index: 20 }, seqno: 17, ..Default::default() };
            s.purge(boundary).unwrap();
        }
        // A crash mid-write leaves half a record at the end of the newest segment.
        let mut newest: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| segment_number(name).is_some())
            .collect();
        newest.sort();
        let last = dir.join(newest.last().unwrap());
        let mut f = OpenOptions::new().append(true).open(last).unwrap();
        f.write_all(&record::encode(RecordKind::Entry, &[1, 2, 3])[..10]).unwrap();

        let s = FileStore::open(&dir, true, 1 << 16).unwrap();
        assert_eq!(s.hard_state().term, 3);
        assert_eq!(s.hard_state().voted_for, Some(MemberId(2)));
        assert_eq!(s.boundary().seqno, 17);
        assert_eq!((s.first_index(), s.last_index()), (21, 45));
        assert_eq!(s.entry(30), Some(e(30, 1, 5000)));
        assert_eq!(s.entry(31), Some(e(31, 2, 5000)));
        assert_eq!(s.entry(20), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn big_entries_stay_on_disk_and_read_back_after_an_overwrite_a_purge_and_a_reopen() {
        let dir = temp_dir("big");
        let big = ON_DISK_BYTES;
        let size = |s: &FileStore| (s.first_index()..=s.last_index()).map(|i| s.entry(i).unwrap().size_bytes()).sum();
        {
            let mut s = FileStore::open(&dir, false, 1 << 18).unwrap();
            s.append(0, (1..=10).map(|i| e(i, 1, if i % 2 == 0 { big } else { 100 })).collect()).unwrap();
            assert!(matches!(s.held(2), Some(Held::Disk { .. })));
            assert!(matches!(s.held(3), Some(Held::Memory(_))));
            assert_eq!(s.entry(4), Some(e(4, 1, big)));
            // A new leader replaces the tail from 6; a purge drops the first segments.
            s.append(5, (6..=12).map(|i| e(i, 2, big)).collect()).unwrap();
            assert_eq!(s.entry(6), Some(e(6, 2, big)));
            s.purge(AppliedState { position: Position { term: 1, index: 4 }, ..Default::default() }).unwrap();
            assert_eq!(s.entry(5), Some(e(5, 1, 100)));
            assert_eq!(s.entry(12), Some(e(12, 2, big)));
            assert_eq!(s.retained_bytes(), size(&s));
        }
        let s = FileStore::open(&dir, false, 1 << 18).unwrap();
        assert_eq!((s.first_index(), s.last_index()), (5, 12));
        assert!(matches!(s.held(7), Some(Held::Disk { .. })));
        for i in 6..=12 {
            assert_eq!(s.entry(i), Some(e(i, 2, big)));
        }
        assert_eq!(s.retained_bytes(), size(&s));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_fsync_everything_appended_survives_a_process_crash() {
        let dir = temp_dir("no-fsync");
        let mut s = FileStore::open(&dir, false, 1 << 16).unwrap();
        s.save_hard_state(HardState { term: 4, voted_for: Some(MemberId(3)) }).unwrap();
        s.append(0, (1..=40).map(|i| e(i, 1, 5000)).collect()).unwrap();
        s.append(35, (36..=50).map(|i| e(i, 4, 5000)).collect()).unwrap();
        // No sync, and no destructor either: the process is gone, only what the OS holds
        // is left, and it is all there.
        std::mem::forget(s);
        let s = FileStore::open(&dir, false, 1 << 16).unwrap();
        assert_eq!(s.hard_state(), HardState { term: 4, voted_for: Some(MemberId(3)) });
        assert_eq!((s.first_index(), s.last_index()), (1, 50));
        assert_eq!(s.entry(35), Some(e(35, 1, 5000)));
        assert_eq!(s.entry(36), Some(e(36, 4, 5000)));
        assert_eq!(s.entry(50), Some(e(50, 4, 5000)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_replaced_tail_brought_back_by_a_power_loss_is_cut() {
        let dir = temp_dir("stale-tail");
        let mut s = FileStore::open(&dir, false, 1 << 20).unwrap();
        s.append(0, (1..=10).map(|i| e(i, 1, 100)).collect()).unwrap();
        s.append(5, (6..=8).map(|i| e(i, 2, 100)).collect()).unwrap();
        drop(s);
        // Without fsync the truncation may be lost while its replacements are not: the
        // old entries 9 and 10 of term 1 reappear after entry 8 of term 2.
        let path = dir.join(segment_name(1));
        let mut file = OpenOptions::new().append(true).open(path).unwrap();
        for i in 9..=10 {
            let mut w = Writer::default();
            e(i, 1, 100).encode(&mut w);
            file.write_all(&record::encode(RecordKind::Entry, &w.bytes)).unwrap();
        }
        let s = FileStore::open(&dir, false, 1 << 20).unwrap();
        assert_eq!(s.last_index(), 8);
        assert_eq!(s.entry(8), Some(e(8, 2, 100)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn shares_a_directory_as_prefixed_top_level_files_and_wipes_only_those() {
        let dir = temp_dir("datadir");
        fs::create_dir_all(dir.join("mysql")).unwrap();
        fs::write(dir.join("ibdata1"), b"innodb").unwrap();
        fs::write(dir.join("mysql").join("7.seg"), b"not ours").unwrap();
        fs::write(dir.join("000000000001.seg"), b"not ours either").unwrap();
        let id = load_or_create_member_id(&dir).unwrap();
        assert!(id.0 != 0 && id.0 < 1 << 63);
        {
            let mut s = FileStore::open(&dir, true, 1 << 16).unwrap();
            s.save_hard_state(HardState { term: 2, voted_for: Some(id) }).unwrap();
            s.append(0, (1..=30).map(|i| e(i, 1, 5000)).collect()).unwrap();
            s.sync().unwrap();
            s.purge(AppliedState { position: Position { term: 1, index: 5 }, seqno: 4, ..Default::default() }).unwrap();
        }
        let mut names: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        let ours: Vec<&String> = names.iter().filter(|n| n.starts_with("lockstep-")).collect();
        assert!(ours.len() > 3, "{names:?}");
        assert!(ours.iter().all(|n| dir.join(n).is_file()), "only top-level files: {names:?}");
        // What mariabackup's SST keeps of a joiner's datadir (its `cpat`).
        assert!(ours.iter().all(|n| n.ends_with("galera.cache")), "{names:?}");
        let s = FileStore::open(&dir, true, 1 << 16).unwrap();
        assert_eq!((s.first_index(), s.last_index(), s.boundary().seqno), (6, 30, 4));
        drop(s);

        assert!(FileStore::wipe(&dir).unwrap());
        assert!(!FileStore::wipe(&dir).unwrap());
        let mut left: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["000000000001.seg", "ibdata1", "lockstep-member-id.galera.cache", "mysql"]);
        assert_eq!(fs::read(dir.join("mysql").join("7.seg")).unwrap(), b"not ours");
        assert_eq!(load_or_create_member_id(&dir).unwrap(), id);
        let s = FileStore::open(&dir, true, 1 << 16).unwrap();
        assert_eq!((s.last_index(), s.hard_state()), (0, HardState::default()));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_names_of_an_earlier_version_are_adopted_with_the_log_the_vote_and_the_id() {
        let dir = temp_dir("earlier-names");
        let id = load_or_create_member_id(&dir).unwrap();
        {
            let mut s = FileStore::open(&dir, true, 1 << 16).unwrap();
            s.save_hard_state(HardState { term: 3, voted_for: Some(id) }).unwrap();
            s.append(0, (1..=30).map(|i| e(i, 1, 5000)).collect()).unwrap();
            s.sync().unwrap();
        }
        fs::write(dir.join("lockstep.cache.certification"), b"the provider's").unwrap();
        fs::write(dir.join("lockstep.cache.hardstate.new"), b"a replacement cut short").unwrap();
        // As an earlier version named them.
        for entry in fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let earlier = if name == MEMBER_ID_FILE {
                EARLIER_MEMBER_ID_FILE.to_owned()
            } else if let Some(n) = segment_number(&name) {
                format!("{EARLIER_CACHE_PREFIX}{n:012}.seg")
            } else if let Some(rest) = name.strip_prefix(CACHE_PREFIX) {
                format!("{EARLIER_CACHE_PREFIX}{}", rest.strip_suffix(KEPT_SUFFIX).unwrap())
            } else {
                continue;
            };
            fs::rename(dir.join(&name), dir.join(earlier)).unwrap();
        }
        assert_eq!(load_or_create_member_id(&dir).unwrap(), id);
        let s = FileStore::open(&dir, true, 1 << 16).unwrap();
        assert_eq!((s.last_index(), s.hard_state().term), (30, 3));
        assert_eq!(fs::read(dir.join("lockstep-cache.certification.galera.cache")).unwrap(), b"the provider's");
        let mut earlier: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("lockstep."))
            .collect();
        earlier.sort();
        assert_eq!(earlier, ["lockstep.cache.hardstate.new"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn member_ids_follow_their_creation_and_a_damaged_id_file_is_an_error() {
        let (a, b) = (temp_dir("id-a"), temp_dir("id-b"));
        let id = load_or_create_member_id(&a).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(id < load_or_create_member_id(&b).unwrap(), "a member made later sorts after");
        assert_eq!(load_or_create_member_id(&a).unwrap(), id, "an id is made once");
        assert_eq!(fs::read_to_string(a.join(MEMBER_ID_FILE)).unwrap(), format!("{}\n", id.0));
        fs::write(a.join(MEMBER_ID_FILE), "0\n").unwrap();
        assert!(load_or_create_member_id(&a).is_err());
        fs::write(a.join(MEMBER_ID_FILE), "m1").unwrap();
        assert!(load_or_create_member_id(&a).is_err());
        fs::remove_dir_all(&a).unwrap();
        fs::remove_dir_all(&b).unwrap();
    }

    #[test]
    fn a_corrupt_boundary_file_is_an_error_not_a_panic() {
        let dir = temp_dir("corrupt");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(BOUNDARY_FILE), b"garbage that is not a record").unwrap();
        assert!(FileStore::open(&dir, false, 1 << 16).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
