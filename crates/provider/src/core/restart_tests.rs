//! A restarted node that could catch up from its own log chooses between that and a state
//! transfer from a member that stayed up and synced (docs/design/restart-from-own-log.md).
use super::phase::Restart;
use super::*;
use lockstep_group::View as GroupView;

const HISTORY: Uuid = Uuid([7; 16]);
const ME: MemberId = MemberId(1);
const OTHER: MemberId = MemberId(2);

fn view(view_id: u64, members: &[MemberId]) -> Payload {
    Payload::View(GroupView { view_id, members: members.iter().map(|id| test_member(*id)).collect() })
}

fn status(primary: bool) -> lockstep_group::Status {
    test_status(ME, primary, &[ME, OTHER])
}

/// A node restarted at seqno 3 of a history whose log it holds from the group's first view:
/// its log replays seqnos 1 to 3 (views), then the group orders a view at seqno 4 while it
/// takes part (`members`).
fn restarted(members: &[MemberId]) -> (Core<u32>, u64) {
    restarted_at(Gtid::new(HISTORY, 3), members)
}

fn restarted_at(position: Gtid, members: &[MemberId]) -> (Core<u32>, u64) {
    let mut core = Core::new(test_settings(), position, false);
    let generation = connect(&mut core);
    let replayed = DeliveryContext { history: HISTORY, replayed: true };
    for seqno in 1..=3 {
        core.on_delivered(generation, seqno, view(seqno as u64, &[ME, OTHER]), replayed);
    }
    let live = DeliveryContext { history: HISTORY, replayed: false };
    core.on_delivered(generation, 4, view(4, members), live);
    (core, generation)
}

fn connect(core: &mut Core<u32>) -> u64 {
    core.open(Opening {
        me: ME,
        member: member_uuid(ME, 1),
        bootstrap_history: None,
        ist_addr: "127.0.0.1:4568".into(),
        donors: String::new(),
        checkpoint: None,
    })
}

fn synced_from(core: &mut Core<u32>, generation: u64, origin: MemberId, since: Option<Seqno>) {
    let live = DeliveryContext { history: HISTORY, replayed: false };
    core.on_delivered(
        generation,
        4,
        Payload::Control { origin, control: Control::Synced { since, ends_donation: None, stateless: false } },
        live,
    );
}

fn restart(core: &Core<u32>) -> Restart {
    core.connection().expect("connected").restart
}

#[test]
fn a_member_synced_since_before_our_first_live_view_makes_a_restarted_node_ask_for_a_transfer() {
    let (mut core, generation) = restarted(&[ME, OTHER]);
    assert!(core.can_catch_up_alone());
    assert_eq!(restart(&core), Restart::Choosing { joined_at: 4, stopped_at: 3, until_ms: None });
    assert_eq!(core.restart_choice(generation, &1), None, "waits");
    core.take_effects();
    // The other member has been synced since seqno 2 (before this node stopped at 3) and
    // announces after applying our view.
    synced_from(&mut core, generation, OTHER, Some(2));
    assert_eq!(restart(&core), Restart::Transfer);
    assert_eq!(core.take_effects().wake, vec![1], "the waiting applier is woken");
    assert_eq!(core.restart_choice(generation, &1), Some(false));
    assert_eq!(core.own_log_position(generation), None);
    // Its request says it holds the order with the group's verdicts: the donor confirms its
    // position whether or not its cache holds the gap.
    match core.begin_state_request(generation, 9) {
        RequestStart::Send(request) => {
            assert_eq!(request.position, Gtid::new(HISTORY, 3));
            assert!(request.has_state && request.own_order);
        }
        other => panic!("{other:?}"),
    }
}

/// A running server that reconnects (`wsrep_cluster_address` set again) asks for no
/// transfer: it catches up from its own log at once, its first view at its own position.
#[test]
fn a_reconnecting_server_catches_up_alone_though_members_stayed_up() {
    let (mut core, _) = restarted(&[ME]);
    assert_eq!(restart(&core), Restart::Alone, "alone in the view");
    assert!(core.close("reconnecting"));
    let generation = connect(&mut core);
    // The group replays the member's log, then orders a view with the other member.
    let replayed = DeliveryContext { history: HISTORY, replayed: true };
    for seqno in 1..=4 {
        core.on_delivered(generation, seqno, view(seqno as u64, &[ME]), replayed);
    }
    let live = DeliveryContext { history: HISTORY, replayed: false };
    core.on_delivered(generation, 5, view(5, &[ME, OTHER]), live);
    assert_eq!(restart(&core), Restart::Alone);
    assert_eq!(core.restart_choice(generation, &1), Some(true));
    // Where it stood when it disconnected (the view at 4 was never applied here).
    assert_eq!(core.own_log_position(generation), Some(Gtid::new(HISTORY, 3)));
}

#[test]
fn announcements_of_members_that_restarted_too_do_not_count_and_the_node_catches_up_alone() {
    let (mut core, generation) = restarted(&[ME, OTHER]);
    // Not synced when it announced (catching up itself), or synced only after this node
    // stopped (it restarted too, a moment earlier), or this node's own announcement.
    synced_from(&mut core, generation, OTHER, None);
    synced_from(&mut core, generation, OTHER, Some(4));
    synced_from(&mut core, generation, ME, Some(1));
    assert!(matches!(restart(&core), Restart::Choosing { .. }));
    // The deadline runs from the first driver round after the view.
    core.on_group_status(generation, &status(true), 10_000);
    let until_ms = Some(10_000 + RESTART_CHOICE_MS);
    assert_eq!(restart(&core), Restart::Choosing { joined_at: 4, stopped_at: 3, until_ms });
    core.on_group_status(generation, &status(true), 10_000 + RESTART_CHOICE_MS - 1);
    assert_eq!(core.restart_choice(generation, &1), None);
    core.on_group_status(generation, &status(true), 10_000 + RESTART_CHOICE_MS);
    assert_eq!(restart(&core), Restart::Alone);
    assert_eq!(core.restart_choice(generation, &1), Some(true));
    assert_eq!(core.own_log_position(generation), Some(Gtid::new(HISTORY, 3)));
    // A late announcement changes nothing.
    synced_from(&mut core, generation, OTHER, Some(2));
    assert_eq!(restart(&core), Restart::Alone);
}

#[test]
fn a_restarted_node_alone_in_its_view_catches_up_alone_at_once() {
    let (mut core, generation) = restarted(&[ME]);
    assert_eq!(restart(&core), Restart::Alone);
    assert_eq!(core.restart_choice(generation, &1), Some(true));
}

/// The donor that was to confirm the position of a restarted node leaves after the server
/// took its state, and nobody else is synced: the node applies its own order (provider
/// simulator, seed 2997, where the others crashed and it forced a component).
#[test]
fn a_restarted_node_whose_confirming_donor_left_catches_up_alone_when_nobody_else_can_donate() {
    let (mut core, generation) = restarted(&[ME, OTHER]);
    synced_from(&mut core, generation, OTHER, Some(2));
    let RequestStart::Send(request) = core.begin_state_request(generation, 9) else { panic!("sends") };
    let live = DeliveryContext { history: HISTORY, replayed: false };
    let ordered = |control| Payload::Control { origin: ME, control };
    core.on_delivered(generation, 4, ordered(Control::StateRequest(request)), live);
    assert_eq!(core.connection().unwrap().donor.map(|(donor, _)| donor), Some(OTHER));
    assert_eq!(core.sst_received(Gtid::new(HISTORY, 3), 0), Status::Ok);
    assert_eq!(core.install_transfer(generation), Ok(Gtid::new(HISTORY, 3)));
    core.take_effects();

    core.on_group_status(generation, &test_status(ME, true, &[ME]), 1_000);
    assert_eq!(core.catch_up(generation), Some(CatchUp::Waiting));
    let again = core.take_effects().send.into_iter().find_map(|(c, _)| match c {
        Control::StateRequest(r) => Some(r),
        _ => None,
    });
    let again = again.expect("the stream alone is asked for");
    assert!(again.own_order);
    core.on_delivered(generation, 5, view(5, &[ME]), live);
    core.on_delivered(generation, 5, ordered(Control::StateRequest(again)), live);
    assert_eq!(core.catch_up(generation), Some(CatchUp::Done), "nobody can send it");
    assert!(core.can_replicate());
}

#[test]
fn a_donor_confirms_the_position_of_a_joiner_that_holds_its_order_even_without_the_gap() {
    let (core, _) = restarted(&[ME, OTHER]);
    let donation = |own| core.donation(OTHER, 7, Vec::new(), 4, Gtid::new(HISTORY, 3), true, String::new(), own);
    assert!(donation(true).position_only(false));
    assert!(!donation(false).position_only(false), "a joiner with a fresh index needs the donor's verdicts");
    assert!(donation(false).position_only(true));
    let elsewhere = core.donation(OTHER, 7, Vec::new(), 4, Gtid::new(Uuid([9; 16]), 3), true, String::new(), true);
    assert!(!elsewhere.position_only(false), "not in our history: a snapshot");
}

/// A restarted member keeps its id, so the views replayed from its log hold it; its data
/// gone (a full transfer needed), it must not start the server's handshake at one of them:
/// its state request could then be ordered before its join (mtr galera_sr_mysqldump_sst).
#[test]
fn a_restarted_node_without_state_starts_its_handshake_at_its_first_live_view() {
    let (core, _) = restarted_at(Gtid::UNDEFINED, &[ME, OTHER]);
    assert!(!core.has_state());
    assert_eq!(core.connection().expect("connected").joined_at, Some(4));
    let firsts: Vec<Seqno> = (core.events.iter())
        .filter_map(|e| match e {
            Event::View { view, first_in_connection: true } => Some(view.state_id.seqno),
            _ => None,
        })
        .collect();
    assert_eq!(firsts, vec![4]);
}

/// A node that left others running may not bootstrap; its refusal names who went on without
/// it, from what the last primary view it saw (not one replayed from its log) said.
#[test]
fn a_refused_bootstrap_names_the_members_that_went_on_without_this_node() {
    let (mut core, _) = restarted(&[ME, OTHER, MemberId(3)]);
    let (_, others) = core.take_effects().last_primary.expect("the live view's members are kept");
    assert_eq!(others, ["node2", "node3"]);
    let mut stopped = Core::<u32>::new(core.settings(), Gtid::new(HISTORY, 4), false);
    assert!(!stopped.unsafe_bootstrap_refusal().contains("went on"), "nothing known");
    stopped.remember_last_primary(others);
    let refusal = stopped.unsafe_bootstrap_refusal();
    assert!(refusal.starts_with("It may not be safe to bootstrap the cluster from this node."), "{refusal}");
    assert!(refusal.contains("went on with node2, node3"), "{refusal}");
    assert_eq!(stopped.may_connect(true), Err(Status::NodeFail));
}

/// A node whose data is ahead of the group in the same history (the group was bootstrapped
/// from a node that was behind, and ordered other commits at those seqnos) stops at its first
/// live view rather than merge a forked history; one at or behind the group's view goes on.
#[test]
fn a_node_ahead_of_the_group_in_the_same_history_is_refused_rather_than_merged() {
    let (ahead, _) = restarted_at(Gtid::new(HISTORY, 10), &[ME, OTHER]);
    assert!(ahead.is_failed(), "seqno 10 held, the group orders seqno 4");
    let (level, _) = restarted_at(Gtid::new(HISTORY, 3), &[ME, OTHER]);
    assert!(!level.is_failed());
}

/// A node whose group member started over because its history forked from the group's
/// (docs/design/group-forked-history.md) asks for a full transfer whatever its position, and
/// its saved state stays undefined until that transfer is installed.
#[test]
fn a_forked_history_asks_for_a_full_transfer_and_saves_no_position_until_it_is_installed() {
    let mut core = Core::new(test_settings(), Gtid::new(HISTORY, 5), false);
    let generation = connect(&mut core);
    core.history_forked();
    let (_, saved) = core.take_effects().save.expect("saved at once");
    assert_eq!(saved.position, Gtid::UNDEFINED);
    let live = DeliveryContext { history: HISTORY, replayed: false };
    core.on_delivered(generation, 7, view(7, &[OTHER, ME]), live);
    match core.begin_state_request(generation, 9) {
        RequestStart::Send(request) => {
            assert_eq!(request.position, Gtid::UNDEFINED);
            assert!(!request.has_state);
        }
        other => panic!("{other:?}"),
    }
    // A save meanwhile (a view changing whether this node may bootstrap) stays undefined.
    core.on_delivered(generation, 8, view(8, &[ME]), live);
    let (_, saved) = core.take_effects().save.expect("alone now: safe to bootstrap, saved");
    assert_eq!(saved.position, Gtid::UNDEFINED);
}

/// A node already joining from its own position when its member starts over on a forked
/// history: its certification state and its state request went by a position that is not a
/// place in the group's history, so it ends for a full transfer, its saved state undefined
/// (provider simulator, seed 95635: refused as ahead of the group instead, it kept its
/// position and continued from it on the other history after a restart).
#[test]
fn a_joining_node_whose_history_forked_ends_for_a_full_transfer() {
    let mut core = Core::new(test_settings(), Gtid::new(HISTORY, 5), false);
    let generation = connect(&mut core);
    let live = DeliveryContext { history: HISTORY, replayed: false };
    core.on_delivered(generation, 7, view(7, &[OTHER, ME]), live);
    assert!(matches!(core.phase(), Phase::Joining(_)), "{:?}", core.phase());
    core.take_effects();
    core.history_forked();
    assert!(core.is_failed() && core.restart_needed());
    let (_, saved) = core.take_effects().save.expect("saved");
    assert_eq!(saved.position, Gtid::UNDEFINED);
}

/// A node that applied past a fork of the order on the side the group's history left
/// (docs/design/group-forced-primary.md): restarted, it asks for a full transfer whatever its
/// position; running, it stops as inconsistent, its saved state asking for a full transfer,
/// and its process ends to be restarted into one.
#[test]
fn applying_past_a_fork_on_the_abandoned_side_takes_a_full_transfer() {
    let live = DeliveryContext { history: HISTORY, replayed: false };
    let mut restarted = Core::new(test_settings(), Gtid::new(HISTORY, 9), false);
    let generation = connect(&mut restarted);
    restarted.on_delivered(generation, 6, Payload::HistoryForked, live);
    restarted.on_delivered(generation, 7, view(7, &[OTHER, ME]), live);
    assert!(!restarted.is_failed());
    match restarted.begin_state_request(generation, 9) {
        RequestStart::Send(request) => assert!(request.position == Gtid::UNDEFINED && !request.has_state),
        other => panic!("{other:?}"),
    }
    let (mut running, generation) = restarted_at(Gtid::new(HISTORY, 3), &[ME]);
    assert!(!running.is_failed());
    running.take_effects();
    running.on_delivered(generation, 2, Payload::HistoryForked, live);
    assert!(running.is_failed() && running.restart_needed());
    let (_, saved) = running.take_effects().save.expect("saved");
    assert_eq!(saved.position, Gtid::UNDEFINED);
}

/// A running node whose group skipped seqnos past its position (its member fell behind what
/// the leader's log held: docs/design/group-gcache-purge-and-state-gaps.md) stops, its saved
/// state asks for a full transfer, and its process ends to be restarted into one; a gap it had
/// applied past changes nothing.
#[test]
fn a_running_node_the_group_skipped_seqnos_past_ends_for_a_full_transfer() {
    let live = DeliveryContext { history: HISTORY, replayed: false };
    let (mut running, generation) = test_synced_with_other(test_settings());
    running.on_delivered(generation, 1, Payload::Gap, live);
    assert!(!running.is_failed());
    running.on_delivered(generation, 5, Payload::Gap, live);
    assert!(running.is_failed() && running.restart_needed());
    let (_, saved) = running.take_effects().save.expect("saved");
    assert_eq!(saved.position, Gtid::UNDEFINED);
}

/// A running node whose member started over as a new member of another primary component
/// (its own met that one and yielded to it: docs/design/group-forced-primary.md, "Two
/// primary components meet") stops, its saved state asks for a full transfer, and its
/// process ends to be restarted into one.
#[test]
fn a_running_node_whose_history_forked_stops_and_asks_for_a_full_transfer() {
    let (mut running, _) = test_synced_with_other(test_settings());
    running.take_effects();
    running.history_forked();
    assert!(running.is_failed() && running.restart_needed());
    let (_, saved) = running.take_effects().save.expect("saved");
    assert_eq!(saved.position, Gtid::UNDEFINED);
}
