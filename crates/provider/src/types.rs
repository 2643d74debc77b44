//! Value types shared by the provider logic: identifiers, positions, status codes, flags.
use std::fmt;
use std::str::FromStr;

/// A position in the global order. Dense, strictly increasing along one history.
pub type Seqno = i64;
pub const SEQNO_UNDEFINED: Seqno = -1;

/// A 16-byte identifier: a group history, or a member of a group.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const NIL: Uuid = Uuid([0; 16]);

    pub fn is_nil(&self) -> bool {
        *self == Self::NIL
    }

    /// A fresh random (version 4) identifier.
    pub fn random() -> Uuid {
        let mut bytes = random_bytes();
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }
}

fn random_bytes() -> [u8; 16] {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let from_kernel = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_kernel.is_err() {
        // No /dev/urandom (odd sandbox): fall back to time and address entropy.
        use std::hash::{BuildHasher, Hasher};
        let state = std::collections::hash_map::RandomState::new();
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = state.build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl FromStr for Uuid {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError(format!("not a UUID: '{s}'"));
        let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
        if s.len() != 36 || hex.len() != 32 {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).map_err(|_| bad())?;
            out[i] = u8::from_str_radix(text, 16).map_err(|_| bad())?;
        }
        Ok(Uuid(out))
    }
}

/// `uuid:seqno`: a point in one history.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Gtid {
    pub uuid: Uuid,
    pub seqno: Seqno,
}

impl Gtid {
    pub const UNDEFINED: Gtid = Gtid { uuid: Uuid::NIL, seqno: SEQNO_UNDEFINED };

    pub fn new(uuid: Uuid, seqno: Seqno) -> Gtid {
        Gtid { uuid, seqno }
    }

    pub fn is_undefined(&self) -> bool {
        self.uuid.is_nil() && self.seqno == SEQNO_UNDEFINED
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uuid, self.seqno)
    }
}

impl FromStr for Gtid {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (uuid, seqno) = s.rsplit_once(':').ok_or_else(|| ParseError(format!("not a GTID: '{s}'")))?;
        let seqno = seqno.trim().parse().map_err(|_| ParseError(format!("bad seqno in GTID '{s}'")))?;
        Ok(Gtid { uuid: uuid.trim().parse()?, seqno })
    }
}

/// Result of a provider call, with the numeric values of wsrep API v26.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    Warning = 1,
    TrxMissing = 2,
    TrxFail = 3,
    BfAbort = 4,
    SizeExceeded = 5,
    ConnFail = 6,
    NodeFail = 7,
    Fatal = 8,
    NotImplemented = 9,
    NotAllowed = 10,
}

/// Writeset flags as they cross the ABI (wsrep v26 bit values).
pub mod flags {
    pub const TRX_END: u32 = 1 << 0;
    pub const ROLLBACK: u32 = 1 << 1;
    pub const ISOLATION: u32 = 1 << 2;
    pub const PA_UNSAFE: u32 = 1 << 3;
    pub const TRX_START: u32 = 1 << 6;
    pub const IMPLICIT_DEPS: u32 = 1 << 9;
}

/// Capability bits (wsrep v26 values).
pub mod capabilities {
    pub const MULTI_MASTER: u32 = 1 << 0;
    pub const CERTIFICATION: u32 = 1 << 1;
    pub const PARALLEL_APPLYING: u32 = 1 << 2;
    pub const TRX_REPLAY: u32 = 1 << 3;
    pub const ISOLATION: u32 = 1 << 4;
    pub const PAUSE: u32 = 1 << 5;
    pub const CAUSAL_READS: u32 = 1 << 6;
    /// Streaming replication: without it MariaDB refuses `wsrep_trx_fragment_size`.
    pub const STREAMING: u32 = 1 << 15;
}

/// Source of a transaction: origin member, its transaction id and connection id.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SourceTrx {
    pub node: Uuid,
    pub trx_id: u64,
    pub conn_id: u64,
}

/// What `certify` and `to_execute_start` report about an ordered writeset.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TrxMeta {
    pub gtid: Gtid,
    pub source: SourceTrx,
    pub depends_on: Seqno,
}

impl TrxMeta {
    pub fn unordered(source: SourceTrx) -> TrxMeta {
        TrxMeta { gtid: Gtid::UNDEFINED, source, depends_on: SEQNO_UNDEFINED }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_round_trip() {
        let u = Uuid::random();
        let text = u.to_string();
        assert_eq!(text.len(), 36);
        assert_eq!(text.parse::<Uuid>().unwrap(), u);
        assert!("zz".parse::<Uuid>().is_err());
        assert!("be4f07b0-e63c-11f1-920d-1b748f4148ag".parse::<Uuid>().is_err());
    }

    #[test]
    fn gtid_text_round_trip() {
        let g: Gtid = "be4f07b0-e63c-11f1-920d-1b748f4148ab:42".parse().unwrap();
        assert_eq!(g.seqno, 42);
        assert_eq!(g.to_string(), "be4f07b0-e63c-11f1-920d-1b748f4148ab:42");
        let undefined: Gtid = "00000000-0000-0000-0000-000000000000:-1".parse().unwrap();
        assert!(undefined.is_undefined());
    }
}
