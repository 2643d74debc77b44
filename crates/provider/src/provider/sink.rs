//! The group member's driver thread hands the total order to the core here: each delivery is
//! decoded before the lock is taken, then certified under it; the submitter of a writeset of
//! ours is woken straight from this thread (one hand-off from the order to the client).
use super::Provider;
use crate::core::{DeliveryContext, Payload};
use crate::types::Uuid;
use lockstep_group::{Delivered, DeliverySink, Outbox, Status, SubmitError};
use std::sync::Weak;
use std::time::Instant;

pub(super) struct CoreSink {
    /// Weak: the provider owns the group member, whose driver owns this sink.
    pub provider: Weak<Provider>,
    pub generation: u64,
    pub started: Instant,
    /// The member's failure, once reported to the core.
    pub failure_reported: bool,
    /// That the member's history forked from the group's, once reported to the core: the
    /// member keeps saying so after the full transfer that follows.
    pub history_forked_reported: bool,
}

impl CoreSink {
    /// Whether to tell the core now that the member's history forked (`Status::history_forked`).
    fn history_forked_news(&mut self, status: &Status) -> bool {
        let news = status.history_forked && !self.history_forked_reported;
        self.history_forked_reported |= news;
        news
    }
}

impl DeliverySink for CoreSink {
    fn deliver(&mut self, delivered: Delivered, replayed: bool, status: &Status, outbox: &mut Outbox) -> bool {
        let Some(provider) = self.provider.upgrade() else { return true };
        let (seqno, payload) = Payload::decode(delivered);
        let context = DeliveryContext { history: Uuid(status.history), replayed };
        let forked = self.history_forked_news(status);
        provider.in_driver(outbox, |core| {
            if forked {
                core.history_forked();
            }
            core.on_delivered(self.generation, seqno, payload, context)
        })
    }

    fn submit_failed(&mut self, tag: u64, error: SubmitError, outbox: &mut Outbox) {
        let Some(provider) = self.provider.upgrade() else { return };
        provider.in_driver(outbox, |core| core.on_submit_failed(self.generation, tag, error));
    }

    fn barrier_reached(&mut self, tag: u64, seqno: lockstep_group::Seqno, outbox: &mut Outbox) {
        let Some(provider) = self.provider.upgrade() else { return };
        provider.in_driver(outbox, |core| core.on_read_barrier(self.generation, tag, seqno as crate::types::Seqno));
    }

    fn round(&mut self, status: &Status, outbox: &mut Outbox) -> bool {
        let Some(provider) = self.provider.upgrade() else { return true };
        let now_ms = self.started.elapsed().as_millis() as u64;
        let failure = status.failed.clone().filter(|_| !self.failure_reported);
        self.failure_reported |= failure.is_some();
        let forked = self.history_forked_news(status);
        provider.in_driver(outbox, |core| {
            if let Some(why) = &failure {
                core.fail(&format!("group communication failed ({why})"));
            }
            if forked {
                core.history_forked();
            }
            core.on_group_status(self.generation, status, now_ms);
            core.accepting_deliveries()
        })
    }
}

impl Provider {
    /// `with_core` for the driver thread: control messages go into its outbox.
    fn in_driver<T>(&self, outbox: &mut Outbox, f: impl FnOnce(&mut crate::core::Core<super::Parked>) -> T) -> T {
        let mut core = self.lock_core();
        let out = f(&mut core);
        let effects = core.take_effects();
        drop(core);
        self.execute(effects, Some(outbox));
        out
    }
}
