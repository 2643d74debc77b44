//! A local cluster: N nodes under one directory, described by `DIR/cluster.state`.
use crate::arbitrator::{Arbitrator, ARBITRATOR_NAME};
use crate::certs::{self, NodeTls};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::node::{Node, NodeConfig};
use crate::ports::{allocate_node_ports, NodePorts};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

const STATE_FILE: &str = "cluster.state";
/// The CA and node certificates, under the cluster directory.
const TLS_DIR: &str = "tls";
const CLUSTER_NAME: &str = "lockstep";
/// From starting the arbitrator to the nodes counting it in their view.
const ARBITRATOR_JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The most nodes a local cluster has: each is a `mariadbd` with its own buffer pool.
const MAX_NODES: usize = 64;

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

/// Settings given again for a cluster that exists (`lockstep cluster up` on its directory);
/// None or false: not given.
#[derive(Debug, Default)]
pub struct Requested {
    pub node_count: Option<usize>,
    pub provider: Option<PathBuf>,
    pub provider_options: Option<String>,
    pub no_tls: bool,
    pub arbitrator: Option<PathBuf>,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub nodes: Vec<Node>,
    pub arbitrator: Option<Arbitrator>,
    layout: Layout,
}

impl Cluster {
    /// Allocates ports, creates every node's data directory and `my.cnf`, writes the state file.
    /// Nothing is started. If a step fails, what the earlier ones made is removed.
    pub fn create(spec: &ClusterSpec) -> Result<Cluster> {
        if spec.node_count == 0 {
            return Err(Error::Invalid("a cluster needs at least one node".into()));
        }
        if spec.node_count > MAX_NODES {
            return Err(Error::Invalid(format!(
                "{} nodes: a local cluster has at most {MAX_NODES} (each is a mariadbd)",
                spec.node_count
            )));
        }
        if !spec.provider.is_file() {
            return Err(Error::Invalid(format!(
                "wsrep provider {} does not exist (build it with `cargo build --release -p \
                 lockstep-abi`, or name one with --provider or LOCKSTEP_PROVIDER)",
                spec.provider.display()
            )));
        }
        let arbitrator = match &spec.arbitrator {
            // With one node the cluster address is `gcomm://`: the arbitrator has no one to join.
            Some(_) if spec.node_count == 1 => {
                return Err(Error::Invalid("an arbitrator votes beside two data nodes or more (--nodes 2)".into()));
            }
            Some(program) => Some(find_program(program)?),
            None => None,
        };
        let dir = absolute(&spec.dir)?;
        if dir.join(STATE_FILE).exists() {
            return Err(Error::Invalid(format!("{} already holds a cluster", dir.display())));
        }
        let layout = Layout {
            provider: absolute(&spec.provider)?,
            provider_options: spec.provider_options.clone(),
            tls: spec.tls,
            ports: (0..spec.node_count).map(|_| allocate_node_ports()).collect::<Result<Vec<_>>>()?,
            arbitrator: match arbitrator {
                Some(program) => Some((allocate_node_ports()?.group, program)),
                None => None,
            },
        };
        let cluster = Cluster::from_layout(&dir, &layout);
        let mut paths: Vec<PathBuf> = cluster.nodes.iter().map(|n| n.dir.clone()).collect();
        paths.extend(layout.tls.then(|| dir.join(TLS_DIR)));
        paths.push(dir.join(STATE_FILE));
        Creation::plan(&dir, paths)?.run(|| {
            fs::create_dir_all(&dir).map_err(|e| Error::io_path("create", &dir, e))?;
            if layout.tls {
                let mut names: Vec<String> = cluster.nodes.iter().map(|n| n.name().to_string()).collect();
                names.extend(cluster.arbitrator.as_ref().map(|_| ARBITRATOR_NAME.to_string()));
                certs::create(&dir.join(TLS_DIR), &names)?;
            }
            for node in &cluster.nodes {
                node.initialize()?;
            }
            let path = dir.join(STATE_FILE);
            fs::write(&path, layout.render()).map_err(|e| Error::io_path("write", &path, e))
        })?;
        Ok(cluster)
    }

    /// Reads the cluster that [`Cluster::create`] left in `dir`.
    pub fn open(dir: &Path) -> Result<Cluster> {
        let dir = absolute(dir)?;
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            // Only a creation killed before its end leaves node directories without the state file.
            io::ErrorKind::NotFound if dir.join("node1").exists() => {
                // Only what `cluster up` makes, named one by one: the directory may hold other files.
                let made: Vec<String> = (1..)
                    .map(|n| dir.join(format!("node{n}")))
                    .take_while(|path| path.exists())
                    .chain(Some(dir.join(TLS_DIR)).filter(|path| path.exists()))
                    .map(|path| path.display().to_string())
                    .collect();
                Error::Invalid(format!(
                    "{} holds no cluster, only the start of one (no {STATE_FILE}: a `cluster up` that did not \
                     finish): remove {} and run `cluster up` again",
                    dir.display(),
                    made.join(" ")
                ))
            }
            io::ErrorKind::NotFound => Error::Invalid(format!("{} holds no cluster (no {STATE_FILE})", dir.display())),
            _ => Error::io_path("read", &path, e),
        })?;
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
        Cluster { dir: dir.to_path_buf(), nodes, arbitrator, layout: layout.clone() }
    }

    /// Refuses settings that differ from the cluster's: they are fixed when it is made, and a
    /// start that ignored them would run another cluster than the one asked for.
    pub fn refuse_changes(&self, requested: &Requested) -> Result<()> {
        let have = &self.layout;
        let mut differ = Vec::new();
        if let Some(count) = requested.node_count.filter(|&count| count != have.ports.len()) {
            differ.push(format!("--nodes {count} (it has {})", have.ports.len()));
        }
        if let Some(provider) = &requested.provider {
            let provider = absolute(provider)?;
            if provider != have.provider {
                differ.push(format!("--provider {} (it has {})", provider.display(), have.provider.display()));
            }
        }
        if let Some(options) = requested.provider_options.as_ref().filter(|&options| *options != have.provider_options)
        {
            differ.push(format!("--provider-options {options:?} (it has {:?})", have.provider_options));
        }
        if requested.no_tls && have.tls {
            differ.push("--no-tls (it has TLS)".into());
        }
        if let Some(program) = &requested.arbitrator {
            let program = find_program(program)?;
            match &have.arbitrator {
                None => differ.push(format!("--arbitrator {} (it has none)", program.display())),
                Some((_, had)) if *had != program => {
                    differ.push(format!("--arbitrator {} (it runs {})", program.display(), had.display()))
                }
                Some(_) => {}
            }
        }
        if differ.is_empty() {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "{} holds a cluster with other settings than given: {}. They are fixed when a cluster is made: \
             leave them out to start this one, or make another in a new directory",
            self.dir.display(),
            differ.join(", ")
        )))
    }

    /// Starts every node that is not running and waits until each is ready. A node that
    /// crashed restarts at the position `--wsrep-recover` finds in InnoDB, as the packaging
    /// does. A new cluster is bootstrapped by its first node (`--wsrep-new-cluster`), then the
    /// others join in order. A cluster that ran before is never bootstrapped again: its
    /// stopped nodes start at once, so they form the primary component again as soon as a
    /// majority is up, with or without nodes still running. One at a time, a node that needs
    /// another stopped one for a majority would wait for it for ever (a node left running
    /// alone after the others were killed is not primary, and the next one cannot join it).
    pub fn start(&mut self) -> Result<()> {
        let none_running = !self.nodes.iter_mut().any(|node| node.is_running());
        let ran_before = self.nodes.iter().any(|node| node.saved_state_file().exists());
        if ran_before {
            self.start_stopped_at_once()?;
            return self.start_arbitrator();
        }
        // Bootstrapping next to a running primary component would split the cluster in two.
        let mut bootstrap = none_running;
        for node in &mut self.nodes {
            if node.is_running() {
                continue;
            }
            node.start(bootstrap, None)?;
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
            interrupt::check(|| format!("while waiting for {} to count the arbitrator", witness.name()))?;
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

    fn start_stopped_at_once(&mut self) -> Result<()> {
        let mut stopped: Vec<&mut Node> = self.nodes.iter_mut().collect();
        stopped.retain_mut(|node| !node.is_running());
        let positions = stopped.iter().map(|node| node.restart_position()).collect::<Result<Vec<_>>>()?;
        for (node, position) in stopped.iter_mut().zip(&positions) {
            node.launch(false, position.as_ref())?;
        }
        let mut first_error = None;
        for node in &mut stopped {
            if let Err(e) = node.wait_ready() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Clean shutdown of every node, last first, so the bootstrap node leaves last and keeps
    /// `safe_to_bootstrap: 1`. Tries every node even if one fails; reports every failure.
    pub fn stop(&mut self) -> Result<()> {
        self.stop_servers(false)
    }

    /// [`Cluster::stop`] of only the servers this process started (see [`Node::started_here`]):
    /// an interrupted start undoes itself and leaves alone the servers that ran before it.
    pub fn stop_started(&mut self) -> Result<()> {
        self.stop_servers(true)
    }

    fn stop_servers(&mut self, only_started_here: bool) -> Result<()> {
        let mut failures = Vec::new();
        // First, so the last data node to leave is the last member and may bootstrap again.
        if let Some(arbitrator) = self.arbitrator.as_mut() {
            if !only_started_here || arbitrator.started_here() {
                failures.extend(arbitrator.stop().err());
            }
        }
        for node in self.nodes.iter_mut().rev() {
            if !only_started_here || node.started_here() {
                failures.extend(node.stop().err());
            }
        }
        every_failure(failures)
    }
}

/// Every failure of a step tried on each node: the one, or all of them in one error.
fn every_failure(mut failures: Vec<Error>) -> Result<()> {
    match failures.len() {
        0 => Ok(()),
        1 => Err(failures.remove(0)),
        _ => Err(Error::Invalid(failures.iter().map(Error::to_string).collect::<Vec<_>>().join("\n"))),
    }
}

/// What `DIR/cluster.state` records: enough to rebuild every node's paths and `my.cnf`.
#[derive(Debug, Clone, PartialEq)]
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

/// What [`Cluster::create`] makes, so that a failed creation leaves nothing a rerun trips on:
/// a new cluster directory goes whole, with the parents it needed; in a directory that was
/// there before only `paths` go, none of which may exist beforehand.
struct Creation {
    dir: PathBuf,
    /// The outermost directory the creation makes, when the cluster directory is new.
    new_root: Option<PathBuf>,
    paths: Vec<PathBuf>,
}

impl Creation {
    fn plan(dir: &Path, paths: Vec<PathBuf>) -> Result<Creation> {
        let there: Vec<String> =
            paths.iter().filter(|path| exists(path)).map(|path| path.display().to_string()).collect();
        if !there.is_empty() {
            return Err(Error::Invalid(format!(
                "{} holds no {STATE_FILE} but has {} (from a `cluster up` that did not finish?): remove them \
                 and retry, or use another directory",
                dir.display(),
                there.join(", ")
            )));
        }
        let new_root = dir.ancestors().take_while(|dir| !exists(dir)).last().map(Path::to_path_buf);
        Ok(Creation { dir: dir.to_path_buf(), new_root, paths })
    }

    /// Runs `make`; if it fails, removes what it made and says so in the error.
    fn run(&self, make: impl FnOnce() -> Result<()>) -> Result<()> {
        let Err(cause) = make() else { return Ok(()) };
        let made: Vec<&PathBuf> = match &self.new_root {
            Some(root) => vec![root],
            None => self.paths.iter().collect(),
        };
        let made: Vec<&PathBuf> = made.into_iter().filter(|path| exists(path)).collect();
        let names = made.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
        let dir = self.dir.display();
        let cleanup = match made.iter().try_for_each(|path| remove(path)) {
            Ok(()) if made.is_empty() => format!("no cluster was made in {dir}"),
            Ok(()) => format!("no cluster was made in {dir}; removed what making it had left: {names}"),
            Err(e) => format!(
                "no cluster was made in {dir}, and removing what making it had left failed ({e}): remove \
                 {names} and retry"
            ),
        };
        Err(Error::Create { cause: Box::new(cause), cleanup })
    }
}

/// Whether anything is at `path`, a dangling symbolic link included.
fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

fn remove(path: &Path) -> io::Result<()> {
    if path.symlink_metadata()?.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// `program` as a shell finds it: a bare name on PATH, a path from the working directory;
/// either must be an executable file.
fn find_program(program: &Path) -> Result<PathBuf> {
    let executable = |path: &Path| fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !program.as_os_str().as_bytes().contains(&b'/') {
        let search = std::env::var_os("PATH").unwrap_or_default();
        let found = std::env::split_paths(&search).map(|dir| dir.join(program)).find(|path| executable(path));
        let found = found.ok_or_else(|| {
            Error::Invalid(format!("arbitrator program {:?}: not found on PATH", program.display().to_string()))
        })?;
        return absolute(&found);
    }
    let path = absolute(program)?;
    if !executable(&path) {
        let problem = if exists(&path) { "is not an executable file" } else { "does not exist" };
        return Err(Error::Invalid(format!("arbitrator program {} {problem}", path.display())));
    }
    Ok(path)
}

/// `path` made absolute, with `.` and `..` resolved by name: a `..` left in would make
/// `missing/..` look absent to every "already exists" check while naming a directory that
/// holds a cluster.
fn absolute(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).map_err(|e| Error::io_path("resolve", path, e))?;
    let mut resolved = PathBuf::new();
    for component in absolute.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            other => resolved.push(other),
        }
    }
    Ok(resolved)
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

    /// Two nodes on Galera's library, with TLS and an arbitrator running `program`.
    fn two_nodes(provider_options: &str, program: PathBuf) -> Layout {
        Layout {
            provider: PathBuf::from("/usr/lib/galera/libgalera_smm.so"),
            provider_options: provider_options.into(),
            tls: true,
            ports: vec![
                NodePorts { client: 23000, group: 23001, sst: 23003 },
                NodePorts { client: 23004, group: 23005, sst: 23007 },
            ],
            arbitrator: Some((23009, program)),
        }
    }

    #[test]
    fn a_stop_reports_every_failure() {
        let failure = |node: &str| Error::Invalid(format!("{node} did not stop"));
        assert!(every_failure(vec![]).is_ok());
        assert_eq!(every_failure(vec![failure("node3")]).unwrap_err().to_string(), "node3 did not stop");
        let both = every_failure(vec![failure("node3"), failure("node1")]).unwrap_err().to_string();
        assert_eq!(both, "node3 did not stop\nnode1 did not stop");
    }

    #[test]
    fn layout_survives_the_state_file() {
        let layout = two_nodes("gcs.fc_limit=32;gcache.size=64M", PathBuf::from("/opt/lock step/lockstep"));
        assert_eq!(Layout::parse(&layout.render()), Some(layout));
        let older = Layout::parse("provider /x.so\nprovider_options \nnode client_port=1 group_port=2 sst_port=3\n");
        assert!(!older.expect("a state file from before TLS").tls);
        assert_eq!(Layout::parse("provider /x.so\nnode client_port=1\n"), None);
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lockstep-cluster-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creation_refuses_what_cannot_run_before_making_anything() {
        let scratch = scratch("refused");
        fs::create_dir_all(&scratch).unwrap();
        let provider = scratch.join("provider.so");
        fs::write(&provider, "").unwrap();
        let not_executable = scratch.join("garbd");
        fs::write(&not_executable, "").unwrap();
        let dir = scratch.join("cluster");
        let spec = ClusterSpec {
            dir: dir.clone(),
            node_count: 2,
            provider,
            provider_options: String::new(),
            tls: false,
            arbitrator: None,
        };
        let refusal = |spec: ClusterSpec| Cluster::create(&spec).err().expect("refused").to_string();
        assert!(refusal(ClusterSpec { node_count: 65, ..spec.clone() }).contains("at most 64"));
        let one_node = ClusterSpec { node_count: 1, arbitrator: Some("sh".into()), ..spec.clone() };
        assert!(refusal(one_node).contains("two data nodes or more"));
        let missing = ClusterSpec { arbitrator: Some("no-such-arbitrator-program".into()), ..spec.clone() };
        assert!(refusal(missing).contains("not found on PATH"));
        let not_executable = ClusterSpec { arbitrator: Some(not_executable), ..spec.clone() };
        assert!(refusal(not_executable).ends_with("garbd is not an executable file"));
        let absent = ClusterSpec { arbitrator: Some(scratch.join("absent")), ..spec };
        assert!(refusal(absent).ends_with("absent does not exist"));
        assert!(!dir.exists());
        fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn an_arbitrator_named_bare_is_looked_up_on_path() {
        let found = find_program(Path::new("sh")).unwrap();
        assert!(found.is_absolute() && found.ends_with("sh"), "{}", found.display());
        assert_ne!(found, std::env::current_dir().unwrap().join("sh"));
    }

    #[test]
    fn a_failed_creation_removes_what_it_made_and_nothing_else() {
        let failing = || -> Result<()> { Err(Error::Invalid("mariadb-install-db failed".into())) };
        // In a directory that was there with other content, only the creation's own paths go.
        let dir = scratch("failed");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("notes.txt"), "mine").unwrap();
        let paths = vec![dir.join("node1"), dir.join("node2"), dir.join(TLS_DIR), dir.join(STATE_FILE)];
        let error = Creation::plan(&dir, paths.clone())
            .unwrap()
            .run(|| {
                fs::create_dir_all(dir.join("tls")).unwrap();
                fs::create_dir_all(dir.join("node1/data")).unwrap();
                failing()
            })
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("mariadb-install-db failed\nno cluster was made in"), "{error}");
        assert!(error.ends_with(&format!("{}, {}", dir.join("node1").display(), dir.join("tls").display())), "{error}");
        let left: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["notes.txt"]);
        // A path of its own that exists already is refused: it may not be the creation's to remove.
        fs::create_dir_all(dir.join("node2")).unwrap();
        let refused = Creation::plan(&dir, paths).err().expect("refused").to_string();
        let expected = format!("has {} (from a `cluster up` that did not finish?)", dir.join("node2").display());
        assert!(refused.contains(&expected), "{refused}");
        // A new directory goes whole, with the parents it needed.
        let nested = dir.join("a/b/cluster");
        let creation = Creation::plan(&nested, vec![nested.join("node1")]).unwrap();
        let error = creation.run(|| {
            fs::create_dir_all(nested.join("node1/data")).unwrap();
            failing()
        });
        assert!(error.unwrap_err().to_string().ends_with(&format!("left: {}", dir.join("a").display())));
        assert!(!dir.join("a").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_without_a_state_file_is_said_to_hold_no_cluster() {
        let dir = scratch("none");
        fs::create_dir_all(&dir).unwrap();
        let error = Cluster::open(&dir).err().expect("no cluster").to_string();
        assert!(error.ends_with("holds no cluster (no cluster.state)"), "{error}");
        fs::create_dir_all(dir.join("node1/data")).unwrap();
        fs::create_dir_all(dir.join("node2")).unwrap();
        fs::create_dir_all(dir.join("node_modules")).unwrap();
        let error = Cluster::open(&dir).err().expect("no cluster").to_string();
        let expected = format!("remove {0}/node1 {0}/node2 and run `cluster up` again", dir.display());
        assert!(error.ends_with(&expected), "{error}");
        // The same directory named through a `..` is the same directory.
        let through_parent = dir.join("missing/..");
        let error = Cluster::open(&through_parent).err().expect("no cluster").to_string();
        assert!(error.ends_with(&expected), "{error}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_restart_refuses_settings_that_differ_from_the_cluster() {
        let program = std::env::current_exe().unwrap();
        let layout = two_nodes("gcs.fc_limit=32", program.clone());
        let cluster = Cluster::from_layout(Path::new("/tmp/c"), &layout);
        cluster.refuse_changes(&Requested::default()).unwrap();
        let same = Requested {
            node_count: Some(2),
            provider: Some(layout.provider.clone()),
            provider_options: Some("gcs.fc_limit=32".into()),
            no_tls: false,
            arbitrator: Some(program),
        };
        cluster.refuse_changes(&same).unwrap();
        let other = Requested {
            node_count: Some(3),
            provider_options: Some(String::new()),
            no_tls: true,
            arbitrator: Some("/bin/sh".into()),
            ..Requested::default()
        };
        let error = cluster.refuse_changes(&other).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "/tmp/c holds a cluster with other settings than given: --nodes 3 (it has 2), --provider-options \"\" \
                 (it has \"gcs.fc_limit=32\"), --no-tls (it has TLS), --arbitrator /bin/sh (it runs /"
            ),
            "{error}"
        );
    }
}
