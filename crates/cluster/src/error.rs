//! Errors of the cluster harness: each says which node, command or file it is about.
use crate::interrupt::signal_name;
use std::fmt;
use std::io;
use std::path::Path;

/// Result of a harness operation.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong while building, starting, querying or stopping local nodes.
#[derive(Debug)]
pub enum Error {
    /// A file or process operation failed.
    Io { context: String, source: io::Error },
    /// An external program (`mariadb`, `mariadb-install-db`, ...) exited unsuccessfully.
    Command { command: String, status: String, output: String },
    /// Something did not happen within its bounded wait.
    Timeout { what: String, seconds: u64 },
    /// `mariadbd` exited while we waited for it to become ready; `log` names its log and
    /// carries the end of it.
    NodeExited { node: String, status: String, log: String },
    /// A signal came (see [`crate::INTERRUPTING_SIGNAL`]); `during` says at what point, as
    /// "while waiting for node2 to report wsrep_ready=ON".
    Interrupted { signal: i32, during: String },
    /// Making a cluster failed (`cause`); `cleanup` says what of it was removed, or what to remove.
    Create { cause: Box<Error>, cleanup: String },
    /// A file or a value did not have the expected shape.
    Invalid(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    pub(crate) fn io_path(action: &str, path: &Path, source: io::Error) -> Error {
        Error::io(format!("{action} {}", path.display()), source)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Command { command, status, output } => write!(f, "`{command}` failed ({status}):\n{output}"),
            Error::Timeout { what, seconds } => write!(f, "timed out after {seconds} s: {what}"),
            Error::NodeExited { node, status, log } => write!(f, "{node}: mariadbd exited ({status}); {log}"),
            Error::Interrupted { signal, during } => write!(f, "interrupted by {} {during}", signal_name(*signal)),
            Error::Create { cause, cleanup } => write!(f, "{cause}\n{cleanup}"),
            Error::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Create { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}
