//! Galera's weighted quorum (`pc.weight`) as Raft votes.
//!
//! Galera calls a component primary when it holds more than half the weight of the last
//! primary component. Here each member casts its weight in votes, divided by the weights'
//! greatest common divisor (equal weights: one vote each), so a component holds a majority
//! of the votes exactly when it holds more than half the weight. A member of weight 0
//! replicates as a non-voter. noraft counts voters, each once: a member with several votes
//! is several Raft voters (crate::raft, docs/design/weighted-quorum.md).

use crate::types::MemberId;
use std::collections::BTreeMap;

/// One member's say in the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weighted {
    pub id: MemberId,
    pub weight: u8,
    /// Arbitrators vote, but a quorum of arbitrators alone is never made from weights when no
    /// member with data weighs anything.
    pub arbitrator: bool,
}

/// The voters among `members` and the votes each casts.
pub fn votes(members: &[Weighted]) -> BTreeMap<MemberId, u8> {
    let weighted: Vec<Weighted> = members.iter().copied().filter(|m| m.weight > 0).collect();
    if !weighted.iter().any(|m| !m.arbitrator) {
        // Nothing with data weighs anything: every member counts once, as if unweighted.
        return members.iter().map(|m| (m.id, 1)).collect();
    }
    let divisor = weighted.iter().fold(0, |g, m| gcd(g, m.weight));
    weighted.iter().map(|m| (m.id, m.weight / divisor)).collect()
}

fn gcd(a: u8, b: u8) -> u8 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(weights: &[u8]) -> Vec<Weighted> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| Weighted { id: MemberId(i as u64 + 1), weight, arbitrator: false })
            .collect()
    }

    fn counts(list: &[(u64, u8)]) -> BTreeMap<MemberId, u8> {
        list.iter().map(|&(i, n)| (MemberId(i), n)).collect()
    }

    #[test]
    fn equal_weights_give_every_member_one_vote() {
        assert_eq!(votes(&members(&[1, 1, 1])), counts(&[(1, 1), (2, 1), (3, 1)]));
        assert_eq!(votes(&members(&[3, 3])), counts(&[(1, 1), (2, 1)]));
    }

    #[test]
    fn weights_become_votes_divided_by_their_common_divisor() {
        assert_eq!(votes(&members(&[2, 1, 1, 1])), counts(&[(1, 2), (2, 1), (3, 1), (4, 1)]));
        assert_eq!(votes(&members(&[4, 2, 6])), counts(&[(1, 2), (2, 1), (3, 3)]));
        assert_eq!(votes(&members(&[255, 1])), counts(&[(1, 255), (2, 1)]));
    }

    #[test]
    fn weight_zero_does_not_vote() {
        assert_eq!(votes(&members(&[1, 0, 1, 1])), counts(&[(1, 1), (3, 1), (4, 1)]));
        assert_eq!(votes(&members(&[0, 0])), counts(&[(1, 1), (2, 1)]), "nobody weighs anything: all count once");
    }

    #[test]
    fn arbitrators_alone_weighing_something_count_as_unweighted() {
        let mut m = members(&[0, 3]);
        m[1].arbitrator = true;
        assert_eq!(votes(&m), counts(&[(1, 1), (2, 1)]));
    }

    /// Galera's rule and ours agree on every group of every assignment of weights 0-3 to
    /// four members.
    #[test]
    fn a_group_holds_a_majority_of_the_votes_exactly_when_it_holds_more_than_half_the_weight() {
        for code in 1..4u32.pow(4) {
            let weights: Vec<u8> = (0..4).map(|i| ((code / 4u32.pow(i)) % 4) as u8).collect();
            let chosen = votes(&members(&weights));
            let total_votes: u32 = chosen.values().map(|&n| u32::from(n)).sum();
            let total_weight: u32 = weights.iter().map(|&w| u32::from(w)).sum();
            for group in 0..16u32 {
                let in_group = |id: &MemberId| group & (1 << (id.0 - 1)) != 0;
                let held: u32 = chosen.iter().filter(|(id, _)| in_group(id)).map(|(_, &n)| u32::from(n)).sum();
                let weight: u32 =
                    weights.iter().enumerate().filter(|(i, _)| group & (1 << i) != 0).map(|(_, &w)| u32::from(w)).sum();
                assert_eq!(2 * held > total_votes, 2 * weight > total_weight, "weights {weights:?}, group {group:b}");
            }
        }
    }
}
