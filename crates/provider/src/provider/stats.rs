//! Status variables: the core's, with what the runtime keeps outside it.
use super::{lock, Provider, StatVar};
use crate::core::StatsSnapshot;

impl Provider {
    pub fn stats(&self) -> Vec<StatVar> {
        // The one in use: it cannot change at runtime.
        let segment = lock(&self.options).get("gmcast.segment").to_string();
        self.lock_core().stats(&StatsSnapshot { segment: &segment })
    }

    /// `FLUSH STATUS`: resets the averages and rates, keeps totals and positions.
    pub fn stats_reset(&self) {
        self.with_core(|core| core.stats_reset());
    }
}
