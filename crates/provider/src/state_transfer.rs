//! Donor selection: a pure function of the ordered history, so every member picks the
//! same donor for a request without talking about it. Also the words a failed transfer is
//! reported in.
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

/// The code Galera reports when a donor's server refuses to donate: `-ECANCELED`.
pub const DONATION_REFUSED: i32 = -125;

/// A joiner's transfer when its group communication failed for good: `-ENOTCONN`.
pub const GROUP_FAILED: i32 = -107;

/// A negative errno as the C library describes it (`-125` -> "Operation canceled").
pub fn errno_text(rcode: i32) -> String {
    let text = std::io::Error::from_raw_os_error(rcode.saturating_neg()).to_string();
    // Rust adds " (os error N)" to the C library's text.
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The line every member logs when a donor reports its transfer failed, in Galera's words
/// (MariaDB's tests suppress it by them): `<index>.<segment> (<name>)` of the donor, then of
/// the joiner, in the current view; index -1 for a member no longer in it.
pub fn transfer_failed_line(members: &[MemberInfo], donor: MemberId, joiner: MemberId, rcode: i32) -> String {
    let describe = |id: MemberId| match members.iter().position(|m| m.id == id) {
        Some(i) => format!("{i}.{} ({})", members[i].segment, members[i].name),
        None => format!("-1.-1 ({id}, left the group)"),
    };
    format!("{}: State transfer to {} failed: {rcode} ({})", describe(donor), describe(joiner), errno_text(rcode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str) -> MemberInfo {
        MemberInfo { name: name.into(), ..MemberInfo::with_id(MemberId(id)) }
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

    #[test]
    fn a_failed_transfer_is_told_in_galeras_words() {
        let mut members = [member(1, "node1"), member(2, "node2")];
        members[1].segment = 2;
        assert_eq!(errno_text(DONATION_REFUSED), "Operation canceled");
        assert_eq!(
            transfer_failed_line(&members, MemberId(1), MemberId(2), DONATION_REFUSED),
            "0.0 (node1): State transfer to 1.2 (node2) failed: -125 (Operation canceled)"
        );
        let gone = transfer_failed_line(&members, MemberId(1), MemberId(9), -32);
        assert_eq!(gone, "0.0 (node1): State transfer to -1.-1 (m9, left the group) failed: -32 (Broken pipe)");
        // No panic on codes that are no errno.
        assert!(errno_text(i32::MIN).contains("2147483647"));
    }
}
