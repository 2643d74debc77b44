//! A local cluster's arbitrator: `lockstep arbitrator` (or Galera's `garbd`, which takes the
//! same options, beside Galera nodes) run in `DIR/garb/`, a voting member without data, so
//! two data nodes keep a primary component when one dies.
use crate::certs::NodeTls;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::process::{describe, send_signal, ServerProcess};
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Its name in views and the name of its directory and certificate.
pub const ARBITRATOR_NAME: &str = "garb";
/// It leaves the group before it exits; a few seconds at most.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

pub struct Arbitrator {
    pub dir: PathBuf,
    /// The `lockstep` program that runs it, or `garbd`.
    pub program: PathBuf,
    /// Its group communication port on 127.0.0.1.
    pub port: u16,
    pub cluster_name: String,
    pub cluster_address: String,
    /// Extra provider options of the cluster (the nodes' too).
    pub provider_options: String,
    pub tls: Option<NodeTls>,
    process: Option<ServerProcess>,
}

impl Arbitrator {
    pub(crate) fn new(
        dir: PathBuf,
        program: PathBuf,
        port: u16,
        cluster: (&str, &str, &str),
        tls: Option<NodeTls>,
    ) -> Self {
        let (cluster_name, cluster_address, provider_options) = cluster;
        Arbitrator {
            dir,
            program,
            port,
            cluster_name: cluster_name.to_string(),
            cluster_address: cluster_address.to_string(),
            provider_options: provider_options.to_string(),
            tls,
            process: None,
        }
    }

    pub fn log_file(&self) -> PathBuf {
        self.dir.join("garb.log")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("garb.pid")
    }

    /// The provider options it runs with: its listening address, the cluster's TLS files and
    /// extra options.
    pub fn options(&self) -> String {
        let mut options = vec![format!("gmcast.listen_addr=tcp://127.0.0.1:{}", self.port)];
        options.extend(self.tls.as_ref().map(NodeTls::provider_options));
        options.extend((!self.provider_options.is_empty()).then(|| self.provider_options.clone()));
        options.join(";")
    }

    /// Starts it; it joins the cluster through every node's address.
    pub fn start(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        interrupt::check(|| "before starting the arbitrator".into())?;
        fs::create_dir_all(&self.dir).map_err(|e| Error::io_path("create", &self.dir, e))?;
        let out_path = self.dir.join("garb.out");
        let out = File::create(&out_path).map_err(|e| Error::io_path("create", &out_path, e))?;
        let mut command = Command::new(&self.program);
        if !self.is_garbd() {
            command.arg("arbitrator");
        }
        command
            .args(["--address", &self.cluster_address, "--group", &self.cluster_name, "--name", ARBITRATOR_NAME])
            .arg("--options")
            .arg(self.options())
            .arg("--log")
            .arg(self.log_file())
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| Error::io_path("open", &out_path, e))?)
            .stderr(out)
            .process_group(0);
        let child = command.spawn().map_err(|e| Error::io(format!("start `{}`", describe(&command)), e))?;
        let pid_file = self.pid_file();
        fs::write(&pid_file, format!("{}\n", child.id())).map_err(|e| Error::io_path("write", &pid_file, e))?;
        self.process = Some(ServerProcess::Child(child));
        Ok(())
    }

    fn is_garbd(&self) -> bool {
        self.program.file_name().is_some_and(|name| name == "garbd")
    }

    fn process(&mut self) -> Option<&mut ServerProcess> {
        let pid_file = self.pid_file();
        let program = if self.is_garbd() { "garbd" } else { "lockstep" };
        ServerProcess::running(&mut self.process, &pid_file, program)
    }

    pub fn is_running(&mut self) -> bool {
        self.process().is_some()
    }

    /// Whether it runs because this process started it: what an interrupted start stops.
    pub fn started_here(&mut self) -> bool {
        self.process().is_some_and(|process| process.is_child())
    }

    /// How it ended, if it did (for a start that did not join).
    pub fn exit_status(&mut self) -> Option<String> {
        self.process.as_mut().and_then(ServerProcess::exit_status)
    }

    /// SIGTERM: it leaves the group, then exits; SIGKILL after a bounded wait.
    pub fn stop(&mut self) -> Result<()> {
        self.signal(libc::SIGTERM)
    }

    /// SIGKILL: it vanishes without leaving, as after a crash.
    pub fn kill(&mut self) -> Result<()> {
        self.signal(libc::SIGKILL)
    }

    fn signal(&mut self, signal: libc::c_int) -> Result<()> {
        let Some(process) = self.process() else {
            return Ok(());
        };
        send_signal(process.pid(), signal);
        let ended = process.wait_exit(STOP_TIMEOUT);
        if !ended {
            send_signal(process.pid(), libc::SIGKILL);
            process.wait_exit(STOP_TIMEOUT);
        }
        self.process = None;
        let _ = fs::remove_file(self.pid_file());
        match ended {
            true => Ok(()),
            false => Err(Error::Timeout {
                what: "the arbitrator to exit (killed it)".into(),
                seconds: STOP_TIMEOUT.as_secs(),
            }),
        }
    }
}
