//! A long-lived client session: one `mariadb` process per session, statements fed through its
//! stdin, so a transaction can stay open across calls (and across nodes, one session each).
//!
//! Each [`Session::exec`] sends a batch followed by a marker `SELECT`, and reads the client's
//! stdout and stderr (one pipe, so they stay in order) up to the marker. The client runs
//! without `--force`: on the first error it prints `ERROR <code> ...` and exits, so the rest
//! of the batch never runs. That makes `BEGIN; ...; COMMIT` in one batch atomic from the
//! client's side, and the server rolls back whatever the closed connection left open. The
//! next `exec` connects again.
use lockstep_cluster::Node;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Bound on one batch, connection included.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the client's exit once its stdin is closed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// `ER_LOCK_DEADLOCK`: what the loser of a write-write conflict between nodes gets.
pub const DEADLOCK: u32 = 1213;

/// Why a batch did not complete.
#[derive(Debug, Clone)]
pub struct SqlError {
    /// The server's (or client library's, 2xxx) error code; `None` when the client died, was
    /// killed on timeout, or printed something unexpected.
    pub code: Option<u32>,
    pub message: String,
}

impl SqlError {
    pub fn is(&self, code: u32) -> bool {
        self.code == Some(code)
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

struct Client {
    child: Child,
    stdin: ChildStdin,
    /// Lines of stdout and stderr; closed when the client exits.
    lines: Receiver<String>,
}

pub struct Session {
    label: String,
    socket: PathBuf,
    client: Option<Client>,
    batches: u64,
}

impl Session {
    /// A session on `node` (the client connects on the first [`Session::exec`]).
    pub fn open(node: &Node) -> Session {
        Session { label: node.name().to_string(), socket: node.socket(), client: None, batches: 0 }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// True while a client is connected (a failed batch disconnects it).
    pub fn is_connected(&self) -> bool {
        self.client.is_some()
    }

    /// Runs `batch` (statements separated by `;`) and returns its rows, tab-separated.
    pub fn exec(&mut self, batch: &str) -> Result<String, SqlError> {
        self.batches += 1;
        let marker = format!("lockstep-session-marker-{}", self.batches);
        let batch = batch.trim().trim_end_matches(';');
        let input = format!("{batch};\nSELECT '{marker}';\n");
        let client = match self.client.take() {
            Some(client) => client,
            None => self.connect()?,
        };
        let Client { mut child, mut stdin, lines } = client;
        // A client that already exited is reported below from what it printed.
        let _ = stdin.write_all(input.as_bytes()).and_then(|()| stdin.flush());
        let deadline = Instant::now() + EXEC_TIMEOUT;
        let mut rows = String::new();
        let mut error: Option<SqlError> = None;
        loop {
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if error.is_none() && line == marker => {
                    self.client = Some(Client { child, stdin, lines });
                    return Ok(rows);
                }
                Ok(line) => match (&mut error, parse_error(&line)) {
                    (None, Some(e)) => error = Some(e),
                    (None, None) => {
                        rows.push_str(&line);
                        rows.push('\n');
                    }
                    // Whatever the client prints after its error belongs to the error.
                    (Some(e), _) => {
                        e.message.push('\n');
                        e.message.push_str(&line);
                    }
                },
                Err(RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    return Err(error.unwrap_or_else(|| SqlError {
                        code: None,
                        message: format!("{}: mariadb exited ({status}) without a result:\n{rows}", self.label),
                    }));
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SqlError {
                        code: None,
                        message: format!("{}: no result within {} s for `{batch}`", self.label, EXEC_TIMEOUT.as_secs()),
                    });
                }
            }
        }
    }

    /// Like [`Session::exec`], panicking on failure.
    pub fn must(&mut self, batch: &str) -> String {
        self.exec(batch).unwrap_or_else(|e| panic!("{}: `{batch}` failed: {e}", self.label))
    }

    fn connect(&self) -> Result<Client, SqlError> {
        let failed = |e: std::io::Error| SqlError { code: None, message: format!("{}: mariadb: {e}", self.label) };
        let (reader, writer) = std::io::pipe().map_err(failed)?;
        let mut child = {
            // The command holds the pipe's write ends; it must be gone before we read to EOF.
            let mut command = Command::new("mariadb");
            command
                .arg("--no-defaults")
                .arg("-S")
                .arg(&self.socket)
                .args(["-uroot", "--batch", "--skip-column-names", "--unbuffered", "--connect-timeout=5"])
                .stdin(Stdio::piped())
                .stdout(writer.try_clone().map_err(failed)?)
                .stderr(writer);
            command.spawn().map_err(failed)?
        };
        let stdin = child.stdin.take().expect("stdin is piped");
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                match reader.read_until(b'\n', &mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buffer).trim_end_matches(['\n', '\r']).to_string();
                        if sender.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Client { child, stdin, lines })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(Client { mut child, stdin, .. }) = self.client.take() {
            // End of input ends the client (and rolls back an open transaction); a client stuck
            // in a statement is killed.
            drop(stdin);
            let deadline = Instant::now() + CLOSE_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `ERROR 1213 (40001) at line 3: Deadlock found ...` or `ERROR 2002 (HY000): Can't connect ...`.
fn parse_error(line: &str) -> Option<SqlError> {
    let rest = line.strip_prefix("ERROR ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(SqlError { code: digits.parse().ok(), message: line.to_string() })
}
