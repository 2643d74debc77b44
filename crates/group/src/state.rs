//! The applied group state: a pure function of the committed log prefix. Every member
//! applies the same entries in the same order, so every member numbers the same
//! writesets and views with the same seqnos. See docs/design/group-seqno-vs-raft-index.md.

use crate::cache::{Entry, Payload};
use crate::codec::{DecodeError, Reader, Writer};
use crate::raft::{Membership, Position};
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, View};
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
    /// A member leaves, gracefully or evicted after `inactive_timeout_ms`.
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
}

const OP_WRITESET: u8 = 1;
const OP_JOIN: u8 = 2;
const OP_LEAVE: u8 = 3;
const OP_GENESIS: u8 = 4;
const OP_MESSAGE: u8 = 5;
const OP_REMERGE: u8 = 6;

impl Op {
    pub fn encode(&self) -> Vec<u8> {
        // Sized for a writeset's data: a big one is not regrown and copied again.
        let data = match self {
            Self::Writeset { data, .. } | Self::Message { data, .. } => data.len(),
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
    pub view: View,
    pub directory: BTreeMap<MemberId, DirectoryEntry>,
}

impl AppliedState {
    /// Applies the next committed entry; returns what it delivers, if anything.
    pub fn apply(&mut self, entry: &Entry) -> Option<Delivered> {
        debug_assert_eq!(entry.position.index, self.position.index + 1);
        self.position = entry.position;
        match &entry.payload {
            Payload::LeaderChange => None,
            Payload::Membership(m) => {
                self.membership = m.clone();
                self.refresh_view()
            }
            Payload::Command(bytes) => match Op::decode(bytes) {
                Ok(Op::Writeset { origin, request, data }) => {
                    self.seqno += 1;
                    Some(Delivered {
                        seqno: self.seqno,
                        kind: DeliveredKind::Writeset { origin, request },
                        bytes: data,
                    })
                }
                Ok(Op::Join(info)) => {
                    self.directory.insert(info.id, DirectoryEntry { info, wants_in: true });
                    self.refresh_view()
                }
                Ok(Op::Leave(id)) => {
                    if let Some(entry) = self.directory.get_mut(&id) {
                        entry.wants_in = false;
                    }
                    None
                }
                Ok(Op::Genesis(genesis)) => {
                    // Numbering starts here; only before the first view, so it happens once.
                    if self.view.view_id == 0 {
                        self.history = genesis.history;
                        self.group = genesis.group;
                        self.seqno = genesis.base_seqno;
                    } else {
                        log::warn!("ignoring a genesis committed after view {}", self.view.view_id);
                    }
                    None
                }
                Ok(Op::Message { origin, request, data }) => {
                    Some(Delivered { seqno: self.seqno, kind: DeliveredKind::Message { origin, request }, bytes: data })
                }
                Ok(Op::Remerge { view_id }) => {
                    let current = view_id == self.view.view_id && !self.view.members.is_empty();
                    current.then(|| self.new_view(self.view.members.clone()))
                }
                Err(e) => {
                    // Committed everywhere, so skipping it is skipped everywhere alike.
                    log::warn!("skipping undecodable committed entry {entry:?}: {e}");
                    None
                }
            },
        }
    }

    /// The view is the committed (non-joint) voter set, for members whose info is known.
    pub(crate) fn refresh_view(&mut self) -> Option<Delivered> {
        if self.membership.is_joint() {
            return None;
        }
        let members: Vec<MemberInfo> =
            self.membership.voters.iter().filter_map(|id| self.directory.get(id).map(|e| e.info.clone())).collect();
        if members == self.view.members {
            return None;
        }
        Some(self.new_view(members))
    }

    fn new_view(&mut self, members: Vec<MemberInfo>) -> Delivered {
        self.view = View { view_id: self.view.view_id + 1, members };
        self.seqno += 1;
        Delivered { seqno: self.seqno, kind: DeliveredKind::View(self.view.clone()), bytes: self.view.encode() }
    }

    pub fn encode(&self, w: &mut Writer) {
        self.position.encode(w);
        self.membership.encode(w);
        w.fixed(&self.history).u64(self.seqno);
        let view = self.view.encode();
        w.bytes(&view).len(self.directory.len());
        for entry in self.directory.values() {
            entry.info.encode(w);
            w.bool(entry.wants_in);
        }
        w.u64(self.group);
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
        Ok(Self { position, membership, history, group, seqno, view, directory })
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
        }
    }

    fn entry(index: u64, payload: Payload) -> Entry {
        Entry { position: Position { term: 1, index }, payload }
    }

    #[test]
    fn seqnos_are_dense_over_writesets_and_views_only() {
        let mut s = AppliedState::default();
        let voters = Membership { voters: [MemberId(1)].into(), new_voters: Default::default() };
        assert_eq!(s.apply(&entry(1, Payload::Membership(voters))), None);
        assert_eq!(s.apply(&entry(2, Payload::LeaderChange)), None);
        let view = s.apply(&entry(3, Payload::Command(Op::Join(info(1)).encode())));
        assert_eq!(view.unwrap().seqno, 1);
        let ws = Op::Writeset { origin: MemberId(1), request: 7, data: b"w".to_vec() };
        let d = s.apply(&entry(4, Payload::Command(ws.encode()))).unwrap();
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
        let voters = Membership { voters: [MemberId(1)].into(), new_voters: Default::default() };
        s.apply(&entry(1, Payload::Membership(voters)));
        let genesis = Genesis { history: [5; 16], base_seqno: 41, group: 1 };
        assert_eq!(s.apply(&entry(2, Payload::Command(Op::Genesis(genesis).encode()))), None);
        assert_eq!((s.history, s.seqno), ([5; 16], 41));
        assert_eq!(s.apply(&entry(3, Payload::Command(Op::Join(info(1)).encode()))).unwrap().seqno, 42);
        // Only the first genesis counts: a later one would renumber what was delivered.
        let late = Genesis { history: [6; 16], base_seqno: 7, group: 1 };
        assert_eq!(s.apply(&entry(4, Payload::Command(Op::Genesis(late).encode()))), None);
        assert_eq!((s.history, s.seqno), ([5; 16], 42));

        let message = Op::Message { origin: MemberId(1), request: 3, data: b"m".to_vec() };
        let d = s.apply(&entry(5, Payload::Command(message.encode()))).unwrap();
        let kind = DeliveredKind::Message { origin: MemberId(1), request: 3 };
        assert_eq!(d, Delivered { seqno: 42, kind, bytes: b"m".to_vec() });
        assert_eq!(s.seqno, 42);

        // Two members asking at once after the same view make one new view, not two.
        let remerge = Op::Remerge { view_id: 1 }.encode();
        let d = s.apply(&entry(6, Payload::Command(remerge.clone()))).unwrap();
        assert_eq!((d.seqno, s.view.view_id, s.view.members.len()), (43, 2, 1));
        assert_eq!(s.apply(&entry(7, Payload::Command(remerge))), None);

        let mut w = Writer::default();
        s.encode(&mut w);
        let decoded = AppliedState::decode(&mut Reader::new(&w.bytes)).unwrap();
        assert_eq!(decoded, s);
        assert_eq!(decoded.history, [5; 16]);
        for op in [Op::Genesis(genesis), message, Op::Remerge { view_id: 9 }] {
            assert_eq!(Op::decode(&op.encode()).unwrap(), op);
        }
    }
}
