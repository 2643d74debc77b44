//! A local cluster: N nodes under one directory, described by `DIR/cluster.state`.
use crate::arbitrator::{Arbitrator, ARBITRATOR_NAME};
use crate::certs::{self, NodeTls};
use crate::error::{Error, Result};
use crate::node::{Node, NodeConfig};
use crate::ports::{allocate_node_ports, NodePorts};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

const STATE_FILE: &str = "cluster.state";
/// The CA and node certificates, under the cluster directory.
const TLS_DIR: &str = "tls";
const CLUSTER_NAME: &str = "lockstep";
/// From starting the arbitrator to the nodes counting it in their view.
const ARBITRATOR_JOIN_TIMEOUT: Duration = Duration::from_secs(60);

/// What to build.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub dir: PathBuf,
    pub node_count: usize,
    pub provider: PathBuf,
    /// Extra `wsrep_provider_options` for every node (`key=value;...`), may be empty.
    pub provider_options: String,
    /// Make a cluster CA and node certificates and turn TLS on (`socket.ssl*`).
    pub tls: bool,
    /// Also run an arbitrator (`lockstep arbitrator`, garbd) with this `lockstep` program.
    pub arbitrator: Option<PathBuf>,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub nodes: Vec<Node>,
    pub arbitrator: Option<Arbitrator>,
}

impl Cluster {
    /// Allocates ports, creates every node's data directory and `my.cnf`, writes the state file.
    /// Nothing is started.
    pub fn create(spec: &ClusterSpec) -> Result<Cluster> {
        if spec.node_count == 0 {
            return Err(Error::Invalid("a cluster needs at least one node".into()));
        }
        if !spec.provider.is_file() {
            return Err(Error::Invalid(format!(
                "wsrep provider {} does not exist (build it with `cargo build --release -p \
                 lockstep-abi`, or name one with --provider or LOCKSTEP_PROVIDER)",
                spec.provider.display()
            )));
        }
        fs::create_dir_all(&spec.dir).map_err(|e| Error::io_path("create", &spec.dir, e))?;
        let dir = absolute(&spec.dir)?;
        if dir.join(STATE_FILE).exists() {
            return Err(Error::Invalid(format!("{} already holds a cluster", dir.display())));
        }
        let layout = Layout {
            provider: absolute(&spec.provider)?,
            provider_options: spec.provider_options.clone(),
            tls: spec.tls,
            ports: (0..spec.node_count).map(|_| allocate_node_ports()).collect::<Result<Vec<_>>>()?,
            arbitrator: match &spec.arbitrator {
                Some(program) => Some((allocate_node_ports()?.group, absolute(program)?)),
                None => None,
            },
        };
        let cluster = Cluster::from_layout(&dir, &layout);
        if layout.tls {
            let mut names: Vec<String> = cluster.nodes.iter().map(|n| n.name().to_string()).collect();
            names.extend(cluster.arbitrator.as_ref().map(|_| ARBITRATOR_NAME.to_string()));
            certs::create(&dir.join(TLS_DIR), &names)?;
        }
        for node in &cluster.nodes {
            node.initialize()?;
        }
        let path = dir.join(STATE_FILE);
        fs::write(&path, layout.render()).map_err(|e| Error::io_path("write", &path, e))?;
        Ok(cluster)
    }

    /// Reads the cluster that [`Cluster::create`] left in `dir`.
    pub fn open(dir: &Path) -> Result<Cluster> {
        let dir = absolute(dir)?;
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).map_err(|e| Error::io_path("read", &path, e))?;
        let layout =
            Layout::parse(&text).ok_or_else(|| Error::Invalid(format!("{}: unexpected content", path.display())))?;
        Ok(Cluster::from_layout(&dir, &layout))
    }

    fn from_layout(dir: &Path, layout: &Layout) -> Cluster {
        // One node bootstraps alone. With more, every node lists every member, so any of them
        // can rejoin later; the first one is started with --wsrep-new-cluster.
        let cluster_address = if layout.ports.len() == 1 {
            "gcomm://".to_string()
        } else {
            let members: Vec<String> = layout.ports.iter().map(|p| format!("127.0.0.1:{}", p.group)).collect();
            format!("gcomm://{}", members.join(","))
        };
        let nodes = layout
            .ports
            .iter()
            .enumerate()
            .map(|(i, ports)| {
                let name = format!("node{}", i + 1);
                let config = NodeConfig {
                    name: name.clone(),
                    ports: *ports,
                    provider: layout.provider.clone(),
                    cluster_name: CLUSTER_NAME.to_string(),
                    cluster_address: cluster_address.clone(),
                    provider_options: layout.provider_options.clone(),
                    tls: layout.tls.then(|| NodeTls::at(&dir.join(TLS_DIR), &name)),
                };
                Node::new(dir.join(name), config)
            })
            .collect();
        let arbitrator = layout.arbitrator.as_ref().map(|(port, program)| {
            let tls = layout.tls.then(|| NodeTls::at(&dir.join(TLS_DIR), ARBITRATOR_NAME));
            let cluster = (CLUSTER_NAME, cluster_address.as_str(), layout.provider_options.as_str());
            Arbitrator::new(dir.join(ARBITRATOR_NAME), program.clone(), *port, cluster, tls)
        });
        Cluster { dir: dir.to_path_buf(), nodes, arbitrator }
    }

    /// Starts every node that is not running and waits until each is ready. A node that
    /// crashed restarts at the position `--wsrep-recover` finds in InnoDB, as the packaging
    /// does. A new cluster is bootstrapped by its first node (`--wsrep-new-cluster`), then the
    /// others join in order. A cluster that ran before and has no node running (every node
    /// crashed or was stopped) is never bootstrapped again: every node starts at once and
    /// they form the primary component again as soon as a majority is up.
    pub fn start(&mut self) -> Result<()> {
        let none_running = !self.nodes.iter_mut().any(|node| node.is_running());
        let ran_before = self.nodes.iter().any(|node| node.saved_state_file().exists());
        if none_running && ran_before {
            self.restart_all()?;
            return self.start_arbitrator();
        }
        // Bootstrapping next to a running primary component would split the cluster in two.
        let mut bootstrap = none_running;
        for node in &mut self.nodes {
            if node.is_running() {
                continue;
            }
            let start_position = node.restart_position()?;
            node.start(bootstrap, start_position.as_ref())?;
            bootstrap = false;
        }
        self.start_arbitrator()
    }

    /// Starts the arbitrator if the cluster has one and it is not running, and waits until
    /// a running node counts it in its view.
    fn start_arbitrator(&mut self) -> Result<()> {
        let Some(arbitrator) = self.arbitrator.as_mut() else { return Ok(()) };
        if arbitrator.is_running() {
            return Ok(());
        }
        arbitrator.start()?;
        let mut running: Vec<&mut Node> = self.nodes.iter_mut().collect();
        running.retain_mut(|n| n.is_running());
        let wanted = running.len() + 1;
        let Some(witness) = running.first() else { return Ok(()) };
        let deadline = Instant::now() + ARBITRATOR_JOIN_TIMEOUT;
        loop {
            let size = witness.status().ok().and_then(|s| s.get("wsrep_cluster_size")?.parse::<usize>().ok());
            if size.is_some_and(|size| size >= wanted) {
                return Ok(());
            }
            if let Some(status) = arbitrator.exit_status() {
                let log = std::fs::read_to_string(arbitrator.log_file()).unwrap_or_default();
                return Err(Error::Invalid(format!("the arbitrator exited ({status}); its log:\n{log}")));
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{} to count the arbitrator (log: {})",
                        witness.name(),
                        arbitrator.log_file().display()
                    ),
                    seconds: ARBITRATOR_JOIN_TIMEOUT.as_secs(),
                });
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn restart_all(&mut self) -> Result<()> {
        let positions = self.nodes.iter().map(Node::restart_position).collect::<Result<Vec<_>>>()?;
        for (node, position) in self.nodes.iter_mut().zip(&positions) {
            node.launch(false, position.as_ref())?;
        }
        let mut first_error = None;
        for node in &mut self.nodes {
            if let Err(e) = node.wait_ready() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Clean shutdown of every node, last first, so the bootstrap node leaves last and keeps
    /// `safe_to_bootstrap: 1`. Tries every node even if one fails; reports the first failure.
    pub fn stop(&mut self) -> Result<()> {
        let mut first_error = None;
        // First, so the last data node to leave is the last member and may bootstrap again.
        if let Some(Err(e)) = self.arbitrator.as_mut().map(Arbitrator::stop) {
            first_error.get_or_insert(e);
        }
        for node in self.nodes.iter_mut().rev() {
            if let Err(e) = node.stop() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// What `DIR/cluster.state` records: enough to rebuild every node's paths and `my.cnf`.
#[derive(Debug, PartialEq)]
struct Layout {
    provider: PathBuf,
    provider_options: String,
    tls: bool,
    ports: Vec<NodePorts>,
    /// The arbitrator's group port and program, if the cluster has one.
    arbitrator: Option<(u16, PathBuf)>,
}

impl Layout {
    fn render(&self) -> String {
        let mut text = format!(
            "# Local Lockstep cluster layout, written by `lockstep cluster up`.\n\
             provider {}\nprovider_options {}\ntls {}\n",
            self.provider.display(),
            self.provider_options,
            if self.tls { "yes" } else { "no" }
        );
        for p in &self.ports {
            text.push_str(&format!("node client_port={} group_port={} sst_port={}\n", p.client, p.group, p.sst));
        }
        if let Some((port, program)) = &self.arbitrator {
            text.push_str(&format!("arbitrator {port} {}\n", program.display()));
        }
        text
    }

    fn parse(text: &str) -> Option<Layout> {
        // A state file without a `tls` line predates TLS: its nodes run without.
        let (mut provider, mut provider_options, mut tls, mut ports) = (None, String::new(), false, Vec::new());
        let mut arbitrator = None;
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "provider" => provider = Some(PathBuf::from(rest)),
                "provider_options" => provider_options = rest.to_string(),
                "tls" => tls = rest == "yes",
                "arbitrator" => {
                    let (port, program) = rest.split_once(' ')?;
                    arbitrator = Some((port.parse().ok()?, PathBuf::from(program)));
                }
                "node" => {
                    let port = |name: &str| {
                        rest.split(' ').find_map(|field| field.strip_prefix(name)?.strip_prefix('='))?.parse().ok()
                    };
                    ports.push(NodePorts {
                        client: port("client_port")?,
                        group: port("group_port")?,
                        sst: port("sst_port")?,
                    });
                }
                _ => return None,
            }
        }
        Some(Layout { provider: provider?, provider_options, tls, ports, arbitrator })
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::io_path("resolve", path, e))
}

/// The provider to load when none is named: `LOCKSTEP_PROVIDER`, else this workspace's
/// `target/release/liblockstep.so`.
pub fn default_provider() -> PathBuf {
    std::env::var_os("LOCKSTEP_PROVIDER").map(PathBuf::from).unwrap_or_else(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2);
        workspace
            .expect("crates/cluster lies two levels below the workspace root")
            .join("target/release/liblockstep.so")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_survives_the_state_file() {
        let layout = Layout {
            provider: PathBuf::from("/usr/lib/galera/libgalera_smm.so"),
            provider_options: "gcs.fc_limit=32;gcache.size=64M".into(),
            tls: true,
            ports: vec![
                NodePorts { client: 23000, group: 23001, sst: 23003 },
                NodePorts { client: 23004, group: 23005, sst: 23007 },
            ],
            arbitrator: Some((23009, PathBuf::from("/opt/lock step/lockstep"))),
        };
        assert_eq!(Layout::parse(&layout.render()), Some(layout));
        let older = Layout::parse("provider /x.so\nprovider_options \nnode client_port=1 group_port=2 sst_port=3\n");
        assert!(!older.expect("a state file from before TLS").tls);
        assert_eq!(Layout::parse("provider /x.so\nnode client_port=1\n"), None);
    }
}
