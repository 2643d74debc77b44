//! An operator's interruption (Ctrl-C, `kill`): a program that catches the signal stores it
//! here, every wait of this crate then gives up within a fraction of a second with
//! [`Error::Interrupted`], and the program stops what it started.
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The signal that interrupted this process, 0 while none has. The program's signal handler
/// stores it (`signal_hook::flag::register_usize(signal, &INTERRUPTING_SIGNAL, signal as usize)`):
/// a signal is the whole process's, hence one flag rather than one per cluster.
pub static INTERRUPTING_SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// The signal that interrupted this process, if one has.
pub fn interrupting_signal() -> Option<i32> {
    match INTERRUPTING_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// `SIGINT` rather than 2: what an operator knows signals by.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        other => format!("signal {other}"),
    }
}

/// [`Error::Interrupted`] once a signal has come; `during` says at what point ("while
/// waiting for ...", "before starting ...").
pub(crate) fn check(during: impl FnOnce() -> String) -> Result<()> {
    match interrupting_signal() {
        Some(signal) => Err(Error::Interrupted { signal, during: during() }),
        None => Ok(()),
    }
}
