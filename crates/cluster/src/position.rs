//! Positions (`uuid:seqno`) and `grastate.dat`: the provider's own types, read from outside.
use crate::error::{Error, Result};
pub use lockstep_provider::grastate::SavedState;
pub use lockstep_provider::types::Gtid as Position;
use std::path::Path;

pub fn read_saved_state(path: &Path) -> Result<SavedState> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io_path("read", path, e))?;
    SavedState::parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}:\n{text}", path.display())))
}

/// Parses `uuid:seqno` as printed by `--wsrep-recover` and accepted by `--wsrep_start_position`.
pub fn parse_position(text: &str) -> Result<Position> {
    text.trim().parse().map_err(|e| Error::Invalid(format!("not a `uuid:seqno` position: {text:?} ({e})")))
}
