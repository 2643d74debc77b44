//! `grastate.dat`: the saved position operators, SST scripts and mtr tests read and edit.
//! Same name, format and transitions as Galera (wsrep-behaviour.md §1.4).
use crate::types::{Gtid, Seqno, Uuid, SEQNO_UNDEFINED};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "grastate.dat";
/// Beside it: the names of the other data members of this node's last primary component,
/// one a line, which a refused bootstrap names (Galera keeps no such file). Ending as
/// Galera's cache does, mariabackup's SST keeps it; being a top-level file, rsync's does not
/// copy the donor's over it (docs/design/group-cache-in-datadir.md).
pub const LAST_PRIMARY_FILE_NAME: &str = "lockstep-last-primary.galera.cache";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedState {
    pub position: Gtid,
    pub safe_to_bootstrap: bool,
}

impl SavedState {
    pub const NONE: SavedState = SavedState { position: Gtid::UNDEFINED, safe_to_bootstrap: true };

    pub fn render(&self) -> String {
        format!(
            "# GALERA saved state\nversion: 2.1\nuuid:    {}\nseqno:   {}\nsafe_to_bootstrap: {}\n",
            self.position.uuid,
            self.position.seqno,
            u8::from(self.safe_to_bootstrap)
        )
    }

    /// Accepts any line order, comments and a missing `safe_to_bootstrap` (older files).
    pub fn parse(text: &str) -> Result<SavedState, String> {
        let mut uuid = None;
        let mut seqno = None;
        let mut safe = true;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            match key.trim() {
                "uuid" => uuid = Some(value.parse::<Uuid>().map_err(|e| e.to_string())?),
                "seqno" => seqno = Some(value.parse::<Seqno>().map_err(|_| format!("bad seqno '{value}'"))?),
                "safe_to_bootstrap" => safe = value != "0",
                _ => {}
            }
        }
        Ok(SavedState {
            position: Gtid::new(uuid.ok_or("no uuid line")?, seqno.unwrap_or(SEQNO_UNDEFINED)),
            safe_to_bootstrap: safe,
        })
    }
}

/// The state file of one data directory, locked while this provider uses it.
pub struct StateFile {
    path: PathBuf,
    _lock: Option<File>,
}

impl StateFile {
    /// Opens (creating if needed) and locks the file. The lock only warns when it cannot be
    /// taken, as Galera does, but two providers on one data directory are then unprotected.
    pub fn open(data_dir: &Path) -> io::Result<(StateFile, Option<SavedState>, Option<String>)> {
        let path = data_dir.join(FILE_NAME);
        let saved =
            match std::fs::read_to_string(&path) {
                // An empty file is what a crash right after creating it leaves behind.
                Ok(text) if text.trim().is_empty() => None,
                Ok(text) => Some(SavedState::parse(&text).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("corrupt {}: {e}", path.display()))
                })?),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let (lock, warning) = match file.try_lock() {
            Ok(()) => (Some(file), None),
            Err(e) => (
                None,
                Some(format!("could not lock {}: {e}; is another provider using this data directory?", path.display())),
            ),
        };
        Ok((StateFile { path, _lock: lock }, saved, warning))
    }

    /// Rewrites the file durably: a crash leaves either the old or the new content.
    pub fn write(&self, state: &SavedState) -> io::Result<()> {
        replace_durably(&self.path, state.render().as_bytes())
    }

    /// The names kept in `LAST_PRIMARY_FILE_NAME` (none if it is missing or unreadable).
    pub fn last_primary(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.last_primary_path()).unwrap_or_default();
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
    }

    pub fn write_last_primary(&self, others: &[String]) -> io::Result<()> {
        let text: String = others.iter().map(|name| format!("{name}\n")).collect();
        replace_durably(&self.last_primary_path(), text.as_bytes())
    }

    fn last_primary_path(&self) -> PathBuf {
        self.path.with_file_name(LAST_PRIMARY_FILE_NAME)
    }
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content.
fn replace_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lenient_reading() {
        let state = SavedState {
            position: "be4f07b0-e63c-11f1-920d-1b748f4148ab:20".parse().unwrap(),
            safe_to_bootstrap: false,
        };
        assert_eq!(SavedState::parse(&state.render()).unwrap(), state);
        let old = "# comment\nseqno: 5\nuuid: be4f07b0-e63c-11f1-920d-1b748f4148ab\n";
        let parsed = SavedState::parse(old).unwrap();
        assert_eq!(parsed.position.seqno, 5);
        assert!(parsed.safe_to_bootstrap);
        assert!(SavedState::parse("uuid: nonsense\n").is_err());
    }

    #[test]
    fn file_is_written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("lockstep-grastate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (file, saved, _) = StateFile::open(&dir).unwrap();
        assert_eq!(saved, None);
        let state = SavedState { position: Gtid::new(Uuid::random(), 7), safe_to_bootstrap: true };
        file.write(&state).unwrap();
        assert!(file.last_primary().is_empty());
        file.write_last_primary(&["node2".into(), "node3".into()]).unwrap();
        drop(file);
        let (file, saved, _) = StateFile::open(&dir).unwrap();
        assert_eq!(saved, Some(state));
        assert_eq!(file.last_primary(), ["node2", "node3"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
