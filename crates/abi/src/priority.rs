//! An applier thread's CPU priority while it applies a writeset that holds commit order
//! long (docs/design/applier-priority.md): raised by the nice levels the provider asks for,
//! as far as the process may, and put back when the apply returns.
use lockstep_provider::application::{SchedulePolicy, ThreadSchedule};
use std::sync::atomic::{AtomicBool, Ordering};

/// Logged once per process: a server without CAP_SYS_NICE (or an RLIMIT_NICE that allows
/// it) cannot raise a thread's priority, and every apply would say so again.
static REFUSAL_LOGGED: AtomicBool = AtomicBool::new(false);

/// The calling thread runs at a lower nice value until this is dropped.
pub struct Raised {
    thread: libc::id_t,
    previous: libc::c_int,
    /// We set SCHED_RESET_ON_FORK, and take it off again on drop where allowed.
    reset_flag_set: bool,
}

impl Raised {
    /// Up to `levels` nice levels higher: all of them where the process may, else down to
    /// what RLIMIT_NICE allows. `None` when `levels` is 0, the thread is not of the ordinary
    /// scheduling policy (a real-time one is ahead of any nice value), or nothing can be
    /// raised: the apply then runs as it is, slower, never failed.
    pub fn by(levels: i32) -> Option<Raised> {
        if levels <= 0 {
            return None;
        }
        // SAFETY: gettid has no preconditions.
        let thread = unsafe { libc::gettid() } as libc::id_t;
        // SAFETY: sched_getscheduler reads this thread's policy; no memory is passed.
        let policy = unsafe { libc::sched_getscheduler(thread as libc::pid_t) };
        if policy < 0 || policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_OTHER {
            return None;
        }
        let previous = nice_of(thread)?;
        let wanted = (previous - levels).max(-20);
        // Threads the applier creates while raised (the server's pool, a thread of ours on a
        // call back into the provider) start at nice 0 rather than keep the raise for life.
        let reset_flag_set = policy & libc::SCHED_RESET_ON_FORK == 0;
        if reset_flag_set && !set_policy(thread, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK) {
            refused(&std::io::Error::last_os_error().to_string());
            return None;
        }
        // From here, dropping it puts back what was changed.
        let raised = Raised { thread, previous, reset_flag_set };
        if set_nice(thread, wanted) {
            return Some(raised);
        }
        let error = std::io::Error::last_os_error();
        // Without CAP_SYS_NICE, as far as RLIMIT_NICE allows.
        let partial = wanted.max(lowest_allowed_by_limit());
        if partial < previous && set_nice(thread, partial) {
            return Some(raised);
        }
        refused(&error.to_string());
        None
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        // Lowering a priority this thread raised is always allowed.
        set_nice(self.thread, self.previous);
        if self.reset_flag_set {
            // Taking the flag off needs CAP_SYS_NICE; without it the flag stays, which only
            // matters to threads created at a negative nice value.
            set_policy(self.thread, libc::SCHED_OTHER);
        }
    }
}

/// Gives the calling thread `schedule`'s policy and priority (`gcomm.thread_prio`).
pub fn set_schedule(schedule: ThreadSchedule) -> Result<(), String> {
    let policy = match schedule.policy {
        SchedulePolicy::Other => libc::SCHED_OTHER,
        SchedulePolicy::Fifo => libc::SCHED_FIFO,
        SchedulePolicy::RoundRobin => libc::SCHED_RR,
    };
    let param = libc::sched_param { sched_priority: schedule.priority };
    // SAFETY: id 0 is the calling thread; `param` is a local that outlives the call.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

fn refused(why: &str) {
    if !REFUSAL_LOGGED.swap(true, Ordering::Relaxed) {
        log::info!(
            "appliers cannot run at a higher priority ({why}; needs CAP_SYS_NICE or LimitNICE): \
             repl.applier_boost has no effect"
        );
    }
}

/// The thread's nice value; `getpriority` returns -1 both for nice -1 and for an error,
/// which only errno tells apart.
fn nice_of(thread: libc::id_t) -> Option<libc::c_int> {
    // SAFETY: errno is this thread's; getpriority takes no memory.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, thread);
        (nice != -1 || *libc::__errno_location() == 0).then_some(nice)
    }
}

/// The lowest nice value RLIMIT_NICE lets a process without CAP_SYS_NICE set: `20 - limit`.
fn lowest_allowed_by_limit() -> libc::c_int {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a local the call fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut limit) } != 0 {
        return 20;
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return -20;
    }
    20 - limit.rlim_cur.min(40) as libc::c_int
}

fn set_nice(thread: libc::id_t, nice: libc::c_int) -> bool {
    // SAFETY: setpriority on this thread's own id; no memory is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, thread, nice) == 0 }
}

fn set_policy(thread: libc::id_t, policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a local that outlives the call, on this thread's own id.
    unsafe { libc::sched_setscheduler(thread as libc::pid_t, policy, &param) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_nice() -> libc::c_int {
        // SAFETY: gettid has no preconditions.
        nice_of(unsafe { libc::gettid() } as libc::id_t).expect("readable")
    }

    #[test]
    fn a_raised_thread_gets_its_priority_back_whether_or_not_raising_was_allowed() {
        let before = own_nice();
        let raised = Raised::by(5);
        if raised.is_some() {
            assert!(own_nice() < before);
        } else {
            assert_eq!(own_nice(), before, "a refused raise changes nothing");
        }
        drop(raised);
        assert_eq!(own_nice(), before);
    }

    #[test]
    fn a_thread_created_while_raised_does_not_keep_the_raise() {
        let before = own_nice();
        let Some(raised) = Raised::by(5).filter(|_| before == 0) else {
            return; // not allowed here, or a niced test run: nothing to check
        };
        let child = std::thread::spawn(own_nice).join().unwrap();
        drop(raised);
        assert_eq!(child, 0);
    }

    #[test]
    fn a_thread_takes_the_schedule_asked_or_keeps_its_own_with_the_reason() {
        // SAFETY: sched_getscheduler reads the calling thread's policy; no memory is passed.
        let policy = || unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
        let rr = ThreadSchedule { policy: SchedulePolicy::RoundRobin, priority: 1 };
        let other = ThreadSchedule { policy: SchedulePolicy::Other, priority: 0 };
        // On threads of their own: the test harness's threads keep theirs.
        let (taken, after) = std::thread::spawn(move || (set_schedule(rr), policy())).join().unwrap();
        match taken {
            Ok(()) => assert_eq!(after, libc::SCHED_RR),
            Err(why) => assert!(after == libc::SCHED_OTHER && !why.is_empty()),
        }
        // The ordinary policy is always allowed.
        assert_eq!(std::thread::spawn(move || set_schedule(other)).join().unwrap(), Ok(()));
    }

    #[test]
    fn no_levels_asked_changes_nothing() {
        let before = own_nice();
        assert!(Raised::by(0).is_none());
        assert_eq!(own_nice(), before);
    }
}
