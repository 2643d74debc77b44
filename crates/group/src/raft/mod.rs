//! Adapter over the Raft library. This is the only module that names `noraft`: the rest
//! of the crate sees our positions, memberships, entry kinds, actions and an opaque
//! message, so the library can be replaced behind this file and `raft/wire.rs`.
//!
//! noraft is sans-I/O: it never touches a clock, a socket or a disk, and it draws no
//! randomness, which is what makes the simulator deterministic.

mod wire;

use crate::types::MemberId;
use noraft::{
    Action as RaftAction, ClusterConfig, Log, LogEntries, LogEntry, LogIndex, LogPosition, Node, NodeId, Term,
};
use std::collections::BTreeSet;

/// A log position: the term of the entry and its Raft index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub term: u64,
    pub index: u64,
}

/// Raft membership; `new_voters` is non-empty only during a joint-consensus change.
/// Non-voters replicate the log but neither vote nor count for a commit (crate::weights).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub voters: BTreeSet<MemberId>,
    pub new_voters: BTreeSet<MemberId>,
    pub non_voters: BTreeSet<MemberId>,
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

    /// True if `in_contact` holds a majority of `voters` and, during a change, of `new_voters`.
    pub fn has_quorum(&self, in_contact: &BTreeSet<MemberId>) -> bool {
        let majority =
            |set: &BTreeSet<MemberId>| set.is_empty() || set.intersection(in_contact).count() > set.len() / 2;
        !self.voters.is_empty() && majority(&self.voters) && majority(&self.new_voters)
    }

    fn to_config(&self) -> ClusterConfig {
        let mut config = ClusterConfig::new();
        config.voters = self.voters.iter().map(|m| NodeId::new(m.0)).collect();
        config.new_voters = self.new_voters.iter().map(|m| NodeId::new(m.0)).collect();
        config.non_voters = self.non_voters.iter().map(|m| NodeId::new(m.0)).collect();
        config
    }

    fn from_config(config: &ClusterConfig) -> Self {
        Self {
            voters: config.voters.iter().map(|n| MemberId(n.get())).collect(),
            new_voters: config.new_voters.iter().map(|n| MemberId(n.get())).collect(),
            non_voters: config.non_voters.iter().map(|n| MemberId(n.get())).collect(),
        }
    }
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
pub struct RaftMessage(noraft::Message);

impl RaftMessage {
    /// A refused vote in `term`: it carries nothing but the term, which a receiver behind
    /// it adopts (every Raft message does that).
    pub fn term_notice(from: MemberId, term: u64) -> Self {
        Self(noraft::Message::RequestVoteReply {
            from: NodeId::new(from.0),
            term: Term::new(term),
            vote_granted: false,
        })
    }

    pub fn from(&self) -> MemberId {
        MemberId(self.0.from().get())
    }

    pub fn term(&self) -> u64 {
        self.0.term().get()
    }

    pub fn is_vote_request(&self) -> bool {
        matches!(self.0, noraft::Message::RequestVoteCall { .. })
    }

    pub fn is_append_call(&self) -> bool {
        matches!(self.0, noraft::Message::AppendEntriesCall { .. })
    }

    /// Entries carried by an append call, with their positions.
    pub fn entries(&self) -> Vec<(Position, EntryKind)> {
        match &self.0 {
            noraft::Message::AppendEntriesCall { entries, .. } => positioned(entries),
            _ => Vec::new(),
        }
    }

    /// The last log index a follower reports in an append reply.
    pub fn reply_last_index(&self) -> Option<u64> {
        match &self.0 {
            noraft::Message::AppendEntriesReply { last_position, .. } => Some(last_position.index.get()),
            _ => None,
        }
    }

    /// The leader commit index an append call announces.
    pub fn commit_index(&self) -> Option<u64> {
        match &self.0 {
            noraft::Message::AppendEntriesCall { commit_index, .. } => Some(commit_index.get()),
            _ => None,
        }
    }

    /// Drops the first `count` entries of an append call (already sent to that peer).
    pub fn strip_entries_prefix(&mut self, count: usize) {
        self.0.strip_append_entries_prefix(count);
    }

    /// Keeps only the first `count` entries of an append call (the rest follow later).
    pub fn truncate_entries(&mut self, count: usize) {
        if let noraft::Message::AppendEntriesCall { entries, .. } = &mut self.0 {
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
}

impl Consensus {
    /// A member with an empty log, waiting to be added by a leader or to bootstrap.
    pub fn start(id: MemberId) -> Self {
        Self { node: Node::start(NodeId::new(id.0)) }
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
    pub fn latest_membership(&self) -> Membership {
        Membership::from_config(self.node.config())
    }

    pub fn is_voter(&self, id: MemberId) -> bool {
        self.latest_membership().all_voters().any(|m| m == id)
    }

    /// Peers of the newest membership.
    pub fn peers(&self) -> Vec<MemberId> {
        self.node.peers().map(|n| MemberId(n.get())).collect()
    }

    /// Leader only: the last index `peer` is known to hold.
    pub fn follower_match_index(&self, peer: MemberId) -> Option<u64> {
        self.node.follower_match_index(NodeId::new(peer.0)).map(|i| i.get())
    }

    /// Appends a command entry if this member leads; the caller stores its payload.
    pub fn propose_command(&mut self) -> Option<Position> {
        valid(self.node.propose_command())
    }

    /// Starts a joint-consensus change adding and removing voters (an added non-voter is
    /// promoted).
    pub fn propose_membership_change(&mut self, add: &[MemberId], remove: &[MemberId]) -> Option<Position> {
        let to_ids = |ms: &[MemberId]| ms.iter().map(|m| NodeId::new(m.0)).collect::<Vec<_>>();
        let config = self.node.config().to_joint_consensus(&to_ids(add), &to_ids(remove));
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

    pub fn handle_message(&mut self, message: &RaftMessage) -> Result<(), String> {
        self.node.handle_message(&message.0).map_err(|e| e.to_string())
    }

    /// Leader: tells every follower the current commit index (an empty append).
    pub fn broadcast_commit_index(&mut self) {
        self.node.heartbeat();
    }

    pub fn handle_election_timeout(&mut self) {
        self.node.handle_election_timeout();
    }

    /// Forgets entries up to `position` (already applied and purged from the cache).
    pub fn compact(&mut self, position: Position, membership: &Membership) -> bool {
        self.node.handle_snapshot_installed(to_position(position), membership.to_config())
    }

    /// Takes the pending actions.
    pub fn drain(&mut self) -> Vec<Action> {
        let hard = self.hard_state();
        let mut out = Vec::new();
        for action in self.node.actions_mut() {
            out.push(match action {
                RaftAction::SetElectionTimeout => Action::ResetElectionTimer,
                RaftAction::SaveCurrentTerm | RaftAction::SaveVotedFor => Action::SaveHardState(hard),
                RaftAction::AppendLogEntries(entries) => {
                    Action::Append { after: entries.prev_position().index.get(), entries: positioned(&entries) }
                }
                RaftAction::BroadcastMessage(m) => Action::Send { to: None, message: RaftMessage(m) },
                RaftAction::SendMessage(to, m) => {
                    Action::Send { to: Some(MemberId(to.get())), message: RaftMessage(m) }
                }
                RaftAction::InstallSnapshot(to) => Action::NeedsSnapshot(MemberId(to.get())),
            });
        }
        out
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
