//! Our transport over TCP, optionally TLS ([`tls`]): every frame is a `record` (length +
//! checksums).
//!
//! Each member dials each peer once and uses that connection to send; it receives on the
//! connections peers dialled to it. A connection opens with the TLS handshake (when the node
//! has certificates), then a `Hello` each way carrying the protocol version, the cluster name
//! and the member id: a peer of another cluster is refused, and a seed address configured
//! without an id is resolved to its member (`Transport::discover`). Until its hello is in, a
//! connection is unauthenticated: it has [`HANDSHAKE_TIMEOUT`] in all, may send at most
//! [`HELLO_LIMIT_BYTES`], and only [`MAX_UNAUTHENTICATED`] such connections may be open at
//! once. A record that fails its checks or does not decode drops the connection with a log
//! line; nothing a peer sends can panic a member.

mod tcp;
pub mod tls;

pub use tcp::{Inbound, Transport};
pub use tls::{Refusals, Side, Stream, Tls, TlsConfig, TlsError};

use crate::codec::{DecodeError, Reader, Writer};
use crate::record::{self, RecordError, RecordKind};
use crate::types::MemberId;
use std::fmt;
use std::io::{self, Read};
use std::time::{Duration, Instant};

/// Version of the message protocol above the record format (2: a member says whether it is
/// an arbitrator; 3: its weight, and memberships list non-voters; 4: its segment, and
/// relayed messages; 5: `Campaign`; 6: Raft messages number their append calls; 7: a relay's
/// parts share its envelope, and a voter's extra votes are shadow ids in memberships; 8: the
/// provider's writesets carry their keys' chains, not the keys; 9: the provider's state
/// requests say whether their sender guesses who is synced, members answer with their donor
/// choice, and a donor's certification state says whether its synced set was a guess; 10: a
/// donor's certification state carries the inconsistency votes; 11: a refused forward says
/// whether its leader is cut off; 12: the provider's synced announcements say whether they
/// end a donation, and a donor's certification state carries the members donating; 13: every
/// member answers a `Probe`; 14: a synced announcement may say its sender is stateless, and
/// every state request is answered with the donor choice of the members that know; 15: a
/// probe's answer says whether its sender is primary without the prober; 16: every message
/// carries its sender's applied seqno, a member hands `pc.bootstrap` to one that applied more,
/// and forced boundaries in a state carry their seqnos; 17: every message says the term of
/// its sender's last forced boundary and whether it is primary, and a primary member with a
/// forked history probes the members outside its view; 18: the provider's announcement that
/// ends a donation names the request, and a donor's certification state names each donor's).
pub const PROTOCOL_VERSION: u32 = 18;
/// From accepting a connection to its peer's hello, TLS handshake included.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest record accepted before the peer's hello.
pub const HELLO_LIMIT_BYTES: u32 = 4096;
/// Accepted connections still in their handshake; more are closed at once.
pub const MAX_UNAUTHENTICATED: usize = 32;

/// What a record's body takes at first; it grows as the body arrives.
const BODY_FIRST_ALLOCATION: usize = 1 << 20;

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
        let hello = Self { protocol: r.u32()?, cluster_name: r.str()?, member: MemberId::decode(&mut r)? };
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
    WrongCluster {
        ours: String,
        theirs: String,
    },
    WrongProtocol(u32),
    Unexpected(&'static str),
    /// The TLS layer failed: a handshake error, or a certificate the cluster's CA refuses.
    Tls(String),
    /// A plain-TCP peer reached a node that requires TLS.
    PlainPeer,
    /// A TLS peer reached a node without certificates.
    TlsPeer,
    /// The peer closed the connection in the TLS handshake before answering it, as a node
    /// without certificates does on a TLS hello.
    ClosedInTlsHandshake,
    /// The named step did not finish in time.
    Deadline(&'static str),
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
            Self::Tls(e) => write!(f, "TLS: {e}"),
            Self::PlainPeer => {
                write!(f, "the peer speaks plain TCP, but this node requires TLS (socket.ssl is on)")
            }
            Self::TlsPeer => {
                write!(f, "the peer opened a TLS session, but this node has no certificates (socket.ssl is off)")
            }
            Self::ClosedInTlsHandshake => write!(f, "TLS: the peer closed the connection during the TLS handshake"),
            Self::Deadline(what) => write!(f, "{what} not finished in time"),
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
    // Memory as the bytes arrive, not as the header announces: a peer that announces a body
    // at the limit and sends nothing holds a megabyte, not the limit.
    let announced = header.body_bytes as usize;
    let mut body = Vec::with_capacity(announced.min(BODY_FIRST_ALLOCATION));
    stream.take(u64::from(header.body_bytes)).read_to_end(&mut body)?;
    if body.len() < announced {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
    }
    record::check_body(&header, &body)?;
    Ok((header.kind, body))
}

/// Reads the peer's `Hello` before `deadline` and checks it against ours.
pub fn read_hello(stream: &mut Stream, ours: &Hello, deadline: Instant) -> Result<Hello, TransportError> {
    let mut bounded = Bounded { stream, deadline };
    let theirs = check_hello(&mut bounded, ours).map_err(|e| match e {
        TransportError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            TransportError::Deadline("hello")
        }
        e => e,
    });
    stream.tcp().set_read_timeout(None)?;
    theirs
}

fn check_hello(stream: &mut impl Read, ours: &Hello) -> Result<Hello, TransportError> {
    let (kind, body) = read_record(stream, HELLO_LIMIT_BYTES)?;
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

/// Reads from a stream, each read waiting only until `deadline`: a peer trickling bytes
/// cannot stretch a bounded step.
pub struct Bounded<'a> {
    pub stream: &'a mut Stream,
    pub deadline: Instant,
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.tcp().set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out what it holds, then ends, and remembers the largest buffer it was given.
    struct Short {
        bytes: Vec<u8>,
        largest_buffer: usize,
    }

    impl Read for Short {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.largest_buffer = self.largest_buffer.max(buf.len());
            let n = buf.len().min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes.drain(..n);
            Ok(n)
        }
    }

    #[test]
    fn a_record_that_ends_before_its_announced_body_is_refused_without_taking_the_announced_memory() {
        let whole = record::encode(RecordKind::Message, &vec![3u8; 16 << 20]);
        let mut short = Short { bytes: whole[..record::HEADER_BYTES + 100].to_vec(), largest_buffer: 0 };
        assert!(matches!(read_record(&mut short, 32 << 20), Err(TransportError::Io(_))));
        assert!(short.largest_buffer <= BODY_FIRST_ALLOCATION, "{}", short.largest_buffer);
        let mut full = Short { bytes: whole, largest_buffer: 0 };
        assert_eq!(read_record(&mut full, 32 << 20).unwrap().1, vec![3u8; 16 << 20]);
    }
}
