#!/usr/bin/env bash
# A WAN segment's relay dies under writes, both providers in one run:
#
#     bench/segment-relay-failover.sh [SECONDS (25)] [KILL_AT (6)] [ROW_BYTES (1500)]
#
# For each provider (Lockstep, then Galera 4): a 4-node cluster (`lockstep cluster up`, TLS
# on); nodes 2, 3 and 4 are restarted one at a time with `gmcast.segment=1` (node 1 stays in
# segment 0 and up), then every node must be Synced in a primary component of 4. One writer
# on node 1 (Python, pymysql, autocommit) inserts rows of ROW_BYTES random bytes into
# s.t for SECONDS, recording the id and time of each acknowledged insert; an error is
# recorded and the writer goes on (reconnecting if the connection is gone). Byte counters
# are the kernel's, as in segment-bytes.sh: one iptables OUTPUT rule per TCP connection
# between node 1's mariadbd and node 2's, 3's or 4's, labelled with the peer node, counting
# what node 1 sends on it (headers and TLS included); connections are looked for again every
# second, so one opened during the run is counted from then on. Counters and node 1's
# wsrep_replicated(_bytes) are sampled every 250 ms, wsrep_cluster_size every 100 ms.
# At KILL_AT seconds the relay, the segment-1 node that received the most bytes from node 1
# since the first second, gets `kill -9`; writes go on. Reported per provider:
#   - the relay and its share of the bytes into segment 1 before the kill;
#   - the longest gap between two acknowledged commits on node 1 that ends after the kill
#     (and the longest before the kill, for comparison: the machine's noise); when commits
#     were back at full rate: the end of the last 100 ms bin after the kill with fewer
#     commits than half the rate before the kill (from the first second on), followed by
#     1 s at that rate, and how many commits came in between (a slow trickle is no gap);
#   - when node 1's wsrep_cluster_size became 3 (the dead node out of its view);
#   - copies of each writeset sent into segment 1 (bytes node 1 sent to a node / node 1's
#     wsrep_replicated_bytes, over a window), per node and in all: before the kill, from the
#     kill until the eviction, after the eviction (about 1 in all: one member relays; about
#     2 after the kill: node 1 sends to both survivors directly);
#   - no writeset lost: once node 1 and the two surviving segment-1 nodes are at the same
#     wsrep_last_committed (60 s at most), every acknowledged id must be on all three, and the
#     three must have the same row count, SUM(CRC32(v)) and CHECKSUM TABLE (read with
#     wsrep_dirty_reads, so a node that stopped replicating is read too; each survivor's
#     wsrep_ready, cluster status, state and size at the end are reported if not
#     "ON Primary Synced 3").
# Then one summary line per provider with a timeline around the kill (per 0.5 s: commits,
# bytes node 1 sent to nodes 2, 3 and 4, cluster size), and a markdown table. Provider options are the
# generated ones plus gmcast.segment (suspect timeout: each provider's default, PT5S).
# BENCH_CASES="galera" runs one provider only (default "lockstep galera").
# BENCH_KEEP=1 keeps the work directory and says where: each cluster's logs
# (NAME/nodeN/error.log), NAME.json (every figure), NAME.json.acks (time and id of each
# acknowledged insert), .samples (counters) and .errors (the writer's).
# Needs root (iptables; `scripts/setup.sh` installs it). Rules and clusters are removed on exit.
set -uo pipefail
# shellcheck source=bench/lib.sh disable=SC1091 # followed with shellcheck -x
source "$(dirname "$0")/lib.sh"
command_line="bench/segment-relay-failover.sh $*"
bench_setup || exit 1
duration=${1:-25}
kill_at=${2:-6}
row_bytes=${3:-1500}
for number in "$duration" "$kill_at" "$row_bytes"; do
    [[ $number =~ ^[1-9][0-9]*$ ]] ||
        { echo "usage: $0 [SECONDS] [KILL_AT] [ROW_BYTES] (bad number: $number)" >&2; exit 2; }
done
((kill_at + 3 <= duration)) || { echo "KILL_AT must be at least 3 s before the end (SECONDS)" >&2; exit 2; }
((row_bytes <= 60000)) || { echo "ROW_BYTES is at most 60000" >&2; exit 2; }
command -v iptables >/dev/null || { echo "iptables missing: run scripts/setup.sh" >&2; exit 1; }
python=/usr/bin/python3
"$python" -c 'import pymysql' 2>/dev/null || { echo "$python has no pymysql" >&2; exit 1; }
bench_build yes || exit 1
[[ -z $lockstep_unusable ]] || { echo "$lockstep_unusable" >&2; exit 1; }
chain=LOCKSTEP_RELAY_$$
work=$(mktemp -d /tmp/lockstep-relay-failover.XXXXXX)
# shellcheck disable=SC2317,SC2154 # invoked by the EXIT trap; lockstep is set by bench_setup
cleanup() {
    iptables -w -D OUTPUT -j "$chain" 2>/dev/null
    iptables -w -F "$chain" 2>/dev/null
    iptables -w -X "$chain" 2>/dev/null
    for d in "$work"/*/; do [[ -d $d/node1 ]] && "$lockstep" cluster down --dir "$d" >/dev/null 2>&1; done
    if [[ ${BENCH_KEEP:-} == 1 ]]; then
        echo "bench: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
iptables -w -N "$chain" && iptables -w -I OUTPUT -j "$chain" || exit 1

# The measurement (writer, samplers, the kill, the check) and the report, in Python.
cat >"$work/failover.py" <<'PYTHON'
import json, os, re, signal, subprocess, sys, threading, time
import pymysql

def connect(socket, timeout=60):
    return pymysql.connect(unix_socket=socket, user="root", autocommit=True, connect_timeout=10,
                           read_timeout=timeout, write_timeout=timeout)

def status(conn, name):
    with conn.cursor() as c:
        c.execute("SHOW STATUS LIKE %s", (name,))
        row = c.fetchone()
    return row[1] if row else ""

def measure(dir, chain, duration, kill_at, row_bytes, out):
    nodes = [1, 2, 3, 4]
    sock = {n: f"{dir}/node{n}/mariadbd.sock" for n in nodes}
    pid = {n: int(open(f"{dir}/node{n}/mariadbd.pid").read()) for n in nodes}
    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0
    stop_writer, stop_samplers = threading.Event(), threading.Event()
    acks, errors, samples, sizes = [], [], [], []
    rules, rules_lock = {}, threading.Lock()  # (local, peer) -> node

    def refresh_rules():
        with rules_lock:
            add_rules()

    def add_rules():
        lines = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
        owner = {}
        for line in lines.splitlines():
            f = line.split()
            m = re.search(r"pid=(\d+)", line)
            if len(f) >= 4 and m:
                owner[(f[2], f[3])] = int(m.group(1))
        for (local, peer), p in owner.items():
            if p != pid[1] or (local, peer) in rules:
                continue
            for n in (2, 3, 4):
                if owner.get((peer, local)) == pid[n]:
                    rules[(local, peer)] = n
                    lhost, lport = local.rsplit(":", 1)
                    phost, pport = peer.rsplit(":", 1)
                    subprocess.run(["iptables", "-w", "-A", chain, "-p", "tcp", "-s", lhost, "--sport", lport,
                                    "-d", phost, "--dport", pport, "-m", "comment", "--comment", f"node{n}"],
                                   check=True)

    def read_counters():
        text = subprocess.run(["iptables", "-w", "-L", chain, "-n", "-v", "-x"], capture_output=True, text=True).stdout
        sent = {2: 0, 3: 0, 4: 0}
        for line in text.splitlines()[2:]:
            m = re.search(r"/\* node(\d) \*/", line)
            if m:
                sent[int(m.group(1))] += int(line.split()[1])
        return sent

    def writer():
        conn = None
        while not stop_writer.is_set():
            try:
                if conn is None:
                    conn = connect(sock[1])
                with conn.cursor() as c:
                    c.execute("INSERT INTO s.t (v) VALUES (%s)", (os.urandom(row_bytes),))
                    acks.append((now(), c.lastrowid))
            except Exception as e:
                code = e.args[0] if isinstance(e, pymysql.err.MySQLError) and e.args else type(e).__name__
                errors.append((now(), str(code), str(e)[:160]))
                if not isinstance(e, pymysql.err.MySQLError) or (isinstance(code, int) and code >= 2000):
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    def sample_counters():
        conn, tick = connect(sock[1], 5), 0
        while not stop_samplers.is_set():
            if tick % 4 == 0:
                refresh_rules()
            t, sent = now(), read_counters()
            try:
                rep, rep_bytes = int(status(conn, "wsrep_replicated")), int(status(conn, "wsrep_replicated_bytes"))
            except Exception:
                rep = rep_bytes = None
                try:
                    conn = connect(sock[1], 5)
                except Exception:
                    pass
            samples.append((t, sent, rep, rep_bytes, len(rules)))
            tick += 1
            time.sleep(max(0.0, tick * 0.25 - now()))
        conn.close()

    def sample_size():
        conn = connect(sock[1], 5)
        while not stop_samplers.is_set():
            try:
                sizes.append((now(), int(status(conn, "wsrep_cluster_size")), status(conn, "wsrep_cluster_status")))
            except Exception as e:
                sizes.append((now(), None, str(e)[:80]))
                try:
                    conn = connect(sock[1], 5)
                except Exception:
                    pass
            time.sleep(0.1)
        conn.close()

    admin = connect(sock[1], 10)
    leader_before = status(admin, "wsrep_group_leader")
    refresh_rules()
    threads = [threading.Thread(target=f, daemon=True) for f in (sample_counters, sample_size)]
    for th in threads:
        th.start()
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    time.sleep(max(0.0, kill_at - now()))
    start = next(s for s in samples if s[0] >= 1.0)
    last = samples[-1]
    into = {n: last[1][n] - start[1][n] for n in (2, 3, 4)}
    relay = max(into, key=into.get)
    share = into[relay] / max(1, sum(into.values()))
    leader_at_kill = status(admin, "wsrep_group_leader")
    os.kill(pid[relay], signal.SIGKILL)
    t_kill = now()
    time.sleep(max(0.0, duration - now()))
    stop_writer.set()
    w.join(120)
    t_end = now()
    writer_stuck = w.is_alive()
    # The eviction may come after the writes: wait for it (30 s after the kill at most).
    while now() < t_kill + 30 and not any(t > t_kill and s == 3 for t, s, _ in sizes):
        time.sleep(0.1)
    time.sleep(0.3)
    stop_samplers.set()
    for th in threads:
        th.join(10)
    leader_after = status(admin, "wsrep_group_leader")
    survivors = [n for n in nodes if n != relay]

    evicted = next((t - t_kill for t, s, _ in sizes if t > t_kill and s == 3), None)
    statuses = sorted({st for t, s, st in sizes if t > t_kill})
    # Commit gaps: the longest ending after the kill, and the longest before it.
    times = [t for t, _ in acks]
    gaps = [(b - a, a, b) for a, b in zip(times, times[1:])]
    after = [g for g in gaps if g[2] > t_kill]
    before = [g for g in gaps if g[2] <= t_kill and g[1] >= 1.0]
    gap = max(after) if after else None
    base = max(before)[0] if before else None
    first_after = next((t - t_kill for t in times if t > t_kill), None)
    # Back at full rate: 100 ms bins from the kill; the end of the last one with fewer commits than
    # half the rate before the kill (from the first second on), before 1 s of bins at that rate.
    need = 0.5 * 0.1 * sum(1 for t in times if 1.0 <= t < t_kill) / (t_kill - 1.0)
    full, good, i = None, 0, 0
    while good < 10 and t_kill + (i + 1) * 0.1 <= t_end:
        if sum(1 for t in times if t_kill + i * 0.1 <= t < t_kill + (i + 1) * 0.1) < need:
            full, good = (i + 1) * 0.1, 0
        else:
            good += 1
        i += 1
    full = full or 0.0
    slow_commits = sum(1 for t in times if t_kill < t <= t_kill + full)

    def at(t):
        """The counters at t, interpolated between the samples around it: (t, sent, rep, rep_bytes)."""
        ok = [s for s in samples if s[2] is not None]
        b = next((s for s in ok if s[0] >= t), ok[-1])
        a = next((s for s in reversed(ok) if s[0] <= t), ok[0])
        f = 0.0 if b[0] == a[0] else (t - a[0]) / (b[0] - a[0])
        mix = lambda x, y: x + (y - x) * f
        return (t, {n: mix(a[1][n], b[1][n]) for n in (2, 3, 4)}, mix(a[2], b[2]), mix(a[3], b[3]))

    def copies(t1, t2):
        a, b = at(t1), at(t2)
        if b[3] == a[3]:
            return None
        per = {n: (b[1][n] - a[1][n]) / (b[3] - a[3]) for n in (2, 3, 4)}
        return {"from": a[0] - t_kill, "to": b[0] - t_kill, "writesets": round(b[2] - a[2]),
                "bytes_per_writeset": (b[3] - a[3]) / max(1, b[2] - a[2]), "per_node": per,
                "survivors": sum(per[n] for n in survivors if n != 1)}

    windows = {"before": copies(1.0, t_kill), "kill_to_eviction": copies(t_kill, t_kill + evicted) if evicted else None,
               "after_eviction": copies(t_kill + evicted, t_end) if evicted and t_kill + evicted < t_end - 1 else None,
               "after_kill": copies(t_kill, t_end)}

    # Convergence, then the check (dirty reads: a node that stopped replicating is read too).
    conns = {n: connect(sock[n], 120) for n in survivors}
    for conn in conns.values():
        with conn.cursor() as c:
            c.execute("SET SESSION wsrep_dirty_reads = ON")
    deadline, converged = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        lc = {n: status(conns[n], "wsrep_last_committed") for n in survivors}
        if len(set(lc.values())) == 1:
            converged = True
            break
        time.sleep(0.2)
    else:
        converged = lc
    acked = {i for _, i in acks}
    check, states = {}, {}
    for n in survivors:
        states[n] = " ".join(status(conns[n], v) for v in ("wsrep_ready", "wsrep_cluster_status",
                                                             "wsrep_local_state_comment", "wsrep_cluster_size"))
        with conns[n].cursor() as c:
            c.execute("SELECT id FROM s.t")
            ids = {r[0] for r in c.fetchall()}
            c.execute("SELECT COUNT(*), SUM(CRC32(v)) FROM s.t")
            count, crc = c.fetchone()
            c.execute("CHECKSUM TABLE s.t")
            checksum = c.fetchone()[1]
        check[n] = {"rows": count, "crc": int(crc or 0), "checksum": checksum, "missing": len(acked - ids),
                    "missing_ids": sorted(acked - ids)[:10], "unacked_rows": len(ids - acked)}
    for conn in [admin, *conns.values()]:
        conn.close()
    same = len({(v["rows"], v["crc"], v["checksum"]) for v in check.values()}) == 1
    # Per 0.5 s around the kill: commits, bytes node 1 sent to each node, cluster size.
    timeline = []
    t = max(1.0, t_kill - 1.5)
    while t < min(t_end, t_kill + (evicted or 10) + 1.5):
        a, b = at(t), at(t + 0.5)
        size = [s for u, s, _ in sizes if t <= u < t + 0.5]
        timeline.append({"t": round(t - t_kill, 2), "commits": sum(1 for u in times if t <= u < t + 0.5),
                         "bytes": {n: round(b[1][n] - a[1][n]) for n in (2, 3, 4)},
                         "size": min((s for s in size if s is not None), default=None)})
        t += 0.5
    result = {"relay": relay, "relay_share": share, "relay_bytes": into, "leader_before": leader_before,
              "leader_at_kill": leader_at_kill, "leader_after": leader_after, "kill_at": t_kill, "end": t_end,
              "writer_stuck": writer_stuck, "acks": len(acks), "errors": len(errors), "error_samples": errors[:5],
              "gap": gap and {"length": gap[0], "from": gap[1] - t_kill, "to": gap[2] - t_kill},
              "resumed": gap and gap[2] - t_kill, "first_commit_after_kill": first_after,
              "full_rate_after": full, "slow_commits": slow_commits, "rate_before": need * 20, "gap_before_max": base,
              "evicted": evicted, "statuses_after_kill": statuses, "windows": windows, "converged": converged,
              "check": check, "same": same, "states": states, "survivors": survivors, "connections": samples[-1][4],
              "timeline": timeline}
    json.dump(result, open(out, "w"), indent=1)
    with open(out + ".acks", "w") as f:
        f.writelines(f"{t:.4f} {i}\n" for t, i in acks)
    with open(out + ".samples", "w") as f:
        f.writelines(f"{s[0]:.3f} {s[2]} {s[3]} {s[1][2]} {s[1][3]} {s[1][4]} {s[4]}\n" for s in samples)
    with open(out + ".errors", "w") as f:
        f.writelines(f"{t:.4f} {c} {m}\n" for t, c, m in errors)

def fmt(x, spec=".2f", unit=""):
    return "-" if x is None else f"{x:{spec}}{unit}"

def win(r, name, nodes=None):
    """Copies into segment 1 per writeset over a window: in all, then bytes (copies) per node."""
    w = r["windows"].get(name)
    if not w:
        return "-"
    nodes = nodes or [n for n in (2, 3, 4) if n != r["relay"]]
    size = w["bytes_per_writeset"]
    per = ", ".join(f"node{n} {w['per_node'][str(n)] * size:.0f} B ({w['per_node'][str(n)]:.2f})" for n in nodes)
    total = sum(w["per_node"][str(n)] for n in nodes)
    return f"{total:.2f}: {per}"

def lost(r):
    """Acknowledged ids missing: 0, or how many on which node."""
    per = [f"{r['check'][str(n)]['missing']} on node{n}" for n in r["survivors"] if r["check"][str(n)]["missing"]]
    return ", ".join(per) or "0"

def unwell(r):
    """The survivors not ready, Primary, Synced in a component of 3 at the end."""
    bad = [f"node{n} {r['states'][str(n)]}" for n in r["survivors"] if r["states"][str(n)] != "ON Primary Synced 3"]
    return "; NOT WELL at the end (wsrep_ready, cluster_status, state, size): " + ", ".join(bad) if bad else ""

def summary(name, r):
    g = r["gap"] or {}
    size = (r["windows"]["before"] or {}).get("bytes_per_writeset")
    rows = "/".join(str(r["check"][str(n)]["rows"]) for n in r["survivors"])
    return (f"{name}: relay node{r['relay']} ({r['relay_share'] * 100:.0f} % of node 1's bytes into segment 1; "
            f"leader {r['leader_before'] or '-'} before the writes, {r['leader_at_kill'] or '-'} at the kill, "
            f"{r['leader_after'] or '-'} after); longest commit gap {fmt(g.get('length'), '.2f', ' s')} "
            f"(kill {fmt(g.get('from'), '+.2f')} to {fmt(g.get('to'), '+.2f')} s; longest before the kill "
            f"{fmt(r['gap_before_max'], '.3f', ' s')}), commits at full rate again {fmt(r['full_rate_after'], '.1f', ' s')} "
            f"after the kill ({r['slow_commits']} commits in between; {r['rate_before']:.0f}/s before the kill); "
            f"size 3 on node 1 {fmt(r['evicted'], '.2f', ' s')} after the kill; writesets of {fmt(size, '.0f', ' B')}, "
            f"copies into segment 1 per writeset: before {win(r, 'before', [2, 3, 4])}; kill to eviction {win(r, 'kill_to_eviction')}; after eviction {win(r, 'after_eviction')}; "
            f"{r['acks']} acknowledged, {lost(r)} missing, {r['errors']} writer errors; rows on nodes "
            f"{','.join(map(str, r['survivors']))}: {rows}, checksums {'equal' if r['same'] else 'DIFFER'}"
            f"{'' if r['converged'] is True else ', NOT CONVERGED ' + json.dumps(r['converged'])}{unwell(r)}")

def report(pairs):
    results = [(name, json.load(open(path))) for name, path in pairs]
    for name, r in results:
        print(summary(name, r))
        print(f"  timeline of {name} (s from the kill: commits on node 1, bytes node 1 sent to node 2/3/4, cluster size):")
        for e in r["timeline"]:
            by = " ".join(f"{e['bytes'][str(n)]:>9}" for n in (2, 3, 4))
            print(f"    {e['t']:+6.1f} {e['commits']:>5} {by}  {e['size'] if e['size'] is not None else '-'}")
        if r["error_samples"]:
            print(f"  first writer errors of {name}: " + "; ".join(f"{t:.2f} s {c} {m}" for t, c, m in r["error_samples"]))
    print()
    print("| measure | " + " | ".join(n for n, _ in results) + " |")
    print("|---|" + "---:|" * len(results))
    def row(label, f):
        print(f"| {label} | " + " | ".join(f(r) for _, r in results) + " |")
    row("relay (share of node 1's bytes into segment 1 before the kill)",
        lambda r: f"node{r['relay']} ({r['relay_share'] * 100:.0f} %)")
    row("leader at the kill (Lockstep's wsrep_group_leader)", lambda r: r["leader_at_kill"] or "-")
    row("longest gap between commits on node 1, ending after the kill",
        lambda r: fmt((r["gap"] or {}).get("length"), ".2f", " s")
        + (f" ({r['gap']['from']:+.2f} to {r['gap']['to']:+.2f})" if r["gap"] else ""))
    row("commits at full rate again (≥ half the rate before, per 100 ms), from the kill",
        lambda r: fmt(r["full_rate_after"], ".1f", " s"))
    row("commits from the kill until then / rate before the kill",
        lambda r: f"{r['slow_commits']} / {r['rate_before']:.0f} per s")
    row("longest gap before the kill (noise)", lambda r: fmt(r["gap_before_max"], ".3f", " s"))
    row("wsrep_cluster_size 3 on node 1, from the kill", lambda r: fmt(r["evicted"], ".2f", " s"))
    row("writeset (node 1's wsrep_replicated_bytes per writeset)",
        lambda r: fmt((r["windows"]["before"] or {}).get("bytes_per_writeset"), ".0f", " B"))
    row("copies into segment 1 per writeset, before the kill: all; bytes (copies) to each",
        lambda r: win(r, "before", [2, 3, 4]))
    row("the same, kill to eviction: the survivors", lambda r: win(r, "kill_to_eviction"))
    row("the same, after eviction: the survivors", lambda r: win(r, "after_eviction"))
    row("acknowledged inserts / writer errors", lambda r: f"{r['acks']} / {r['errors']}")
    row("acknowledged ids missing on the 3 survivors", lambda r: str(lost(r)))
    row("survivors' rows, checksums", lambda r: "/".join(str(r["check"][str(n)]["rows"]) for n in r["survivors"])
        + (", equal" if r["same"] else ", DIFFER"))
    row("survivors Synced in a primary component of 3 at the end",
        lambda r: "yes" if not unwell(r) else unwell(r).split(": ", 1)[1])

if __name__ == "__main__":
    if sys.argv[1] == "measure":
        measure(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
    else:
        report([tuple(a.split("=", 1)) for a in sys.argv[2:]])
PYTHON

# why DIR: the last error lines of each node's log, for a failure report.
why() {
    local log
    for log in "$1"/node*/error.log "$1"/node*/mariadbd.out; do
        [[ -f $log ]] && grep -H -E '\[ERROR\]|panicked|error:' "$log" | tail -n 3
    done >&2
}

# run NAME PROVIDER: one measurement; its result in $work/NAME.json.
run() {
    local name=$1 provider=$2 dir=$work/$1 n reason segments
    reason=$(bench_cluster_up "$dir" "$provider" 4 "$dir-up.log") || { echo "$name: FAILED (cluster up: $reason)"; why "$dir"; return 1; }
    for n in 2 3 4; do
        reason=$(bench_restart_with "$dir" "$provider" "$n" "gmcast.segment=1" 4) ||
            { echo "$name: FAILED (restart of node $n in segment 1: $reason)"; why "$dir"; return 1; }
    done
    reason=$(bench_cluster_check "$dir" 4) || { echo "$name: FAILED (not synced: $reason)"; why "$dir"; return 1; }
    segments=$(for n in 1 2 3 4; do bench_wsrep_var "$dir/node$n/mariadbd.sock" wsrep_gmcast_segment; done | paste -sd,)
    echo "$name: 4 nodes Synced, wsrep_gmcast_segment of nodes 1-4: ${segments:-(not reported)}," \
        "provider $(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_provider_version)"
    bench_sql "$dir/node1/mariadbd.sock" "CREATE DATABASE s;
        CREATE TABLE s.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARBINARY(60000) NOT NULL)" || return 1
    bench_converged "$dir" 30 >/dev/null
    iptables -w -F "$chain"
    timeout --kill-after=10 $((duration + 300)) "$python" "$work/failover.py" measure "$dir" "$chain" \
        "$duration" "$kill_at" "$row_bytes" "$work/$name.json" ||
        { echo "$name: FAILED (measurement)"; why "$dir"; return 1; }
    "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
}

echo "\`$command_line\` ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)," \
    "$duration s of writes of $row_bytes-byte rows, the relay killed at $kill_at s)"
status=0 results=()
declare -A provider_of=([lockstep]=$LOCKSTEP_PROVIDER [galera]=$GALERA_PROVIDER) title_of=([lockstep]=Lockstep [galera]="Galera 4")
for name in ${BENCH_CASES:-lockstep galera}; do
    [[ -n ${provider_of[$name]:-} ]] || { echo "bench: unknown case $name (BENCH_CASES: lockstep, galera)" >&2; exit 2; }
    if run "$name" "${provider_of[$name]}"; then results+=("${title_of[$name]}=$work/$name.json"); else status=1; fi
done
echo
((${#results[@]} > 0)) && "$python" "$work/failover.py" report "${results[@]}"
exit "$status"
