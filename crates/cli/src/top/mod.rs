//! `lockstep cluster top`: every node of a cluster on one screen, refreshed every interval:
//! commits/s, apply queue, flow-control paused share, lag in seqnos and ms, conflicts/s and
//! state. Reads `SHOW GLOBAL STATUS LIKE 'wsrep%'`, so it shows Galera nodes as well.
mod view;

use lockstep_cluster::{mariadbd_running, Endpoint, Error, Result};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use view::Sample;

/// Bound on one status query; a node slower than this shows as not answering.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Enough of the client's error for a socket path and the error number that ends it.
const WHY_UNREAD_CHARS: usize = 160;

pub struct Target {
    pub name: String,
    pub endpoint: Endpoint,
    /// A local node's pid file: a node it names no live server for shows as not running.
    pub pid_file: Option<PathBuf>,
}

/// `HOST:PORT` (a bare host means port 3306).
pub fn parse_host(text: &str, user: &str, password: Option<&str>) -> Result<Target> {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) => {
            let port = port.parse().map_err(|_| Error::Invalid(format!("bad port in --host {text}")))?;
            (host.trim_start_matches('[').trim_end_matches(']'), port)
        }
        None => (text, 3306),
    };
    if host.is_empty() {
        return Err(Error::Invalid(format!("no host in --host {text}")));
    }
    let endpoint =
        Endpoint::Tcp { host: host.to_string(), port, user: user.to_string(), password: password.map(str::to_string) };
    Ok(Target { name: text.to_string(), endpoint, pid_file: None })
}

/// Refreshes until interrupted, or `count` times. On a terminal each refresh redraws the
/// screen; otherwise tables follow one another (for logs and scripts).
pub fn run(source: &str, targets: Vec<Target>, interval: Duration, count: Option<u64>) -> Result<()> {
    if targets.is_empty() {
        return Err(Error::Invalid("no nodes to show".into()));
    }
    let redraw = std::io::stdout().is_terminal();
    let in_flight: Vec<Arc<AtomicBool>> = targets.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
    let (answers, answered) = mpsc::channel();
    let mut before: Option<(Instant, Vec<Sample>)> = None;
    let mut refresh = 0u64;
    while count.is_none_or(|c| refresh < c) {
        refresh += 1;
        let started = Instant::now();
        for (index, target) in targets.iter().enumerate() {
            // At most one query per node at a time: a hung server does not pile up clients.
            if in_flight[index].swap(true, Ordering::SeqCst) {
                continue;
            }
            let (endpoint, answers, busy) = (target.endpoint.clone(), answers.clone(), in_flight[index].clone());
            let pid_file = target.pid_file.clone();
            thread::spawn(move || {
                let status = endpoint.wsrep_status(QUERY_TIMEOUT).map_err(|e| why_unread(&e, pid_file.as_deref()));
                busy.store(false, Ordering::SeqCst);
                let _ = answers.send((refresh, index, status));
            });
        }
        let mut statuses: Vec<Option<std::result::Result<_, String>>> = targets.iter().map(|_| None).collect();
        let deadline = started + interval.mul_f64(0.9).min(QUERY_TIMEOUT);
        while statuses.iter().any(Option::is_none) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
            match answered.recv_timeout(left) {
                Ok((round, index, status)) if round == refresh => statuses[index] = Some(status),
                Ok(_) => {} // an answer from an earlier refresh, too late
                Err(_) => break,
            }
        }
        let now: Vec<Sample> = targets
            .iter()
            .zip(statuses)
            .map(|(t, s)| Sample { name: t.name.clone(), status: s.unwrap_or_else(|| Err("no answer".into())) })
            .collect();
        let seconds = before.as_ref().map_or(0.0, |(at, _)| started.duration_since(*at).as_secs_f64());
        let rows = view::rows(before.as_ref().map(|(_, s)| s.as_slice()), &now, seconds);
        let title = format!(
            "lockstep cluster top: {source}, every {:.1} s, refresh {refresh}{}",
            interval.as_secs_f64(),
            if count.is_none() { " (Ctrl-C to quit)" } else { "" }
        );
        let table = view::render(&title, &rows);
        let mut out = std::io::stdout().lock();
        let shown = if redraw { write!(out, "\x1b[H\x1b[2J{table}") } else { writeln!(out, "{table}") };
        if shown.and_then(|_| out.flush()).is_err() {
            return Ok(()); // the reader went away (a closed pipe)
        }
        drop(out);
        before = Some((started, now));
        if count.is_none_or(|c| refresh < c) {
            thread::sleep(interval.saturating_sub(started.elapsed()));
        }
    }
    Ok(())
}

/// `not running` for a local node whose pid file names no live server; otherwise what the
/// client said (such as `ERROR 2002 (HY000): Can't connect ... (2)`), short enough for the
/// state column.
fn why_unread(error: &Error, pid_file: Option<&Path>) -> String {
    if pid_file.is_some_and(|pid_file| !mariadbd_running(pid_file)) {
        return "not running".into();
    }
    let text = match error {
        Error::Command { output, .. } => output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string(),
        Error::Timeout { seconds, .. } => format!("no answer in {seconds} s"),
        other => other.to_string(),
    };
    let text = text.trim().trim_start_matches("ERROR ");
    let mut short: String = text.chars().take(WHY_UNREAD_CHARS).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_node_without_a_live_server_shows_as_not_running_and_others_show_the_whole_client_error() {
        let output = "ERROR 2002 (HY000): Can't connect to local server through socket \
                      '/tmp/lockstep-tests/a-rather-long-cluster-directory-name-1234/node2/mariadbd.sock' (2)\n";
        let error =
            Error::Command { command: "mariadb".into(), status: "exit status: 1".into(), output: output.into() };
        assert_eq!(why_unread(&error, Some(Path::new("/nonexistent/node2/mariadbd.pid"))), "not running");
        let why = why_unread(&error, None);
        assert!(why.starts_with("2002 (HY000): Can't connect") && why.ends_with("mariadbd.sock' (2)"), "{why}");
    }
}
