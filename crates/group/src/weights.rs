//! Galera's weighted quorum (`pc.weight`) expressed as a set of Raft voters.
//!
//! Galera calls a component primary when it holds more than half the weight of the last
//! primary component. noraft counts voters, each once, so the weights are mapped onto
//! which members vote: the others replicate as non-voters. The chosen voters are the set
//! whose majorities agree with the weighted rule on the most groups of members, among sets
//! that never call a group primary that the weighted rule would not ("sound"). Many
//! assignments map exactly: equal weights (every member votes), weight 0 (that member does
//! not vote), one member heavier than all others together (it alone votes, as in MariaDB's
//! tests with `pc.weight=2` on one of two nodes). Others do not (2,1,1,1 has no voter set
//! whose majorities are its weighted majorities): the sound set closest to it is used
//! (docs/design/weighted-quorum.md).

use crate::types::MemberId;
use std::collections::BTreeSet;

/// Above this many weighted members not every choice is tried (2^2n steps, and the choice
/// is made again wherever the leader consults it); they then vote with equal weight unless
/// one outweighs all others.
const EXHAUSTIVE_UP_TO: usize = 7;

/// One member's say in the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weighted {
    pub id: MemberId,
    pub weight: u8,
    /// Arbitrators vote but never alone: a voter set needs a member with data.
    pub arbitrator: bool,
}

/// The members that vote so that majorities of them follow the weights of `members`.
pub fn voters(members: &[Weighted]) -> BTreeSet<MemberId> {
    let weighted: Vec<Weighted> = members.iter().copied().filter(|m| m.weight > 0).collect();
    let with_data = |set: &[Weighted]| set.iter().any(|m| !m.arbitrator);
    if !with_data(&weighted) {
        // Nothing with data weighs anything: every member counts once, as if unweighted.
        return members.iter().map(|m| m.id).collect();
    }
    let total: u32 = weighted.iter().map(|m| u32::from(m.weight)).sum();
    if let Some(heavy) = weighted.iter().find(|m| 2 * u32::from(m.weight) > total && !m.arbitrator) {
        return [heavy.id].into();
    }
    if weighted.windows(2).all(|w| w[0].weight == w[1].weight) || weighted.len() > EXHAUSTIVE_UP_TO {
        return weighted.iter().map(|m| m.id).collect();
    }
    closest_sound_set(&weighted).unwrap_or_else(|| weighted.iter().map(|m| m.id).collect())
}

/// Tries every voter set (as a bit mask over `members`) against every group of members.
fn closest_sound_set(members: &[Weighted]) -> Option<BTreeSet<MemberId>> {
    let n = members.len();
    let groups = 1u32 << n;
    let total: u32 = members.iter().map(|m| u32::from(m.weight)).sum();
    let weight_of = |group: u32| -> u32 {
        members.iter().enumerate().filter(|(i, _)| group & (1 << i) != 0).map(|(_, m)| u32::from(m.weight)).sum()
    };
    let primary_by_weight: Vec<bool> = (0..groups).map(|g| 2 * weight_of(g) > total).collect();
    let data_mask: u32 = members.iter().enumerate().filter(|(_, m)| !m.arbitrator).map(|(i, _)| 1 << i).sum();
    let mut best: Option<(u32, u32)> = None; // (agreements, voter mask)
    for voters in 1..groups {
        if voters & data_mask == 0 {
            continue;
        }
        let size = voters.count_ones();
        let mut agreements = 0;
        let mut sound = true;
        for group in 0..groups {
            let primary_by_votes = 2 * (group & voters).count_ones() > size;
            if primary_by_votes && !primary_by_weight[group as usize] {
                sound = false;
                break;
            }
            agreements += u32::from(primary_by_votes == primary_by_weight[group as usize]);
        }
        // Ties go to more voters (more copies on the commit path), then to the lower mask.
        let better = best.is_none_or(|(a, v)| (agreements, size) > (a, v.count_ones()));
        if sound && better {
            best = Some((agreements, voters));
        }
    }
    best.map(|(_, mask)| members.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, m)| m.id).collect())
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

    fn ids(list: &[u64]) -> BTreeSet<MemberId> {
        list.iter().map(|&i| MemberId(i)).collect()
    }

    #[test]
    fn equal_weights_make_every_member_a_voter() {
        assert_eq!(voters(&members(&[1, 1, 1])), ids(&[1, 2, 3]));
        assert_eq!(voters(&members(&[3, 3])), ids(&[1, 2]));
    }

    #[test]
    fn a_member_heavier_than_all_others_together_votes_alone() {
        assert_eq!(voters(&members(&[2, 1])), ids(&[1]));
        assert_eq!(voters(&members(&[1, 3, 1])), ids(&[2]));
    }

    #[test]
    fn weight_zero_does_not_vote() {
        assert_eq!(voters(&members(&[1, 0, 1, 1])), ids(&[1, 3, 4]));
        assert_eq!(voters(&members(&[0, 0])), ids(&[1, 2]), "nobody weighs anything: all count once");
    }

    #[test]
    fn without_an_exact_set_the_closest_sound_one_is_chosen() {
        // 2,1,1: {2,3} weighs 2 of 4, not primary; {1,2} and {1,3} are. Voters {1,2}: only
        // {1,3} differs, and nothing Galera calls non-primary is primary here.
        assert_eq!(voters(&members(&[2, 1, 1])), ids(&[1, 2]));
        // 2,1,1,1: all four voting is sound; {1,x} lose where Galera keeps them primary.
        assert_eq!(voters(&members(&[2, 1, 1, 1])), ids(&[1, 2, 3, 4]));
    }

    #[test]
    fn an_arbitrator_never_votes_alone() {
        let mut m = members(&[1, 3]);
        m[1].arbitrator = true;
        let chosen = voters(&m);
        assert!(chosen.contains(&MemberId(1)), "{chosen:?}");
    }

    #[test]
    fn chosen_sets_are_sound_for_every_small_assignment_that_has_one() {
        for code in 0..4u32.pow(4) {
            let weights: Vec<u8> = (0..4).map(|i| ((code / 4u32.pow(i)) % 4) as u8).collect();
            let m = members(&weights);
            let weighted: Vec<Weighted> = m.iter().copied().filter(|x| x.weight > 0).collect();
            if weighted.is_empty() || closest_sound_set(&weighted).is_none() {
                continue;
            }
            let chosen = voters(&m);
            let total: u32 = weights.iter().map(|&w| u32::from(w)).sum();
            for group in 0..16u32 {
                let in_group = |id: &MemberId| group & (1 << (id.0 - 1)) != 0;
                let votes = chosen.iter().filter(|id| in_group(id)).count();
                let weight: u32 = m.iter().filter(|x| in_group(&x.id)).map(|x| u32::from(x.weight)).sum();
                assert!(
                    2 * votes <= chosen.len() || 2 * weight > total,
                    "weights {weights:?}: voters {chosen:?} make group {group:b} primary at weight {weight}/{total}"
                );
            }
        }
    }
}
