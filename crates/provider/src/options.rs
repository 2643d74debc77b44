//! Provider options: Galera's names, defaults and syntax (`key = value; key = value`).
//!
//! Names MariaDB, its mtr configs and operators pass must be accepted; an unknown name is
//! refused with an error naming it. Values are checked by kind so that a malformed value is
//! refused too. Hidden options (runtime triggers and TLS settings) are accepted but, as in
//! Galera, not echoed: mtr compares the echoed string before and after a test. Triggers
//! (`socket.ssl_reload`) are checked but never stored: see [`triggered`].
use crate::application::{SchedulePolicy, ThreadSchedule};
use crate::types::ParseError;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Bool,
    Integer,
    /// An integer in this range, both ends included.
    Within(i64, i64),
    /// A share from 0 to 1, 1 included only if `to_one` (Galera's ranges for its flow-control
    /// factors).
    Share {
        to_one: bool,
    },
    /// Bytes, with an optional K/M/G/T suffix.
    Size,
    /// ISO 8601 duration such as `PT30S` or `P1D`, or seconds (`1.5`); at most [`MAX_PERIOD`].
    Period,
    /// A thread scheduling policy and priority, `other:0`, `fifo:N` or `rr:N` (N 1-99);
    /// empty for the system's default.
    Schedule,
}

struct Spec {
    name: &'static str,
    kind: Kind,
    default: &'static str,
    hidden: bool,
    /// An action, not a setting: validated, acted on by the provider, never stored.
    trigger: bool,
}

const fn opt(name: &'static str, kind: Kind, default: &'static str) -> Spec {
    Spec { name, kind, default, hidden: false, trigger: false }
}

const fn hidden(name: &'static str, kind: Kind, default: &'static str) -> Spec {
    Spec { name, kind, default, hidden: true, trigger: false }
}

const fn trigger(name: &'static str, kind: Kind) -> Spec {
    Spec { name, kind, default: "", hidden: true, trigger: true }
}

/// Options the running node cannot change, as Galera refuses them: each is read only when
/// the node starts or connects (addresses, the cache, the TLS switch, the group threads'
/// scheduling, ...); a change would be echoed but not used. `repl.commit_order` and
/// `gcache.name`, not acted on, are refused as Galera refuses them. The certificate options
/// may change: `socket.ssl_reload` reads the files they name then.
const START_ONLY: &[&str] = &[
    "base_dir",
    "base_host",
    "base_port",
    "gcache.dir",
    "gcache.name",
    "gcache.size",
    "gcache.sync",
    "gcomm.thread_prio",
    "gmcast.listen_addr",
    "gmcast.segment",
    "ist.recv_addr",
    "ist.recv_bind",
    "pc.npvo",
    "repl.commit_order",
    "socket.compression",
    "socket.ssl",
];

/// The longest period an option takes: Galera keeps periods as i64 nanoseconds (about 292
/// years), and ours must not overflow where a deadline or a sum of milliseconds is made of one.
pub const MAX_PERIOD: Duration = Duration::from_nanos(i64::MAX as u64);

/// Defaults that depend on the node (`base_*`, directories, listen addresses) are filled in
/// by [`Options::new`]; `""` here means "derived".
const SPECS: &[Spec] = &[
    opt("base_dir", Kind::Text, ""),
    opt("base_host", Kind::Text, ""),
    opt("base_port", Kind::Within(1, 65535), "4567"),
    opt("cert.log_conflicts", Kind::Bool, "no"),
    opt("cert.optimistic_pa", Kind::Bool, "yes"),
    opt("debug", Kind::Bool, "no"),
    opt("evs.auto_evict", Kind::Integer, "0"),
    opt("evs.causal_keepalive_period", Kind::Period, "PT1S"),
    opt("evs.debug_log_mask", Kind::Text, "0x1"),
    opt("evs.delay_margin", Kind::Period, "PT1S"),
    opt("evs.delayed_keep_period", Kind::Period, "PT30S"),
    opt("evs.inactive_check_period", Kind::Period, "PT0.5S"),
    opt("evs.inactive_timeout", Kind::Period, "PT15S"),
    opt("evs.info_log_mask", Kind::Text, "0"),
    opt("evs.install_timeout", Kind::Period, "PT7.5S"),
    opt("evs.join_retrans_period", Kind::Period, "PT1S"),
    opt("evs.keepalive_period", Kind::Period, "PT1S"),
    opt("evs.max_install_timeouts", Kind::Integer, "3"),
    opt("evs.send_window", Kind::Integer, "4"),
    opt("evs.stats_report_period", Kind::Period, "PT1M"),
    opt("evs.suspect_timeout", Kind::Period, "PT5S"),
    opt("evs.use_aggregate", Kind::Bool, "true"),
    opt("evs.user_send_window", Kind::Integer, "2"),
    opt("evs.version", Kind::Integer, "1"),
    opt("evs.view_forget_timeout", Kind::Period, "P1D"),
    opt("gcache.dir", Kind::Text, ""),
    opt("gcache.keep_pages_size", Kind::Size, "0"),
    opt("gcache.mem_size", Kind::Size, "0"),
    opt("gcache.name", Kind::Text, "galera.cache"),
    opt("gcache.page_size", Kind::Size, "128M"),
    opt("gcache.recover", Kind::Bool, "yes"),
    opt("gcache.size", Kind::Size, "128M"),
    // Ours, not Galera's: fdatasync the group log before anything depending on it is sent
    // or acknowledged. See docs/design/group-durability-sync-before-send.md.
    opt("gcache.sync", Kind::Bool, "no"),
    opt("gcomm.thread_prio", Kind::Schedule, ""),
    opt("gcs.fc_debug", Kind::Integer, "0"),
    opt("gcs.fc_factor", Kind::Share { to_one: true }, "1.0"),
    // Above 0 as Galera requires: 0 would stop every writer.
    opt("gcs.fc_limit", Kind::Within(1, i64::MAX), "16"),
    opt("gcs.fc_master_slave", Kind::Bool, "no"),
    opt("gcs.fc_single_primary", Kind::Bool, "no"),
    opt("gcs.max_packet_size", Kind::Integer, "64500"),
    opt("gcs.max_throttle", Kind::Share { to_one: false }, "0.25"),
    opt("gcs.recv_q_hard_limit", Kind::Size, "9223372036854775807"),
    opt("gcs.recv_q_soft_limit", Kind::Share { to_one: false }, "0.25"),
    opt("gcs.stateless", Kind::Bool, "no"),
    opt("gcs.sync_donor", Kind::Bool, "no"),
    opt("gmcast.listen_addr", Kind::Text, ""),
    opt("gmcast.mcast_addr", Kind::Text, ""),
    opt("gmcast.mcast_ttl", Kind::Integer, "1"),
    opt("gmcast.peer_timeout", Kind::Period, "PT3S"),
    opt("gmcast.segment", Kind::Within(0, 255), "0"),
    opt("gmcast.time_wait", Kind::Period, "PT5S"),
    opt("gmcast.version", Kind::Integer, "0"),
    opt("ist.recv_addr", Kind::Text, ""),
    opt("pc.announce_timeout", Kind::Period, "PT3S"),
    opt("pc.checksum", Kind::Bool, "false"),
    opt("pc.ignore_quorum", Kind::Bool, "false"),
    opt("pc.ignore_sb", Kind::Bool, "false"),
    opt("pc.linger", Kind::Period, "PT20S"),
    opt("pc.npvo", Kind::Bool, "false"),
    opt("pc.recovery", Kind::Bool, "true"),
    opt("pc.version", Kind::Integer, "0"),
    opt("pc.wait_prim", Kind::Bool, "true"),
    opt("pc.wait_prim_timeout", Kind::Period, "PT30S"),
    opt("pc.weight", Kind::Within(0, 255), "1"),
    opt("protonet.backend", Kind::Text, "asio"),
    opt("protonet.version", Kind::Integer, "0"),
    // Ours, not Galera's: nice levels an applier rises by while it applies a streaming
    // fragment or a big writeset. See docs/design/applier-priority.md.
    opt("repl.applier_boost", Kind::Within(0, 20), "10"),
    opt("repl.causal_read_timeout", Kind::Period, "PT30S"),
    opt("repl.commit_order", Kind::Within(0, 3), "3"),
    opt("repl.key_format", Kind::Text, "FLAT8"),
    opt("repl.max_ws_size", Kind::Size, "2147483647"),
    opt("repl.proto_max", Kind::Integer, "11"),
    opt("socket.checksum", Kind::Integer, "2"),
    // Ours, not Galera's: deflate what this node sends with writesets in it (the group's
    // messages; state transfers are not). See docs/design/group-segments.md.
    opt("socket.compression", Kind::Bool, "no"),
    opt("socket.recv_buf_size", Kind::Text, "auto"),
    opt("socket.send_buf_size", Kind::Text, "auto"),
    hidden("gcache.freeze_purge_at_seqno", Kind::Text, "-1"),
    hidden("gmcast.isolate", Kind::Within(0, 2), "0"),
    hidden("gmcast.peer_addr", Kind::Text, ""),
    hidden("ist.keep_keys", Kind::Bool, "yes"),
    hidden("ist.recv_bind", Kind::Text, ""),
    hidden("socket.dynamic", Kind::Bool, "false"),
    hidden("socket.ssl", Kind::Bool, "no"),
    hidden("socket.ssl_ca", Kind::Text, ""),
    hidden("socket.ssl_cert", Kind::Text, ""),
    hidden("socket.ssl_cipher", Kind::Text, ""),
    hidden("socket.ssl_compression", Kind::Bool, "no"),
    hidden("socket.ssl_key", Kind::Text, ""),
    hidden("socket.ssl_password_file", Kind::Text, ""),
    trigger("socket.ssl_reload", Kind::Bool),
    trigger("pc.bootstrap", Kind::Bool),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError(pub String);

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}

/// Where this node lives, for the node-dependent defaults.
pub struct NodeSite<'a> {
    pub data_dir: &'a str,
    pub node_address: &'a str,
}

#[derive(Debug, Clone)]
pub struct Options {
    values: BTreeMap<&'static str, String>,
}

impl Options {
    pub fn new(site: &NodeSite<'_>) -> Options {
        let (host, port) = split_host_port(site.node_address);
        let mut values = BTreeMap::new();
        for spec in SPECS.iter().filter(|s| !s.trigger) {
            values.insert(spec.name, spec.default.to_string());
        }
        let dir = if site.data_dir.is_empty() { "./".to_string() } else { site.data_dir.to_string() };
        values.insert("base_dir", dir.clone());
        values.insert("gcache.dir", dir);
        values.insert("base_host", host.to_string());
        values.insert("ist.recv_addr", host.to_string());
        if let Some(port) = port {
            values.insert("base_port", port.to_string());
        }
        let mut options = Options { values };
        options.derive_listen_addr();
        options
    }

    fn derive_listen_addr(&mut self) {
        let port = self.values["base_port"].clone();
        self.values.insert("gmcast.listen_addr", format!("tcp://0.0.0.0:{port}"));
    }

    /// Applies `key=value;key=value`. All or nothing: on error nothing changes.
    pub fn apply(&mut self, text: &str) -> Result<(), OptionError> {
        self.apply_with(text, false)
    }

    /// The same for `SET GLOBAL wsrep_provider_options`: a change to an option of
    /// [`START_ONLY`] is refused, as Galera refuses it; its current value again passes.
    pub fn apply_at_runtime(&mut self, text: &str) -> Result<(), OptionError> {
        self.apply_with(text, true)
    }

    fn apply_with(&mut self, text: &str, runtime: bool) -> Result<(), OptionError> {
        let mut updated = self.clone();
        let mut listen_addr_given = false;
        for item in split_items(text) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| OptionError(format!("malformed provider option '{item}': expected key=value")))?;
            let (key, value) = (key.trim(), value.trim());
            let spec = SPECS
                .iter()
                .find(|s| s.name == key)
                .ok_or_else(|| OptionError(format!("Unknown parameter '{key}'")))?;
            check_value(spec.kind, value)
                .map_err(|e| OptionError(format!("bad value for provider option '{key}': {e}")))?;
            // Its own value again is no change (a saved `@@wsrep_provider_options` restored whole).
            if runtime && START_ONLY.contains(&spec.name) && !self.holds(spec, value) {
                return Err(OptionError(format!(
                    "'{key}' cannot be changed at runtime: it is read when the node starts or connects"
                )));
            }
            if spec.trigger {
                continue;
            }
            listen_addr_given |= key == "gmcast.listen_addr";
            updated.values.insert(spec.name, value.to_string());
        }
        if !listen_addr_given && updated.values["base_port"] != self.values["base_port"] {
            updated.derive_listen_addr();
        }
        *self = updated;
        Ok(())
    }

    /// Whether option `spec` has `value` already (as it means, not only as it is written).
    fn holds(&self, spec: &Spec, value: &str) -> bool {
        let current = self.get(spec.name);
        match spec.kind {
            Kind::Schedule => parse_schedule(value) == parse_schedule(current),
            Kind::Bool => parse_bool(value) == parse_bool(current),
            Kind::Integer | Kind::Within(..) => parse_integer(value) == parse_integer(current),
            Kind::Size => parse_size(value) == parse_size(current),
            _ => value == current,
        }
    }

    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map_or("", String::as_str)
    }

    /// The echo MariaDB shows as `@@wsrep_provider_options`.
    pub fn render(&self) -> String {
        SPECS
            .iter()
            // Galera echoes a hidden option once it is given a value of its own.
            .filter(|s| !s.trigger && (!s.hidden || self.values[s.name] != s.default))
            .map(|s| format!("{} = {}", s.name, self.values[s.name]))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn flag(&self, key: &str) -> bool {
        parse_bool(self.get(key)).unwrap_or(false)
    }

    pub fn period(&self, key: &str) -> Duration {
        parse_period(self.get(key)).unwrap_or(Duration::from_secs(30))
    }

    /// An integer option's value (0 for one that does not parse, which `apply` refuses).
    pub fn integer(&self, key: &str) -> i64 {
        parse_integer(self.get(key)).unwrap_or(0)
    }

    /// A size option's value (`u64::MAX` for one that does not parse, which `apply` refuses).
    pub fn size(&self, key: &str) -> u64 {
        parse_size(self.get(key)).unwrap_or(u64::MAX)
    }

    /// A schedule option's value; `None` for the system's default (empty).
    pub fn schedule(&self, key: &str) -> Option<ThreadSchedule> {
        parse_schedule(self.get(key)).flatten()
    }
}

/// The triggers `text` (as given to [`Options::apply`]) sets to a true value, such as
/// `socket.ssl_reload` for `SET GLOBAL wsrep_provider_options='socket.ssl_reload=1'`.
pub fn triggered(text: &str) -> Vec<&'static str> {
    split_items(text)
        .filter_map(|item| item.split_once('='))
        .filter_map(|(key, value)| {
            let spec = SPECS.iter().find(|s| s.trigger && s.name == key.trim())?;
            parse_bool(value.trim()).unwrap_or(false).then_some(spec.name)
        })
        .collect()
}

/// Splits on `;`, dropping empty items; a value may not itself contain `;`.
fn split_items(text: &str) -> impl Iterator<Item = &str> {
    text.split(';').map(str::trim).filter(|s| !s.is_empty())
}

fn split_host_port(address: &str) -> (&str, Option<u16>) {
    let address = address.trim();
    if let Some((host, port)) = address.rsplit_once(':') {
        if let Ok(port) = port.parse::<u16>() {
            if !host.contains(':') || host.starts_with('[') {
                return (host, Some(port));
            }
        }
    }
    (address, None)
}

fn check_value(kind: Kind, value: &str) -> Result<(), ParseError> {
    let ok = match kind {
        Kind::Text => true,
        Kind::Bool => parse_bool(value).is_some(),
        Kind::Integer => parse_integer(value).is_some(),
        Kind::Within(low, high) => parse_integer(value).is_some_and(|v| (low..=high).contains(&v)),
        Kind::Share { to_one } => value.parse::<f64>().is_ok_and(|v| v >= 0.0 && (v < 1.0 || to_one && v == 1.0)),
        Kind::Size => parse_size(value).is_some(),
        Kind::Period => parse_period(value).is_some(),
        Kind::Schedule => parse_schedule(value).is_some(),
    };
    if ok {
        Ok(())
    } else {
        let expected = match kind {
            Kind::Within(low, high) => format!("an integer from {low} to {high}"),
            Kind::Share { to_one: true } => "a number from 0 to 1".to_owned(),
            Kind::Share { to_one: false } => "a number from 0 to below 1".to_owned(),
            Kind::Schedule => "a scheduling policy and priority: other:0, fifo:1-99 or rr:1-99".to_owned(),
            Kind::Period => "a period of at most 292 years: ISO 8601 such as PT30S or P1D, or seconds".to_owned(),
            kind => format!("a valid {kind:?}").to_lowercase(),
        };
        Err(ParseError(format!("'{value}' is not {expected}")))
    }
}

pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" | "on" => Some(true),
        "0" | "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// `policy:priority` as Galera's `gcomm.thread_prio` takes it: `Some(None)` for an empty
/// value (the system's default), `None` for one that is not valid.
pub fn parse_schedule(value: &str) -> Option<Option<ThreadSchedule>> {
    let value = value.trim();
    if value.is_empty() {
        return Some(None);
    }
    let (policy, priority) = value.split_once(':')?;
    let priority = priority.trim().parse::<i32>().ok()?;
    let policy = match policy.trim() {
        "other" if priority == 0 => SchedulePolicy::Other,
        "fifo" if (1..=99).contains(&priority) => SchedulePolicy::Fifo,
        "rr" if (1..=99).contains(&priority) => SchedulePolicy::RoundRobin,
        _ => return None,
    };
    Some(Some(ThreadSchedule { policy, priority }))
}

pub fn parse_size(value: &str) -> Option<u64> {
    let (digits, shift) = split_unit(value.trim())?;
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// A whole number as Galera reads one: a sign, digits, and K, M, G or T for a power of 1024
/// (mtr sets `gcs.fc_limit=1K`).
pub fn parse_integer(value: &str) -> Option<i64> {
    let value = value.trim();
    let (negative, unsigned) = match value.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let (digits, shift) = split_unit(unsigned)?;
    let magnitude = digits.parse::<i64>().ok()?.checked_mul(1i64 << shift)?;
    Some(if negative { -magnitude } else { magnitude })
}

/// The digits of a size or a whole number, and the shift its unit suffix stands for.
fn split_unit(value: &str) -> Option<(&str, u32)> {
    let (digits, unit) = match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => value.split_at(i),
        None => (value, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    (!digits.is_empty()).then_some((digits, shift))
}

/// A period as Galera reads it: ISO 8601, `P[nY][nM][nD][T[nH][nM][nS]]` (a year is 12
/// months of 30 days, as Galera counts them), or a plain number of seconds (`10`, `1.5`,
/// `.5`). `None` for anything else, or longer than [`MAX_PERIOD`].
pub fn parse_period(value: &str) -> Option<Duration> {
    let value = value.trim();
    let seconds = match value.strip_prefix('P') {
        Some(rest) => {
            let (date, time) = match rest.split_once('T') {
                Some((_, "")) => return None,
                Some((date, time)) => (date, time),
                None => (rest, ""),
            };
            const DAY: f64 = 86400.0;
            units(date, &[('Y', 360.0 * DAY), ('M', 30.0 * DAY), ('D', DAY)])?
                + units(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?
        }
        None => number(value)?,
    };
    Duration::try_from_secs_f64(seconds).ok().filter(|d| *d <= MAX_PERIOD)
}

/// Seconds in `text`, numbers each followed by its unit in the order of `scales`, each unit
/// at most once (`1D`, `2H30M`; empty is 0).
fn units(mut text: &str, scales: &[(char, f64)]) -> Option<f64> {
    let mut seconds = 0.0;
    for &(unit, scale) in scales {
        if let Some((n, rest)) = text.split_once(unit) {
            seconds += number(n)? * scale;
            text = rest;
        }
    }
    text.is_empty().then_some(seconds)
}

/// A number that is not negative: `10`, `1.5`, `.5`.
fn number(text: &str) -> Option<f64> {
    let digits = !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.');
    text.parse::<f64>().ok().filter(|_| digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options::new(&NodeSite { data_dir: "/var/lib/mysql/", node_address: "127.0.0.1" })
    }

    #[test]
    fn echo_uses_galera_format_and_derived_defaults() {
        let text = options().render();
        assert!(text.starts_with("base_dir = /var/lib/mysql/; base_host = 127.0.0.1; base_port = 4567;"));
        assert!(text.contains("gmcast.listen_addr = tcp://0.0.0.0:4567"));
        assert!(text.contains("repl.max_ws_size = 2147483647"));
        assert!(text.contains("gcache.size = 128M; gcache.sync = no; gcomm.thread_prio = ;"));
        assert!(!text.contains("gmcast.isolate"), "hidden options are not echoed");
    }

    #[test]
    fn mtr_style_options_are_accepted_and_echoed() {
        let mut o = options();
        o.apply("repl.causal_read_timeout=PT90S;base_port=16000;evs.suspect_timeout=PT10S;evs.inactive_timeout=PT30S;evs.install_timeout=PT15S;pc.wait_prim_timeout=PT60S;gcache.size=10M; ")
            .unwrap();
        assert!(!o.flag("gcache.sync"));
        o.apply("gcache.sync=yes").unwrap();
        assert!(o.flag("gcache.sync"));
        let text = o.render();
        assert!(text.contains("gcache.sync = yes"));
        assert!(text.contains("base_port = 16000"));
        assert!(text.contains("gmcast.listen_addr = tcp://0.0.0.0:16000"));
        assert!(text.contains("gcache.size = 10M"));
        assert_eq!(o.period("repl.causal_read_timeout"), Duration::from_secs(90));
        o.apply("gmcast.isolate=1").unwrap();
        o.apply("gmcast.isolate=0").unwrap();
        let refused = o.apply("gmcast.isolate=3").unwrap_err().to_string();
        assert!(refused.contains("'3' is not an integer from 0 to 2"), "{refused}");
        assert_eq!(o.render(), text, "setting and resetting a hidden option leaves the echo alone");
        o.apply("ist.recv_bind=127.0.0.1").unwrap();
        assert!(o.render().contains("ist.recv_bind = 127.0.0.1"), "a hidden option given a value is echoed");
    }

    #[test]
    fn flow_control_shares_are_refused_outside_galeras_ranges() {
        let mut o = options();
        o.apply("gcs.fc_factor=1; gcs.recv_q_soft_limit=0.0; gcs.max_throttle=0.99").unwrap();
        for bad in ["gcs.fc_factor=1.01", "gcs.recv_q_soft_limit=1.0", "gcs.max_throttle=-0.1", "gcs.max_throttle=NaN"]
        {
            assert!(o.apply(bad).is_err(), "{bad}");
        }
        let refused = o.apply("gcs.recv_q_soft_limit=1").unwrap_err().to_string();
        assert!(refused.contains("'1' is not a number from 0 to below 1"), "{refused}");
        assert_eq!(o.get("gcs.max_throttle"), "0.99");
    }

    #[test]
    fn ssl_reload_is_a_trigger_checked_but_never_stored_or_echoed() {
        let mut o = options();
        let before = o.render();
        o.apply("socket.ssl_reload=1").unwrap();
        assert_eq!(o.render(), before);
        assert_eq!(o.get("socket.ssl_reload"), "");
        assert!(o.apply("socket.ssl_reload=maybe").is_err());
        assert_eq!(triggered("gcs.fc_limit=9; socket.ssl_reload = YES"), vec!["socket.ssl_reload"]);
        assert!(triggered("socket.ssl_reload=0").is_empty());
    }

    #[test]
    fn unknown_names_and_bad_values_are_refused_without_partial_changes() {
        let mut o = options();
        let before = o.render();
        let err = o.apply("gcs.fc_limit=32;no.such.option=1").unwrap_err();
        assert!(err.0.contains("no.such.option"), "{err}");
        let err = o.apply("evs.suspect_timeout=soon").unwrap_err();
        assert!(err.0.contains("evs.suspect_timeout"), "{err}");
        assert!(o.apply("gcs.fc_limit").is_err());
        assert_eq!(o.render(), before);
    }

    #[test]
    fn periods_and_sizes_parse_like_galera() {
        assert_eq!(parse_period("PT0.5S"), Some(Duration::from_millis(500)));
        assert_eq!(parse_period("P1D"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_period("PT1M30S"), Some(Duration::from_secs(90)));
        assert_eq!(
            parse_period("P1Y2M3DT4H5M6.5S"),
            Some(Duration::from_secs_f64(((360 + 60 + 3) * 24 + 4) as f64 * 3600.0 + 306.5))
        );
        assert_eq!(parse_period("PT1M"), Some(Duration::from_secs(60)), "minutes after T, months before");
        for bad in ["P1DT", "PT5", "P1S", "PT1S2M", "PT-5S", "P1D2D", "PTS", "5s", "-1", "1e3", "", "."] {
            assert_eq!(parse_period(bad), None, "{bad}");
        }
        assert_eq!(parse_size("128M"), Some(128 << 20));
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("5X"), None);
    }

    #[test]
    fn plain_numbers_are_periods_in_seconds_as_galera_reads_them() {
        assert_eq!(parse_period("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_period("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_period(" .5 "), Some(Duration::from_millis(500)));
        let mut o = options();
        o.apply("evs.suspect_timeout=10").unwrap();
        assert_eq!(o.period("evs.suspect_timeout"), Duration::from_secs(10));
        assert!(o.render().contains("evs.suspect_timeout = 10;"), "echoed as given");
    }

    #[test]
    fn periods_past_292_years_are_refused_naming_the_option() {
        assert_eq!(parse_period("P106751D"), Some(Duration::from_secs(106_751 * 86_400)));
        let mut o = options();
        o.apply("evs.suspect_timeout=P106751D").unwrap();
        for huge in ["P106752D", "PT1e20S", "P1000000000000000D", "1e300", &"9".repeat(400)] {
            let err = o.apply(&format!("evs.suspect_timeout={huge}")).unwrap_err().to_string();
            assert!(err.contains("'evs.suspect_timeout'") && err.contains("292 years"), "{err}");
        }
        assert!(o.period("evs.suspect_timeout") <= MAX_PERIOD);
    }

    #[test]
    fn flow_control_limit_and_ports_and_commit_order_are_refused_outside_their_ranges() {
        let mut o = options();
        for bad in ["gcs.fc_limit=0", "gcs.fc_limit=-1", "gcs.fc_limit=16X", "base_port=0", "base_port=65536"] {
            let err = o.apply(bad).unwrap_err().to_string();
            assert!(err.contains(bad.split('=').next().unwrap()), "{err}");
        }
        for bad in ["repl.commit_order=4", "repl.commit_order=-1"] {
            assert!(o.apply(bad).is_err(), "{bad}");
        }
        o.apply("gcs.fc_limit=1; base_port=65535; repl.commit_order=0").unwrap();
        o.apply("gcs.fc_limit=9223372036854775807").unwrap();
        assert_eq!(o.integer("gcs.fc_limit"), i64::MAX);
        // Galera reads whole numbers with a K/M/G/T suffix (mtr inconsistency_shutdown).
        o.apply("gcs.fc_limit=1K").unwrap();
        assert_eq!(o.integer("gcs.fc_limit"), 1024);
        assert!(o.apply("gcs.fc_limit=8T").is_ok() && o.apply("gcs.fc_limit=9000000T").is_err(), "overflow refused");
        assert_eq!(super::parse_integer("-2k"), Some(-2048));
    }

    #[test]
    fn options_read_only_at_start_or_connect_are_refused_at_runtime_but_set_at_load() {
        let changes = [
            "base_dir=/elsewhere/",
            "base_host=10.0.0.9",
            "base_port=5000",
            "gcache.dir=/elsewhere/",
            "gcache.name=other.cache",
            "gcache.size=1G",
            "gcache.sync=yes",
            "gmcast.listen_addr=tcp://0.0.0.0:5000",
            "gmcast.segment=2",
            "ist.recv_addr=10.0.0.9:5001",
            "ist.recv_bind=0.0.0.0",
            "repl.commit_order=2",
            "socket.compression=yes",
            "socket.ssl=yes",
        ];
        for change in changes {
            let mut o = options();
            let before = o.render();
            let err = o.apply_at_runtime(&format!("gcs.fc_limit=5; {change}")).unwrap_err().to_string();
            let key = change.split('=').next().unwrap();
            assert!(err.contains(&format!("'{key}' cannot be changed at runtime")), "{err}");
            assert_eq!(o.render(), before, "all or nothing");
            o.apply(change).unwrap();
        }
        let mut o = options();
        o.apply_at_runtime("gcache.size=128M; base_port = 4567; gcache.sync=false; gmcast.segment=00")
            .expect("their current values, written otherwise");
        o.apply_at_runtime(&o.render()).expect("the node's own echo, set again");
        o.apply_at_runtime(
            "evs.suspect_timeout=PT10S; repl.max_ws_size=1M; gcs.recv_q_hard_limit=1M; socket.ssl_cert=/c.pem; socket.ssl_key=/k.pem; socket.ssl_ca=/ca.pem",
        )
        .expect("options the running node takes");
    }

    #[test]
    fn thread_schedules_parse_as_galeras_gcomm_thread_prio() {
        let rr = ThreadSchedule { policy: SchedulePolicy::RoundRobin, priority: 2 };
        assert_eq!(parse_schedule("rr:2"), Some(Some(rr)));
        assert_eq!(parse_schedule(""), Some(None));
        assert_eq!(parse_schedule("other:0").flatten().map(|s| s.to_string()), Some("other:0".into()));
        for bad in ["fifo", "fifo:0", "fifo:100", "other:5", "batch:0", "rr:x", ":1"] {
            assert_eq!(parse_schedule(bad), None, "{bad}");
        }
        let mut o = options();
        let err = o.apply("gcomm.thread_prio=fifo:0").unwrap_err();
        assert!(err.0.contains("gcomm.thread_prio") && err.0.contains("fifo:1-99"), "{}", err.0);
        o.apply("gcomm.thread_prio=fifo:3").unwrap();
        assert_eq!(o.schedule("gcomm.thread_prio"), Some(ThreadSchedule { policy: SchedulePolicy::Fifo, priority: 3 }));
        let err = o.apply_at_runtime("gcs.fc_limit=5; gcomm.thread_prio=rr:2").unwrap_err();
        assert!(err.0.contains("cannot be changed at runtime"), "{}", err.0);
        assert_eq!(o.get("gcs.fc_limit"), "16", "all or nothing");
        let echoed = o.render();
        o.apply_at_runtime(&echoed).expect("the node's own echo, set again");
        o.apply_at_runtime("gcomm.thread_prio = fifo:03").expect("the same schedule, written otherwise");
    }

    #[test]
    fn node_address_port_becomes_base_port() {
        let o = Options::new(&NodeSite { data_dir: "/d/", node_address: "10.0.0.5:5000" });
        assert_eq!(o.get("base_host"), "10.0.0.5");
        assert_eq!(o.get("base_port"), "5000");
    }
}
