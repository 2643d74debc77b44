//! Messages between members: one envelope (sender, its receive-queue length and applied
//! seqno, the leader's primary flag and queue table) around a body. Encoded as a `record::RecordKind::Message`.

use crate::codec::{DecodeError, Reader, Writer};
use crate::raft::{Position, RaftMessage};
use crate::state::AppliedState;
use crate::types::{MemberId, MemberInfo};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub from: MemberId,
    /// The sender's bootstrap id (`Genesis::group`; 0 before it applied a genesis).
    pub group: u64,
    /// The sender's Raft term when it sent this: a leader orders a forwarded writeset only
    /// if it was sent in the leader's term (`Member::order_forwarded`).
    pub term: u64,
    /// Sender's deliveries not yet taken by its application (flow control input).
    pub recv_queue: u32,
    /// The last seqno the sender applied: a member told to force a primary component hands
    /// that to the member in contact that applied most (`Member::bootstrap_primary`).
    pub applied: u64,
    /// How many components were forced along the sender's history (`AppliedState::forks`):
    /// a member ignores the Raft calls of one whose history lacks a fork its own went through.
    pub forks: u32,
    /// The term of the last of those forced boundaries (0 if none): two histories forced
    /// apart the same number of times differ there.
    pub fork_term: u64,
    /// Set by a leader in contact with a quorum: receivers are then primary.
    pub leader_primary: bool,
    /// The sender is in a primary component of its own history: one of another history
    /// meeting ours is a split brain one side ends (`member/split_brain.rs`).
    pub primary: bool,
    /// From a leader: every member's receive-queue length as it last heard.
    pub queue_table: Vec<(MemberId, u32)>,
    pub body: Body,
}

/// Raft messages with writesets for several members of another segment, sent once to one
/// of them (the relay), which hands each of the others its part (docs/design/group-segments.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay {
    /// Every payload once.
    pub pool: Vec<Vec<u8>>,
    pub parts: Vec<RelayPart>,
}

/// The sender's Raft message to `to`, inside the relay's envelope (a part has none of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPart {
    pub to: MemberId,
    /// A Raft message whose payloads are taken out...
    pub message: RaftMessage,
    /// ...and are these entries of the pool, in order.
    pub payloads: Vec<u32>,
    /// As `Body::Raft::call`.
    pub call: u64,
}

/// Most payload bytes the parts of one relay may refer to, counting a payload once per part
/// that refers to it: what its receiver may copy out of it. The pool itself fits in a record,
/// and so does each part; without a bound, a small relay whose parts all refer to a big
/// payload would make its receiver copy it without end. The sender keeps to it
/// (`Member::relay_into_segments`), the decoder refuses a relay beyond it.
pub const RELAY_REFERENCED_LIMIT_BYTES: u64 = 4 * crate::config::RECORD_LIMIT_BYTES as u64;

impl Message {
    /// A part of this relay message as the message its sender addressed to `part.to`: this
    /// envelope around the part's Raft message, its payloads back in place.
    pub fn relayed_part(&self, part: &RelayPart) -> Message {
        let Body::Relay(relay) = &self.body else { unreachable!("a part of this relay") };
        Message {
            body: Body::Raft {
                message: part.message.clone(),
                payloads: part.payloads.iter().map(|&i| relay.pool[i as usize].clone()).collect(),
                call: part.call,
            },
            queue_table: self.queue_table.clone(),
            ..*self
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A Raft message; `payloads` are those of its command entries, in order. `call` tells
    /// which append a reply answers: an append call carries its number among the sender's
    /// calls to the receiver (from 1), an append reply the number of the latest call its
    /// sender had received from the receiver; other messages carry 0.
    Raft {
        message: RaftMessage,
        payloads: Vec<Vec<u8>>,
        call: u64,
    },
    /// A writeset for the leader to order on behalf of the sender.
    Forward {
        request: u64,
        data: Vec<u8>,
    },
    /// An unnumbered message for the leader to order on behalf of the sender.
    ForwardMessage {
        request: u64,
        data: Vec<u8>,
    },
    /// A part of the sender's writeset `upload`, ordered under its own `request`.
    ForwardPart {
        request: u64,
        upload: u64,
        part: u32,
        data: Vec<u8>,
    },
    /// The end of the sender's writeset `request`, ordered in `parts` parts before it.
    ForwardEnd {
        request: u64,
        parts: u32,
        data: Vec<u8>,
    },
    /// The receiver is not a primary leader, or is one cut off from a quorum
    /// (`Member::cut_off`): the request was not ordered.
    ForwardRefused {
        request: u64,
        cut_off: bool,
    },
    /// Please add me to the primary component.
    Join(MemberInfo),
    /// Please remove me from the primary component.
    Leave,
    /// Answer to `Leave`: the removal is committed, the sender may stop.
    Removed,
    /// Would you vote for me in `term`, given my log ends at `last`? (Raft §9.6 pre-vote)
    PreVote {
        term: u64,
        last: Position,
    },
    PreVoteReply {
        term: u64,
        granted: bool,
    },
    /// The sender no longer retains what the receiver needs: continue from this state.
    Snapshot(AppliedState),
    /// The sender is back in the primary component at view `view_id`: please order a new view.
    Remerge {
        view_id: u64,
    },
    /// Sent once to each seed found: a member of another bootstrap learns of us from it.
    /// `address` is where the sender listens (as a `Join` says), so the seed can answer a
    /// member that asks nothing else of it.
    Probe {
        address: String,
    },
    /// Answer to `Probe`, whatever the bootstrap: the prober learns ours from the envelope.
    /// `primary_without_you`: the sender is in a primary component in which the prober has
    /// no vote (docs/design/group-forked-history.md).
    ProbeAnswer {
        primary_without_you: bool,
    },
    /// Answer to a message of an earlier bootstrap of this cluster: the receiver's state is
    /// from before ours (the envelope says which bootstrap we belong to).
    Stale,
    /// `pc.bootstrap=1` was set on the sender, and the receiver applied more of the order:
    /// the receiver forms the primary component from its state, as the sender would have.
    ForcePrimary,
    /// A follower asks the leader for its commit index (a causal read's point).
    ReadIndex {
        request: u64,
    },
    /// The leader's commit index, or `None` if it cannot vouch for it without ordering.
    ReadIndexReply {
        request: u64,
        index: Option<u64>,
    },
    /// From the leader, to every voter: it hands the lead to `heir`, which has its whole log
    /// and starts an election now (Raft's leadership transfer, "TimeoutNow"); the others
    /// grant the heir their vote though they still hear the leader.
    Campaign {
        heir: MemberId,
    },
    /// From another segment's member: the parts of its Raft messages for this segment.
    Relay(Relay),
    /// From a relay of our segment: a Raft message of another member, sent to us.
    Relayed(Box<Message>),
}

const BODY_RAFT: u8 = 1;
const BODY_FORWARD: u8 = 2;
const BODY_FORWARD_REFUSED: u8 = 3;
const BODY_JOIN: u8 = 4;
const BODY_LEAVE: u8 = 5;
const BODY_SNAPSHOT: u8 = 6;
const BODY_REMOVED: u8 = 7;
const BODY_PRE_VOTE: u8 = 8;
const BODY_PRE_VOTE_REPLY: u8 = 9;
const BODY_FORWARD_MESSAGE: u8 = 10;
const BODY_REMERGE: u8 = 11;
const BODY_READ_INDEX: u8 = 12;
const BODY_READ_INDEX_REPLY: u8 = 13;
const BODY_PROBE: u8 = 14;
const BODY_STALE: u8 = 15;
const BODY_FORWARD_PART: u8 = 16;
const BODY_FORWARD_END: u8 = 17;
const BODY_CAMPAIGN: u8 = 18;
const BODY_RELAY: u8 = 19;
const BODY_RELAYED: u8 = 20;
const BODY_PROBE_ANSWER: u8 = 21;
const BODY_FORCE_PRIMARY: u8 = 22;

/// Only Raft messages travel through a relay (and never a relay inside a relay).
fn relayable(message: Message) -> Result<Message, DecodeError> {
    match message.body {
        Body::Raft { .. } => Ok(message),
        _ => Err(DecodeError("only Raft messages are relayed")),
    }
}

impl Message {
    /// The writeset bytes it carries, which is its size near enough to count it against
    /// a queue's budget without encoding it.
    pub fn payload_bytes(&self) -> usize {
        match &self.body {
            Body::Raft { payloads, .. } => payloads.iter().map(Vec::len).sum(),
            Body::Relay(relay) => relay.pool.iter().map(Vec::len).sum(),
            Body::Relayed(message) => message.payload_bytes(),
            Body::Forward { data, .. }
            | Body::ForwardMessage { data, .. }
            | Body::ForwardPart { data, .. }
            | Body::ForwardEnd { data, .. } => data.len(),
            _ => 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.encode_into(&mut w);
        w.bytes
    }

    pub fn encode_into(&self, w: &mut Writer) {
        w.u64(self.from.0)
            .u64(self.group)
            .u64(self.term)
            .u32(self.recv_queue)
            .u64(self.applied)
            .u32(self.forks)
            .u64(self.fork_term)
            .bool(self.leader_primary)
            .bool(self.primary)
            .len(self.queue_table.len());
        for (id, len) in &self.queue_table {
            w.u64(id.0).u32(*len);
        }
        match &self.body {
            Body::Raft { message, payloads, call } => {
                w.u8(BODY_RAFT);
                message.encode(w);
                w.len(payloads.len());
                for p in payloads {
                    w.bytes(p);
                }
                w.u64(*call);
            }
            Body::Forward { request, data } => {
                w.u8(BODY_FORWARD).u64(*request).bytes(data);
            }
            Body::ForwardMessage { request, data } => {
                w.u8(BODY_FORWARD_MESSAGE).u64(*request).bytes(data);
            }
            Body::ForwardPart { request, upload, part, data } => {
                w.u8(BODY_FORWARD_PART).u64(*request).u64(*upload).u32(*part).bytes(data);
            }
            Body::ForwardEnd { request, parts, data } => {
                w.u8(BODY_FORWARD_END).u64(*request).u32(*parts).bytes(data);
            }
            Body::ForwardRefused { request, cut_off } => {
                w.u8(BODY_FORWARD_REFUSED).u64(*request).bool(*cut_off);
            }
            Body::Join(info) => {
                w.u8(BODY_JOIN);
                info.encode(w);
            }
            Body::Leave => {
                w.u8(BODY_LEAVE);
            }
            Body::Removed => {
                w.u8(BODY_REMOVED);
            }
            Body::PreVote { term, last } => {
                w.u8(BODY_PRE_VOTE).u64(*term);
                last.encode(w);
            }
            Body::PreVoteReply { term, granted } => {
                w.u8(BODY_PRE_VOTE_REPLY).u64(*term).bool(*granted);
            }
            Body::Snapshot(state) => {
                w.u8(BODY_SNAPSHOT);
                state.encode(w);
            }
            Body::Remerge { view_id } => {
                w.u8(BODY_REMERGE).u64(*view_id);
            }
            Body::ReadIndex { request } => {
                w.u8(BODY_READ_INDEX).u64(*request);
            }
            Body::ReadIndexReply { request, index } => {
                w.u8(BODY_READ_INDEX_REPLY).u64(*request).bool(index.is_some()).u64(index.unwrap_or(0));
            }
            Body::Probe { address } => {
                w.u8(BODY_PROBE).str(address);
            }
            Body::ProbeAnswer { primary_without_you } => {
                w.u8(BODY_PROBE_ANSWER).bool(*primary_without_you);
            }
            Body::Stale => {
                w.u8(BODY_STALE);
            }
            Body::ForcePrimary => {
                w.u8(BODY_FORCE_PRIMARY);
            }
            Body::Campaign { heir } => {
                w.u8(BODY_CAMPAIGN).u64(heir.0);
            }
            Body::Relay(relay) => {
                w.u8(BODY_RELAY).len(relay.pool.len());
                for p in &relay.pool {
                    w.bytes(p);
                }
                w.len(relay.parts.len());
                for part in &relay.parts {
                    w.u64(part.to.0).len(part.payloads.len());
                    for &i in &part.payloads {
                        w.u32(i);
                    }
                    part.message.encode(w);
                    w.u64(part.call);
                }
            }
            Body::Relayed(message) => {
                w.u8(BODY_RELAYED).bytes(&message.encode());
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let from = MemberId::decode(&mut r)?;
        let group = r.u64()?;
        let term = r.u64()?;
        let recv_queue = r.u32()?;
        let applied = r.u64()?;
        let forks = r.u32()?;
        let fork_term = r.u64()?;
        let leader_primary = r.bool()?;
        let primary = r.bool()?;
        let n = r.len(12)?;
        let queue_table =
            (0..n).map(|_| Ok((MemberId::decode(&mut r)?, r.u32()?))).collect::<Result<_, DecodeError>>()?;
        let body = match r.u8()? {
            BODY_RAFT => {
                let message = RaftMessage::decode(&mut r)?;
                if message.from() != from {
                    return Err(DecodeError("raft sender differs from envelope"));
                }
                let n = r.len(4)?;
                let payloads = (0..n).map(|_| r.bytes()).collect::<Result<_, _>>()?;
                Body::Raft { message, payloads, call: r.u64()? }
            }
            BODY_FORWARD => Body::Forward { request: r.u64()?, data: r.bytes()? },
            BODY_FORWARD_MESSAGE => Body::ForwardMessage { request: r.u64()?, data: r.bytes()? },
            BODY_FORWARD_PART => {
                Body::ForwardPart { request: r.u64()?, upload: r.u64()?, part: r.u32()?, data: r.bytes()? }
            }
            BODY_FORWARD_END => Body::ForwardEnd { request: r.u64()?, parts: r.u32()?, data: r.bytes()? },
            BODY_FORWARD_REFUSED => Body::ForwardRefused { request: r.u64()?, cut_off: r.bool()? },
            BODY_JOIN => Body::Join(MemberInfo::decode(&mut r)?),
            BODY_LEAVE => Body::Leave,
            BODY_REMOVED => Body::Removed,
            BODY_PRE_VOTE => Body::PreVote { term: r.u64()?, last: Position::decode(&mut r)? },
            BODY_PRE_VOTE_REPLY => Body::PreVoteReply { term: r.u64()?, granted: r.bool()? },
            BODY_SNAPSHOT => Body::Snapshot(AppliedState::decode(&mut r)?),
            BODY_REMERGE => Body::Remerge { view_id: r.u64()? },
            BODY_READ_INDEX => Body::ReadIndex { request: r.u64()? },
            BODY_READ_INDEX_REPLY => {
                let (request, known, index) = (r.u64()?, r.bool()?, r.u64()?);
                Body::ReadIndexReply { request, index: known.then_some(index) }
            }
            BODY_PROBE => Body::Probe { address: r.str()? },
            BODY_PROBE_ANSWER => Body::ProbeAnswer { primary_without_you: r.bool()? },
            BODY_STALE => Body::Stale,
            BODY_FORCE_PRIMARY => Body::ForcePrimary,
            BODY_CAMPAIGN => Body::Campaign { heir: MemberId::decode(&mut r)? },
            BODY_RELAY => {
                let pool: Vec<Vec<u8>> = (0..r.len(4)?).map(|_| r.bytes()).collect::<Result<_, _>>()?;
                let n = r.len(16)?;
                let mut parts = Vec::new();
                let mut referenced = 0u64;
                for _ in 0..n {
                    let to = MemberId::decode(&mut r)?;
                    let payloads: Vec<u32> = (0..r.len(4)?).map(|_| r.u32()).collect::<Result<_, _>>()?;
                    let mut distinct = BTreeSet::new();
                    for &i in &payloads {
                        let payload = pool.get(i as usize).ok_or(DecodeError("relayed payload outside the pool"))?;
                        // A part is one Raft message: each of its entries once.
                        if !distinct.insert(i) {
                            return Err(DecodeError("a relayed part names a payload twice"));
                        }
                        referenced += payload.len() as u64;
                    }
                    if referenced > RELAY_REFERENCED_LIMIT_BYTES {
                        return Err(DecodeError("relayed parts refer to more bytes than a relay may"));
                    }
                    let message = RaftMessage::decode(&mut r)?;
                    parts.push(RelayPart { to, message, payloads, call: r.u64()? });
                }
                Body::Relay(Relay { pool, parts })
            }
            BODY_RELAYED => Body::Relayed(Box::new(relayable(Message::decode(&r.bytes()?)?)?)),
            _ => return Err(DecodeError("unknown message body")),
        };
        r.finish()?;
        Ok(Self {
            from,
            group,
            term,
            recv_queue,
            applied,
            forks,
            fork_term,
            leader_primary,
            primary,
            queue_table,
            body,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::MemoryStore;
    use crate::config::GroupConfig;
    use crate::member::Member;
    use crate::sim::Sim;
    use crate::types::MemberId;

    /// Real traffic of a small cluster across two segments (relays too), encoded.
    fn sample_messages() -> Vec<Vec<u8>> {
        let mut sim = Sim::with_segments(3, 3, GroupConfig::new("fuzz"), false, &[0, 1, 1]);
        sim.run_for(3_000).unwrap();
        for k in 0..20 {
            sim.submit(MemberId(1 + k % 3), vec![k as u8; 40]);
            sim.send_message(MemberId(1 + k % 3), vec![k as u8; 8]);
        }
        sim.capture_messages(true);
        sim.run_for(2_000).unwrap();
        sim.captured_messages()
    }

    #[test]
    fn corrupted_messages_are_refused_or_handled_never_a_panic() {
        let samples = sample_messages();
        assert!(samples.len() > 20);
        let kinds: Vec<Body> = samples.iter().map(|bytes| Message::decode(bytes).unwrap().body).collect();
        assert!(kinds.iter().any(|b| matches!(b, Body::Relay(_))), "relays among the samples");
        assert!(kinds.iter().any(|b| matches!(b, Body::Relayed(_))));
        let mut member = Member::join(
            MemberInfo { name: "n9".into(), ..MemberInfo::with_id(MemberId(9)) },
            GroupConfig::new("fuzz"),
            MemoryStore::new(),
            &[MemberId(1)],
            0,
        );
        let (mut refused, mut accepted) = (0, 0);
        for (round, bytes) in crate::fuzz::corruptions(&samples, 20_000, 7).enumerate() {
            match Message::decode(&bytes) {
                Err(_) => refused += 1,
                Ok(message) => {
                    accepted += 1;
                    member.receive(message);
                    member.tick(round as u64);
                    member.flush();
                    member.take_outbox();
                }
            }
        }
        assert!(refused > 0 && accepted > 0, "refused {refused}, accepted {accepted}");
    }

    pub(crate) fn envelope(from: MemberId, body: Body) -> Message {
        Message {
            from,
            group: 0,
            term: 1,
            recv_queue: 0,
            applied: 0,
            forks: 0,
            fork_term: 0,
            leader_primary: false,
            primary: false,
            queue_table: Vec::new(),
            body,
        }
    }

    fn relay(pool: Vec<Vec<u8>>, parts: Vec<Vec<u32>>) -> Message {
        let parts = parts
            .into_iter()
            .map(|payloads| RelayPart {
                to: MemberId(2),
                message: RaftMessage::term_notice(MemberId(1), 1),
                payloads,
                call: 0,
            })
            .collect();
        envelope(MemberId(1), Body::Relay(Relay { pool, parts }))
    }

    #[test]
    fn a_relay_whose_parts_would_copy_a_payload_without_end_is_refused() {
        let big = vec![7u8; 1 << 20];
        let fits = (RELAY_REFERENCED_LIMIT_BYTES / big.len() as u64) as usize;
        let within = relay(vec![big.clone()], vec![vec![0]; fits]);
        assert_eq!(Message::decode(&within.encode()).unwrap(), within);
        let beyond = relay(vec![big.clone()], vec![vec![0]; fits + 1]);
        assert!(Message::decode(&beyond.encode()).is_err(), "one part more than a relay may refer to");
        let twice = relay(vec![big, vec![1]], vec![vec![1, 0, 1]]);
        assert!(Message::decode(&twice.encode()).is_err(), "a part naming a payload twice");
    }

    #[test]
    fn a_peer_naming_a_shadow_vote_or_no_member_is_refused() {
        let shadow = MemberId((1 << 63) | 5);
        for bad in [shadow, MemberId(0)] {
            assert!(
                Message::decode(&envelope(bad, Body::ProbeAnswer { primary_without_you: false }).encode()).is_err(),
                "sender {bad}"
            );
            assert!(Message::decode(&envelope(MemberId(1), Body::Campaign { heir: bad }).encode()).is_err());
            let table = Message {
                queue_table: vec![(bad, 3)],
                ..envelope(MemberId(1), Body::ProbeAnswer { primary_without_you: false })
            };
            assert!(Message::decode(&table.encode()).is_err());
        }
        let hello = crate::transport::Hello { protocol: 1, cluster_name: "c".into(), member: shadow };
        let record = hello.encode();
        let (_, body, _) = crate::record::decode(&record, 4096).unwrap();
        assert!(crate::transport::Hello::decode(body).is_err());
    }
}
