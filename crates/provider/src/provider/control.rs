//! Causal reads, pause/resume (FTWRL, donors) and desync/resync.
use super::{lock, Provider};
use crate::types::{Gtid, Seqno, Status};
use std::time::{Duration, Instant};

/// How long `pause` waits for in-flight writesets before giving up.
const PAUSE_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

impl Provider {
    /// `upto = None`: wait until everything ordered before this call has committed here.
    /// `upto = Some(g)`: wait until `g` has committed here. `timeout_s < 0` = the
    /// `repl.causal_read_timeout` default.
    pub fn sync_wait(&self, upto: Option<Gtid>, timeout_s: i32) -> (Status, Gtid) {
        let timeout = if timeout_s < 0 {
            lock(&self.options).period("repl.causal_read_timeout")
        } else {
            Duration::from_secs(timeout_s as u64)
        };
        let deadline = Instant::now().checked_add(timeout);
        let target = match upto {
            Some(gtid) => {
                let core = self.lock_core();
                if gtid.uuid != core.group() {
                    return (Status::TrxMissing, core.last_committed());
                }
                gtid.seqno
            }
            None => match self.causal_point(deadline) {
                Some(point) => point,
                None => return (Status::TrxFail, self.last_committed_id()),
            },
        };
        let reached = self.wait_for(deadline, |core, me| core.committed_up_to(target, me).then_some(())).is_some();
        let status = if reached && !self.lock_core().is_failed() { Status::Ok } else { Status::TrxFail };
        (status, self.last_committed_id())
    }

    /// The causal point: the group's read index (the leader's commit index), or where a
    /// barrier sent now is ordered when the leader cannot vouch for it. Every writeset
    /// acknowledged anywhere before this call is at or before it.
    fn causal_point(&self, deadline: Option<Instant>) -> Option<Seqno> {
        let id = self.with_core(|core| core.barrier_start())?;
        let Some(link) = self.link() else {
            self.with_core(|core| core.forget_barrier(id));
            return None;
        };
        link.node.read_barrier_tagged(id);
        drop(link);
        let point = self.wait_for(deadline, |core, me| core.barrier_point(id, me));
        if point.is_none() {
            self.with_core(|core| core.forget_barrier(id));
        }
        point.and_then(Result::ok)
    }

    /// Stops ordering new writesets, waits for those in flight to commit and returns the
    /// seqno the node is paused at, or -1 on failure.
    pub fn pause(&self) -> Seqno {
        let Some(target) = self.with_core(|core| core.pause_start()) else { return -1 };
        let deadline = Instant::now().checked_add(PAUSE_DRAIN_TIMEOUT);
        let drained = self.wait_for(deadline, |core, me| core.committed_up_to(target, me).then_some(())).is_some();
        if !drained {
            self.with_core(|core| core.pause_abandoned());
            log::error!("pause: in-flight writesets did not commit within {PAUSE_DRAIN_TIMEOUT:?}");
            return -1;
        }
        self.with_core(|core| core.pause_drained())
    }

    pub fn resume(&self) -> Status {
        self.with_core(|core| core.resume())
    }

    pub fn desync(&self) -> Status {
        self.with_core(|core| core.desync())
    }

    pub fn resync(&self) -> Status {
        self.with_core(|core| core.resync())
    }
}
