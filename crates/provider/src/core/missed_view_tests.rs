//! A member cut off while the group went on receives what it missed when it is back, views
//! without it among them: the server sees those views (`Event::Excluded`), as Galera's
//! incremental transfer shows them, and rolls back this node's streaming transactions as the
//! group did.
use super::*;
use crate::application::ViewStatus;
use lockstep_group::View as GroupView;

const HISTORY: Uuid = Uuid([7; 16]);
const ME: MemberId = MemberId(1);
const OTHER: MemberId = MemberId(2);

fn view(view_id: u64, members: &[MemberId]) -> Payload {
    Payload::View(GroupView { view_id, members: members.iter().map(|id| test_member(*id)).collect() })
}

fn delivered(replayed: bool) -> DeliveryContext {
    DeliveryContext { history: HISTORY, replayed }
}

#[test]
fn a_view_without_this_node_that_it_missed_reaches_the_server_in_its_place_with_no_index_for_it() {
    let (mut core, generation) = test_synced_with_other(test_settings());
    core.on_group_status(generation, &test_status(ME, false, &[ME]), 0);
    core.take_effects();
    // Back: the group's view without this node, then the one that takes it in again.
    core.on_delivered(generation, 2, view(2, &[OTHER]), delivered(false));
    core.on_delivered(generation, 3, view(3, &[OTHER, ME]), delivered(false));
    let event = core.next_task(generation, &0);
    let Some(Task::Run(Event::Excluded { view })) = event else { panic!("{event:?}") };
    assert_eq!((view.state_id, view.my_index, view.members.len()), (Gtid::new(HISTORY, 2), -1, 1));
    assert_eq!(view.status, ViewStatus::Primary);
    assert_eq!(core.turn(generation, 1, 2, &0), Some(Turn::Go));
    core.finished(2);
    let event = core.next_task(generation, &0);
    let Some(Task::Run(Event::View { view, .. })) = event else { panic!("{event:?}") };
    assert_eq!((view.state_id.seqno, view.my_index), (3, 1));
}

#[test]
fn a_view_without_this_node_replayed_from_its_log_or_after_it_left_is_not_shown() {
    let (mut core, generation) = test_synced_with_other(test_settings());
    core.on_delivered(generation, 2, view(2, &[OTHER]), delivered(true));
    assert!(core.next_task(generation, &0).is_none(), "replayed");
    assert!(core.begin_leave().is_some());
    core.on_delivered(generation, 3, view(3, &[OTHER]), delivered(false));
    assert!(!matches!(core.next_task(generation, &0), Some(Task::Run(Event::Excluded { .. }))), "after it left");
}
