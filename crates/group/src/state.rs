//! The applied group state: a pure function of the committed log prefix. Every member
//! applies the same entries in the same order, so every member numbers the same
//! writesets and views with the same seqnos. See docs/design/group-seqno-vs-raft-index.md.

use crate::cache::{Entry, Payload};
use crate::codec::{DecodeError, Reader, Writer};
use crate::raft::{self, Membership, Position};
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, View};
use crate::weights::{self, Weighted};
use std::collections::BTreeMap;

/// The payload of a command entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Writeset {
        origin: MemberId,
        request: u64,
        data: Vec<u8>,
    },
    /// A member asks to be in the primary component (name and address for views).
    Join(MemberInfo),
    /// A member leaves, gracefully or evicted after `suspect_timeout_ms`.
    Leave(MemberId),
    /// The cluster's history and base seqno: the bootstrapper's first command.
    Genesis(Genesis),
    /// An unnumbered message (see `DeliveredKind::Message`).
    Message {
        origin: MemberId,
        request: u64,
        data: Vec<u8>,
    },
    /// A member back in the primary component after being out of it asks for a new view;
    /// only the first such request while `view_id` is current makes one.
    Remerge {
        view_id: u64,
    },
    /// A part of a writeset; it takes no seqno (docs/design/group-writeset-parts.md).
    Part(Part),
    /// The end of the writeset `request` of `origin`: its `parts` parts, then `data`. It
    /// takes the writeset's seqno.
    Assembled {
        origin: MemberId,
        request: u64,
        parts: u32,
        data: Vec<u8>,
    },
}

const OP_WRITESET: u8 = 1;
const OP_JOIN: u8 = 2;
const OP_LEAVE: u8 = 3;
const OP_GENESIS: u8 = 4;
const OP_MESSAGE: u8 = 5;
const OP_REMERGE: u8 = 6;
const OP_PART: u8 = 7;
const OP_ASSEMBLED: u8 = 8;

/// Whether an entry changes who is in the group or who votes.
pub fn changes_membership(payload: &Payload) -> bool {
    match payload {
        Payload::Membership(_) => true,
        Payload::Command(bytes) => matches!(bytes.first(), Some(&OP_JOIN | &OP_LEAVE)),
        Payload::LeaderChange => false,
    }
}

impl Op {
    pub fn encode(&self) -> Vec<u8> {
        // Sized for a writeset's data: a big one is not regrown and copied again.
        let data = match self {
            Self::Writeset { data, .. }
            | Self::Message { data, .. }
            | Self::Part(Part { data, .. })
            | Self::Assembled { data, .. } => data.len(),
            _ => 0,
        };
        let mut w = Writer { bytes: Vec::with_capacity(data + 32) };
        match self {
            Self::Writeset { origin, request, data } => {
                w.u8(OP_WRITESET).u64(origin.0).u64(*request).bytes(data);
            }
            Self::Join(info) => {
                w.u8(OP_JOIN);
                info.encode(&mut w);
            }
            Self::Leave(id) => {
                w.u8(OP_LEAVE).u64(id.0);
            }
            Self::Genesis(g) => {
                w.u8(OP_GENESIS).fixed(&g.history).u64(g.base_seqno).u64(g.group);
            }
            Self::Message { origin, request, data } => {
                w.u8(OP_MESSAGE).u64(origin.0).u64(*request).bytes(data);
            }
            Self::Remerge { view_id } => {
                w.u8(OP_REMERGE).u64(*view_id);
            }
            Self::Part(Part { origin, request, upload, part, data }) => {
                w.u8(OP_PART).u64(origin.0).u64(*request).u64(*upload).u32(*part).bytes(data);
            }
            Self::Assembled { origin, request, parts, data } => {
                w.u8(OP_ASSEMBLED).u64(origin.0).u64(*request).u32(*parts).bytes(data);
            }
        }
        w.bytes
    }

    /// The genesis a command is, if it is one; other operations are not decoded.
    pub fn genesis(bytes: &[u8]) -> Option<Genesis> {
        match bytes.first() {
            Some(&OP_GENESIS) => match Self::decode(bytes) {
                Ok(Self::Genesis(genesis)) => Some(genesis),
                _ => None,
            },
            _ => None,
        }
    }

    /// The member a `Join` names; other operations are not decoded.
    pub fn joining(bytes: &[u8]) -> Option<MemberInfo> {
        match bytes.first() {
            Some(&OP_JOIN) => match Self::decode(bytes) {
                Ok(Self::Join(info)) => Some(info),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let op = match r.u8()? {
            OP_WRITESET => Self::Writeset { origin: MemberId(r.u64()?), request: r.u64()?, data: r.bytes()? },
            OP_JOIN => Self::Join(MemberInfo::decode(&mut r)?),
            OP_LEAVE => Self::Leave(MemberId(r.u64()?)),
            OP_GENESIS => {
                let (history, base_seqno) = (r.array()?, r.u64()?);
                // Logs written before bootstrap ids have none.
                let group = if r.at_end() { 0 } else { r.u64()? };
                Self::Genesis(Genesis { history, base_seqno, group })
            }
            OP_MESSAGE => Self::Message { origin: MemberId(r.u64()?), request: r.u64()?, data: r.bytes()? },
            OP_REMERGE => Self::Remerge { view_id: r.u64()? },
            OP_PART => Self::Part(Part {
                origin: MemberId(r.u64()?),
                request: r.u64()?,
                upload: r.u64()?,
                part: r.u32()?,
                data: r.bytes()?,
            }),
            OP_ASSEMBLED => {
                Self::Assembled { origin: MemberId(r.u64()?), request: r.u64()?, parts: r.u32()?, data: r.bytes()? }
            }
            _ => return Err(DecodeError("unknown operation")),
        };
        r.finish()?;
        Ok(op)
    }
}

/// A directory entry: who the member is and whether it currently wants to be a voter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryEntry {
    pub info: MemberInfo,
    pub wants_in: bool,
}

/// Part number `part` of the writeset `upload` of `origin`, ordered under its own `request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub origin: MemberId,
    pub request: u64,
    pub upload: u64,
    pub part: u32,
    pub data: Vec<u8>,
}

/// A writeset whose parts are being ordered: which one, and how far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenUpload {
    pub upload: u64,
    /// Parts ordered so far (the next one must have this number).
    pub parts: u32,
    pub bytes: u64,
}

/// What applying one entry yields.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Nothing,
    Delivered(Delivered),
    /// A part; `accepted` unless it did not follow the parts before it (one was lost on the
    /// way), which ends its upload.
    Part {
        part: Part,
        accepted: bool,
    },
    /// A writeset ordered in parts: `delivered.bytes` holds only its last piece, to follow
    /// the `bytes` of parts before it.
    Assembled {
        delivered: Delivered,
        bytes: u64,
    },
    /// The end of an upload whose parts did not all arrive: nothing is delivered, and the
    /// origin learns that its writeset was not ordered.
    Refused {
        origin: MemberId,
    },
}

/// Where a component forced without a quorum started its own order (`force_primary`): its
/// boundary, and the first seqno at which that side and the side it left may differ (its
/// forced view's, or the one after the boundary when the view did not change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForcedBoundary {
    pub position: Position,
    pub seqno: Seqno,
}

/// Group state after applying the log up to `position`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppliedState {
    pub position: Position,
    pub membership: Membership,
    /// The history UUID from the genesis (zero before it is applied).
    pub history: [u8; 16],
    /// The genesis' bootstrap id (zero before it is applied).
    pub group: u64,
    pub seqno: Seqno,
    /// Index of the last entry that delivered a writeset: a member that applied up to there
    /// and skips to this state misses no data, only views and messages.
    pub last_writeset_index: u64,
    /// The boundaries of the components forced without a quorum along this history
    /// (`force_primary`), oldest first: two states are on one history only if one's list
    /// starts with the other's (docs/design/group-views-only-gap.md).
    pub forks: Vec<ForcedBoundary>,
    pub view: View,
    pub directory: BTreeMap<MemberId, DirectoryEntry>,
    /// Writesets being ordered in parts, by origin (one at a time per member). Not
    /// persisted: the cache purges only up to states without any, so a restart replays
    /// every part it needs (docs/design/group-writeset-parts.md).
    pub uploads: BTreeMap<MemberId, OpenUpload>,
}

impl AppliedState {
    /// `id` is an arbitrator (a voter without data), as its last join said.
    pub fn is_arbitrator(&self, id: MemberId) -> bool {
        self.directory.get(&id).is_some_and(|e| e.info.arbitrator)
    }

    /// The members that should vote and their votes, by the weights of those that want in
    /// (crate::weights). A member whose extra votes Raft could not tell from another's
    /// (`raft::share_vote_key`) casts one.
    pub fn votes_by_weight(&self) -> BTreeMap<MemberId, u8> {
        let members: Vec<Weighted> = self
            .directory
            .values()
            .filter(|e| e.wants_in)
            .map(|e| Weighted { id: e.info.id, weight: e.info.weight, arbitrator: e.info.arbitrator })
            .collect();
        let mut votes = weights::votes(&members);
        for (&id, n) in votes.iter_mut() {
            if self.directory.keys().any(|&other| raft::share_vote_key(id, other)) {
                *n = 1;
            }
        }
        votes
    }

    /// Applies the next committed entry; returns what it yields.
    pub fn apply(&mut self, entry: &Entry) -> Applied {
        debug_assert_eq!(entry.position.index, self.position.index + 1);
        self.position = entry.position;
        let op = match &entry.payload {
            Payload::LeaderChange => return Applied::Nothing,
            Payload::Membership(m) => {
                self.membership = m.clone();
                return self.refresh_view().map_or(Applied::Nothing, Applied::Delivered);
            }
            Payload::Command(bytes) => match Op::decode(bytes) {
                Ok(op) => op,
                Err(e) => {
                    // Committed everywhere, so skipping it is skipped everywhere alike.
                    log::warn!("skipping undecodable committed entry at {:?}: {e}", entry.position);
                    return Applied::Nothing;
                }
            },
        };
        match op {
            Op::Writeset { origin, request, data } => {
                self.seqno += 1;
                self.last_writeset_index = entry.position.index;
                let kind = DeliveredKind::Writeset { origin, request };
                Applied::Delivered(Delivered { seqno: self.seqno, kind, bytes: data })
            }
            Op::Part(part) => {
                let open = self.uploads.get(&part.origin).filter(|u| u.upload == part.upload);
                let accepted = part.part == 0 || open.is_some_and(|open| open.parts == part.part);
                if accepted {
                    let fresh = OpenUpload { upload: part.upload, parts: 0, bytes: 0 };
                    let open = self.uploads.entry(part.origin).or_insert(fresh);
                    if part.part == 0 {
                        *open = fresh;
                    }
                    open.parts += 1;
                    open.bytes += part.data.len() as u64;
                } else if open.is_some() {
                    self.uploads.remove(&part.origin);
                }
                Applied::Part { part, accepted }
            }
            Op::Assembled { origin, request, parts, data } => {
                let open = self.uploads.get(&origin).copied().filter(|u| u.upload == request);
                if open.is_some() {
                    self.uploads.remove(&origin);
                }
                match open.filter(|u| u.parts == parts) {
                    Some(open) => {
                        self.seqno += 1;
                        self.last_writeset_index = entry.position.index;
                        let kind = DeliveredKind::Writeset { origin, request };
                        let delivered = Delivered { seqno: self.seqno, kind, bytes: data };
                        Applied::Assembled { delivered, bytes: open.bytes }
                    }
                    None => Applied::Refused { origin },
                }
            }
            Op::Join(info) => {
                self.directory.insert(info.id, DirectoryEntry { info, wants_in: true });
                self.refresh_view().map_or(Applied::Nothing, Applied::Delivered)
            }
            Op::Leave(id) => {
                if let Some(entry) = self.directory.get_mut(&id) {
                    entry.wants_in = false;
                }
                // A member out of the configuration leaves the view now (one moving between
                // voting and not); the others when their removal commits.
                self.refresh_view().map_or(Applied::Nothing, Applied::Delivered)
            }
            Op::Genesis(genesis) => {
                // Numbering starts here; only before the first view, so it happens once.
                if self.view.view_id == 0 {
                    self.history = genesis.history;
                    self.group = genesis.group;
                    self.seqno = genesis.base_seqno;
                } else {
                    log::warn!("ignoring a genesis committed after view {}", self.view.view_id);
                }
                Applied::Nothing
            }
            Op::Message { origin, request, data } => {
                let kind = DeliveredKind::Message { origin, request };
                Applied::Delivered(Delivered { seqno: self.seqno, kind, bytes: data })
            }
            Op::Remerge { view_id } => {
                let current = view_id == self.view.view_id && !self.view.members.is_empty();
                if current {
                    Applied::Delivered(self.new_view(self.view.members.clone()))
                } else {
                    Applied::Nothing
                }
            }
        }
    }

    /// The view is the committed (non-joint) configuration, voters and non-voters, for
    /// members whose info is known; a member of the view that still wants in stays while
    /// its weight moves it between the two (it is out of the configuration for a moment).
    pub(crate) fn refresh_view(&mut self) -> Option<Delivered> {
        if self.membership.is_joint() {
            return None;
        }
        let members: Vec<MemberInfo> = self
            .directory
            .values()
            .filter(|e| self.membership.contains(e.info.id) || (e.wants_in && self.view.contains(e.info.id)))
            .map(|e| e.info.clone())
            .collect();
        if members == self.view.members {
            return None;
        }
        Some(self.new_view(members))
    }

    fn new_view(&mut self, members: Vec<MemberInfo>) -> Delivered {
        // A member out of the view will not finish its upload; its parts are dropped.
        self.uploads.retain(|origin, _| members.iter().any(|m| m.id == *origin));
        self.view = View { view_id: self.view.view_id + 1, members };
        self.seqno += 1;
        Delivered { seqno: self.seqno, kind: DeliveredKind::View(self.view.clone()), bytes: self.view.encode() }
    }

    pub fn encode(&self, w: &mut Writer) {
        debug_assert!(self.uploads.is_empty(), "a state with open uploads is never persisted or sent");
        self.position.encode(w);
        self.membership.encode(w);
        w.fixed(&self.history).u64(self.seqno);
        let view = self.view.encode();
        w.bytes(&view).len(self.directory.len());
        for entry in self.directory.values() {
            entry.info.encode(w);
            w.bool(entry.wants_in);
        }
        w.u64(self.group).u64(self.last_writeset_index).len(self.forks.len());
        for fork in &self.forks {
            fork.position.encode(w);
        }
        // After the positions: states written before the seqnos were kept end there.
        for fork in &self.forks {
            w.u64(fork.seqno);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let position = Position::decode(r)?;
        let membership = Membership::decode(r)?;
        let history = r.array()?;
        let seqno = r.u64()?;
        let view_bytes = r.bytes()?;
        let mut view_reader = Reader::new(&view_bytes);
        let view = View::decode(&mut view_reader)?;
        view_reader.finish()?;
        let n = r.len(21)?;
        let mut directory = BTreeMap::new();
        for _ in 0..n {
            let info = MemberInfo::decode(r)?;
            let wants_in = r.bool()?;
            directory.insert(info.id, DirectoryEntry { info, wants_in });
        }
        let group = if r.at_end() { 0 } else { r.u64()? };
        // Written before it existed: every skip counts as one past a writeset.
        let last_writeset_index = if r.at_end() { position.index } else { r.u64()? };
        let positions = if r.at_end() {
            Vec::new()
        } else {
            (0..r.len(16)?).map(|_| Position::decode(r)).collect::<Result<Vec<_>, _>>()?
        };
        // Unknown: 0, before anything an application applied, so any skip past it is a gap.
        let seqnos_kept = !r.at_end();
        let forks = (positions.into_iter())
            .map(|position| Ok(ForcedBoundary { position, seqno: if seqnos_kept { r.u64()? } else { 0 } }))
            .collect::<Result<_, DecodeError>>()?;
        let uploads = BTreeMap::new();
        Ok(Self { position, membership, history, group, seqno, last_writeset_index, forks, view, directory, uploads })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u64) -> MemberInfo {
        MemberInfo {
            id: MemberId(id),
            name: format!("n{id}"),
            address: format!("127.0.0.1:{}", 4567 + id),
            incoming_address: format!("127.0.0.1:{}", 3306 + id),
            incarnation: 0,
            arbitrator: false,
            weight: 1,
            segment: 0,
        }
    }

    fn delivered(applied: Applied) -> Option<Delivered> {
        match applied {
            Applied::Delivered(d) => Some(d),
            Applied::Nothing => None,
            other => panic!("not a delivery: {other:?}"),
        }
    }

    fn entry(index: u64, payload: Payload) -> Entry {
        Entry { position: Position { term: 1, index }, payload }
    }

    #[test]
    fn seqnos_are_dense_over_writesets_and_views_only() {
        let mut s = AppliedState::default();
        let voters = Membership { voters: [MemberId(1)].into(), ..Default::default() };
        assert_eq!(delivered(s.apply(&entry(1, Payload::Membership(voters)))), None);
        assert_eq!(delivered(s.apply(&entry(2, Payload::LeaderChange))), None);
        let view = delivered(s.apply(&entry(3, Payload::Command(Op::Join(info(1)).encode()))));
        assert_eq!(view.unwrap().seqno, 1);
        let ws = Op::Writeset { origin: MemberId(1), request: 7, data: b"w".to_vec() };
        let d = delivered(s.apply(&entry(4, Payload::Command(ws.encode())))).unwrap();
        assert_eq!((d.seqno, d.bytes), (2, b"w".to_vec()));
        assert_eq!(s.view.view_id, 1);

        let mut w = Writer::default();
        s.encode(&mut w);
        let mut r = Reader::new(&w.bytes);
        assert_eq!(AppliedState::decode(&mut r).unwrap(), s);
        r.finish().unwrap();
    }

    #[test]
    fn genesis_sets_history_and_base_messages_share_a_seqno_and_a_remerge_makes_one_view() {
        let mut s = AppliedState::default();
        let voters = Membership { voters: [MemberId(1)].into(), ..Default::default() };
        delivered(s.apply(&entry(1, Payload::Membership(voters))));
        let genesis = Genesis { history: [5; 16], base_seqno: 41, group: 1 };
        assert_eq!(delivered(s.apply(&entry(2, Payload::Command(Op::Genesis(genesis).encode())))), None);
        assert_eq!((s.history, s.seqno), ([5; 16], 41));
        assert_eq!(delivered(s.apply(&entry(3, Payload::Command(Op::Join(info(1)).encode())))).unwrap().seqno, 42);
        // Only the first genesis counts: a later one would renumber what was delivered.
        let late = Genesis { history: [6; 16], base_seqno: 7, group: 1 };
        assert_eq!(delivered(s.apply(&entry(4, Payload::Command(Op::Genesis(late).encode())))), None);
        assert_eq!((s.history, s.seqno), ([5; 16], 42));

        let message = Op::Message { origin: MemberId(1), request: 3, data: b"m".to_vec() };
        let d = delivered(s.apply(&entry(5, Payload::Command(message.encode())))).unwrap();
        let kind = DeliveredKind::Message { origin: MemberId(1), request: 3 };
        assert_eq!(d, Delivered { seqno: 42, kind, bytes: b"m".to_vec() });
        assert_eq!(s.seqno, 42);

        // Two members asking at once after the same view make one new view, not two.
        let remerge = Op::Remerge { view_id: 1 }.encode();
        let d = delivered(s.apply(&entry(6, Payload::Command(remerge.clone())))).unwrap();
        assert_eq!((d.seqno, s.view.view_id, s.view.members.len()), (43, 2, 1));
        assert_eq!(delivered(s.apply(&entry(7, Payload::Command(remerge)))), None);

        let mut w = Writer::default();
        s.encode(&mut w);
        let decoded = AppliedState::decode(&mut Reader::new(&w.bytes)).unwrap();
        assert_eq!(decoded, s);
        assert_eq!(decoded.history, [5; 16]);
        for op in [Op::Genesis(genesis), message, Op::Remerge { view_id: 9 }] {
            assert_eq!(Op::decode(&op.encode()).unwrap(), op);
        }
    }

    #[test]
    fn a_writeset_in_parts_takes_one_seqno_at_its_end_and_only_if_every_part_came() {
        let mut s = AppliedState::default();
        let voters = Membership { voters: [MemberId(1), MemberId(2)].into(), ..Default::default() };
        s.apply(&entry(1, Payload::Membership(voters)));
        s.apply(&entry(2, Payload::Command(Op::Join(info(1)).encode())));
        assert_eq!(delivered(s.apply(&entry(3, Payload::Command(Op::Join(info(2)).encode())))).unwrap().seqno, 2);
        let (a, b) = (MemberId(1), MemberId(2));
        let part = |origin, request, upload, part, data: &[u8]| {
            Payload::Command(Op::Part(Part { origin, request, upload, part, data: data.to_vec() }).encode())
        };
        let end = |origin, request, parts, data: &[u8]| {
            Payload::Command(Op::Assembled { origin, request, parts, data: data.to_vec() }.encode())
        };
        // a's upload 10 interleaves with b's writeset; parts take no seqno.
        let applied = s.apply(&entry(4, part(a, 11, 10, 0, b"he")));
        assert!(matches!(applied, Applied::Part { accepted: true, part: Part { part: 0, .. } }));
        let ws = Op::Writeset { origin: b, request: 5, data: b"w".to_vec() };
        assert_eq!(delivered(s.apply(&entry(5, Payload::Command(ws.encode())))).unwrap().seqno, 3);
        assert!(matches!(s.apply(&entry(6, part(a, 12, 10, 1, b"ll"))), Applied::Part { accepted: true, .. }));
        assert_eq!(s.uploads[&a], OpenUpload { upload: 10, parts: 2, bytes: 4 });
        let Applied::Assembled { delivered: whole, bytes } = s.apply(&entry(7, end(a, 10, 2, b"o"))) else { panic!() };
        assert_eq!((whole.seqno, whole.bytes, bytes), (4, b"o".to_vec(), 4));
        assert!(s.uploads.is_empty());
        // Again: refused, no seqno.
        assert_eq!(s.apply(&entry(8, end(a, 10, 2, b"o"))), Applied::Refused { origin: a });

        // A lost part ends the upload: the next part is refused, and so is its end.
        s.apply(&entry(9, part(b, 21, 20, 0, b"x")));
        assert!(matches!(s.apply(&entry(10, part(b, 23, 20, 2, b"z"))), Applied::Part { accepted: false, .. }));
        assert!(!s.uploads.contains_key(&b));
        assert_eq!(s.apply(&entry(11, end(b, 20, 3, b"!"))), Applied::Refused { origin: b });
        // A first part replaces what an abandoned upload left; a view without its origin drops it.
        s.apply(&entry(12, part(b, 31, 30, 0, b"x")));
        s.apply(&entry(13, part(b, 33, 32, 0, b"y")));
        assert_eq!(s.uploads[&b].upload, 32);
        assert_eq!(s.apply(&entry(14, Payload::Command(Op::Leave(b).encode()))), Applied::Nothing);
        let without_b = Membership { voters: [MemberId(1)].into(), ..Default::default() };
        assert_eq!(delivered(s.apply(&entry(15, Payload::Membership(without_b)))).unwrap().seqno, 5);
        assert!(s.uploads.is_empty());
        assert_eq!(s.apply(&entry(16, end(b, 32, 1, b"!"))), Applied::Refused { origin: b });
        assert_eq!(s.seqno, 5);
        for op in [
            Op::Part(Part { origin: a, request: 1, upload: 2, part: 3, data: b"p".to_vec() }),
            Op::Assembled { origin: a, request: 2, parts: 4, data: b"e".to_vec() },
        ] {
            assert_eq!(Op::decode(&op.encode()).unwrap(), op);
        }
    }
}
