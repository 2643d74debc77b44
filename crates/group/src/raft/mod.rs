//! Adapter over the Raft library. This is the only module that names `noraft`: the rest
//! of the crate sees our positions, memberships, entry kinds, actions and an opaque
//! message, so the library can be replaced behind this file and `raft/wire.rs`.
//!
//! noraft is sans-I/O: it never touches a clock, a socket or a disk, and it draws no
//! randomness, which is what makes the simulator deterministic.

mod wire;

use crate::types::MemberId;
use noraft::{
    Action as RaftAction, ClusterConfig, Log, LogEntries, LogEntry, LogIndex, LogPosition, Message, Node, NodeId, Term,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A log position: the term of the entry and its Raft index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub term: u64,
    pub index: u64,
}

/// Raft membership; `new_voters` is non-empty only during a joint-consensus change.
/// Non-voters replicate the log but neither vote nor count for a commit. A voter casts one
/// vote unless `votes` (`new_votes` for the new side of a change) gives it more: Galera's
/// weighted quorum (crate::weights, docs/design/weighted-quorum.md).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub voters: BTreeSet<MemberId>,
    pub new_voters: BTreeSet<MemberId>,
    pub non_voters: BTreeSet<MemberId>,
    /// Voters that cast more than one vote, and how many (never 0 or 1).
    pub votes: BTreeMap<MemberId, u8>,
    pub new_votes: BTreeMap<MemberId, u8>,
}

impl Membership {
    pub fn is_joint(&self) -> bool {
        !self.new_voters.is_empty()
    }

    /// Every voter of either side of a joint change.
    pub fn all_voters(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.voters.union(&self.new_voters).copied()
    }

    /// Voters and non-voters: every member the log is replicated to.
    pub fn contains(&self, id: MemberId) -> bool {
        self.voters.contains(&id) || self.new_voters.contains(&id) || self.non_voters.contains(&id)
    }

    /// The votes `id` casts (0 if it is no voter), outside a joint change.
    pub fn votes_of(&self, id: MemberId) -> u8 {
        if self.voters.contains(&id) {
            self.votes.get(&id).copied().unwrap_or(1)
        } else {
            0
        }
    }

    /// Every voter and its votes, outside a joint change.
    pub fn vote_counts(&self) -> BTreeMap<MemberId, u8> {
        self.voters.iter().map(|&m| (m, self.votes_of(m))).collect()
    }

    /// True if `in_contact` holds more than half the votes of `voters` and, during a change,
    /// of `new_voters`.
    pub fn has_quorum(&self, in_contact: &BTreeSet<MemberId>) -> bool {
        self.has_quorum_where(|m| in_contact.contains(&m))
    }

    /// `has_quorum` of the members for which `in_contact` holds.
    pub fn has_quorum_where(&self, in_contact: impl Fn(MemberId) -> bool) -> bool {
        let majority = |set: &BTreeSet<MemberId>, votes: &BTreeMap<MemberId, u8>| {
            let weight = |m: &MemberId| u32::from(votes.get(m).copied().unwrap_or(1));
            let held: u32 = set.iter().filter(|&&m| in_contact(m)).map(weight).sum();
            set.is_empty() || 2 * held > set.iter().map(weight).sum::<u32>()
        };
        !self.voters.is_empty() && majority(&self.voters, &self.votes) && majority(&self.new_voters, &self.new_votes)
    }

    fn to_config(&self) -> ClusterConfig {
        let mut config = ClusterConfig::new();
        config.voters = raft_voters(&self.voters, &self.votes);
        config.new_voters = raft_voters(&self.new_voters, &self.new_votes);
        config.non_voters = self.non_voters.iter().map(|m| NodeId::new(m.0)).collect();
        config
    }

    fn from_config(config: &ClusterConfig) -> Self {
        let (voters, votes) = member_votes(&config.voters);
        let (new_voters, new_votes) = member_votes(&config.new_voters);
        Self {
            voters,
            new_voters,
            non_voters: config.non_voters.iter().map(|n| MemberId(n.get())).collect(),
            votes,
            new_votes,
        }
    }
}

// A member casting several votes is several Raft voters: its own id and one *shadow* per
// extra vote. Shadows exist only in noraft's configuration. Nothing is ever sent to one:
// the member's own answers count for its shadows too (`Consensus::handle_message`), and a
// member answers for its own shadows at once (`Consensus::drain`), so they vote and hold
// the log exactly as their member does. A shadow's id has the top bit set (member ids are
// below 2^63), the vote's number (1-254) in the next 8 bits and its member's low 55 bits.
const SHADOW_BIT: u64 = 1 << 63;
const VOTE_KEY_BITS: u64 = (1 << 55) - 1;

fn shadow(owner: MemberId, vote: u8) -> NodeId {
    NodeId::new(SHADOW_BIT | (u64::from(vote) << 55) | (owner.0 & VOTE_KEY_BITS))
}

fn is_shadow(id: NodeId) -> bool {
    id.get() & SHADOW_BIT != 0
}

fn is_shadow_of(id: NodeId, owner: MemberId) -> bool {
    is_shadow(id) && id.get() & VOTE_KEY_BITS == owner.0 & VOTE_KEY_BITS
}

/// Two members whose shadows could not be told apart: they cast one vote each
/// (`AppliedState::votes_by_weight`). Time-ordered ids never meet this (it takes the same
/// millisecond modulo about a year and the same 20 random bits).
pub fn share_vote_key(a: MemberId, b: MemberId) -> bool {
    a != b && a.0 & VOTE_KEY_BITS == b.0 & VOTE_KEY_BITS
}

fn raft_voters(voters: &BTreeSet<MemberId>, votes: &BTreeMap<MemberId, u8>) -> BTreeSet<NodeId> {
    let mut ids = BTreeSet::new();
    for &m in voters {
        ids.insert(NodeId::new(m.0));
        ids.extend((1..votes.get(&m).copied().unwrap_or(1)).map(|vote| shadow(m, vote)));
    }
    ids
}

fn member_votes(ids: &BTreeSet<NodeId>) -> (BTreeSet<MemberId>, BTreeMap<MemberId, u8>) {
    let voters: BTreeSet<MemberId> = ids.iter().filter(|n| !is_shadow(**n)).map(|n| MemberId(n.get())).collect();
    let mut votes: BTreeMap<MemberId, u8> = BTreeMap::new();
    for &s in ids.iter().filter(|n| is_shadow(**n)) {
        if let Some(&owner) = voters.iter().find(|&&m| is_shadow_of(s, m)) {
            let n = votes.entry(owner).or_insert(1);
            *n = n.saturating_add(1);
        }
    }
    (voters, votes)
}

/// What a log entry is, without its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// First entry of a new leader's term.
    LeaderChange,
    Membership(Membership),
    /// Carries an application payload kept by the caller.
    Command,
}

impl EntryKind {
    fn to_entry(&self, term: u64) -> LogEntry {
        match self {
            Self::LeaderChange => LogEntry::Term(Term::new(term)),
            Self::Membership(m) => LogEntry::ClusterConfig(m.to_config()),
            Self::Command => LogEntry::Command,
        }
    }

    fn from_entry(entry: &LogEntry) -> Self {
        match entry {
            LogEntry::Term(_) => Self::LeaderChange,
            LogEntry::ClusterConfig(c) => Self::Membership(Membership::from_config(c)),
            LogEntry::Command => Self::Command,
        }
    }
}

/// Raft's durable vote state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HardState {
    pub term: u64,
    pub voted_for: Option<MemberId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Follower,
    Candidate,
    Leader,
}

/// A Raft protocol message (opaque outside this module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftMessage(Message);

impl RaftMessage {
    /// A refused vote in `term`: it carries nothing but the term, which a receiver behind
    /// it adopts (every Raft message does that).
    pub fn term_notice(from: MemberId, term: u64) -> Self {
        Self(Message::RequestVoteReply { from: NodeId::new(from.0), term: Term::new(term), vote_granted: false })
    }

    pub fn from(&self) -> MemberId {
        MemberId(self.0.from().get())
    }

    pub fn term(&self) -> u64 {
        self.0.term().get()
    }

    pub fn is_vote_request(&self) -> bool {
        matches!(self.0, Message::RequestVoteCall { .. })
    }

    pub fn is_append_call(&self) -> bool {
        matches!(self.0, Message::AppendEntriesCall { .. })
    }

    /// Entries carried by an append call, with their positions.
    pub fn entries(&self) -> Vec<(Position, EntryKind)> {
        match &self.0 {
            Message::AppendEntriesCall { entries, .. } => positioned(entries),
            _ => Vec::new(),
        }
    }

    /// The last log index a follower reports in an append reply.
    pub fn reply_last_index(&self) -> Option<u64> {
        match &self.0 {
            Message::AppendEntriesReply { last_position, .. } => Some(last_position.index.get()),
            _ => None,
        }
    }

    /// The leader commit index an append call announces.
    pub fn commit_index(&self) -> Option<u64> {
        match &self.0 {
            Message::AppendEntriesCall { commit_index, .. } => Some(commit_index.get()),
            _ => None,
        }
    }

    /// Drops the first `count` entries of an append call (already sent to that peer).
    pub fn strip_entries_prefix(&mut self, count: usize) {
        self.0.strip_append_entries_prefix(count);
    }

    /// Keeps only the first `count` entries of an append call (the rest follow later).
    pub fn truncate_entries(&mut self, count: usize) {
        if let Message::AppendEntriesCall { entries, .. } = &mut self.0 {
            entries.truncate(count);
        }
    }
}

/// What the caller must do, in this order: storage first, then sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    ResetElectionTimer,
    SaveHardState(HardState),
    /// Replace every entry after index `after` by `entries`.
    Append {
        after: u64,
        entries: Vec<(Position, EntryKind)>,
    },
    /// `to: None` means every peer.
    Send {
        to: Option<MemberId>,
        message: RaftMessage,
    },
    /// The peer needs entries this member no longer retains.
    NeedsSnapshot(MemberId),
}

/// The consensus core of one member.
#[derive(Debug, Clone)]
pub struct Consensus {
    node: Node,
    /// Actions taken from the node before an append that its pending one could not absorb
    /// (`handle_message`), in order, ahead of what `drain` takes next.
    taken_early: Vec<Action>,
    /// `latest_membership` and the configuration it was made from: quorum checks ask for it
    /// several times a round, and it changes only with the configuration.
    latest: RefCell<Option<(ClusterConfig, Arc<Membership>)>>,
}

impl Consensus {
    /// A member with an empty log, waiting to be added by a leader or to bootstrap.
    pub fn start(id: MemberId) -> Self {
        Self { node: Node::start(NodeId::new(id.0)), taken_early: Vec::new(), latest: RefCell::default() }
    }

    /// A member restored from its cache: the snapshot boundary and the retained entries.
    pub fn restart(
        id: MemberId,
        hard: HardState,
        snapshot: Position,
        snapshot_membership: &Membership,
        entries: impl IntoIterator<Item = (u64, EntryKind)>,
    ) -> Self {
        let log_entries =
            LogEntries::from_iter(to_position(snapshot), entries.into_iter().map(|(term, kind)| kind.to_entry(term)));
        let log = Log::new(snapshot_membership.to_config(), log_entries);
        Self {
            node: Node::restart(NodeId::new(id.0), Term::new(hard.term), hard.voted_for.map(|m| NodeId::new(m.0)), log),
            taken_early: Vec::new(),
            latest: RefCell::default(),
        }
    }

    /// Starts a new cluster with this member as its only voter (Galera's bootstrap).
    pub fn bootstrap(&mut self) -> bool {
        let me = self.node.id();
        !self.node.create_cluster(&[me]).is_invalid()
    }

    pub fn role(&self) -> Role {
        let role = self.node.role();
        if role.is_leader() {
            Role::Leader
        } else if role.is_candidate() {
            Role::Candidate
        } else {
            Role::Follower
        }
    }

    pub fn term(&self) -> u64 {
        self.node.current_term().get()
    }

    pub fn hard_state(&self) -> HardState {
        HardState { term: self.term(), voted_for: self.node.voted_for().map(|n| MemberId(n.get())) }
    }

    pub fn commit_index(&self) -> u64 {
        self.node.commit_index().get()
    }

    /// The term of the entry at `index`, if the log holds it.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        self.node.log().entries().get_term(LogIndex::new(index)).map(|t| t.get())
    }

    pub fn last_index(&self) -> u64 {
        self.node.log().last_position().index.get()
    }

    pub fn last_position(&self) -> Position {
        from_position(self.node.log().last_position())
    }

    /// The newest membership in the log, committed or not.
    pub fn latest_membership(&self) -> Arc<Membership> {
        let config = self.node.config();
        let mut latest = self.latest.borrow_mut();
        match latest.as_ref() {
            Some((made_from, membership)) if made_from == config => Arc::clone(membership),
            _ => {
                let membership = Arc::new(Membership::from_config(config));
                *latest = Some((config.clone(), Arc::clone(&membership)));
                membership
            }
        }
    }

    /// The newest membership entry the log holds past its snapshot, if any: its index, and
    /// the membership in force before it (the one before in the log, or the snapshot's).
    pub fn latest_membership_change(&self) -> Option<(u64, Membership)> {
        let log = self.node.log();
        let mut before = log.snapshot_config().clone();
        let mut latest = None;
        for (position, entry) in log.entries().iter_with_positions() {
            if let LogEntry::ClusterConfig(config) = entry {
                if let Some((_, previous)) = latest.replace((position.index.get(), config)) {
                    before = previous;
                }
            }
        }
        latest.map(|(index, _)| (index, Membership::from_config(&before)))
    }

    /// Drops the entries from `index` on, as a crash before they were written would have: for
    /// entries that counted for no commit (docs/design/group-raft-library.md, "A removal
    /// nobody else holds"). The node restarts on the shorter log as a follower (its commit
    /// index back at the snapshot, as after any restart) and the cache is cut to match.
    pub fn drop_entries_from(&mut self, index: u64) -> bool {
        let log = self.node.log();
        let snapshot = log.snapshot_position().index.get();
        if index <= self.commit_index() || index <= snapshot || index > log.last_position().index.get() {
            return false;
        }
        let mut entries = log.entries().clone();
        entries.truncate((index - 1 - snapshot) as usize);
        let log = Log::new(log.snapshot_config().clone(), entries);
        self.take_actions_early();
        self.taken_early.push(Action::Append { after: index - 1, entries: Vec::new() });
        let (id, term, voted_for) = (self.node.id(), self.node.current_term(), self.node.voted_for());
        self.node = Node::restart(id, term, voted_for, log);
        true
    }

    pub fn is_voter(&self, id: MemberId) -> bool {
        self.latest_membership().all_voters().any(|m| m == id)
    }

    /// Peers of the newest membership.
    pub fn peers(&self) -> Vec<MemberId> {
        self.node.peers().filter(|&n| !is_shadow(n)).map(|n| MemberId(n.get())).collect()
    }

    /// The shadows of `owner` (its votes beyond the first) in the newest membership.
    fn shadows(&self, owner: MemberId) -> Vec<NodeId> {
        let config = self.node.config();
        config.voters.union(&config.new_voters).copied().filter(|&n| is_shadow_of(n, owner)).collect()
    }

    /// Leader only: the last index `peer` is known to hold.
    pub fn follower_match_index(&self, peer: MemberId) -> Option<u64> {
        self.node.follower_match_index(NodeId::new(peer.0)).map(|i| i.get())
    }

    /// Appends a command entry if this member leads; the caller stores its payload.
    pub fn propose_command(&mut self) -> Option<Position> {
        valid(self.node.propose_command())
    }

    /// Starts a joint-consensus change that gives `id` `votes` votes: 0 takes a voter out,
    /// and a non-voter given votes is promoted.
    pub fn propose_votes(&mut self, id: MemberId, votes: u8) -> Option<Position> {
        let config = self.node.config();
        let own = |n: &NodeId| n.get() == id.0 || is_shadow_of(*n, id);
        let current: BTreeSet<NodeId> = config.voters.iter().copied().filter(own).collect();
        let wanted = raft_voters(&[id].into_iter().filter(|_| votes > 0).collect(), &[(id, votes)].into());
        let add: Vec<NodeId> = wanted.difference(&current).copied().collect();
        let remove: Vec<NodeId> = current.difference(&wanted).copied().collect();
        let config = config.to_joint_consensus(&add, &remove);
        valid(self.node.propose_config(config))
    }

    /// Adds or removes a non-voter (no joint consensus needed: it counts for no quorum).
    pub fn propose_non_voter_change(&mut self, id: MemberId, present: bool) -> Option<Position> {
        let mut config = self.node.config().clone();
        let node = NodeId::new(id.0);
        if present {
            config.non_voters.insert(node);
        } else {
            config.non_voters.remove(&node);
        }
        valid(self.node.propose_config(config))
    }

    /// Handles a peer's message; a reply counts for the peer's shadows too.
    pub fn handle_message(&mut self, message: &RaftMessage) -> Result<(), String> {
        let from = message.0.from();
        if is_shadow(from) {
            return Err(format!("a message in the name of a shadow vote ({})", from.get()));
        }
        if let Message::AppendEntriesCall { entries, .. } = &message.0 {
            // noraft merges the appends of several calls into one pending action, and an
            // append that does not start inside the pending one (a new leader's, after it
            // cut a diverging suffix) merges wrongly: the action keeps the first's start,
            // so the log file would keep the entries the new leader replaced, while the
            // node believes them replaced (a debug assertion in noraft; seen in a unit test
            // whose debug build was slow enough for two leaders' appends in one batch).
            // Taking the pending actions first keeps each append whole and in order.
            let pending = self.node.actions().append_log_entries.as_ref();
            if pending.is_some_and(|pending| !pending.contains(entries.prev_position())) {
                self.take_actions_early();
            }
        }
        self.node.handle_message(&message.0).map_err(|e| e.to_string())?;
        // Only replies count for shadows: a call (most of what a follower receives) looks up none.
        if matches!(message.0, Message::AppendEntriesReply { .. } | Message::RequestVoteReply { .. }) {
            for reply in self.shadows(MemberId(from.get())).into_iter().filter_map(|s| reply_as(&message.0, s)) {
                self.node.handle_message(&reply).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// The answer of this member's shadow `shadow` to this member's own `call`: its vote,
    /// and its log.
    fn own_shadow_reply(&self, shadow: NodeId, call: &Message) -> Option<Message> {
        match call {
            Message::RequestVoteCall { term, .. } => {
                Some(Message::RequestVoteReply { from: shadow, term: *term, vote_granted: true })
            }
            Message::AppendEntriesCall { term, .. } => Some(Message::AppendEntriesReply {
                from: shadow,
                term: *term,
                last_position: self.node.log().last_position(),
            }),
            Message::RequestVoteReply { .. } | Message::AppendEntriesReply { .. } => None,
        }
    }

    /// Leader: tells every follower the current commit index (an empty append).
    pub fn broadcast_commit_index(&mut self) {
        self.node.heartbeat();
    }

    /// Leader: a follower again in the same term, its log and vote kept. The commit index
    /// restarts at the snapshot boundary until a leader tells it.
    pub fn step_down(&mut self) {
        let node = &self.node;
        self.node = Node::restart(node.id(), node.current_term(), node.voted_for(), node.log().clone());
    }

    pub fn handle_election_timeout(&mut self) {
        self.node.handle_election_timeout();
    }

    /// Forgets entries up to `position` (already applied and purged from the cache).
    pub fn compact(&mut self, position: Position, membership: &Membership) -> bool {
        self.node.handle_snapshot_installed(to_position(position), membership.to_config())
    }

    /// Takes the pending actions. Calls to shadows are not sent: this member's own shadows
    /// answer at once, and another member's answer for theirs when it replies.
    pub fn drain(&mut self) -> Vec<Action> {
        let mut out = std::mem::take(&mut self.taken_early);
        self.take_actions(&mut out);
        out
    }

    /// Takes the node's pending actions now, ahead of what `drain` takes next.
    fn take_actions_early(&mut self) {
        let mut early = std::mem::take(&mut self.taken_early);
        self.take_actions(&mut early);
        self.taken_early = early;
    }

    /// Appends the node's pending actions to `out`, answering calls to our own shadows.
    fn take_actions(&mut self, out: &mut Vec<Action>) {
        let me = MemberId(self.node.id().get());
        loop {
            let hard = self.hard_state();
            let actions: Vec<RaftAction> = self.node.actions_mut().collect();
            if actions.is_empty() {
                return;
            }
            let mut answers = Vec::new();
            for action in actions {
                out.push(match action {
                    RaftAction::SetElectionTimeout => Action::ResetElectionTimer,
                    RaftAction::SaveCurrentTerm | RaftAction::SaveVotedFor => Action::SaveHardState(hard),
                    RaftAction::AppendLogEntries(entries) => {
                        Action::Append { after: entries.prev_position().index.get(), entries: positioned(&entries) }
                    }
                    RaftAction::BroadcastMessage(m) => {
                        answers.extend(self.shadows(me).into_iter().filter_map(|s| self.own_shadow_reply(s, &m)));
                        Action::Send { to: None, message: RaftMessage(m) }
                    }
                    RaftAction::SendMessage(to, m) if is_shadow(to) => {
                        answers.extend(self.own_shadow_reply(to, &m).filter(|_| is_shadow_of(to, me)));
                        continue;
                    }
                    RaftAction::SendMessage(to, m) => {
                        Action::Send { to: Some(MemberId(to.get())), message: RaftMessage(m) }
                    }
                    RaftAction::InstallSnapshot(to) if is_shadow(to) => continue,
                    RaftAction::InstallSnapshot(to) => Action::NeedsSnapshot(MemberId(to.get())),
                });
            }
            for answer in answers {
                // Our own shadows answer our own calls in our current term: nothing to refuse.
                let handled = self.node.handle_message(&answer);
                debug_assert!(handled.is_ok(), "{handled:?}");
            }
        }
    }
}

/// Reply `message` as if `from` had sent it; `None` for a call.
fn reply_as(message: &Message, from: NodeId) -> Option<Message> {
    match *message {
        Message::RequestVoteReply { term, vote_granted, .. } => {
            Some(Message::RequestVoteReply { from, term, vote_granted })
        }
        Message::AppendEntriesReply { term, last_position, .. } => {
            Some(Message::AppendEntriesReply { from, term, last_position })
        }
        Message::RequestVoteCall { .. } | Message::AppendEntriesCall { .. } => None,
    }
}

fn positioned(entries: &LogEntries) -> Vec<(Position, EntryKind)> {
    entries.iter_with_positions().map(|(p, e)| (from_position(p), EntryKind::from_entry(&e))).collect()
}

fn valid(p: LogPosition) -> Option<Position> {
    (!p.is_invalid()).then(|| from_position(p))
}

fn to_position(p: Position) -> LogPosition {
    LogPosition::new(Term::new(p.term), LogIndex::new(p.index))
}

fn from_position(p: LogPosition) -> Position {
    Position { term: p.term.get(), index: p.index.get() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Reader, Writer};

    fn weighted(voters: &[(u64, u8)], new_voters: &[(u64, u8)]) -> Membership {
        let side = |list: &[(u64, u8)]| -> (BTreeSet<MemberId>, BTreeMap<MemberId, u8>) {
            let ids = list.iter().map(|&(id, _)| MemberId(id)).collect();
            (ids, list.iter().filter(|&&(_, n)| n > 1).map(|&(id, n)| (MemberId(id), n)).collect())
        };
        let ((voters, votes), (new_voters, new_votes)) = (side(voters), side(new_voters));
        Membership { voters, new_voters, non_voters: [MemberId(9)].into(), votes, new_votes }
    }

    fn round_trip(m: &Membership) -> Result<Membership, crate::codec::DecodeError> {
        let mut w = Writer::default();
        m.encode(&mut w);
        Membership::decode(&mut Reader::new(&w.bytes))
    }

    #[test]
    fn extra_votes_are_shadow_voters_in_the_raft_configuration_and_come_back_as_votes() {
        let m = weighted(&[(1, 2), (2, 1), ((1 << 62) + 5, 255)], &[(1, 3), (2, 1)]);
        let config = m.to_config();
        assert_eq!(config.voters.len(), 2 + 1 + 255);
        assert_eq!(config.new_voters.len(), 3 + 1);
        assert_eq!(Membership::from_config(&config), m);
        assert_eq!(round_trip(&m).unwrap(), m);
    }

    #[test]
    fn a_quorum_is_more_than_half_the_votes() {
        let m = weighted(&[(1, 2), (2, 1), (3, 1), (4, 1)], &[]);
        let has = |ids: &[u64]| m.has_quorum(&ids.iter().map(|&i| MemberId(i)).collect());
        assert!(has(&[1, 2]) && has(&[1, 4]) && has(&[2, 3, 4]));
        assert!(!has(&[1]) && !has(&[2, 3]));
        let joint = weighted(&[(1, 2), (2, 1)], &[(1, 1), (2, 1), (3, 1)]);
        let has = |ids: &[u64]| joint.has_quorum(&ids.iter().map(|&i| MemberId(i)).collect());
        assert!(has(&[1, 2]) && !has(&[1]), "both sides need a majority");
    }

    #[test]
    fn a_shadow_without_its_member_or_out_of_sequence_is_refused() {
        let encode = |voters: &[u64]| {
            let mut w = Writer::default();
            w.len(voters.len());
            for &v in voters {
                w.u64(v);
            }
            w.len(0).len(0);
            w.bytes
        };
        let decode = |bytes: Vec<u8>| Membership::decode(&mut Reader::new(&bytes));
        assert!(decode(encode(&[1, shadow(MemberId(1), 1).get()])).is_ok());
        assert!(decode(encode(&[2, shadow(MemberId(1), 1).get()])).is_err(), "no member 1");
        assert!(decode(encode(&[1, shadow(MemberId(1), 2).get()])).is_err(), "vote 1 missing");
    }

    /// Two leaders' appends in one batch, the second starting before the first: the actions,
    /// applied in order to a log file, leave it equal to the node's log (noraft alone merged
    /// them into one append from the first's start, and the file kept what the second replaced).
    #[test]
    fn an_append_that_starts_before_the_pending_one_is_written_after_it() {
        let voters = Membership { voters: (1..=3).map(MemberId).collect(), ..Membership::default() };
        let hard = HardState { term: 1, voted_for: None };
        let mut f = Consensus::restart(
            MemberId(3),
            hard,
            Position::default(),
            &voters,
            [(1, EntryKind::LeaderChange), (1, EntryKind::Command)],
        );
        let call = |from: u64, term: u64, prev: Position, entries: Vec<LogEntry>| {
            let entries = LogEntries::from_iter(to_position(prev), entries);
            RaftMessage(Message::AppendEntriesCall {
                from: NodeId::new(from),
                term: Term::new(term),
                commit_index: LogIndex::new(0),
                entries,
            })
        };
        f.handle_message(&call(1, 1, Position { term: 1, index: 2 }, vec![LogEntry::Command; 2])).unwrap();
        let second = vec![LogEntry::Term(Term::new(2)), LogEntry::Command];
        f.handle_message(&call(2, 2, Position { term: 1, index: 1 }, second)).unwrap();
        let mut file: Vec<Position> = (1..=2).map(|index| Position { term: 1, index }).collect();
        for action in f.drain() {
            if let Action::Append { after, entries } = action {
                file.truncate(after as usize);
                file.extend(entries.into_iter().map(|(position, _)| position));
            }
        }
        let node: Vec<Position> = (1..=f.last_position().index)
            .map(|index| Position { term: f.term_at(index).expect("held"), index })
            .collect();
        assert_eq!(file, node);
        assert_eq!(node.last(), Some(&Position { term: 2, index: 3 }));
    }

    /// A weighted member's shadows vote and hold the log as it does, without a message
    /// sent to them: member 1 (two votes of three) commits alone, and is elected alone.
    #[test]
    fn a_member_with_most_votes_commits_and_is_elected_without_the_others() {
        let mut a = Consensus::start(MemberId(1));
        assert!(a.bootstrap());
        a.drain();
        a.handle_election_timeout();
        a.drain();
        assert_eq!(a.role(), Role::Leader);
        a.propose_votes(MemberId(1), 2);
        a.drain();
        let mut b = Consensus::start(MemberId(2));
        a.propose_votes(MemberId(2), 1);
        // Member 2 answers member 1's calls until both changes are final.
        for _ in 0..8 {
            for action in a.drain() {
                if let Action::Send { message, .. } = action {
                    b.handle_message(&message).unwrap();
                    for reply in b.drain() {
                        if let Action::Send { message, .. } = reply {
                            a.handle_message(&message).unwrap();
                        }
                    }
                }
            }
            a.broadcast_commit_index();
        }
        let latest = a.latest_membership();
        assert!(!latest.is_joint());
        assert_eq!(latest.vote_counts(), [(MemberId(1), 2), (MemberId(2), 1)].into());
        assert_eq!(a.peers(), vec![MemberId(2)], "shadows are no peers");
        let committed = a.commit_index();
        let at = a.propose_command().unwrap();
        let sent = a.drain().iter().filter(|x| matches!(x, Action::Send { .. })).count();
        assert_eq!(sent, 1, "one call, to member 2, none to the shadow");
        assert!(a.commit_index() >= at.index && at.index > committed, "committed without member 2");
        // Restarted as a follower, it stands for election and wins with its own two votes.
        let (hard, last) = (a.hard_state(), a.last_position());
        let mut a = Consensus::restart(MemberId(1), hard, last, &latest, []);
        assert_eq!(a.role(), Role::Follower);
        a.handle_election_timeout();
        a.drain();
        assert_eq!((a.role(), a.term()), (Role::Leader, hard.term + 1));
    }
}
