//! What `lockstep cluster top` shows, computed from two status samples per node: pure, so
//! the figures are tested without servers.
use lockstep_cluster::WsrepStatus;
use std::fmt::Write;

/// One node's status at one moment, or why it could not be read.
pub struct Sample {
    pub name: String,
    pub status: Result<WsrepStatus, String>,
}

/// One node's line: rates over the interval between two samples.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    pub name: String,
    /// `wsrep_local_state_comment`, or `non-Primary`, or why there is no status.
    pub state: String,
    /// Events of the cluster's order this node committed per second (`wsrep_last_committed`).
    pub commits_per_s: Option<f64>,
    /// Its clients' commits per second (`wsrep_local_commits`).
    pub local_commits_per_s: Option<f64>,
    /// `wsrep_local_recv_queue`: received, not yet applied.
    pub apply_queue: Option<i64>,
    /// Share of the interval the cluster's writers were paused by flow control.
    pub paused_percent: Option<f64>,
    /// Flow-control stops this node asked for (it was the slow one).
    pub fc_sent: Option<i64>,
    /// Seqnos behind the most advanced node, and that lag in time at the cluster's rate. The
    /// nodes are read in parallel, a few milliseconds apart: under load that skew shows as a
    /// lag of a few ms on any node, the writer's included.
    pub lag_seqnos: Option<i64>,
    pub lag_ms: Option<f64>,
    /// Certification failures and brute-force aborts per second.
    pub conflicts_per_s: Option<f64>,
}

/// Rows for `now`, with rates against `before` (the previous refresh, same nodes in the same
/// order) over `seconds`.
pub fn rows(before: Option<&[Sample]>, now: &[Sample], seconds: f64) -> Vec<Row> {
    let committed = |s: &Sample| s.status.as_ref().ok().and_then(|s| int(s, "wsrep_last_committed"));
    let top_now = now.iter().filter_map(committed).max();
    let top_before = before.and_then(|b| b.iter().filter_map(committed).max());
    let cluster_rate = match (top_before, top_now) {
        (Some(b), Some(n)) if seconds > 0.0 => Some((n - b).max(0) as f64 / seconds),
        _ => None,
    };
    now.iter()
        .enumerate()
        .map(|(i, sample)| {
            let earlier = before.and_then(|b| b.get(i)).filter(|b| b.name == sample.name);
            row(earlier, sample, seconds, top_now, cluster_rate)
        })
        .collect()
}

fn row(before: Option<&Sample>, now: &Sample, seconds: f64, top: Option<i64>, cluster_rate: Option<f64>) -> Row {
    let status = match &now.status {
        Ok(status) => status,
        Err(why) => return Row::unreadable(&now.name, why),
    };
    let before = before.and_then(|b| b.status.as_ref().ok());
    let rate = |names: &[&str]| -> Option<f64> {
        let sum = |s: &WsrepStatus| names.iter().map(|n| int(s, n)).sum::<Option<i64>>();
        let (b, n) = (sum(before?)?, sum(status)?);
        (seconds > 0.0).then(|| (n - b).max(0) as f64 / seconds)
    };
    let lag_seqnos = top.zip(int(status, "wsrep_last_committed")).map(|(top, own)| top - own);
    let lag_ms = match (lag_seqnos, cluster_rate) {
        (Some(0), _) => Some(0.0),
        (Some(lag), Some(rate)) if rate > 0.0 => Some(lag as f64 / rate * 1000.0),
        _ => None,
    };
    let primary = status.get("wsrep_cluster_status").is_none_or(|s| s == "Primary");
    let state = if primary {
        status.get("wsrep_local_state_comment").unwrap_or("?").to_string()
    } else {
        status.get("wsrep_cluster_status").unwrap_or("?").to_string()
    };
    Row {
        name: now.name.clone(),
        state,
        commits_per_s: rate(&["wsrep_last_committed"]),
        local_commits_per_s: rate(&["wsrep_local_commits"]),
        apply_queue: int(status, "wsrep_local_recv_queue"),
        paused_percent: rate(&["wsrep_flow_control_paused_ns"]).map(|ns_per_s| (ns_per_s / 1e7).min(100.0)),
        fc_sent: int(status, "wsrep_flow_control_sent"),
        lag_seqnos,
        lag_ms,
        conflicts_per_s: rate(&["wsrep_local_cert_failures", "wsrep_local_bf_aborts"]),
    }
}

impl Row {
    fn unreadable(name: &str, why: &str) -> Row {
        Row { name: name.to_string(), state: why.to_string(), ..Row::default() }
    }
}

fn int(status: &WsrepStatus, name: &str) -> Option<i64> {
    status.get(name)?.trim().parse().ok()
}

const HEADER: [&str; 10] =
    ["NODE", "STATE", "COMMITS/S", "LOCAL/S", "APPLY Q", "FC PAUSED", "FC SENT", "LAG", "LAG MS", "CONFLICTS/S"];

/// The table, one line per node under a header; `-` where a figure is not known yet (rates
/// need two samples). The first line says what the table is.
pub fn render(title: &str, rows: &[Row]) -> String {
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.state.clone(),
                figure(r.commits_per_s, 0),
                figure(r.local_commits_per_s, 0),
                whole(r.apply_queue),
                r.paused_percent.map_or("-".into(), |p| format!("{p:.1}%")),
                whole(r.fc_sent),
                whole(r.lag_seqnos),
                figure(r.lag_ms, 0),
                figure(r.conflicts_per_s, 1),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|c| cells.iter().map(|row| row[c].chars().count()).chain([HEADER[c].len()]).max().unwrap_or(0))
        .collect();
    let mut out = format!("{title}\n");
    let mut line = |values: Vec<&str>| {
        let text: Vec<String> = values
            .iter()
            .enumerate()
            // Names and states to the left, figures to the right.
            .map(|(c, v)| if c < 2 { format!("{v:<w$}", w = widths[c]) } else { format!("{v:>w$}", w = widths[c]) })
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(HEADER.to_vec());
    for row in &cells {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

fn whole(value: Option<i64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, pairs: &[(&str, &str)]) -> Sample {
        let text: String = pairs.iter().map(|(n, v)| format!("{n}\t{v}\n")).collect();
        Sample { name: name.into(), status: Ok(WsrepStatus::parse(&text)) }
    }

    fn node(name: &str, committed: i64, local: i64, paused_ns: i64, queue: i64, conflicts: i64) -> Sample {
        let (committed, local, paused, queue, conflicts) =
            (committed.to_string(), local.to_string(), paused_ns.to_string(), queue.to_string(), conflicts.to_string());
        sample(
            name,
            &[
                ("wsrep_cluster_status", "Primary"),
                ("wsrep_local_state_comment", "Synced"),
                ("wsrep_last_committed", &committed),
                ("wsrep_local_commits", &local),
                ("wsrep_flow_control_paused_ns", &paused),
                ("wsrep_flow_control_sent", "3"),
                ("wsrep_local_recv_queue", &queue),
                ("wsrep_local_cert_failures", &conflicts),
                ("wsrep_local_bf_aborts", "1"),
            ],
        )
    }

    #[test]
    fn rates_lag_and_paused_share_come_from_two_samples() {
        let before = [node("node1", 1000, 900, 0, 0, 0), node("node2", 990, 0, 0, 5, 0)];
        // Two seconds later: node 1 committed 400 (300 its own), node 2 is 200 behind.
        let now = [node("node1", 1400, 1200, 500_000_000, 0, 4), node("node2", 1200, 0, 500_000_000, 40, 0)];
        let rows = rows(Some(&before), &now, 2.0);
        assert_eq!(rows[0].commits_per_s, Some(200.0));
        assert_eq!(rows[0].local_commits_per_s, Some(150.0));
        assert_eq!(rows[0].paused_percent, Some(25.0));
        assert_eq!(rows[0].conflicts_per_s, Some(2.0));
        assert_eq!((rows[0].lag_seqnos, rows[0].lag_ms), (Some(0), Some(0.0)));
        assert_eq!(rows[1].commits_per_s, Some(105.0));
        assert_eq!(rows[1].apply_queue, Some(40));
        // The cluster ordered 200 a second: 200 seqnos behind is one second.
        assert_eq!((rows[1].lag_seqnos, rows[1].lag_ms), (Some(200), Some(1000.0)));
    }

    #[test]
    fn the_first_refresh_and_an_unreadable_node_show_what_is_known() {
        let now = [
            node("node1", 10, 10, 0, 0, 0),
            Sample { name: "node2".into(), status: Err("no answer".into()) },
            sample("node3", &[("wsrep_cluster_status", "non-Primary"), ("wsrep_last_committed", "7")]),
        ];
        let rows = rows(None, &now, 1.0);
        assert_eq!(rows[0].commits_per_s, None, "a rate needs two samples");
        assert_eq!(rows[0].apply_queue, Some(0));
        assert_eq!(rows[1].state, "no answer");
        assert_eq!(rows[2].state, "non-Primary");
        assert_eq!(rows[2].lag_seqnos, Some(3));
        assert_eq!(rows[2].lag_ms, None, "no rate yet to turn seqnos into time");
    }

    #[test]
    fn the_table_aligns_figures_under_their_headers() {
        let before = [node("node1", 1000, 900, 0, 0, 0)];
        let now = [node("node1", 1400, 1200, 500_000_000, 12, 4)];
        let text = render("cluster x", &rows(Some(&before), &now, 1.0));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "cluster x");
        assert!(lines[1].starts_with("NODE   STATE   COMMITS/S"), "{text}");
        assert!(lines[2].starts_with("node1  Synced        400"), "{text}");
        assert!(lines[2].contains("50.0%"), "{text}");
        let queue_end = lines[1].find("APPLY Q").unwrap() + "APPLY Q".len();
        assert_eq!(&lines[2][queue_end - 2..queue_end], "12", "{text}");
    }
}
