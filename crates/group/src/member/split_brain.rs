//! Two primary components of one bootstrap that meet (Galera's "conflicting prims"): one
//! was forced without a quorum (`pc.bootstrap`, `pc.ignore_sb`, `pc.ignore_quorum`) while the
//! other stayed primary, or both were, each on its side of a partition. Their histories
//! differ from the fork on and cannot merge, so one side ends: by default the older one goes
//! on (`pc.npvo=false`), with `pc.npvo=true` the newer one. See
//! docs/design/group-forced-primary.md, "Two primary components meet".
//!
//! They meet only if one looks for the other: a member whose history went through a fork is
//! sent nothing by the members it left, and sends them nothing, so while primary it probes
//! the members it knows of outside its view. Every message says whether its sender is
//! primary on its own history; one of another history, primary while we are, for the suspect
//! timeout (a member catching up from a new leader may look so for a moment), is the
//! conflict.

use super::{Member, StartOver};
use crate::cache::LogStore;
use crate::message::Body;
use crate::raft::Role;
use crate::types::MemberId;

/// How the histories of two members relate, as their messages tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum History {
    /// The same forks: one history.
    Same,
    /// Fewer forks: the sender's history may be a prefix of ours (it may catch up from us).
    Behind,
    /// More forks, or as many ending at another: a history ours is not on.
    Other,
}

/// A primary component of another history heard while ours is primary.
#[derive(Debug, Clone, Copy)]
pub(super) struct Conflict {
    pub since_ms: u64,
    pub last_ms: u64,
}

impl<S: LogStore> Member<S> {
    /// The term of our last forced boundary, or 0.
    pub(super) fn fork_term(&self) -> u64 {
        self.applied.forks.last().map_or(0, |f| f.position.term)
    }

    /// The history of a member whose messages say `forks` and `fork_term`, against ours.
    pub(super) fn history_of(&self, forks: u32, fork_term: u64) -> History {
        let (theirs, ours) = (forks as usize, self.applied.forks.len());
        if theirs < ours {
            History::Behind
        } else if theirs > ours || fork_term != self.fork_term() {
            History::Other
        } else {
            History::Same
        }
    }

    /// Primary, and (a follower) following a leader of our own history: a member that takes
    /// a forced leader's appends before it has its boundary is primary in that leader's
    /// component, not in one of its own history.
    pub(super) fn primary_on_own_history(&self) -> bool {
        self.is_primary() && (self.raft.role() == Role::Leader || self.leader_same_history)
    }

    /// Primary with a forked history: probe every member we know of outside our view (the
    /// directory, our seeds), every half suspect timeout.
    pub(super) fn probe_other_components(&mut self) {
        if self.applied.forks.is_empty() || !self.primary_on_own_history() || self.now_ms < self.next_probe_ms {
            return;
        }
        self.next_probe_ms = self.now_ms + self.config.suspect_timeout_ms / 2;
        let me = self.info.id;
        let outside: Vec<MemberId> = (self.applied.directory.keys().chain(self.seeds.iter()))
            .copied()
            .filter(|&id| id != me && !self.applied.view.contains(id))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for id in outside {
            self.send(id, Body::Probe { address: self.info.address.clone() });
        }
    }

    /// A message from `from`, whose history has `forks` ending at `fork_term`, primary or not.
    /// From outside our view, both primary on histories that differ:
    /// once that has lasted the suspect timeout, the side that does not override ends here
    /// (`StartOver::Forked`: our cache is discarded and we join the other side as a new
    /// member; the application, whose data holds our side's history, stops and takes a full
    /// state transfer when restarted).
    pub(super) fn check_conflicting_primary(
        &mut self,
        from: MemberId,
        forks: u32,
        fork_term: u64,
        primary: bool,
        history: History,
    ) {
        let conflicting =
            history != History::Same && primary && !self.applied.view.contains(from) && self.primary_on_own_history();
        if !conflicting {
            return;
        }
        let now = self.now_ms;
        let timeout = self.config.suspect_timeout_ms;
        // Per member: several restarted members of the other side, each primary for a moment
        // as it catches up, are not one lasting conflict.
        self.conflicts.retain(|_, c| now <= c.last_ms + timeout);
        let since_ms = match self.conflicts.get(&from) {
            Some(c) => c.since_ms,
            None => {
                log::warn!(
                    "{}: member {from} is in a primary component of this cluster whose history is not ours ({} \
                     components forced without a quorum along it, {} along ours): a split brain",
                    self.info.id,
                    forks,
                    self.applied.forks.len()
                );
                now
            }
        };
        self.conflicts.insert(from, Conflict { since_ms, last_ms: now });
        if now < since_ms + timeout || self.start_over.is_some() {
            return;
        }
        let ours_newer = (self.applied.forks.len(), self.fork_term()) > (forks as usize, fork_term);
        let overrides = if self.config.newer_primary_overrides { "newer" } else { "older" };
        if ours_newer == self.config.newer_primary_overrides {
            if self.conflict_logged != Some(from) {
                self.conflict_logged = Some(from);
                log::warn!(
                    "{}: the primary component of member {from} ends (pc.npvo: the {overrides} component overrides)",
                    self.info.id
                );
            }
            return;
        }
        log::error!(
            "{}: two primary components of this cluster met, and the {overrides} one overrides (pc.npvo): this \
             member's component ends; it joins member {from}'s as a new member",
            self.info.id
        );
        self.start_over = Some(StartOver::Forked(from));
    }
}
