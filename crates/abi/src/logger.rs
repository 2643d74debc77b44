//! Routes the provider's `log` records into MariaDB's error log through `logger_cb`.
use crate::types::wsrep_log_cb_t;
use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

static LOGGER_CB: AtomicUsize = AtomicUsize::new(0);

pub const ERROR: c_int = 1;
const WARN: c_int = 2;
const INFO: c_int = 3;
const DEBUG: c_int = 4;

struct ServerLogger;

impl log::Log for ServerLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => ERROR,
            log::Level::Warn => WARN,
            log::Level::Info => INFO,
            log::Level::Debug | log::Level::Trace => DEBUG,
        };
        write(level, &record.args().to_string());
    }

    fn flush(&self) {}
}

/// Sends one line to the server's logger, or to stderr (also MariaDB's error log) before
/// `init` handed us the callback.
pub fn write(level: c_int, message: &str) {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let raw = LOGGER_CB.load(Ordering::Acquire);
    if raw == 0 {
        eprintln!("WSREP: {}", message.to_string_lossy());
        return;
    }
    // SAFETY: `raw` was stored from a non-null `wsrep_log_cb_t` in `install`; the server
    // copies the message before returning.
    unsafe {
        let callback: wsrep_log_cb_t = std::mem::transmute::<usize, wsrep_log_cb_t>(raw);
        callback(level, message.as_ptr());
    }
}

pub fn install(callback: Option<wsrep_log_cb_t>) {
    LOGGER_CB.store(callback.map_or(0, |f| f as usize), Ordering::Release);
    // Only the first provider instance of the process installs the logger; later ones
    // reuse it with their own callback above.
    let _ = log::set_logger(&ServerLogger);
    log::set_max_level(log::LevelFilter::Info);
}
