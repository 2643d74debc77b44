//! An applier thread's CPU priority while it applies a writeset that holds commit order
//! long (docs/design/applier-priority.md): raised by the nice levels the provider asks for,
//! and put back when the apply returns.
use std::sync::atomic::{AtomicBool, Ordering};

/// Logged once per process: a server without CAP_SYS_NICE (or an RLIMIT_NICE that allows
/// it) cannot raise a thread's priority, and every apply would say so again.
static REFUSAL_LOGGED: AtomicBool = AtomicBool::new(false);

/// The calling thread runs `levels` nice levels higher than it did until this is dropped.
pub struct Raised {
    thread: libc::id_t,
    previous: libc::c_int,
}

impl Raised {
    /// `None` when `levels` is 0, or the thread's priority cannot be read or raised (then
    /// the apply runs as it is: a slower apply, never a failed one).
    pub fn by(levels: i32) -> Option<Raised> {
        if levels <= 0 {
            return None;
        }
        // SAFETY: gettid has no preconditions.
        let thread = unsafe { libc::gettid() } as libc::id_t;
        let previous = nice_of(thread)?;
        let raised = (previous - levels).max(-20);
        // SAFETY: setpriority on this thread's own id; no memory is passed.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, thread, raised) } != 0 {
            let error = std::io::Error::last_os_error();
            if !REFUSAL_LOGGED.swap(true, Ordering::Relaxed) {
                log::info!(
                    "appliers cannot run at a higher priority ({error}; needs CAP_SYS_NICE or LimitNICE): \
                     repl.applier_boost has no effect"
                );
            }
            return None;
        }
        Some(Raised { thread, previous })
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        // SAFETY: as in `by`. Lowering a priority this thread raised is always allowed.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, self.thread, self.previous) };
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
            assert_eq!(own_nice(), (before - 5).max(-20));
        } else {
            assert_eq!(own_nice(), before, "a refused raise changes nothing");
        }
        drop(raised);
        assert_eq!(own_nice(), before);
    }

    #[test]
    fn no_levels_asked_changes_nothing() {
        let before = own_nice();
        assert!(Raised::by(0).is_none());
        assert_eq!(own_nice(), before);
    }
}
