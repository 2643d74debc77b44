//! Causal reads, pause/resume (FTWRL, donors) and desync/resync.
use super::{MemberState, Provider};
use crate::types::{Gtid, Seqno, Status};
use crate::writeset::Control;
use std::time::{Duration, Instant};

/// How long `pause` waits for in-flight writesets before giving up.
const PAUSE_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

impl Provider {
    /// `upto = None`: wait until everything ordered before this call has committed here.
    /// `upto = Some(g)`: wait until `g` has committed here. `timeout_s < 0` = the
    /// `repl.causal_read_timeout` default.
    pub fn sync_wait(&self, upto: Option<Gtid>, timeout_s: i32) -> (Status, Gtid) {
        let shared = self.lock();
        let timeout = if timeout_s < 0 {
            shared.options.period("repl.causal_read_timeout")
        } else {
            Duration::from_secs(timeout_s as u64)
        };
        let deadline = Instant::now().checked_add(timeout);
        let target = match upto {
            Some(gtid) => {
                if gtid.uuid != shared.group() {
                    return (Status::TrxMissing, shared.last_committed());
                }
                drop(shared);
                gtid.seqno
            }
            None => {
                let node = shared.group_node().filter(|_| shared.can_replicate());
                let Some(node) = node else { return (Status::TrxFail, shared.last_committed()) };
                drop(shared);
                // The causal point: a barrier through the total order. Every writeset
                // acknowledged anywhere before this call is ordered before it.
                let ordered = node.send_message(Control::Barrier.encode()).recv_timeout(timeout);
                let shared = self.lock();
                match ordered {
                    Ok(Ok(seqno)) => seqno as Seqno,
                    _ => return (Status::TrxFail, shared.last_committed()),
                }
            }
        };
        let shared = self.lock();
        let (mut shared, reached) = self.wait_until(shared, deadline, |s| s.committed.last_contiguous() >= target);
        if upto.is_none() {
            shared.counters.causal_reads += 1;
        }
        let status = if reached { Status::Ok } else { Status::TrxFail };
        (status, shared.last_committed())
    }

    pub fn last_committed_id(&self) -> Gtid {
        self.lock().last_committed()
    }

    /// Stops ordering new writesets, waits for those in flight to commit and returns the
    /// seqno the node is paused at, or -1 on failure.
    pub fn pause(&self) -> Seqno {
        let mut shared = self.lock();
        if shared.paused_at.is_some() {
            log::error!("pause requested while already paused");
            return -1;
        }
        // Local writesets still being ordered are not waited for: they wait for `resume`
        // in commit order, which pausing blocks.
        let target = shared.ordering.delivered;
        shared.paused_at = Some(target);
        let deadline = Instant::now().checked_add(PAUSE_DRAIN_TIMEOUT);
        let (mut shared, drained) = self.wait_until(shared, deadline, |s| s.committed.last_contiguous() >= target);
        if !drained {
            shared.paused_at = None;
            drop(shared);
            self.notify();
            log::error!("pause: in-flight writesets did not commit within {PAUSE_DRAIN_TIMEOUT:?}");
            return -1;
        }
        let at = shared.committed.last_contiguous();
        shared.paused_at = Some(at);
        let group = shared.group();
        shared.save_state(Gtid::new(group, at));
        log::info!("provider paused at {group}:{at}");
        at
    }

    pub fn resume(&self) -> Status {
        let mut shared = self.lock();
        if shared.paused_at.take().is_none() {
            return Status::Ok;
        }
        let running = Gtid::new(shared.group(), crate::types::SEQNO_UNDEFINED);
        shared.save_state(running);
        drop(shared);
        self.notify();
        log::info!("provider resumed");
        Status::Ok
    }

    pub fn desync(&self) -> Status {
        let mut shared = self.lock();
        if shared.connection.as_ref().is_none_or(|c| c.closing) {
            return Status::ConnFail;
        }
        shared.desync_count += 1;
        log::info!("desynced from the group (desync count {})", shared.desync_count);
        Status::Ok
    }

    pub fn resync(&self) -> Status {
        let mut shared = self.lock();
        if shared.desync_count == 0 {
            log::warn!("resync requested but the node is not desynced");
            return Status::Ok;
        }
        shared.desync_count -= 1;
        if shared.desync_count == 0 && shared.member_state == MemberState::Joined {
            // With one member there is nothing to catch up on.
            shared.member_state = MemberState::Synced;
        }
        log::info!("resynced (desync count {})", shared.desync_count);
        Status::Ok
    }
}
