//! `lockstep arbitrator`: garbd's command line over `lockstep_provider::arbitrator`.
//!
//! The same options as garbd (`--address`, `--group`, `--options`, `--name`, `--log`,
//! `--daemon`, `--cfg`), so a `garb` service definition needs only the program name changed.
use clap::Args;
use lockstep_provider::arbitrator::{Arbitrator, ArbitratorSettings};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Args, Debug, Default)]
pub struct ArbitratorArgs {
    /// Members of the running cluster: gcomm://host[:port],...
    #[arg(short, long)]
    address: Option<String>,
    /// The cluster's name (its nodes' wsrep_cluster_name).
    #[arg(short, long)]
    group: Option<String>,
    /// Provider options, key=value;... (gmcast.listen_addr, socket.ssl_*, evs.*, ...).
    #[arg(short, long)]
    options: Option<String>,
    /// Its name in views (default garb).
    #[arg(short, long)]
    name: Option<String>,
    /// Append log lines to this file instead of standard error.
    #[arg(short, long)]
    log: Option<PathBuf>,
    /// Run in the background (needs --log).
    #[arg(short, long)]
    daemon: bool,
    /// Read settings from a file of `key = value` lines (address, group, options, name, log);
    /// the command line wins.
    #[arg(short, long)]
    cfg: Option<PathBuf>,
}

pub fn run(args: ArbitratorArgs) {
    if let Err(e) = arbitrate(args) {
        eprintln!("lockstep arbitrator: {e}");
        std::process::exit(1);
    }
}

fn arbitrate(args: ArbitratorArgs) -> Result<(), String> {
    let args = match &args.cfg {
        Some(path) => with_file(args.clone_without_cfg(), &read_cfg(path)?)?,
        None => args,
    };
    if args.daemon {
        return daemonize(&args);
    }
    let address = args.address.clone().ok_or("--address gcomm://host[:port],... is required")?;
    let group = args.group.clone().ok_or("--group (the cluster's name) is required")?;
    init_logging(args.log.as_deref())?;
    let settings = ArbitratorSettings {
        address,
        group,
        options: args.options.clone().unwrap_or_default(),
        name: args.name.clone().unwrap_or_default(),
        // The ABI crate (`lockstep-abi`, whose library is named `lockstep`), not this binary.
        set_thread_schedule: lockstep::set_schedule,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    // Its error goes to standard error (`run`), and to the log too when that is a file.
    let to_log_file = |e: &String| {
        if args.log.is_some() {
            log::error!("{e}");
        }
    };
    let arbitrator = Arbitrator::start(&settings).inspect_err(to_log_file)?;
    let result = arbitrator.run(&stop);
    match &result {
        Ok(()) => log::info!("arbitrator stopped"),
        Err(e) => to_log_file(e),
    }
    result
}

impl ArbitratorArgs {
    fn clone_without_cfg(&self) -> ArbitratorArgs {
        ArbitratorArgs {
            address: self.address.clone(),
            group: self.group.clone(),
            options: self.options.clone(),
            name: self.name.clone(),
            log: self.log.clone(),
            daemon: self.daemon,
            cfg: None,
        }
    }
}

/// garbd's configuration file: `key = value` lines, `#` comments.
fn read_cfg(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_cfg(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse_cfg(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').ok_or_else(|| format!("line {}: expected key = value", number + 1))?;
        let value = value.trim().trim_matches('"');
        pairs.push((key.trim().to_string(), value.to_string()));
    }
    Ok(pairs)
}

/// Fills what the command line left out from the file's settings.
fn with_file(mut args: ArbitratorArgs, pairs: &[(String, String)]) -> Result<ArbitratorArgs, String> {
    for (key, value) in pairs {
        let slot = match key.as_str() {
            "address" => &mut args.address,
            "group" => &mut args.group,
            "options" => &mut args.options,
            "name" => &mut args.name,
            "log" => {
                args.log.get_or_insert_with(|| PathBuf::from(value));
                continue;
            }
            other => return Err(format!("unknown setting '{other}' (known: address, group, options, name, log)")),
        };
        slot.get_or_insert_with(|| value.clone());
    }
    Ok(args)
}

/// Starts this command again in the background, detached from the terminal, and returns.
fn daemonize(args: &ArbitratorArgs) -> Result<(), String> {
    let log = args.log.as_ref().ok_or("--daemon needs --log: a daemon has no terminal to write to")?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut command = Command::new(exe);
    command.arg("arbitrator");
    for (flag, value) in
        [("--address", &args.address), ("--group", &args.group), ("--options", &args.options), ("--name", &args.name)]
    {
        if let Some(value) = value {
            command.arg(flag).arg(value);
        }
    }
    let log = std::path::absolute(log).map_err(|e| format!("{}: {e}", log.display()))?;
    command.arg("--log").arg(&log);
    // Its own process group: the terminal's signals (Ctrl-C, hang-up) are not for it.
    use std::os::unix::process::CommandExt;
    command.process_group(0).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let child = command.spawn().map_err(|e| format!("cannot start in the background: {e}"))?;
    println!("{}", child.id());
    Ok(())
}

/// Log lines as `2026-11-25 18:00:00 [Note] ...`, to the file or standard error.
struct LineLogger {
    out: Mutex<Box<dyn Write + Send>>,
}

impl log::Log for LineLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => "ERROR",
            log::Level::Warn => "Warning",
            _ => "Note",
        };
        let line = format!("{} [{level}] {}\n", utc_now(), record.args());
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(line.as_bytes()).and_then(|_| out.flush());
        }
    }

    fn flush(&self) {}
}

fn init_logging(file: Option<&Path>) -> Result<(), String> {
    let out: Box<dyn Write + Send> = match file {
        Some(path) => Box::new(open_log(path)?),
        None => Box::new(std::io::stderr()),
    };
    let logger: &'static LineLogger = Box::leak(Box::new(LineLogger { out: Mutex::new(out) }));
    log::set_logger(logger).map_err(|e| e.to_string())?;
    log::set_max_level(log::LevelFilter::Info);
    Ok(())
}

fn open_log(path: &Path) -> Result<File, String> {
    OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))
}

fn utc_now() -> String {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc_text(seconds)
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time (proleptic Gregorian, UTC).
fn utc_text(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3_600, rest % 3_600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_read_as_utc_dates() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00");
        assert_eq!(utc_text(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc_text(1_795_651_199), "2026-11-25 23:59:59");
    }

    #[test]
    fn the_command_line_wins_over_the_file_and_unknown_settings_are_refused() {
        let file = parse_cfg("# garb\naddress = gcomm://a:4567,b:4567\ngroup=\"prod\"\n\noptions = gmcast.segment=1\n")
            .unwrap();
        let args = ArbitratorArgs { group: Some("test".into()), ..ArbitratorArgs::default() };
        let merged = with_file(args, &file).unwrap();
        assert_eq!(merged.address.as_deref(), Some("gcomm://a:4567,b:4567"));
        assert_eq!(merged.group.as_deref(), Some("test"));
        assert_eq!(merged.options.as_deref(), Some("gmcast.segment=1"));
        let bad = parse_cfg("sst = xtrabackup\n").unwrap();
        assert!(with_file(ArbitratorArgs::default(), &bad).unwrap_err().contains("unknown setting 'sst'"));
        assert!(parse_cfg("address gcomm://a").unwrap_err().contains("line 1"));
    }
}
