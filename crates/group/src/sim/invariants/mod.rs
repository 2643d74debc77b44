//! Invariant checkers, one per guarantee of the group layer. Each sees every delivery,
//! acknowledgement and restart as it happens, and the end state after the heal phase.

mod acked_survive;
mod arbitrator_hands_over;
mod cache_serves;
mod message_order;
mod no_gaps;
mod progress;
mod same_bytes;
mod view_order;
mod views_only_missed;

pub use acked_survive::AckedSurvive;
pub use arbitrator_hands_over::ArbitratorHandsOver;
pub use cache_serves::CacheServes;
pub use message_order::MessageOrder;
pub use no_gaps::NoGaps;
pub use progress::Progress;
pub use same_bytes::SameBytes;
pub use view_order::ViewOrder;
pub use views_only_missed::ViewsOnlyMissed;

use crate::member::Status;
use crate::types::{Delivered, DeliveredKind, Genesis, MemberId, Seqno};

/// State of the members still running when the run ends.
pub struct EndState {
    /// What member 1 bootstrapped the cluster with.
    pub genesis: Genesis,
    pub live: Vec<Status>,
    /// Acknowledged probes submitted after the heal.
    pub probes_acked: usize,
    /// What each running member's cache serves from its oldest retained seqno on.
    pub cached: Vec<(MemberId, Vec<Delivered>)>,
}

pub trait Invariant {
    fn name(&self) -> &'static str;
    fn on_deliver(&mut self, _member: MemberId, _delivered: &Delivered) -> Result<(), String> {
        Ok(())
    }
    /// The submitter got `seqno` for a writeset whose bytes hash to `hash`.
    fn on_ack(&mut self, _member: MemberId, _seqno: Seqno, _hash: u64) -> Result<(), String> {
        Ok(())
    }
    /// The sender of an unnumbered message (its request number) was told it was ordered
    /// after `seqno`; its bytes hash to `hash`.
    fn on_message_ack(&mut self, _member: MemberId, _request: u64, _seqno: Seqno, _hash: u64) -> Result<(), String> {
        Ok(())
    }
    /// The member (re)starts and resumes delivering after `resume_after`.
    fn on_restart(&mut self, _member: MemberId, _resume_after: Seqno) -> Result<(), String> {
        Ok(())
    }
    fn at_end(&mut self, _end: &EndState) -> Result<(), String> {
        Ok(())
    }
    /// A component forced without a quorum starts a new order after `boundary`: what was
    /// ordered past it on the side it left is forgotten (`sim::fork`).
    fn on_fork(&mut self, _boundary: Seqno) {}
}

/// All checkers.
pub fn all() -> Vec<Box<dyn Invariant>> {
    vec![
        Box::new(SameBytes::default()),
        Box::new(ArbitratorHandsOver),
        Box::new(NoGaps::default()),
        Box::new(ViewOrder::default()),
        Box::new(AckedSurvive::default()),
        Box::new(CacheServes::default()),
        Box::new(MessageOrder::default()),
        Box::new(Progress),
        Box::new(ViewsOnlyMissed::default()),
    ]
}

/// FNV-1a: a stable hash (std's hasher is seeded per process).
pub fn hash_bytes(kind: u8, bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&kind).chain(bytes) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Hash of a delivery: its kind and bytes.
pub fn delivered_hash(d: &Delivered) -> u64 {
    let kind = match d.kind {
        DeliveredKind::Writeset { .. } => 1,
        DeliveredKind::View(_) => 2,
        DeliveredKind::StateGap => 3,
        DeliveredKind::Message { .. } => 4,
        DeliveredKind::ViewsMissed => 5,
        DeliveredKind::HistoryForked => 6,
    };
    hash_bytes(kind, &d.bytes)
}

/// Whether a delivery takes a seqno of its own (a message shares the one before it).
pub fn is_numbered(d: &Delivered) -> bool {
    !matches!(d.kind, DeliveredKind::Message { .. })
}
