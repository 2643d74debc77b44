//! One local MariaDB node: its data directory, `my.cnf`, `mariadbd` process and status.
use crate::certs::NodeTls;
use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::ports::NodePorts;
use crate::position::{parse_position, read_saved_state, Position, SavedState};
use crate::process::{describe, run_checked, send_signal, ServerProcess};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Bound on `mariadb-install-db`.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on a start until `wsrep_ready=ON` (InnoDB recovery and the provider's connect included).
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Bound on a clean shutdown before we fall back to SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on one `mariadb` client call.
const SQL_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on `mariadbd --wsrep-recover` (InnoDB crash recovery only).
const RECOVER_TIMEOUT: Duration = Duration::from_secs(120);
/// How many log lines an error message carries.
const LOG_TAIL_LINES: usize = 25;

/// What goes into a node's `my.cnf`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `wsrep_node_name`, also the directory name (`node1`, ...).
    pub name: String,
    pub ports: NodePorts,
    /// Absolute path of the wsrep provider library (`wsrep_provider`).
    pub provider: PathBuf,
    /// `wsrep_cluster_name`.
    pub cluster_name: String,
    /// `wsrep_cluster_address`: `gcomm://` or `gcomm://127.0.0.1:<group port>,...`.
    pub cluster_address: String,
    /// Extra `wsrep_provider_options` (Galera names, `key=value;...`), appended after ours.
    pub provider_options: String,
    /// TLS files for group and IST traffic (`socket.ssl*`); None: plain TCP.
    pub tls: Option<NodeTls>,
}

/// A node under `dir`: `dir/data`, `dir/my.cnf`, `dir/mariadbd.sock`, `dir/error.log`.
pub struct Node {
    pub dir: PathBuf,
    pub config: NodeConfig,
    process: Option<ServerProcess>,
}

impl Node {
    pub fn new(dir: PathBuf, config: NodeConfig) -> Node {
        Node { dir, config, process: None }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn config_file(&self) -> PathBuf {
        self.dir.join("my.cnf")
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("mariadbd.sock")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("mariadbd.pid")
    }

    pub fn error_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    /// `mariadbd`'s standard output and error: what it says before its error log is open.
    pub fn stdio_file(&self) -> PathBuf {
        self.dir.join("mariadbd.out")
    }

    /// `tmpdir`: one per node, as servers sharing /tmp can collide on temporary file names.
    pub fn tmp_dir(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    pub fn saved_state_file(&self) -> PathBuf {
        self.data_dir().join("grastate.dat")
    }

    /// Creates the node directory, a fresh data directory and `my.cnf`.
    pub fn initialize(&self) -> Result<()> {
        if self.data_dir().exists() {
            return Err(Error::Invalid(format!("{} already exists", self.data_dir().display())));
        }
        fs::create_dir_all(self.tmp_dir()).map_err(|e| Error::io_path("create", &self.tmp_dir(), e))?;
        // --no-defaults keeps the machine's /etc/mysql config (and wsrep) out of the bootstrap run;
        // `normal` authentication lets root in over the socket without a password.
        let mut install = Command::new("mariadb-install-db");
        install.arg("--no-defaults");
        if running_as_root() {
            install.arg("--user=root");
        }
        run_checked(
            install
                .arg(format!("--datadir={}", self.data_dir().display()))
                // Concurrent bootstraps sharing /tmp collide on temporary table names.
                .arg(format!("--tmpdir={}", self.tmp_dir().display()))
                .arg("--auth-root-authentication-method=normal")
                .arg("--skip-test-db"),
            INSTALL_TIMEOUT,
        )?;
        self.write_config()
    }

    pub fn write_config(&self) -> Result<()> {
        let path = self.config_file();
        fs::write(&path, self.render_config()).map_err(|e| Error::io_path("write", &path, e))
    }

    fn render_config(&self) -> String {
        let c = &self.config;
        let p = &c.ports;
        // Galera listens on 0.0.0.0 unless told otherwise; everything stays on loopback.
        let mut provider_options = format!(
            "base_port={};gmcast.listen_addr=tcp://127.0.0.1:{};ist.recv_addr=127.0.0.1:{}",
            p.group,
            p.group,
            p.ist()
        );
        if let Some(tls) = &c.tls {
            provider_options.push(';');
            provider_options.push_str(&tls.provider_options());
        }
        if !c.provider_options.is_empty() {
            provider_options.push(';');
            provider_options.push_str(&c.provider_options);
        }
        format!(
            "# {name} of a local Lockstep cluster, written by lockstep-cluster.
# Ports: client {client}, group {group}, IST {ist}, SST {sst}.
[mariadbd]
{user}datadir = {data_dir}
tmpdir = {tmp_dir}
socket = {socket}
pid-file = {pid_file}
log-error = {error_log}
port = {client}
bind-address = 127.0.0.1
# What Galera replication requires of the server.
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
# Local clusters favour speed over surviving an OS crash.
innodb_flush_log_at_trx_commit = 2
innodb_buffer_pool_size = 64M
wsrep_on = ON
wsrep_provider = {provider}
wsrep_cluster_name = {cluster_name}
wsrep_cluster_address = {cluster_address}
wsrep_node_name = {name}
wsrep_node_address = 127.0.0.1
wsrep_node_incoming_address = 127.0.0.1:{client}
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:{sst}
wsrep_provider_options = \"{provider_options}\"

[client]
socket = {socket}
user = root
",
            // mariadbd refuses to run as root unless told to.
            user = if running_as_root() { "user = root\n" } else { "" },
            name = c.name,
            client = p.client,
            group = p.group,
            ist = p.ist(),
            sst = p.sst,
            data_dir = self.data_dir().display(),
            tmp_dir = self.tmp_dir().display(),
            socket = self.socket().display(),
            pid_file = self.pid_file().display(),
            error_log = self.error_log().display(),
            provider = c.provider.display(),
            cluster_name = c.cluster_name,
            cluster_address = c.cluster_address,
        )
    }

    /// Starts `mariadbd` and waits until it reports `wsrep_ready=ON`.
    /// `bootstrap` adds `--wsrep-new-cluster`; `start_position` (from [`Node::recover`]) adds
    /// `--wsrep_start_position`, as MariaDB's packaging does after a crash.
    /// The server runs in its own process group so it outlives a CLI invocation and its Ctrl-C.
    pub fn start(&mut self, bootstrap: bool, start_position: Option<&Position>) -> Result<()> {
        self.launch(bootstrap, start_position)?;
        self.wait_ready()
    }

    /// Starts `mariadbd` as [`Node::start`] does, without waiting for it to be ready.
    pub fn launch(&mut self, bootstrap: bool, start_position: Option<&Position>) -> Result<()> {
        interrupt::check(|| format!("before starting {}", self.name()))?;
        if self.is_running() {
            return Err(Error::Invalid(format!("{} is already running", self.name())));
        }
        self.hand_data_dir_to_sst_user()?;
        let stdio_path = self.stdio_file();
        let stdio = File::create(&stdio_path).map_err(|e| Error::io_path("create", &stdio_path, e))?;
        let stdio_err = stdio.try_clone().map_err(|e| Error::io_path("open", &stdio_path, e))?;
        let mut command = Command::new("mariadbd");
        command.arg(format!("--defaults-file={}", self.config_file().display()));
        if bootstrap {
            command.arg("--wsrep-new-cluster");
        }
        if let Some(position) = start_position {
            command.arg(format!("--wsrep_start_position={position}"));
        }
        command.stdin(Stdio::null()).stdout(stdio).stderr(stdio_err).process_group(0);
        let child = command.spawn().map_err(|e| Error::io(format!("start `{}`", describe(&command)), e))?;
        self.process = Some(ServerProcess::Child(child));
        Ok(())
    }

    /// rsync SST into a joiner runs an rsync daemon that drops to `nobody`, so when nodes run
    /// as root their data directory must belong to `nobody` (the server keeps creating
    /// root-owned files, hence before every start).
    fn hand_data_dir_to_sst_user(&self) -> Result<()> {
        if !running_as_root() {
            return Ok(());
        }
        run_checked(Command::new("chown").args(["-R", "nobody:nogroup"]).arg(self.data_dir()), INSTALL_TIMEOUT)
            .map(drop)
    }

    /// Waits until the server reports `wsrep_ready=ON`; kills it after [`READY_TIMEOUT`].
    /// A signal ([`crate::INTERRUPTING_SIGNAL`]) ends the wait and leaves the server to the
    /// caller, who stops it.
    pub fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.process.as_mut().and_then(|p| p.exit_status()) {
                self.process = None;
                return Err(Error::NodeExited { node: self.name().to_string(), status, log: self.log_tail() });
            }
            // Connection errors are expected until the server opens its socket.
            if let Ok(status) = self.status() {
                if status.get("wsrep_ready") == Some("ON") {
                    return Ok(());
                }
            }
            interrupt::check(|| format!("while waiting for {} to report wsrep_ready=ON", self.name()))?;
            if Instant::now() >= deadline {
                // A half-started server is of no use to anyone: do not leave it behind.
                let _ = self.kill();
                return Err(Error::Timeout {
                    what: format!("{} to report wsrep_ready=ON; {}", self.name(), self.log_tail()),
                    seconds: READY_TIMEOUT.as_secs(),
                });
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// The running server, whether we started it or another invocation did (found by pid file).
    fn process(&mut self) -> Option<&mut ServerProcess> {
        let pid_file = self.pid_file();
        ServerProcess::running(&mut self.process, &pid_file, "mariadbd")
    }

    pub fn is_running(&mut self) -> bool {
        self.process().is_some()
    }

    /// Whether it runs because this process started it: what an interrupted start stops.
    pub fn started_here(&mut self) -> bool {
        self.process().is_some_and(|process| process.is_child())
    }

    /// Clean shutdown (SIGTERM, as `mariadb-admin shutdown` does), bounded; SIGKILL after that.
    /// Returns an error if SIGKILL was needed, since the provider then wrote no final state.
    pub fn stop(&mut self) -> Result<()> {
        let Some(process) = self.process() else {
            return Ok(());
        };
        send_signal(process.pid(), libc::SIGTERM);
        if process.wait_exit(STOP_TIMEOUT) {
            self.process = None;
            return Ok(());
        }
        self.kill()?;
        Err(Error::Timeout {
            what: format!("clean shutdown of {} (killed it)", self.name()),
            seconds: STOP_TIMEOUT.as_secs(),
        })
    }

    /// `kill -9`: a crash as far as InnoDB and the provider are concerned.
    pub fn kill(&mut self) -> Result<()> {
        let name = self.name().to_string();
        let Some(process) = self.process() else {
            return Ok(());
        };
        send_signal(process.pid(), libc::SIGKILL);
        if !process.wait_exit(STOP_TIMEOUT) {
            return Err(Error::Timeout {
                what: format!("{name} to exit after SIGKILL"),
                seconds: STOP_TIMEOUT.as_secs(),
            });
        }
        self.process = None;
        Ok(())
    }

    /// Runs SQL through the `mariadb` client over the socket; returns its tab-separated output.
    pub fn sql(&self, sql: &str) -> Result<String> {
        self.endpoint().sql(sql, SQL_TIMEOUT)
    }

    /// `SHOW GLOBAL STATUS LIKE 'wsrep%'`.
    pub fn status(&self) -> Result<WsrepStatus> {
        self.endpoint().wsrep_status(SQL_TIMEOUT)
    }

    pub fn endpoint(&self) -> Endpoint {
        Endpoint::Socket(self.socket())
    }

    /// `grastate.dat` as the provider last wrote it.
    pub fn saved_state(&self) -> Result<SavedState> {
        read_saved_state(&self.saved_state_file())
    }

    /// Runs `mariadbd --wsrep-recover` on the stopped node and returns the position InnoDB holds.
    pub fn recover(&self) -> Result<Position> {
        let log = self.dir.join("wsrep-recover.log");
        let _ = fs::remove_file(&log);
        run_checked(
            Command::new("mariadbd")
                .arg(format!("--defaults-file={}", self.config_file().display()))
                .arg("--wsrep-recover")
                .arg(format!("--log-error={}", log.display())),
            RECOVER_TIMEOUT,
        )?;
        let text = fs::read_to_string(&log).map_err(|e| Error::io_path("read", &log, e))?;
        const MARKER: &str = "WSREP: Recovered position: ";
        let line = text
            .lines()
            .rev()
            .find_map(|line| line.split_once(MARKER).map(|(_, position)| position))
            .ok_or_else(|| Error::Invalid(format!("no `{MARKER}` line in {}:\n{text}", log.display())))?;
        parse_position(line)
    }

    /// The position to pass when restarting a stopped node: after a crash `grastate.dat` says
    /// seqno -1 and only InnoDB knows the position, so recover it; otherwise the provider reads
    /// `grastate.dat` itself and nothing needs passing.
    pub fn restart_position(&self) -> Result<Option<Position>> {
        if !self.saved_state_file().exists() || self.saved_state()?.position.seqno >= 0 {
            return Ok(None);
        }
        self.recover().map(Some)
    }

    pub fn error_log_text(&self) -> Result<String> {
        let path = self.error_log();
        fs::read(&path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| Error::io_path("read", &path, e))
    }

    /// The end of the error log, named; the end of [`Node::stdio_file`] when the error log
    /// is empty, as when the server fails before it opens it (a bad option, a missing library).
    fn log_tail(&self) -> String {
        let (error_log, stdio) = (self.error_log(), self.stdio_file());
        match (tail(&error_log), tail(&stdio)) {
            (Some(text), _) => format!("end of its error log {}:\n{text}", error_log.display()),
            (None, Some(text)) => {
                format!("its error log {} is empty; end of {}:\n{text}", error_log.display(), stdio.display())
            }
            (None, None) => format!("its error log {} and {} are empty", error_log.display(), stdio.display()),
        }
    }
}

/// The last [`LOG_TAIL_LINES`] lines of the file at `path`; None if it is missing or blank.
fn tail(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    (!text.trim().is_empty()).then(|| lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n"))
}

/// Whether the `mariadbd` that `pid_file` names is alive: for a node this process did not start.
pub fn mariadbd_running(pid_file: &Path) -> bool {
    ServerProcess::running(&mut None, pid_file, "mariadbd").is_some()
}

fn running_as_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The `wsrep%` status variables of a node at one moment.
#[derive(Debug, Clone)]
pub struct WsrepStatus {
    pub variables: BTreeMap<String, String>,
}

impl WsrepStatus {
    /// From the client's tab-separated `name value` lines.
    pub fn parse(text: &str) -> Self {
        let variables = text
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Self { variables }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.variables.get(name).map(String::as_str)
    }

    /// `wsrep_last_committed`: the seqno of the last event this node committed.
    pub fn last_committed(&self) -> Result<i64> {
        let value = self.get("wsrep_last_committed").unwrap_or("");
        value.parse().map_err(|_| Error::Invalid(format!("wsrep_last_committed is {value:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_in(dir: PathBuf) -> Node {
        let config = NodeConfig {
            name: "node1".into(),
            ports: NodePorts { client: 23000, group: 23001, sst: 23003 },
            provider: PathBuf::from("/x.so"),
            cluster_name: "lockstep".into(),
            cluster_address: "gcomm://".into(),
            provider_options: String::new(),
            tls: None,
        };
        Node::new(dir, config)
    }

    #[test]
    fn a_failed_start_names_the_log_and_shows_mariadbd_out_when_the_error_log_is_empty() {
        let dir = std::env::temp_dir().join(format!("lockstep-node-log-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let node = node_in(dir.clone());
        assert!(node.log_tail().contains("error.log and"), "{}", node.log_tail());
        fs::write(node.stdio_file(), "mariadbd: unknown variable 'x=1'\n").unwrap();
        let text = node.log_tail();
        assert!(text.contains(&format!("its error log {} is empty", node.error_log().display())), "{text}");
        assert!(text.ends_with("mariadbd.out:\nmariadbd: unknown variable 'x=1'"), "{text}");
        let lines: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        fs::write(node.error_log(), lines).unwrap();
        let text = node.log_tail();
        assert!(text.starts_with(&format!("end of its error log {}:\nline 6\n", node.error_log().display())), "{text}");
        assert!(text.ends_with("line 30"), "{text}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
