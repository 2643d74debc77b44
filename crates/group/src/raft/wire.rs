//! Encoding of Raft messages and memberships. Decoding validates what noraft would
//! otherwise trust (index arithmetic, term order), so a forged message is refused, not
//! a panic or wrap-around.

use super::{Membership, Position, RaftMessage};
use crate::codec::{DecodeError, Reader, Writer};
use noraft::{ClusterConfig, LogEntries, LogEntry, LogIndex, LogPosition, Message, NodeId, Term};
use std::collections::BTreeSet;

/// Terms and indices above this are refused: far beyond any real cluster, and it keeps
/// every `+ 1` inside noraft clear of overflow.
const MAX_COUNTER: u64 = 1 << 62;

const REQUEST_VOTE_CALL: u8 = 1;
const REQUEST_VOTE_REPLY: u8 = 2;
const APPEND_ENTRIES_CALL: u8 = 3;
const APPEND_ENTRIES_REPLY: u8 = 4;

const ENTRY_TERM: u8 = 0;
const ENTRY_CONFIG: u8 = 1;
const ENTRY_COMMAND: u8 = 2;

fn counter(r: &mut Reader) -> Result<u64, DecodeError> {
    let v = r.u64()?;
    if v >= MAX_COUNTER {
        return Err(DecodeError("term or index out of range"));
    }
    Ok(v)
}

fn put_position(w: &mut Writer, p: LogPosition) {
    w.u64(p.term.get()).u64(p.index.get());
}

fn get_position(r: &mut Reader) -> Result<LogPosition, DecodeError> {
    let term = counter(r)?;
    let index = counter(r)?;
    Ok(LogPosition::new(Term::new(term), LogIndex::new(index)))
}

impl Position {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.term).u64(self.index);
    }
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self { term: counter(r)?, index: counter(r)? })
    }
}

fn put_set(w: &mut Writer, set: &BTreeSet<NodeId>) {
    w.len(set.len());
    for id in set {
        w.u64(id.get());
    }
}

fn get_set(r: &mut Reader) -> Result<BTreeSet<NodeId>, DecodeError> {
    let n = r.len(8)?;
    (0..n).map(|_| Ok(NodeId::new(r.u64()?))).collect()
}

/// A membership is written as its Raft identities: a voter's extra votes as its shadows.
impl Membership {
    pub fn encode(&self, w: &mut Writer) {
        let config = self.to_config();
        put_set(w, &config.voters);
        put_set(w, &config.new_voters);
        put_set(w, &config.non_voters);
    }
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut config = ClusterConfig::new();
        config.voters = get_set(r)?;
        config.new_voters = get_set(r)?;
        config.non_voters = get_set(r)?;
        // noraft requires a non-voter to be no voter on either side of a change.
        if config.voters.union(&config.new_voters).any(|v| config.non_voters.contains(v)) {
            return Err(DecodeError("a member both votes and does not"));
        }
        let m = Self::from_config(&config);
        if m.to_config() != config {
            return Err(DecodeError("a vote of no member, or votes out of sequence"));
        }
        Ok(m)
    }
}

impl RaftMessage {
    pub fn encode(&self, w: &mut Writer) {
        match &self.0 {
            Message::RequestVoteCall { from, term, last_position } => {
                w.u8(REQUEST_VOTE_CALL).u64(from.get()).u64(term.get());
                put_position(w, *last_position);
            }
            Message::RequestVoteReply { from, term, vote_granted } => {
                w.u8(REQUEST_VOTE_REPLY).u64(from.get()).u64(term.get()).bool(*vote_granted);
            }
            Message::AppendEntriesCall { from, term, commit_index, entries } => {
                w.u8(APPEND_ENTRIES_CALL).u64(from.get()).u64(term.get()).u64(commit_index.get());
                put_position(w, entries.prev_position());
                w.len(entries.len());
                for entry in entries.iter() {
                    match entry {
                        LogEntry::Term(t) => {
                            w.u8(ENTRY_TERM).u64(t.get());
                        }
                        LogEntry::ClusterConfig(c) => {
                            w.u8(ENTRY_CONFIG);
                            Membership::from_config(&c).encode(w);
                        }
                        LogEntry::Command => {
                            w.u8(ENTRY_COMMAND);
                        }
                    }
                }
            }
            Message::AppendEntriesReply { from, term, last_position } => {
                w.u8(APPEND_ENTRIES_REPLY).u64(from.get()).u64(term.get());
                put_position(w, *last_position);
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let tag = r.u8()?;
        let from = NodeId::new(r.u64()?);
        let term = counter(r)?;
        let message = match tag {
            REQUEST_VOTE_CALL => {
                Message::RequestVoteCall { from, term: Term::new(term), last_position: get_position(r)? }
            }
            REQUEST_VOTE_REPLY => Message::RequestVoteReply { from, term: Term::new(term), vote_granted: r.bool()? },
            APPEND_ENTRIES_CALL => {
                let commit_index = LogIndex::new(counter(r)?);
                let prev = get_position(r)?;
                let count = r.len(1)?;
                if prev.index.get() + count as u64 >= MAX_COUNTER {
                    return Err(DecodeError("entries run past the index range"));
                }
                let mut entries = LogEntries::new(prev);
                let mut last_term = prev.term.get();
                for _ in 0..count {
                    entries.push(match r.u8()? {
                        ENTRY_TERM => {
                            let t = counter(r)?;
                            if t < last_term || t > term {
                                return Err(DecodeError("entry terms out of order"));
                            }
                            last_term = t;
                            LogEntry::Term(Term::new(t))
                        }
                        ENTRY_CONFIG => LogEntry::ClusterConfig(Membership::decode(r)?.to_config()),
                        ENTRY_COMMAND => LogEntry::Command,
                        _ => return Err(DecodeError("unknown entry kind")),
                    });
                }
                Message::AppendEntriesCall { from, term: Term::new(term), commit_index, entries }
            }
            APPEND_ENTRIES_REPLY => {
                Message::AppendEntriesReply { from, term: Term::new(term), last_position: get_position(r)? }
            }
            _ => return Err(DecodeError("unknown raft message")),
        };
        Ok(Self(message))
    }
}
