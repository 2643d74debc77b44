//! A component forced without a quorum (`pc.bootstrap`) forks the order. Past the forcing
//! member's last applied seqno, the fork's boundary, the component it left may have ordered
//! other events, which its members applied: an operator who forces accepts losing them
//! (docs/design/group-forced-primary.md). The checkers follow the forced side from the
//! boundary on. Every other member is held apart until it shows it is on that side: a state
//! gap past the boundary (or one that says its history forked), a views-only skip from at or
//! below the boundary, or the forced side's next event right after the boundary. A gap at or
//! below the boundary shows nothing: a restarted member's own log starts with one, and what
//! it replays after it may be the abandoned side's (provider simulator, seed 63168). Until
//! then what it delivers past the boundary is the abandoned side's, unchecked, and must not be
//! the forced side's: a member that applied past the boundary on the abandoned side and then
//! goes on with the forced side's events without a state gap holds both histories at once.
//! A member that took the boundary and then delivers the forced side's next events before any
//! member of that side does (a follower applies what it and the leader hold before the leader
//! knows it committed) is on the forced side too: its run past the boundary is kept and
//! compared with the forced side's events once these are known (provider simulator, seed
//! 88529).

use super::invariants::{delivered_hash, is_numbered};
use crate::types::{Delivered, DeliveredKind, MemberId, Seqno};
use std::collections::{BTreeMap, BTreeSet};

pub struct Fork {
    pub boundary: Seqno,
    /// Members not yet shown to be on the forced side.
    unsettled: BTreeSet<MemberId>,
    /// What the forced side delivered past the boundary: seqno -> hash.
    forced: BTreeMap<Seqno, u64>,
    /// An unsettled member's events right after the boundary (messages among them), delivered
    /// before the forced side's were known, contiguous from the boundary.
    ahead: BTreeMap<MemberId, Vec<Delivered>>,
}

/// What the checkers do with a delivery.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Check,
    /// Of the abandoned side: not theirs to judge.
    Skip,
    /// The member's first event on the forced side: the checkers take it as restarted after
    /// this seqno, then judge the events it delivered `ahead` of the forced side's members
    /// (already shown to be theirs), then the delivery.
    Settle {
        resume_after: Seqno,
        ahead: Vec<Delivered>,
    },
    Broken(String),
}

impl Fork {
    /// `forcer` forced a component whose first event follows `boundary`; `members` are all.
    pub fn new(boundary: Seqno, forcer: MemberId, members: impl Iterator<Item = MemberId>) -> Self {
        let unsettled = members.filter(|&m| m != forcer).collect();
        Self { boundary, unsettled, forced: BTreeMap::new(), ahead: BTreeMap::new() }
    }

    fn is_unsettled(&self, member: MemberId) -> bool {
        self.unsettled.contains(&member)
    }

    /// Whether `member`, having consumed up to `consumed`, applied past the boundary on the
    /// abandoned side: the checkers follow it again only once it is on the forced side.
    pub fn abandoned(&self, member: MemberId, consumed: Seqno) -> bool {
        self.is_unsettled(member) && consumed > self.boundary
    }

    pub fn unsettled(&self) -> impl Iterator<Item = &MemberId> {
        self.unsettled.iter()
    }

    /// `member` delivers `d`, its last numbered delivery having been `last`.
    pub fn judge(&mut self, member: MemberId, last: Seqno, d: &Delivered) -> Verdict {
        let gap = matches!(d.kind, DeliveredKind::StateGap | DeliveredKind::ViewsMissed | DeliveredKind::HistoryForked);
        let on_forced_side = is_numbered(d) && !gap;
        if !self.unsettled.contains(&member) {
            if on_forced_side && d.seqno > self.boundary {
                self.forced.entry(d.seqno).or_insert_with(|| delivered_hash(d));
            }
            return Verdict::Check;
        }
        let boundary = self.boundary;
        // Where the checkers take it up: from its last event if that is common history.
        let resume_after = if last <= boundary { last } else { 0 };
        let forced_here = self.forced.get(&d.seqno) == Some(&delivered_hash(d));
        let verdict = match d.kind {
            DeliveredKind::StateGap if d.seqno <= boundary => Verdict::Check,
            DeliveredKind::StateGap | DeliveredKind::HistoryForked => {
                Verdict::Settle { resume_after, ahead: Vec::new() }
            }
            DeliveredKind::ViewsMissed if last <= boundary => Verdict::Settle { resume_after, ahead: Vec::new() },
            DeliveredKind::ViewsMissed => Verdict::Broken(format!(
                "{member} applied up to seqno {last} on the side a component forced at seqno {boundary} left, then \
                 skipped to seqno {} as views only",
                d.seqno
            )),
            DeliveredKind::Message { .. } if d.seqno < boundary => Verdict::Check,
            // Which side ordered a message right after the boundary is not known here.
            DeliveredKind::Message { .. } => {
                self.note_ahead(member, last, d);
                Verdict::Skip
            }
            _ if d.seqno <= boundary => Verdict::Check,
            _ if forced_here && last == boundary => Verdict::Settle { resume_after, ahead: Vec::new() },
            _ if forced_here && self.ran_ahead_on_forced_side(member, last) => {
                Verdict::Settle { resume_after: boundary, ahead: self.ahead.remove(&member).unwrap_or_default() }
            }
            _ if forced_here => Verdict::Broken(format!(
                "{member} applied up to seqno {last} on the side a component forced at seqno {boundary} left, then \
                 delivered the forced side's seqno {} without a state gap",
                d.seqno
            )),
            _ => {
                self.note_ahead(member, last, d);
                Verdict::Skip
            }
        };
        if let Verdict::Settle { .. } = verdict {
            self.unsettled.remove(&member);
            self.ahead.remove(&member);
            if on_forced_side {
                self.forced.entry(d.seqno).or_insert_with(|| delivered_hash(d));
            }
        }
        verdict
    }

    /// `member` delivered `d`, past the boundary and not (yet) known as the forced side's:
    /// kept while its events run on from the boundary, for [`Fork::ran_ahead_on_forced_side`].
    fn note_ahead(&mut self, member: MemberId, last: Seqno, d: &Delivered) {
        // A message carries the seqno before it: the run's last entry is where it stands.
        let continues = self.ahead.get(&member).and_then(|run| run.last()).is_some_and(|e| e.seqno == last);
        if continues {
            self.ahead.entry(member).or_default().push(d.clone());
        } else if last == self.boundary {
            self.ahead.insert(member, vec![d.clone()]);
        } else {
            self.ahead.remove(&member);
        }
    }

    /// Every numbered event `member` delivered from the boundary up to `last` turned out to be
    /// the forced side's (which side ordered a message is not known).
    fn ran_ahead_on_forced_side(&self, member: MemberId, last: Seqno) -> bool {
        self.ahead.get(&member).is_some_and(|run| {
            run.last().is_some_and(|e| e.seqno == last)
                && run.iter().filter(|e| is_numbered(e)).all(|e| self.forced.get(&e.seqno) == Some(&delivered_hash(e)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::View;

    fn writeset(seqno: Seqno, bytes: &[u8]) -> Delivered {
        Delivered { seqno, kind: DeliveredKind::Writeset { origin: MemberId(1), request: 0 }, bytes: bytes.to_vec() }
    }

    fn gap(seqno: Seqno, kind: DeliveredKind) -> Delivered {
        Delivered { seqno, kind, bytes: Vec::new() }
    }

    fn settled(resume_after: Seqno) -> Verdict {
        Verdict::Settle { resume_after, ahead: Vec::new() }
    }

    #[test]
    fn a_member_past_the_boundary_must_take_a_state_gap_before_the_forced_sides_events() {
        let (forcer, at, behind, past) = (MemberId(1), MemberId(2), MemberId(3), MemberId(4));
        let mut fork = Fork::new(10, forcer, (1..=5).map(MemberId));
        let view = Delivered { seqno: 11, kind: DeliveredKind::View(View::default()), bytes: b"forced".to_vec() };
        assert_eq!(fork.judge(forcer, 10, &view), Verdict::Check);
        assert_eq!(fork.judge(forcer, 11, &writeset(12, b"new")), Verdict::Check);
        // Common history is judged; the forced view right after the boundary settles a member.
        assert_eq!(fork.judge(at, 9, &writeset(10, b"old")), Verdict::Check);
        assert_eq!(fork.judge(at, 10, &view), settled(10));
        assert!(!fork.is_unsettled(at));
        // The abandoned side's events are not judged; a views-only skip from at or below the
        // boundary settles.
        assert_eq!(fork.judge(behind, 10, &writeset(11, b"abandoned")), Verdict::Skip);
        assert!(matches!(fork.judge(behind, 11, &gap(12, DeliveredKind::ViewsMissed)), Verdict::Broken(_)));
        let mut fork2 = Fork::new(10, forcer, (1..=5).map(MemberId));
        assert_eq!(fork2.judge(behind, 8, &gap(11, DeliveredKind::ViewsMissed)), settled(8));
        // Past the boundary on the abandoned side, the forced side's event is a broken history;
        // a state gap settles.
        assert!(matches!(fork.judge(past, 11, &writeset(12, b"new")), Verdict::Broken(_)));
        assert_eq!(fork.judge(past, 11, &gap(12, DeliveredKind::StateGap)), settled(0));
        assert_eq!(fork.unsettled().count(), 2);
    }

    /// Provider simulator, seed 88529: a member that took the boundary delivers the forced
    /// side's next events before the forced side's members do; they turn out to be theirs, so
    /// its next event settles it. A run that differs from the forced side's is a broken history.
    #[test]
    fn a_member_that_delivers_the_forced_sides_events_first_is_on_the_forced_side() {
        let (forcer, early, other) = (MemberId(1), MemberId(2), MemberId(3));
        let mut fork = Fork::new(10, forcer, (1..=3).map(MemberId));
        let view = Delivered { seqno: 11, kind: DeliveredKind::View(View::default()), bytes: b"forced".to_vec() };
        for member in [early, other] {
            assert_eq!(fork.judge(member, 8, &gap(10, DeliveredKind::StateGap)), Verdict::Check);
        }
        assert_eq!(fork.judge(early, 10, &view), Verdict::Skip);
        assert_eq!(fork.judge(early, 11, &writeset(12, b"new")), Verdict::Skip);
        assert_eq!(fork.judge(other, 10, &writeset(11, b"abandoned")), Verdict::Skip);
        assert_eq!(fork.judge(other, 11, &writeset(12, b"abandoned")), Verdict::Skip);
        assert_eq!(fork.judge(forcer, 10, &view), Verdict::Check);
        assert_eq!(fork.judge(forcer, 11, &writeset(12, b"new")), Verdict::Check);
        assert_eq!(fork.judge(forcer, 12, &writeset(13, b"next")), Verdict::Check);
        let ahead = vec![view, writeset(12, b"new")];
        assert_eq!(fork.judge(early, 12, &writeset(13, b"next")), Verdict::Settle { resume_after: 10, ahead });
        assert!(matches!(fork.judge(other, 12, &writeset(13, b"next")), Verdict::Broken(_)));
    }

    /// Provider simulator, seed 63168: a restarted member's own log starts with a gap below
    /// the boundary and may go on past it on the abandoned side.
    #[test]
    fn a_state_gap_at_or_below_the_boundary_settles_nothing() {
        let (forcer, restarted) = (MemberId(1), MemberId(2));
        let mut fork = Fork::new(10, forcer, (1..=3).map(MemberId));
        let forced = Delivered { seqno: 11, kind: DeliveredKind::View(View::default()), bytes: b"forced".to_vec() };
        assert_eq!(fork.judge(forcer, 10, &forced), Verdict::Check);
        assert_eq!(fork.judge(restarted, 12, &gap(4, DeliveredKind::StateGap)), Verdict::Check);
        assert!(fork.is_unsettled(restarted));
        assert_eq!(fork.judge(restarted, 10, &writeset(11, b"abandoned")), Verdict::Skip);
        assert_eq!(fork.judge(restarted, 11, &gap(11, DeliveredKind::HistoryForked)), settled(0));
    }
}
