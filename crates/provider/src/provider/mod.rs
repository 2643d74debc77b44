//! The provider's runtime: the thread-facing edge around the deterministic [`Core`]. Server
//! threads call in through the ABI layer; the group member's driver thread hands deliveries
//! over through [`sink::CoreSink`]; a few threads of our own move state transfers. Each call
//! takes the core's lock for a few map operations, never across a callback, a socket, a file
//! or a copy of a writeset; what the core asks for (wake a waiter, order a control message,
//! write `grastate.dat`) happens after the lock is released. A blocked call parks its thread
//! until the one change it waits for. See docs/design/provider-core.md.
mod applier;
mod catch_up;
mod connection;
pub(crate) use connection::{group_config, group_thread_start, segment, weight};
mod control;
mod gap_spool;
mod isolation;
mod memory;
mod sink;
mod stats;
mod transactions;

pub use crate::core::{StatValue, StatVar, CAPABILITIES};

use crate::application::Application;
use crate::checkpoint::Checkpoint;
use crate::core::{starting_position, Core, Effects, FlowSettings, Settings};
use crate::grastate::StateFile;
use crate::options::{NodeSite, Options};
use crate::types::Gtid;
use lockstep_group::{GroupNode, Outbox};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::Instant;

pub const PROVIDER_NAME: &str = "Lockstep";
/// Galera-shaped (`<major>.<minor>(...)`) so that mtr's version gates parse it; the level we
/// aim to be compatible with, then our own version in parentheses.
pub const PROVIDER_VERSION: &str = concat!("4.23(lockstep ", env!("CARGO_PKG_VERSION"), ")");
pub const PROVIDER_VENDOR: &str = "Lockstep developers";

/// Everything `init` receives, copied out of the C arguments.
#[derive(Clone, Debug)]
pub struct InitArgs {
    pub node_name: String,
    pub node_address: String,
    pub node_incoming: String,
    pub data_dir: String,
    pub options: String,
    pub start_position: Gtid,
}

/// A parked thread the core may wake: compared by thread id.
#[derive(Clone, Debug)]
pub struct Parked(Thread);

impl Parked {
    fn current() -> Parked {
        Parked(std::thread::current())
    }
}

impl PartialEq for Parked {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

/// The group member of the current connection.
struct Link {
    generation: u64,
    node: GroupNode,
    /// To the thread that keeps the certification checkpoint (one waiting at most: a newer
    /// one comes soon enough).
    checkpoints: SyncSender<Box<Checkpoint>>,
    /// Dropped with the link: ends the connection's memory thread (`memory.rs`).
    _memory_thread: std::sync::mpsc::Sender<()>,
}

/// `grastate.dat` and the newest version of it written: writes race between threads, and
/// an older state must never replace a newer one.
struct SavedStateWriter {
    file: StateFile,
    /// Versions of the newest saved state and last primary component written.
    written: u64,
    last_primary_written: u64,
}

/// Whether `version` is newer than the one `written` holds, which it then becomes: effects
/// may be carried out by two threads at once, and an older write must not win.
fn newer(written: &mut u64, version: u64) -> bool {
    let newer = version > *written;
    if newer {
        *written = version;
    }
    newer
}

pub struct Provider {
    app: Arc<dyn Application>,
    node_name: String,
    node_address: String,
    node_incoming: String,
    options: Mutex<Options>,
    core: Mutex<Core<Parked>>,
    saved: Mutex<SavedStateWriter>,
    link: Mutex<Option<Arc<Link>>>,
    /// The process is being ended (`end_process`): later callers wait for it.
    ending: AtomicBool,
    /// The clock of flow control's writer turns.
    started: Instant,
}

/// What the core needs of the options.
fn settings(options: &Options) -> Settings {
    Settings {
        flow: FlowSettings {
            // Checked to be 1 or more when set.
            limit: options.integer("gcs.fc_limit").max(1) as u64,
            factor: options.get("gcs.fc_factor").parse().unwrap_or(1.0),
            single_primary: options.flag("gcs.fc_single_primary") || options.flag("gcs.fc_master_slave"),
        },
        optimistic_pa: options.flag("cert.optimistic_pa"),
        log_conflicts: options.flag("cert.log_conflicts"),
        max_writeset_bytes: connection::max_writeset_bytes(options),
        checkpoint_bytes: connection::checkpoint_bytes(options),
        applier_boost: options.integer("repl.applier_boost").clamp(0, 20) as i32,
        stateless: options.flag("gcs.stateless"),
        apply_queue_bytes: connection::apply_queue_bytes(options),
    }
}

impl Provider {
    pub fn init(args: InitArgs, app: Arc<dyn Application>) -> Result<Provider, String> {
        let mut options = Options::new(&NodeSite { data_dir: &args.data_dir, node_address: &args.node_address });
        options.apply(&args.options).map_err(|e| e.to_string())?;
        let base_dir = PathBuf::from(options.get("base_dir"));
        let (file, saved, lock_warning) = StateFile::open(&base_dir)
            .map_err(|e| format!("cannot open saved state in {}: {e}", base_dir.display()))?;
        if let Some(warning) = lock_warning {
            log::warn!("{warning}");
        }
        let position = starting_position(saved, args.start_position);
        let safe_to_bootstrap = saved.is_none_or(|s| s.safe_to_bootstrap);
        log::info!(
            "{PROVIDER_NAME} {PROVIDER_VERSION}: saved state {}, safe_to_bootstrap: {}; start position {}; initial position {position}",
            saved.map_or("none".to_string(), |s| s.position.to_string()),
            u8::from(safe_to_bootstrap),
            args.start_position,
        );
        let mut core = Core::new(settings(&options), position, safe_to_bootstrap);
        core.remember_last_primary(file.last_primary());
        Ok(Provider {
            app,
            node_name: args.node_name,
            node_address: args.node_address,
            node_incoming: args.node_incoming,
            options: Mutex::new(options),
            core: Mutex::new(core),
            saved: Mutex::new(SavedStateWriter { file, written: 0, last_primary_written: 0 }),
            link: Mutex::new(None),
            ending: AtomicBool::new(false),
            started: Instant::now(),
        })
    }

    pub fn capabilities(&self) -> u32 {
        CAPABILITIES
    }

    pub fn options_get(&self) -> String {
        lock(&self.options).render()
    }

    /// `SET GLOBAL wsrep_provider_options`. All or nothing: on error no option changes.
    pub fn options_set(&self, text: &str) -> Result<(), String> {
        let triggered = crate::options::triggered(text);
        let (before, after) = {
            let mut options = lock(&self.options);
            let mut updated = options.clone();
            updated.apply_at_runtime(text).map_err(|e| e.to_string())?;
            if triggered.contains(&"socket.ssl_reload") {
                // Before the statement's options are kept: a reload that fails leaves them all.
                self.reload_tls(&updated)?;
            }
            (std::mem::replace(&mut *options, updated.clone()), updated)
        };
        self.with_core(|core| core.configure(settings(&after)));
        if let Some(link) = self.link() {
            link.node.tune(connection::tuning(&after));
            link.node.set_ignore_split_brain(connection::ignores_split_brain(&after));
        }
        let weight = Some(connection::weight(&after)).filter(|&w| w != connection::weight(&before));
        if let (Some(weight), Some(link)) = (weight, self.link()) {
            // The new weight counts once the statement returns, as Galera's: wait for the voters.
            if !link.node.set_weight(weight, after.period("evs.suspect_timeout")) {
                log::info!("pc.weight={weight}: not in force yet (no primary component can change the voters now)");
            }
        }
        let isolation = after.integer("gmcast.isolate");
        if isolation != before.integer("gmcast.isolate") {
            self.isolate(isolation);
        }
        if triggered.contains(&"pc.bootstrap") {
            match self.link() {
                Some(link) => {
                    // A Note: the operator asked for it (mtr galera_3nodes.galera-features#115
                    // suppresses nothing of it).
                    log::info!("pc.bootstrap: making the members this node hears from a primary component");
                    link.node.bootstrap_primary();
                }
                None => log::info!("pc.bootstrap: not connected; nothing to bootstrap"),
            }
        }
        Ok(())
    }

    /// `socket.ssl_reload=1`: the files `options` name, which the same statement may have
    /// changed (mtr galera_ssl_reload sets new ones, then reloads), for the connections opened
    /// from now on.
    fn reload_tls(&self, options: &Options) -> Result<(), String> {
        let Some(link) = self.link() else {
            log::info!("socket.ssl_reload: not connected; certificates are read at connect");
            return Ok(());
        };
        let failed = |e: String| format!("socket.ssl_reload failed, the old certificates stay: {e}");
        let reloaded = match crate::tls_options::tls_config(options).map_err(failed)? {
            Some(config) => link.node.reload_tls(config).map_err(|e| failed(e.to_string()))?,
            None if link.node.tls().is_some() => {
                return Err(failed(
                    "TLS cannot be turned off at runtime: socket.ssl_cert and socket.ssl_key are empty".into(),
                ))
            }
            None => false,
        };
        if !reloaded {
            log::info!("socket.ssl_reload: this node runs without TLS, nothing to reload");
        }
        Ok(())
    }

    /// Galera's `gmcast.isolate`: 1 cuts the node off from every peer as a network failure
    /// would (it loses the primary component unless it can keep one alone), 0 ends that, 2
    /// also ends the node's replication for good (Galera terminates its group backend).
    fn isolate(&self, isolation: i64) {
        let link = self.link();
        if let Some(link) = &link {
            link.node.set_isolated(isolation != 0);
        }
        match (isolation, link.is_some()) {
            (0, _) => log::info!("gmcast.isolate=0: group traffic resumes"),
            (1, true) => log::info!("gmcast.isolate=1: this node is cut off from the group until gmcast.isolate=0"),
            (_, true) => {
                self.with_core(|core| core.fail("gmcast.isolate=2: group communication terminated on request"))
            }
            (_, false) => log::info!("gmcast.isolate={isolation}: not connected; takes effect at connect"),
        }
    }

    /// The core, locked. A panic that poisoned the lock left the core in a state nobody
    /// reasoned about: the node stops serving (every waiter is released with an error).
    fn lock_core(&self) -> MutexGuard<'_, Core<Parked>> {
        match self.core.lock() {
            Ok(core) => core,
            Err(poisoned) => {
                let mut core = poisoned.into_inner();
                core.fail("a panic interrupted the provider");
                core
            }
        }
    }

    /// Runs `f` on the core, then what it asked for once the lock is released.
    fn with_core<T>(&self, f: impl FnOnce(&mut Core<Parked>) -> T) -> T {
        let mut core = self.lock_core();
        let out = f(&mut core);
        let effects = core.take_effects();
        drop(core);
        self.execute(effects, None);
        out
    }

    /// Polls the core until `poll` returns `Some`, parking this thread in between: the core
    /// wakes it when what it registered for changes. `None` if `deadline` passed first.
    fn wait_for<T>(
        &self,
        deadline: Option<Instant>,
        mut poll: impl FnMut(&mut Core<Parked>, &Parked) -> Option<T>,
    ) -> Option<T> {
        let me = Parked::current();
        loop {
            let mut core = self.lock_core();
            let outcome = poll(&mut core, &me);
            let expired = outcome.is_none() && deadline.is_some_and(|d| Instant::now() >= d);
            if expired {
                core.abandon_wait(&me);
            }
            let effects = core.take_effects();
            drop(core);
            self.execute(effects, None);
            if outcome.is_some() || expired {
                return outcome;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => std::thread::park_timeout(d.saturating_duration_since(Instant::now())),
            }
        }
    }

    /// Carries out what the core asked for. On the group's driver thread (`outbox`), control
    /// messages go straight into the member; elsewhere through the node's queue.
    fn execute(&self, effects: Effects<Parked>, outbox: Option<&mut Outbox>) {
        if effects.is_empty() {
            return;
        }
        if let Some((version, state)) = effects.save {
            let mut saved = lock(&self.saved);
            if newer(&mut saved.written, version) {
                if let Err(e) = saved.file.write(&state) {
                    log::error!("failed to write {}: {e}", crate::grastate::FILE_NAME);
                }
            }
        }
        if let Some((version, others)) = effects.last_primary {
            let mut saved = lock(&self.saved);
            if newer(&mut saved.last_primary_written, version) {
                if let Err(e) = saved.file.write_last_primary(&others) {
                    log::warn!("failed to write {}: {e}", crate::grastate::LAST_PRIMARY_FILE_NAME);
                }
            }
        }
        if let Some(checkpoint) = effects.checkpoint {
            if let Some(link) = self.link() {
                let _ = link.checkpoints.try_send(checkpoint);
            }
        }
        match outbox {
            Some(outbox) => {
                for (control, tag) in effects.send {
                    outbox.send_message(control.encode(), tag);
                }
                for (writeset, tag) in effects.submit {
                    outbox.submit(writeset.encode(), tag);
                }
            }
            None if !effects.send.is_empty() || !effects.submit.is_empty() || effects.resume_deliveries => {
                if let Some(link) = self.link() {
                    for (control, tag) in effects.send {
                        link.node.send_message_tagged(control.encode(), tag);
                    }
                    for (writeset, tag) in effects.submit {
                        link.node.submit_tagged(writeset.encode(), tag);
                    }
                    if effects.resume_deliveries {
                        link.node.resume_deliveries();
                    }
                }
            }
            None => {}
        }
        for waiter in effects.wake {
            waiter.0.unpark();
        }
    }

    /// The group member of the current connection, if any.
    fn link(&self) -> Option<Arc<Link>> {
        lock(&self.link).clone()
    }

    pub fn last_committed_id(&self) -> Gtid {
        self.lock_core().last_committed_reported()
    }
}

/// Locks a mutex of the runtime's own (options, links, the state file): their holders only
/// copy values, so a poisoned one still holds consistent data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
