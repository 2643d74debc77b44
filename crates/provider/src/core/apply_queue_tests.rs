//! The apply queue's byte bound: deliveries are held back while the writesets queued to
//! apply hold `apply_queue_bytes`, and taken again as appliers take them.
use super::*;
use crate::application::WsHandle;
use crate::certification::Chains;
use crate::types::SourceTrx;
use crate::writeset::StateRequest;
use lockstep_group::View;

const HISTORY: Uuid = Uuid([7; 16]);
const ME: MemberId = MemberId(1);
const OTHER: MemberId = MemberId(2);

fn live() -> DeliveryContext {
    DeliveryContext { history: HISTORY, replayed: false }
}

fn writeset(trx_id: u64, bytes: usize) -> Payload {
    Payload::Writeset(Box::new(Writeset {
        source: SourceTrx { node: Uuid([2; 16]), trx_id, conn_id: 1 },
        local_id: 0,
        last_seen: 0,
        flags: flags::TRX_START | flags::TRX_END,
        chains: Chains::default(),
        key_bytes: 0,
        data: vec![0; bytes],
    }))
}

fn synced(apply_queue_bytes: u64) -> (Core<u32>, u64) {
    test_synced_with_other(Settings { apply_queue_bytes, ..test_settings() })
}

#[test]
fn deliveries_are_held_while_the_queued_writesets_hold_their_byte_limit() {
    let (mut core, generation) = synced(2500);
    assert!(core.on_delivered(generation, 2, writeset(2, 1000), live()));
    assert!(core.on_delivered(generation, 3, writeset(3, 1000), live()));
    assert!(!core.on_delivered(generation, 4, writeset(4, 1000), live()), "3 000 bytes queued: hold");
    assert!(!core.accepting_deliveries());
    // One delivery may still arrive after the group was told; it waits in the core.
    assert!(!core.on_delivered(generation, 5, writeset(5, 1000), live()));

    // An applier takes seqno 2: 2 000 bytes queued, the waiting delivery goes in (3 000
    // again), and the group is still held.
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Apply { seqno: 2, .. }))));
    assert!(!core.take_effects().resume_deliveries && !core.accepting_deliveries());
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Apply { seqno: 3, .. }))));
    assert!(core.take_effects().resume_deliveries && core.accepting_deliveries(), "2 000 bytes: room");
}

#[test]
fn a_writeset_bigger_than_the_limit_is_taken_alone_and_a_miscount_heals() {
    let (mut core, generation) = synced(2500);
    assert!(!core.on_delivered(generation, 2, writeset(2, 10_000), live()), "taken, then full");
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Apply { seqno: 2, .. }))));
    assert!(core.accepting_deliveries());
    // A count that missed a way out (here: set by hand) is corrected once it says full, at
    // the driver's next round once the last count is old enough.
    core.queued_bytes = 1 << 30;
    assert!(!core.on_delivered(generation, 3, writeset(3, 1000), live()), "counted again 0 ms ago");
    core.on_group_status(generation, &test_status(ME, true, &[ME, OTHER]), 1_000);
    assert!(core.take_effects().resume_deliveries && core.accepting_deliveries());
    assert_eq!(core.queued_bytes, 1000);
}

#[test]
fn an_applier_waiting_for_the_vote_on_its_failure_gets_the_order_read_on_whatever_the_queue_holds() {
    let (mut core, generation) = synced(2500);
    for seqno in 2..=4 {
        core.on_delivered(generation, seqno, writeset(seqno as u64, 1000), live());
    }
    assert!(!core.on_delivered(generation, 5, writeset(5, 1000), live()), "held");
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Apply { seqno: 2, .. }))));
    assert!(!core.accepting_deliveries(), "still 3 000 bytes queued");
    // Seqno 2 fails to commit here: every commit after it waits for the members' vote,
    // which comes through the order (provider simulator, seed 20018 with a small limit).
    let handle = WsHandle { trx_id: 2, opaque: REMOTE_HANDLE | 2 };
    assert_eq!(core.commit_order_enter(handle, 2, &0), Some(Status::Ok));
    core.commit_order_leave(handle, 2, Some(outcome_of(b"duplicate key")));
    assert!(core.take_effects().resume_deliveries && core.accepting_deliveries());
    assert!(core.on_delivered(generation, 6, writeset(6, 1000), live()));
}

/// The members' votes on a seqno came before this node's applier failed it (a restarted
/// member reads them from its log ahead of applying): the applier takes the group's outcome
/// at once, instead of waiting for a vote of its own that nobody counts any more (provider
/// simulator, seed 97933: the applier waited to the end of the run).
#[test]
fn an_applier_failing_a_seqno_the_members_already_decided_takes_their_outcome() {
    let (mut core, generation) = synced(1 << 20);
    let third = MemberId(3);
    let members = [ME, OTHER, third].iter().map(|id| test_member(*id)).collect();
    core.on_delivered(generation, 2, Payload::View(View { view_id: 2, members }), live());
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::View { .. }))));
    core.view_applied(2);
    core.on_delivered(generation, 3, writeset(3, 10), live());
    for origin in [OTHER, third] {
        let vote = Control::Vote { seqno: 3, outcome: vote::SUCCESS };
        core.on_delivered(generation, 3, Payload::Control { origin, control: vote }, live());
    }
    assert!(matches!(core.next_task(generation, &0), Some(Task::Run(Event::Apply { seqno: 3, .. }))));
    let handle = WsHandle { trx_id: 3, opaque: REMOTE_HANDLE | 3 };
    assert_eq!(core.commit_order_enter(handle, 3, &0), Some(Status::Ok));
    core.commit_order_leave(handle, 3, Some(outcome_of(b"duplicate key")));
    assert_eq!(core.vote_result(generation, 3, &0), Some(VoteResult::Inconsistent));
}

#[test]
fn a_joiner_without_state_keeps_nothing_its_donor_will_send_until_a_donor_was_chosen() {
    let settings = Settings { apply_queue_bytes: 2500, ..test_settings() };
    let mut core: Core<u32> = Core::new(settings, Gtid::UNDEFINED, true);
    let generation = core.open(Opening {
        me: OTHER,
        member: member_uuid(OTHER, 1),
        bootstrap_history: None,
        ist_addr: "127.0.0.1:4568".into(),
        donors: String::new(),
        checkpoint: None,
    });
    let members = [ME, OTHER].iter().map(|id| test_member(*id)).collect();
    assert!(core.on_delivered(generation, 2, Payload::View(View { view_id: 2, members }), live()));
    let applies = |core: &Core<u32>| core.events.iter().filter(|e| matches!(e, Event::Apply { .. })).count();
    // No request of it is ordered yet: all of these precede it, in the donor's state.
    for seqno in 3..=10 {
        assert!(core.on_delivered(generation, seqno, writeset(seqno as u64, 1 << 20), live()), "read on");
    }
    assert_eq!((applies(&core), core.queued_bytes), (0, 0), "nothing to apply is kept");
    // A request of ours given a donor, even one no longer counted as ours (its id is not the
    // current one): that donor's snapshot may reach the server's script and be older than a
    // later request's point, completed then from what was read meanwhile.
    let request = Control::StateRequest(StateRequest {
        sst_request: b"mariabackup\x00127.0.0.1:4444\x00".to_vec(),
        position: Gtid::UNDEFINED,
        donors: String::new(),
        has_state: false,
        ist_addr: "127.0.0.1:4568".into(),
        id: 99,
        own_order: false,
        guessing: false,
    });
    core.on_delivered(generation, 11, Payload::Control { origin: OTHER, control: request }, live());
    assert_eq!(core.catch_up(generation), Some(phase::CatchUp::Waiting), "not the current request");
    assert!(core.on_delivered(generation, 12, writeset(12, 1000), live()));
    assert_eq!(applies(&core), 1, "kept");
}
