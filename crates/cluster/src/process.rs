//! Running external programs with a bounded wait, and signalling processes by pid.
use crate::error::{Error, Result};
use crate::interrupt;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// How often a wait looks for an interruption: an operator's Ctrl-C is answered at once.
const INTERRUPT_POLL: Duration = Duration::from_millis(200);

/// Runs `command` to completion, killing it if it takes longer than `timeout` or a signal
/// interrupts this process ([`crate::INTERRUPTING_SIGNAL`]).
/// Output is collected on a helper thread so a chatty program cannot fill its pipe and stall.
pub(crate) fn run_bounded(command: &mut Command, timeout: Duration) -> Result<Output> {
    let description = describe(command);
    interrupt::check(|| format!("before running `{description}`"))?;
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("start `{description}`"), e))?;
    let pid = child.id();
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    let deadline = Instant::now() + timeout;
    let failure = loop {
        let wait = INTERRUPT_POLL.min(deadline.saturating_duration_since(Instant::now()));
        match receiver.recv_timeout(wait) {
            Ok(output) => return output.map_err(|e| Error::io(format!("wait for `{description}`"), e)),
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                if let Err(interrupted) = interrupt::check(|| format!("while running `{description}`")) {
                    break interrupted;
                }
            }
            Err(_) => break Error::Timeout { what: description, seconds: timeout.as_secs() },
        }
    };
    send_signal(pid, libc::SIGKILL);
    // Reap it so the helper thread ends; the kill makes this immediate.
    let _ = receiver.recv();
    Err(failure)
}

/// Like [`run_bounded`] but a non-zero exit is an error carrying the program's output.
pub(crate) fn run_checked(command: &mut Command, timeout: Duration) -> Result<Output> {
    let output = run_bounded(command, timeout)?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(Error::Command {
            command: describe(command),
            status: output.status.to_string(),
            output: format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        })
    }
}

pub(crate) fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for argument in command.get_args() {
        text.push(' ');
        text.push_str(&argument.to_string_lossy());
    }
    text
}

pub(crate) fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// True while `pid` is a live (not zombie) process whose command name is `name`.
/// Checking the name keeps a stale pid file from making us signal an unrelated process.
pub(crate) fn is_alive(pid: u32, name: &str) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Format: "pid (comm) state ...", and comm itself may contain spaces or parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let comm = &stat[open + 1..close];
    let state = stat[close + 1..].trim_start().chars().next();
    comm == name && !matches!(state, Some('Z') | Some('X'))
}

/// A server (`mariadbd`, or `lockstep` as an arbitrator) we either started ourselves (and
/// must reap) or found through its pid file, with its program's command name.
pub(crate) enum ServerProcess {
    Child(Child),
    Pid(u32, &'static str),
}

impl ServerProcess {
    /// The running process in `slot`, whether we started it or another invocation did
    /// (found by `pid_file`, if its command name is `program`); `None` once it has ended.
    pub(crate) fn running<'a>(
        slot: &'a mut Option<Self>,
        pid_file: &Path,
        program: &'static str,
    ) -> Option<&'a mut Self> {
        if slot.is_none() {
            let pid = fs::read_to_string(pid_file).ok().and_then(|text| text.trim().parse().ok());
            *slot = pid.map(|pid| ServerProcess::Pid(pid, program));
        }
        if slot.as_mut()?.exit_status().is_some() {
            *slot = None;
        }
        slot.as_mut()
    }

    pub(crate) fn pid(&self) -> u32 {
        match self {
            ServerProcess::Child(child) => child.id(),
            ServerProcess::Pid(pid, _) => *pid,
        }
    }

    /// `None` while running, otherwise how it ended (as far as we can know).
    pub(crate) fn exit_status(&mut self) -> Option<String> {
        match self {
            ServerProcess::Child(child) => match child.try_wait() {
                Ok(None) => None,
                Ok(Some(status)) => Some(status.to_string()),
                Err(e) => Some(format!("unknown ({e})")),
            },
            ServerProcess::Pid(pid, program) => (!is_alive(*pid, program)).then(|| "exited".to_string()),
        }
    }

    /// Whether this process started it (and must reap it), rather than finding its pid file.
    pub(crate) fn is_child(&self) -> bool {
        matches!(self, ServerProcess::Child(_))
    }

    /// Waits up to `timeout` for the process to end; true if it did.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.exit_status().is_some() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}
