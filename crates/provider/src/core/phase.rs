//! Where this node's connection stands, as one state machine (Galera's node states plus the
//! steps of joining). Every change goes through [`Phase::to`], which refuses a transition the
//! design does not allow: a refused transition is a bug, and it stops the node (the panic is
//! caught at the edge and the node leaves) rather than letting it run in a state nobody
//! reasoned about.
use crate::types::{Gtid, Seqno};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not connected.
    Closed,
    /// Connected; the group's history is unknown until the first delivery.
    Opening,
    /// In the group without the server's state: the state-transfer handshake is under way.
    Joining(Handshake),
    /// Holds the group's state (from its own position or a transfer) and applies the order.
    Joined,
    /// Joined and caught up: everything ordered before its own announcement is applied.
    Synced,
    /// `disconnect` was called; the final view follows. `app_ready`: the server had
    /// finished its handshake (so ordered events may still be applied).
    Closing { app_ready: bool },
}

/// The server's side of joining (wsrep-behaviour.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The view that starts it has not reached the server yet.
    Pending,
    /// Our state request is on its way through the order.
    Requested,
    /// The request found no member able to donate: it is sent again.
    NoDonor,
    /// The server reported the transfer's result (`sst_received`).
    Received { position: Gtid, rcode: i32 },
    /// The server's script failed while its donor was still in the group: if the donor
    /// leaves (it crashed mid-transfer, taking the stream down), another member is asked
    /// through a new script; if it reports its own failure or stays, the transfer failed.
    ScriptFailed { rcode: i32 },
    /// The donor left after the server's script failed: the server starts a new script
    /// (its state-transfer request again) and another member is asked.
    NewScript,
    /// The transfer failed (its donor ordered the failure, or the server reported `rcode`
    /// < 0): this node will never receive that state, and its process ends (Galera's abort).
    Failed { rcode: i32 },
}

/// The joiner's side of the donor's stream (gap and certification state), which replaces
/// what the joiner would otherwise certify itself. See `ist.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUp {
    /// Listening; our request is not ordered yet (or found no donor, or its donor left the
    /// group before its stream was in: another is asked).
    Waiting,
    /// Our request was ordered after this seqno: delivery stops there until the stream is in.
    AtRequest(Seqno),
    /// The stream for the request after this seqno is in and its certification state
    /// installed; the gap's events are handed to the appliers a batch at a time, as they
    /// commit what came before (the receiver holds the rest on disk). What is delivered
    /// after the request is certified and waits behind the gap.
    Feeding(Seqno),
    /// Nothing (more) to receive.
    Done,
    /// The stream failed: this node cannot continue.
    Failed,
}

impl CatchUp {
    /// Applying may go on (nothing from the donor is still to replace it).
    pub fn settled(self) -> bool {
        matches!(self, CatchUp::Done | CatchUp::Failed)
    }

    /// Appliers may take what is queued: the donor's events, if any, are in place or come
    /// behind it in order.
    pub fn applies(self) -> bool {
        self.settled() || matches!(self, CatchUp::Feeding(_))
    }

    pub fn to(&mut self, next: CatchUp) {
        use CatchUp::*;
        let allowed = match (*self, next) {
            (Waiting, AtRequest(_) | Done | Failed) | (AtRequest(_), Waiting | Done | Failed) => true,
            (AtRequest(at), Feeding(fed)) => at == fed,
            (Feeding(_), Done | Failed) => true,
            _ => false,
        };
        assert!(allowed, "catch-up transition {self:?} -> {next:?} is not allowed");
        *self = next;
    }
}

/// What a restarted node that could catch up from its own log does (`can_catch_up_alone`):
/// catch up alone, or take a state transfer from a member that stayed up and synced, as a
/// restarted Galera node always does (docs/design/restart-from-own-log.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Not such a node, or its first view ordered while it takes part has not come yet.
    Undecided,
    /// Its first live view is at `joined_at`: it waits for an announcement, ordered after
    /// that view, from a member synced since at most `stopped_at` (this node's position when
    /// it went down), until the driver's clock reaches `until_ms` (set at the first round
    /// after the view).
    Choosing { joined_at: Seqno, stopped_at: Seqno, until_ms: Option<u64> },
    /// Nobody synced is live (a whole-cluster restart): it catches up from its own log.
    Alone,
    /// A member synced since before this node went down announced itself after our first
    /// live view: state transfer (the donor confirms our position; the server's script runs in bypass mode).
    Transfer,
}

/// Whether the group is a primary component for us (wsrep_cluster_status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Primary,
    NonPrimary,
}

impl Phase {
    pub fn to(&mut self, next: Phase) {
        use Handshake::*;
        use Phase::*;
        let allowed = match (*self, next) {
            (Closed, Opening) => true,
            // The first delivery: a bootstrapped node holds the state, a joiner asks for it.
            (Opening, Joined | Joining(Pending)) => true,
            // The server's receiver serves the whole handshake: a transfer started for an
            // earlier request may end after a later one found no donor.
            (Joining(from), Joining(to)) => matches!(
                (from, to),
                (Pending | NoDonor | Requested | NewScript, Requested)
                    | (Requested, NoDonor)
                    | (Requested | NoDonor, Received { .. })
                    | (Requested, ScriptFailed { .. })
                    | (Requested | NoDonor | ScriptFailed { .. }, NewScript)
                    | (Pending | Requested | NoDonor | ScriptFailed { .. } | NewScript, Failed { .. })
            ),
            // The server took the state (or needs none: a reconnect that continues its own).
            (Joining(Received { .. } | Pending), Joined) => true,
            (Joined, Synced) => true,
            // Lost the primary component: synced again only after the next view.
            (Synced, Joined) => true,
            (Opening | Joining(_) | Joined | Synced, Closing { .. }) => true,
            (_, Closed) => true,
            _ => false,
        };
        assert!(allowed, "phase transition {self:?} -> {next:?} is not allowed");
        *self = next;
    }

    /// The server has its state and may apply (its storage engines are up).
    pub fn app_ready(self) -> bool {
        matches!(self, Phase::Joined | Phase::Synced | Phase::Closing { app_ready: true })
    }
}

/// Galera's `wsrep_local_state` and its comment.
pub fn local_state(phase: Phase, component: Component, desynced: bool) -> (i64, &'static str) {
    match phase {
        Phase::Joined | Phase::Synced if component == Component::NonPrimary => (0, "Initialized"),
        Phase::Joined | Phase::Synced if desynced => (2, "Donor/Desynced"),
        Phase::Joining(Handshake::Failed { .. }) => (0, "Joining: State Transfer failed"),
        Phase::Joining(_) => (1, "Joining"),
        Phase::Joined => (3, "Joined"),
        Phase::Synced => (4, "Synced"),
        Phase::Closed | Phase::Opening | Phase::Closing { .. } => (0, "Initialized"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joiner_goes_through_the_handshake_and_a_lost_primary_unsyncs() {
        let mut p = Phase::Closed;
        for next in [
            Phase::Opening,
            Phase::Joining(Handshake::Pending),
            Phase::Joining(Handshake::Requested),
            Phase::Joining(Handshake::NoDonor),
            Phase::Joining(Handshake::Requested),
            Phase::Joining(Handshake::Received { position: Gtid::UNDEFINED, rcode: 0 }),
            Phase::Joined,
            Phase::Synced,
            Phase::Joined,
            Phase::Closing { app_ready: true },
            Phase::Closed,
        ] {
            p.to(next);
        }
        assert_eq!(local_state(Phase::Synced, Component::NonPrimary, false), (0, "Initialized"));
        assert_eq!(local_state(Phase::Synced, Component::Primary, true), (2, "Donor/Desynced"));
    }

    #[test]
    fn a_failed_transfer_ends_the_handshake_for_good() {
        let mut p = Phase::Joining(Handshake::Requested);
        p.to(Phase::Joining(Handshake::Failed { rcode: -125 }));
        assert_eq!(local_state(p, Component::Primary, false), (0, "Joining: State Transfer failed"));
        let mut received = Phase::Joining(Handshake::Received { position: Gtid::UNDEFINED, rcode: 0 });
        let late = std::panic::catch_unwind(move || received.to(Phase::Joining(Handshake::Failed { rcode: -125 })));
        assert!(late.is_err(), "a state already received does not fail afterwards");
        for next in [Phase::Joining(Handshake::Requested), Phase::Joined] {
            let mut failed = Phase::Joining(Handshake::Failed { rcode: -125 });
            assert!(std::panic::catch_unwind(move || failed.to(next)).is_err(), "{next:?} after a failure");
        }
        p.to(Phase::Closed);
    }

    #[test]
    fn a_script_that_failed_as_its_donor_left_is_started_again_then_requested_again() {
        let mut p = Phase::Joining(Handshake::Requested);
        for next in [
            Phase::Joining(Handshake::ScriptFailed { rcode: -32 }),
            Phase::Joining(Handshake::NewScript),
            Phase::Joining(Handshake::Requested),
            Phase::Joining(Handshake::NoDonor),
            Phase::Joining(Handshake::NewScript),
            Phase::Joining(Handshake::Requested),
            Phase::Joining(Handshake::ScriptFailed { rcode: -32 }),
            Phase::Joining(Handshake::Failed { rcode: -32 }),
        ] {
            p.to(next);
        }
        // A failed script reports nothing more: only the donor's fate or a new script follow.
        let mut failed = Phase::Joining(Handshake::ScriptFailed { rcode: -32 });
        let received = Phase::Joining(Handshake::Received { position: Gtid::UNDEFINED, rcode: 0 });
        assert!(std::panic::catch_unwind(move || failed.to(received)).is_err());
        assert_eq!(
            local_state(Phase::Joining(Handshake::ScriptFailed { rcode: -32 }), Component::Primary, false).1,
            "Joining"
        );
    }

    #[test]
    #[should_panic(expected = "not allowed")]
    fn skipping_the_handshake_is_refused() {
        let mut p = Phase::Joining(Handshake::Requested);
        p.to(Phase::Synced);
    }
}
