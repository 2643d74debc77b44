//! Our transport over TCP (TLS later): every frame is a `record` (length + checksums).
//!
//! Each member dials each peer once and uses that connection to send; it receives on the
//! connections peers dialled to it. A connection opens with a `Hello` each way carrying
//! the protocol version, the cluster name and the member id: a peer of another cluster
//! is refused, and a seed address configured without an id is resolved to its member
//! (`Transport::discover`). A record that fails its checks or does not decode drops the connection
//! with a log line; nothing a peer sends can panic a member.

mod tcp;

pub use tcp::Transport;

use crate::codec::{DecodeError, Reader, Writer};
use crate::record::{self, RecordError, RecordKind};
use crate::types::MemberId;
use std::fmt;
use std::io::{self, Read};

/// Version of the message protocol above the record format.
pub const PROTOCOL_VERSION: u32 = 1;

/// The first record on a connection, in both directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u32,
    pub cluster_name: String,
    pub member: MemberId,
}

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.protocol).str(&self.cluster_name).u64(self.member.0);
        record::encode(RecordKind::Hello, &w.bytes)
    }

    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let hello = Self { protocol: r.u32()?, cluster_name: r.str()?, member: MemberId(r.u64()?) };
        r.finish()?;
        Ok(hello)
    }
}

/// Why a connection was dropped.
#[derive(Debug)]
pub enum TransportError {
    Io(io::Error),
    Record(RecordError),
    Decode(DecodeError),
    WrongCluster { ours: String, theirs: String },
    WrongProtocol(u32),
    Unexpected(&'static str),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "i/o: {e}"),
            Self::Record(e) => write!(f, "bad record: {e}"),
            Self::Decode(e) => write!(f, "{e}"),
            Self::WrongCluster { ours, theirs } => {
                write!(f, "peer belongs to cluster '{theirs}', not '{ours}'")
            }
            Self::WrongProtocol(v) => write!(f, "peer speaks protocol {v}, not {PROTOCOL_VERSION}"),
            Self::Unexpected(what) => write!(f, "unexpected {what}"),
        }
    }
}

impl From<io::Error> for TransportError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<RecordError> for TransportError {
    fn from(e: RecordError) -> Self {
        Self::Record(e)
    }
}

impl From<DecodeError> for TransportError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

/// Reads one checked record; the header is verified before the body is read.
pub fn read_record(stream: &mut impl Read, limit_bytes: u32) -> Result<(RecordKind, Vec<u8>), TransportError> {
    let mut header = [0u8; record::HEADER_BYTES];
    stream.read_exact(&mut header)?;
    let header = record::decode_header(&header, limit_bytes)?;
    let mut body = vec![0u8; header.body_bytes as usize];
    stream.read_exact(&mut body)?;
    record::check_body(&header, &body)?;
    Ok((header.kind, body))
}

/// Reads the peer's `Hello` and checks it against ours.
pub fn read_hello(stream: &mut impl Read, ours: &Hello) -> Result<Hello, TransportError> {
    let (kind, body) = read_record(stream, 4096)?;
    if kind != RecordKind::Hello {
        return Err(TransportError::Unexpected("record before hello"));
    }
    let theirs = Hello::decode(&body)?;
    if theirs.protocol != PROTOCOL_VERSION {
        return Err(TransportError::WrongProtocol(theirs.protocol));
    }
    if theirs.cluster_name != ours.cluster_name {
        return Err(TransportError::WrongCluster { ours: ours.cluster_name.clone(), theirs: theirs.cluster_name });
    }
    Ok(theirs)
}
