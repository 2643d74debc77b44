//! When to hand back to the system the memory a burst of big writesets left with the
//! allocator (docs/design/apply-queue-memory.md, "Memory kept after a burst"). A thread per
//! connection looks once a second; the release itself is the application's
//! (`Application::release_free_memory`, glibc's `malloc_trim` in the server).
use std::time::Duration;

/// How often the connection's memory thread looks.
pub(super) const LOOK_EVERY: Duration = Duration::from_secs(1);
/// While large writesets keep coming, memory is released after every this many bytes of them.
const RELEASE_EVERY_BYTES: i64 = 64 << 20;
/// Once the apply queue is empty, memory is released if at least this many bytes of large
/// writesets went through since the last time.
const RELEASE_AFTER_BYTES: i64 = 1 << 20;

/// Bytes of large writesets ordered through this node (`Counters::received_large_bytes`)
/// when memory was last released.
#[derive(Debug)]
pub(super) struct MemoryRelease {
    released_at: i64,
}

impl MemoryRelease {
    /// From the bytes ordered so far: the counter is the process's, kept across connections.
    pub fn starting_at(ordered_bytes: i64) -> Self {
        MemoryRelease { released_at: ordered_bytes }
    }

    /// Whether to release now, given the bytes of large writesets ordered so far and the
    /// events queued to apply.
    pub fn due(&mut self, ordered_bytes: i64, queued_events: usize) -> bool {
        let since = ordered_bytes - self.released_at;
        let due = since >= RELEASE_EVERY_BYTES || (queued_events == 0 && since >= RELEASE_AFTER_BYTES) || since < 0;
        if due {
            self.released_at = ordered_bytes;
        }
        due && since > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_released_along_a_long_burst_and_once_its_queue_has_drained() {
        let mut release = MemoryRelease::starting_at(0);
        assert!(!release.due(0, 0), "nothing went through");
        assert!(!release.due(40 << 20, 500), "the burst goes on");
        assert!(release.due(70 << 20, 500), "64 MiB since the start");
        assert!(!release.due(100 << 20, 20));
        assert!(release.due(100 << 20, 0), "drained: the last 30 MiB");
        assert!(!release.due(100 << 20, 0), "nothing since");
        assert!(!release.due((100 << 20) + 1000, 0), "a few small writesets are not worth it");
        let mut next_connection = MemoryRelease::starting_at(100 << 20);
        assert!(!next_connection.due(100 << 20, 0), "what the last connection ordered is not counted again");
    }
}
