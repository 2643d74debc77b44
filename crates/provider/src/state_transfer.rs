//! Donor selection: a pure function of the ordered history, so every member picks the
//! same donor for a request without talking about it.
use lockstep_group::{MemberId, MemberInfo};
use std::collections::BTreeSet;

/// The donor for `joiner`: the first synced member named in `donors`
/// (`wsrep_sst_donor`, comma-separated) if any, else — unless the list names members
/// without a trailing comma — any synced member in view order, those of the joiner's segment
/// (`gmcast.segment`) first: a transfer stays inside a site when it can.
pub fn choose_donor(
    members: &[MemberInfo],
    synced: &BTreeSet<MemberId>,
    joiner: MemberId,
    donors: &str,
) -> Option<MemberId> {
    let candidates: Vec<&MemberInfo> = members.iter().filter(|m| m.id != joiner && synced.contains(&m.id)).collect();
    let names: Vec<&str> = donors.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    for name in &names {
        if let Some(m) = candidates.iter().find(|m| m.name == *name) {
            return Some(m.id);
        }
    }
    let anyone = names.is_empty() || donors.trim_end().ends_with(',');
    if anyone {
        let segment = members.iter().find(|m| m.id == joiner).map(|m| m.segment);
        let nearby = candidates.iter().find(|m| Some(m.segment) == segment);
        nearby.or(candidates.first()).map(|m| m.id)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str) -> MemberInfo {
        MemberInfo {
            id: MemberId(id),
            name: name.into(),
            address: String::new(),
            incoming_address: String::new(),
            incarnation: 0,
            arbitrator: false,
            weight: 1,
            segment: 0,
        }
    }

    #[test]
    fn named_donors_first_then_anyone_only_with_a_trailing_comma() {
        let members = [member(1, "a"), member(2, "b"), member(3, "c")];
        let synced: BTreeSet<MemberId> = [MemberId(1), MemberId(2)].into();
        let joiner = MemberId(3);
        assert_eq!(choose_donor(&members, &synced, joiner, ""), Some(MemberId(1)));
        assert_eq!(choose_donor(&members, &synced, joiner, "b"), Some(MemberId(2)));
        assert_eq!(choose_donor(&members, &synced, joiner, "c,b"), Some(MemberId(2)), "c is the joiner");
        assert_eq!(choose_donor(&members, &synced, joiner, "x"), None, "named but absent: wait");
        assert_eq!(choose_donor(&members, &synced, joiner, "x,"), Some(MemberId(1)));
        assert_eq!(choose_donor(&members, &BTreeSet::new(), joiner, ""), None);
    }

    #[test]
    fn any_donor_is_taken_from_the_joiners_segment_first() {
        let mut members = [member(1, "a"), member(2, "b"), member(3, "c")];
        members[1].segment = 1;
        members[2].segment = 1;
        let synced: BTreeSet<MemberId> = [MemberId(1), MemberId(2)].into();
        assert_eq!(choose_donor(&members, &synced, MemberId(3), ""), Some(MemberId(2)));
        assert_eq!(choose_donor(&members, &synced, MemberId(3), "a"), Some(MemberId(1)), "named first");
        let only_elsewhere: BTreeSet<MemberId> = [MemberId(1)].into();
        assert_eq!(choose_donor(&members, &only_elsewhere, MemberId(3), ""), Some(MemberId(1)));
    }
}
