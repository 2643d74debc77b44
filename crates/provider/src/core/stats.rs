//! Status variables with Galera's names (MariaDB adds the `wsrep_` prefix), computed from the
//! core's state.
use super::phase::{local_state, Component};
use super::{Core, Counters};

#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    Int(i64),
    Double(f64),
    Text(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct StatVar {
    pub name: &'static str,
    pub value: StatValue,
}

/// What the runtime adds to the core's state: values it keeps outside the core.
pub struct StatsSnapshot<'a> {
    /// `gmcast.segment`.
    pub segment: &'a str,
}

/// A queue's length, sampled whenever something joins it, since the last `FLUSH STATUS`:
/// Galera's `_min`, `_max` and `_avg`.
#[derive(Default, Debug, Clone, Copy)]
pub struct QueueSamples {
    samples: i64,
    sum: i64,
    min: i64,
    max: i64,
}

impl QueueSamples {
    pub fn sample(&mut self, len: usize) {
        let len = len as i64;
        (self.min, self.max) = if self.samples == 0 { (len, len) } else { (self.min.min(len), self.max.max(len)) };
        self.samples += 1;
        self.sum += len;
    }

    fn average(&self) -> f64 {
        average(self.sum, self.samples)
    }
}

/// One of Galera's monitors as its status reports it, since the last `FLUSH STATUS`: how
/// often a seqno entered while an earlier one had not left (`_oooe`, out-of-order entry), how
/// many were in at once on average (`_window`: the highest entered minus the last that left,
/// at each entry) and how many entries had to wait (`_waits`). Galera never counts `_oool`.
#[derive(Default, Debug, Clone, Copy)]
pub struct MonitorSamples {
    entered: i64,
    out_of_order: i64,
    window_sum: i64,
    last_entered: i64,
    waits: i64,
}

impl MonitorSamples {
    /// `seqno` enters while everything up to `last_left` has left.
    pub fn enter(&mut self, seqno: i64, last_left: i64) {
        self.last_entered = self.last_entered.max(seqno);
        self.entered += 1;
        self.out_of_order += i64::from(last_left + 1 < seqno);
        self.window_sum += (self.last_entered - last_left).max(0);
    }

    pub fn wait(&mut self) {
        self.waits += 1;
    }

    fn out_of_order_share(&self) -> f64 {
        average(self.out_of_order, self.entered)
    }

    fn window(&self) -> f64 {
        average(self.window_sum, self.entered)
    }
}

/// Replication latency (a local writeset from submission to its certified place in the
/// order) since the last `FLUSH STATUS`, reported as Galera reports `evs_repl_latency`:
/// `min/avg/max/stddev/samples` in seconds.
#[derive(Default, Debug, Clone, Copy)]
pub struct LatencySamples {
    samples: u64,
    sum: f64,
    sum_of_squares: f64,
    min: f64,
    max: f64,
}

impl LatencySamples {
    pub fn sample(&mut self, seconds: f64) {
        (self.min, self.max) =
            if self.samples == 0 { (seconds, seconds) } else { (self.min.min(seconds), self.max.max(seconds)) };
        self.samples += 1;
        self.sum += seconds;
        self.sum_of_squares += seconds * seconds;
    }

    fn render(&self) -> String {
        if self.samples == 0 {
            return "0/0/0/0/0".into();
        }
        let n = self.samples as f64;
        let mean = self.sum / n;
        let deviation = (self.sum_of_squares / n - mean * mean).max(0.0).sqrt();
        format!("{:.6}/{mean:.6}/{:.6}/{deviation:.6}/{}", self.min, self.max, self.samples)
    }
}

fn average(sum: i64, count: i64) -> f64 {
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

impl<W: Clone + PartialEq> Core<W> {
    pub fn stats(&self, outside: &StatsSnapshot<'_>) -> Vec<StatVar> {
        use StatValue::{Double, Int, Text};
        let c = &self.counters;
        let connection = self.connection.as_ref();
        let component = connection.map_or(Component::NonPrimary, |c| c.component);
        let (state, comment) = local_state(self.phase, component, self.desync_count > 0);
        let primary = connection.is_some_and(|_| component == Component::Primary && self.phase.app_ready());
        let members = connection.map_or(&[][..], |c| &c.view.members[..]);
        let weight: u32 = if primary { members.iter().map(|m| u32::from(m.weight)).sum() } else { 0 };
        let incoming = connection
            .map(|c| c.view.members.iter().map(|m| m.incoming_address.as_str()).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        let leader = connection
            .and_then(|c| c.leader.and_then(|id| c.view.members.iter().find(|m| m.id == id)))
            .map_or(String::new(), |m| m.name.clone());
        let name_of = |id| connection.and_then(|c| c.view.members.iter().find(|m| m.id == id)).map(|m| m.name.clone());
        let paused_by: Vec<String> = self.flow.stopping().filter_map(name_of).collect();
        let paced_by: Vec<String> = self.flow.pacing().filter_map(name_of).collect();
        let vars: Vec<(&'static str, StatValue)> = vec![
            ("local_state_uuid", Text(self.group().to_string())),
            ("protocol_version", Int(11)),
            ("protocol_application", Int(4)),
            ("protocol_replicator", Int(11)),
            ("protocol_GCS", Int(5)),
            ("last_committed", Int(self.committed.last_contiguous())),
            ("replicated", Int(c.replicated)),
            ("replicated_bytes", Int(c.replicated_bytes)),
            ("repl_keys", Int(c.repl_keys)),
            ("repl_keys_bytes", Int(c.repl_keys_bytes)),
            ("repl_data_bytes", Int(c.repl_data_bytes)),
            ("repl_other_bytes", Int(0)),
            ("received", Int(c.received)),
            ("received_bytes", Int(c.received_bytes)),
            ("local_commits", Int(c.local_commits)),
            ("local_cert_failures", Int(c.local_cert_failures)),
            ("local_replays", Int(c.local_replays)),
            ("local_send_queue", Int(self.send_queue_len() as i64)),
            ("local_send_queue_max", Int(c.send_queue.max)),
            ("local_send_queue_min", Int(c.send_queue.min)),
            ("local_send_queue_avg", Double(c.send_queue.average())),
            ("local_recv_queue", Int(self.queued_events() as i64)),
            ("local_recv_queue_max", Int(c.recv_queue.max)),
            ("local_recv_queue_min", Int(c.recv_queue.min)),
            ("local_recv_queue_avg", Double(c.recv_queue.average())),
            ("local_cached_downto", Int(connection.and_then(|c| c.cached).unwrap_or(-1))),
            ("flow_control_paused_ns", Int(self.flow.paused_ms(self.clock_ms) as i64 * 1_000_000)),
            ("flow_control_paused", Double(self.flow.paused_share(self.clock_ms))),
            ("flow_control_sent", Int(self.flow.stops_sent() as i64)),
            ("flow_control_recv", Int(self.flow.stops_received() as i64)),
            ("flow_control_active", Text(self.flow.paused().to_string())),
            ("flow_control_requested", Text(connection.is_some_and(|c| self.flow.requested(c.me)).to_string())),
            // Ours: which members hold the writers now (their wsrep_node_name), on every node.
            ("flow_control_paused_by", Text(paused_by.join(","))),
            // Ours: the members whose pace is in force, the slowest (writesets a second for the
            // whole group, 0 for none), how far apart it spaces this node's writesets, and the
            // apply rate this node measured on its appliers (what its pace is set from).
            ("flow_control_paced_by", Text(paced_by.join(","))),
            ("flow_control_pace", Int(self.flow.pace().map_or(0, i64::from))),
            ("flow_control_writer_interval_us", Int(self.flow.writer_interval(members.len()).as_micros() as i64)),
            ("flow_control_apply_rate", Double(self.flow.apply_rate())),
            ("cert_deps_distance", Double(average(c.deps_distance_sum, c.certified))),
            ("apply_oooe", Double(c.apply_monitor.out_of_order_share())),
            ("apply_oool", Double(0.0)),
            ("apply_window", Double(c.apply_monitor.window())),
            ("apply_waits", Int(c.apply_monitor.waits)),
            ("commit_oooe", Double(c.commit_monitor.out_of_order_share())),
            ("commit_oool", Double(0.0)),
            ("commit_window", Double(c.commit_monitor.window())),
            ("local_state", Int(state)),
            ("local_state_comment", Text(comment.into())),
            ("cert_index_size", Int(self.certification.size() as i64)),
            ("causal_reads", Int(c.causal_reads)),
            ("cert_interval", Double(average(c.interval_sum, c.certified))),
            ("open_transactions", Int(self.trxs.len() as i64)),
            ("open_connections", Int(0)),
            ("incoming_addresses", Text(incoming)),
            ("cluster_weight", Text(weight.to_string())),
            ("desync_count", Text(self.desync_count.to_string())),
            ("evs_delayed", Text(String::new())),
            ("evs_evict_list", Text(String::new())),
            ("evs_repl_latency", Text(c.replication_latency.render())),
            ("evs_state", Text(if connection.is_some() { "OPERATIONAL".into() } else { "CLOSED".into() })),
            ("gcomm_uuid", Text(connection.map_or(String::new(), |c| c.member.to_string()))),
            ("gmcast_segment", Text(outside.segment.to_string())),
            // Ours: which member orders writesets now (its wsrep_node_name); commits need a
            // majority, and the leader is where writes are cheapest.
            ("group_leader", Text(leader)),
        ];
        vars.into_iter().map(|(name, value)| StatVar { name, value }).collect()
    }

    /// Our writesets not yet ordered, and writers waiting for a pause or a flow-control stop
    /// to end before theirs can go: Galera's send queue.
    pub(super) fn send_queue_len(&self) -> usize {
        self.ordering.in_flight.values().filter(|f| f.outcome.is_none()).count() + self.unpause_waiters.len()
    }

    /// A local writeset took `latency` from submission to its certified place in the order.
    pub fn replicated_in(&mut self, latency: std::time::Duration) {
        self.counters.replication_latency.sample(latency.as_secs_f64());
    }

    /// `FLUSH STATUS`: resets the averages and rates, keeps totals and positions.
    pub fn stats_reset(&mut self) {
        self.flow.reset_stats(self.clock_ms);
        let c = &mut self.counters;
        *c = Counters {
            replicated: c.replicated,
            replicated_bytes: c.replicated_bytes,
            repl_keys: c.repl_keys,
            repl_keys_bytes: c.repl_keys_bytes,
            repl_data_bytes: c.repl_data_bytes,
            received: c.received,
            received_bytes: c.received_bytes,
            received_large_bytes: c.received_large_bytes,
            local_commits: c.local_commits,
            local_cert_failures: c.local_cert_failures,
            local_replays: c.local_replays,
            causal_reads: c.causal_reads,
            ..Counters::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{LatencySamples, MonitorSamples, QueueSamples};

    #[test]
    fn monitor_samples_count_out_of_order_entries_and_the_window() {
        let mut m = MonitorSamples::default();
        // 11 enters in order; 13 enters while 12 is still in; 12 waits.
        m.enter(11, 10);
        m.enter(13, 11);
        m.wait();
        m.enter(12, 11);
        assert_eq!((m.entered, m.out_of_order, m.waits), (3, 1, 1));
        assert_eq!(m.window_sum, 1 + 2 + 2);
        assert!((m.out_of_order_share() - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn replication_latency_renders_as_galera_min_avg_max_stddev_samples() {
        let mut l = LatencySamples::default();
        assert_eq!(l.render(), "0/0/0/0/0");
        for seconds in [0.001, 0.003] {
            l.sample(seconds);
        }
        assert_eq!(l.render(), "0.001000/0.002000/0.003000/0.001000/2");
    }

    #[test]
    fn queue_samples_keep_min_max_and_average_since_the_reset() {
        let mut q = QueueSamples::default();
        assert_eq!((q.min, q.max, q.average()), (0, 0, 0.0));
        for len in [3, 1, 5] {
            q.sample(len);
        }
        assert_eq!((q.min, q.max, q.average()), (1, 5, 3.0));
    }
}
