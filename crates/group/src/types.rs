//! Galera-vocabulary types of the public interface.

use crate::codec::{DecodeError, Reader, Writer};
use std::fmt;

/// Global sequence number: dense, from the genesis' `base_seqno + 1`, identical on every
/// member of the primary component.
pub type Seqno = u64;

/// What a new cluster starts from (Galera's group state id at bootstrap): the history
/// UUID and the seqno the bootstrapping database is at. It is the first command of the log,
/// so every member, including one that joins much later, numbers from it alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Genesis {
    pub history: [u8; 16],
    pub base_seqno: Seqno,
    /// This bootstrap's id ([`time_ordered_id`]: a later bootstrap has a greater one). Every
    /// message carries its sender's, so that members of two bootstraps of one cluster never
    /// mix (docs/design/group-bootstrap-id.md).
    pub group: u64,
}

impl Genesis {
    /// A new bootstrap of history `history` from a database at `base_seqno`.
    pub fn new(history: [u8; 16], base_seqno: Seqno) -> Genesis {
        Genesis { history, base_seqno, group: time_ordered_id() }
    }
}

/// Non-zero and below 2^63: the creation time in milliseconds, then 20 random bits, so ids
/// made one after another sort in the order they were made. std's hasher keys come from the
/// OS's random source.
pub fn time_ordered_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        h.write_u128(now.as_nanos());
        h.write_u32(std::process::id());
        let millis = now.as_millis() as u64;
        let id = ((millis << 20) | (h.finish() & 0xf_ffff)) & (u64::MAX >> 1);
        if id != 0 {
            return id;
        }
    }
}

/// Stable identity of a member (one per node, kept across restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberId(pub u64);

impl MemberId {
    /// A member id read from a peer or a file: non-zero and below 2^63. Ids at or above
    /// 2^63 name a member's extra votes inside Raft (crate::raft); a peer that names one
    /// is refused here, not left to stop the member's Raft state.
    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let id = r.u64()?;
        if id == 0 || id >= 1 << 63 {
            return Err(DecodeError("member id out of range"));
        }
        Ok(Self(id))
    }
}

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.0)
    }
}

/// A member as it appears in a view.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemberInfo {
    pub id: MemberId,
    /// Human name (`wsrep_node_name`).
    pub name: String,
    /// Where peers reach its group transport (`wsrep_node_address`).
    pub address: String,
    /// Where clients reach it (`wsrep_node_incoming_address`); opaque to the group.
    pub incoming_address: String,
    /// Chosen anew at each connection of the member; opaque to the group. The application
    /// derives the identity it shows from it (Galera gives a node a new UUID at every
    /// connection, and MariaDB relies on that).
    pub incarnation: u64,
    /// A voter that holds no data (`lockstep arbitrator`, Galera's garbd): it leads only to
    /// hand the lead over, and never donates, votes on a failed commit or reports a commit cut.
    pub arbitrator: bool,
    /// Its say in the quorum (`pc.weight`, 0-255, default 1; crate::weights).
    pub weight: u8,
    /// Its site (`gmcast.segment`, 0-255, default 0): writesets cross into another segment
    /// once and are relayed inside it (docs/design/group-segments.md).
    pub segment: u8,
}

impl MemberInfo {
    /// A member known by its id alone: no name or addresses, incarnation 0, one vote, the
    /// default segment.
    pub fn with_id(id: MemberId) -> Self {
        MemberInfo {
            id,
            name: String::new(),
            address: String::new(),
            incoming_address: String::new(),
            incarnation: 0,
            arbitrator: false,
            weight: 1,
            segment: 0,
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u64(self.id.0).str(&self.name).str(&self.address).str(&self.incoming_address).u64(self.incarnation);
        w.u8(u8::from(self.arbitrator)).u8(self.weight).u8(self.segment);
    }
    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            id: MemberId::decode(r)?,
            name: r.str()?,
            address: r.str()?,
            incoming_address: r.str()?,
            incarnation: r.u64()?,
            arbitrator: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError("member role")),
            },
            weight: r.u8()?,
            segment: r.u8()?,
        })
    }
}

/// A committed membership of the primary component.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct View {
    /// Increases by one with every view; identical everywhere.
    pub view_id: u64,
    /// Sorted by member id.
    pub members: Vec<MemberInfo>,
}

impl View {
    pub fn contains(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u64(self.view_id).len(self.members.len());
        for m in &self.members {
            m.encode(&mut w);
        }
        w.bytes
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let view_id = r.u64()?;
        let n = r.len(20)?;
        let members = (0..n).map(|_| MemberInfo::decode(r)).collect::<Result<_, _>>()?;
        Ok(Self { view_id, members })
    }
}

/// What was delivered at a seqno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveredKind {
    /// A writeset submitted by `origin` as its request number `request`.
    Writeset { origin: MemberId, request: u64 },
    /// A new view of the primary component; `bytes` holds its encoding.
    View(View),
    /// An unnumbered message sent by `origin` as its request number `request`, ordered with
    /// everything else but taking no seqno: `seqno` is the last one assigned before it, so
    /// everything up to that seqno precedes it and everything after follows it.
    Message { origin: MemberId, request: u64 },
    /// Seqnos up to and including this one were ordered while this member was away and
    /// are no longer retained by any peer it reached: an application below this seqno
    /// needs a state transfer (Galera's SST) before it can apply what follows. Messages
    /// ordered in that stretch are lost too, so the gap may repeat the seqno last delivered
    /// (then only messages were missed and no transfer is needed).
    StateGap,
    /// Seqnos up to and including this one were ordered while this member was away and are
    /// no longer retained, but were views only: no writeset came after the last one this
    /// member applied (messages may have, and are lost with the stretch). Nothing to apply and
    /// no state transfer: the view that follows is the group's current one
    /// (docs/design/group-views-only-gap.md).
    ViewsMissed,
    /// This member's application applied past a fork of the order on the side the group's
    /// history left (a component forced without a quorum,
    /// docs/design/group-forced-primary.md): its state is not the group's however its seqno
    /// reads, and it needs a full state transfer. The group's order goes on after this seqno,
    /// which may lie below what the application applied.
    HistoryForked,
}

/// One event of the total order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub seqno: Seqno,
    pub kind: DeliveredKind,
    pub bytes: Vec<u8>,
}

/// Why a submission was not accepted or did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitError {
    /// This member is not in the primary component.
    NotPrimary,
    /// Local senders are paused by flow control.
    Paused,
    /// Larger than the group carries: a writeset over `max_writeset_bytes` (at most
    /// `config::WRITESET_LIMIT_BYTES`), a message over `config::ENTRY_LIMIT_BYTES`. Refused
    /// before it is ordered.
    TooLarge,
    /// Too many submissions are waiting for their seqno.
    QueueFull,
    /// The leader changed before accepting it; it was never ordered, so it may be resubmitted.
    Retry,
    /// No seqno within `submit_timeout_ms`: the writeset may or may not be ordered later.
    Unknown,
    /// A read barrier no leader answers from its log: it holds no lease (no recent contact
    /// with a quorum), none is known (an election, a hand-over), or the one asked lost the
    /// lead. Order a barrier through the log instead.
    NoLease,
    /// The member stopped (a cache failure or a panic; `Status::failed` says which). A
    /// writeset waiting for its seqno then may or may not have been ordered.
    Failed,
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::NotPrimary => "not in the primary component",
            Self::Paused => "senders paused by flow control",
            Self::TooLarge => {
                let (writeset, message) =
                    (crate::config::WRITESET_LIMIT_BYTES >> 20, crate::config::ENTRY_LIMIT_BYTES >> 20);
                return write!(
                    f,
                    "larger than the group carries (a writeset: max_writeset_bytes, at most {writeset} MiB; a \
                     message: {message} MiB)"
                );
            }
            Self::QueueFull => "too many submissions in flight",
            Self::Retry => "not ordered (leader changed); resubmit",
            Self::Unknown => "outcome unknown (timed out)",
            Self::NoLease => "no leader can answer a read barrier now",
            Self::Failed => "the group member stopped (see its status)",
        };
        f.write_str(text)
    }
}

impl std::error::Error for SubmitError {}
