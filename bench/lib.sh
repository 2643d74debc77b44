# shellcheck shell=bash
# Helpers shared by the sysbench benchmarks; sourced, not run.
#
# bench_setup moves to the workspace root and sets:
#   target_dir  the cargo target directory (CARGO_TARGET_DIR honoured)
#   lockstep    the `lockstep` CLI that starts and stops local clusters
# sysbench tables: BENCH_TABLES (4) tables of BENCH_TABLE_SIZE (100000) rows.

BENCH_TABLES=${BENCH_TABLES:-4}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-100000}
# The reference provider, installed by scripts/setup.sh.
GALERA_PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}

bench_setup() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
    target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
    lockstep=$target_dir/release/lockstep
}

# Cluster directories the script made: stopped (SIGKILL for what remains) and removed when it
# exits, once bench_remove_dirs_at_exit has set the trap.
bench_dirs=()
bench_remove_dirs_at_exit() {
    trap 'for d in "${bench_dirs[@]}"; do "$lockstep" cluster down --dir "$d" >/dev/null 2>&1; pkill -9 -f "$d/" 2>/dev/null; rm -rf "$d"; done' EXIT
}

# bench_sql SOCKET STATEMENT: tab-separated rows, no column names.
bench_sql() {
    mariadb --no-defaults -S "$1" -uroot -N -B -e "$2"
}

# bench_sysbench WORKLOAD SOCKET [sysbench options and command...]
bench_sysbench() {
    local workload=$1 socket=$2
    shift 2
    # bench_timeout, if set, bounds the run in seconds: a stalled cluster must not hang the script.
    timeout --kill-after=10 "${bench_timeout:-0}" \
        sysbench "$workload" --db-driver=mysql "--mysql-socket=$socket" --mysql-user=root --mysql-db=sbtest \
        "--tables=$BENCH_TABLES" "--table-size=$BENCH_TABLE_SIZE" --db-ps-mode=disable "$@"
}

# bench_prepare SOCKET: creates and fills the sbtest database. --auto_inc=off: ids 1..N
# given by sysbench, as its runs expect; with AUTO_INCREMENT, a node of a 3-node cluster
# (wsrep_auto_increment_control) hands out 1, 4, 7... and two thirds of the ids that runs pick
# would match no row.
bench_prepare() {
    bench_sql "$1" "CREATE DATABASE sbtest" &&
        bench_sysbench oltp_write_only "$1" --threads=4 --auto_inc=off prepare >/dev/null
}

# bench_run WORKLOAD SOCKET THREADS SECONDS: the run's report on stdout.
bench_run() {
    bench_sysbench "$1" "$2" "--threads=$3" "--time=$4" --report-interval=10 run
}

# bench_result FILE FIELD: FIELD of the sysbench report in FILE, one of
#   tps (transactions per second), transactions (their count), avg (average latency, ms),
#   p95 (95th percentile latency, ms), errors (ignored errors).
bench_result() {
    case $2 in
        tps) awk '/^ *transactions:/ { gsub(/\(/, "", $3); print $3 }' "$1" ;;
        transactions) awk '/^ *transactions:/ { print $2 }' "$1" ;;
        # sysbench prints the average with 2 decimals; the latency sum over the events is finer.
        avg) awk '/^ *total number of events:/ { n = $5 } /^ *sum:/ { s = $2 }
                  END { if (n > 0) printf "%.4f\n", s / n }' "$1" ;;
        p95) awk '/^ *95th percentile:/ { print $3 }' "$1" ;;
        errors) awk '/^ *ignored errors:/ { print $3 }' "$1" ;;
        *) return 1 ;;
    esac
}

# bench_wsrep_var SOCKET NAME: the value of a wsrep status variable.
bench_wsrep_var() {
    bench_sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2
}

# bench_standalone_up DIR: a MariaDB server with wsrep off, configured exactly like a node of a
# local cluster. `lockstep cluster up` writes (and briefly starts, with Galera) a one-node
# cluster in DIR; node1 then runs alone with --wsrep-on=OFF and no provider. Socket:
# DIR/node1/mariadbd.sock. `lockstep cluster down --dir DIR` stops it (it finds the server by
# its pid file).
bench_standalone_up() {
    local dir=$1 node=$1/node1
    "$lockstep" cluster up --nodes 1 --dir "$dir" --provider "$GALERA_PROVIDER" >/dev/null &&
        "$lockstep" cluster down --dir "$dir" >/dev/null || return 1
    mariadbd "--defaults-file=$node/my.cnf" --wsrep-on=OFF --wsrep-provider=none \
        </dev/null >"$node/mariadbd.out" 2>&1 &
    local pid=$! deadline=$((SECONDS + 90))
    until bench_sql "$node/mariadbd.sock" "SELECT 1" >/dev/null 2>&1; do
        if ((SECONDS > deadline)) || ! bench_running "$pid"; then
            echo "bench: standalone server in $node did not start; see $node/error.log" >&2
            "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
            return 1
        fi
        sleep 0.2
    done
}

# bench_running PID: true while PID has not exited (zombies count as exited).
bench_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat != *") "[ZX]* ]]
}

# bench_build [PROVIDER_TOO (yes)]: builds the lockstep CLI and, unless LOCKSTEP_PROVIDER names
# one or PROVIDER_TOO is "no", the provider (never measure a stale library in place of the
# current sources). Sets LOCKSTEP_PROVIDER and lockstep_unusable (empty, or why the Lockstep
# provider cannot be measured). Fails only if there is no CLI at all.
# shellcheck disable=SC2034 # lockstep_unusable is for the caller
bench_build() {
    lockstep_unusable=
    if ! cargo build --release -p lockstep-cli; then
        [[ -x $lockstep ]] || { echo "bench: cannot build $lockstep" >&2; return 1; }
        echo "bench: building the lockstep CLI failed; using the existing $lockstep" >&2
    fi
    if [[ ${1:-yes} != no && -z ${LOCKSTEP_PROVIDER:-} ]]; then
        LOCKSTEP_PROVIDER=$target_dir/release/liblockstep.so
        cargo build --release -p lockstep-abi || lockstep_unusable="cargo build -p lockstep-abi failed"
    fi
}

# bench_cluster_up DIR PROVIDER NODES LOG: `lockstep cluster up` in DIR, bounded (10 min),
# its output in LOG. On failure, prints the reason (first error lines of LOG) and fails.
bench_cluster_up() {
    if ! timeout --kill-after=10 600 "$lockstep" cluster up --nodes "$3" --dir "$1" --provider "$2" >"$4" 2>&1; then
        echo "$(grep -m1 '^error:' "$4") $(grep -m1 '\[ERROR\]' "$4" | sed 's/.*\[ERROR\] //' | cut -c1-200)"
        return 1
    fi
}

# bench_restart_with DIR PROVIDER NODE OPTIONS NODES: stops node NODE of the NODES-node cluster
# in DIR, adds OPTIONS to its provider options and brings it back (`lockstep cluster up --dir`,
# as an operator would: the other nodes stay up).
bench_restart_with() {
    local dir=$1 provider=$2 n=$3 options=$4 nodes=$5 pid
    pid=$(cat "$dir/node$n/mariadbd.pid")
    mariadb-admin --no-defaults -S "$dir/node$n/mariadbd.sock" -uroot shutdown || return 1
    timeout 60 tail --pid="$pid" -f /dev/null
    sed -i "s/^\(wsrep_provider_options = \".*\)\"\$/\1;$options\"/" "$dir/node$n/my.cnf"
    bench_cluster_up "$dir" "$provider" "$nodes" "$dir-up$n.log"
}

# bench_cluster_check DIR [SIZE (3)]: every node of the cluster in DIR is Synced in a primary
# component of SIZE; waits up to 60 s for joiners to finish catching up. On failure, prints
# the first node that is not and its state.
bench_cluster_check() {
    local size=${2:-3} socket state name deadline=$((SECONDS + 60))
    for socket in "$1"/node*/mariadbd.sock; do
        while :; do
            state=$(for name in wsrep_cluster_size wsrep_cluster_status wsrep_local_state_comment; do
                bench_wsrep_var "$socket" "$name" 2>&1 | head -c 80
            done | paste -sd' ')
            [[ $state == "$size Primary Synced" ]] && break
            if ((SECONDS > deadline)); then
                echo "$(basename "$(dirname "$socket")"): size, status, state = $state"
                return 1
            fi
            sleep 0.2
        done
    done
}

# bench_converged DIR [SECONDS (60)]: waits for every node of the cluster in DIR to reach the
# same wsrep_last_committed. On failure, prints each node's value.
bench_converged() {
    local deadline=$((SECONDS + ${2:-60})) values socket
    while :; do
        values=$(for socket in "$1"/node*/mariadbd.sock; do bench_wsrep_var "$socket" wsrep_last_committed; done |
            paste -sd' ')
        [[ $(tr ' ' '\n' <<<"$values" | sort -u | wc -l) == 1 ]] && return 0
        ((SECONDS > deadline)) && { echo "$values"; return 1; }
        sleep 0.2
    done
}

# bench_clusters_side_by_side WORK NAME PROVIDER NAME PROVIDER: two 3-node clusters started at
# the same time in WORK/NAME (logs in WORK/NAME-up.log), each checked Primary and Synced.
# Two clusters allocating ports at the same moment may (rarely) pick the same ones: a cluster
# that fails to start gets one more try, alone. On failure, says why and fails.
bench_clusters_side_by_side() {
    local work=$1 name reason
    local -A library=([$2]=$3 [$4]=$5) pid
    for name in "$2" "$4"; do
        bench_cluster_up "$work/$name" "${library[$name]}" 3 "$work/$name-up.log" >"$work/$name-up.reason" &
        pid[$name]=$!
    done
    for name in "$2" "$4"; do
        if ! wait "${pid[$name]}"; then
            echo "bench: $name: no cluster ($(cat "$work/$name-up.reason")); trying once more" >&2
            "$lockstep" cluster down --dir "$work/$name" >/dev/null 2>&1
            rm -rf "${work:?}/$name"
            if ! reason=$(bench_cluster_up "$work/$name" "${library[$name]}" 3 "$work/$name-up.log"); then
                tail -n 15 "$work/$name-up.log" >&2
                echo "bench: $name: no 3-node cluster: $reason" >&2
                return 1
            fi
        fi
        if ! reason=$(bench_cluster_check "$work/$name" 3); then
            echo "bench: $name: no 3-node primary cluster: $reason" >&2
            return 1
        fi
    done
}

# bench_prepare_side_by_side WORK NAME...: the sysbench data on node 1 of each cluster
# WORK/NAME, all at the same time (logs in WORK/NAME-prepare.log), then every node of each
# at the same wsrep_last_committed. On failure, says why and fails.
bench_prepare_side_by_side() {
    local work=$1 name values
    local -A pid
    shift
    for name in "$@"; do
        bench_timeout=1800 bench_prepare "$work/$name/node1/mariadbd.sock" >"$work/$name-prepare.log" 2>&1 &
        pid[$name]=$!
    done
    for name in "$@"; do
        if ! wait "${pid[$name]}"; then
            tail -n 5 "$work/$name-prepare.log" >&2
            echo "bench: $name: sysbench prepare failed" >&2
            return 1
        fi
        if ! values=$(bench_converged "$work/$name" 120); then
            echo "bench: $name: nodes did not converge after prepare: wsrep_last_committed $values" >&2
            return 1
        fi
    done
}

# bench_slave_threads N SOCKET...: wsrep_slave_threads=N on every server, waiting (30 s at
# most) until each runs N appliers (the server starts them in the background). Fewer
# appliers: with Galera an applier leaves only after an event, so a node that receives none
# (the one the clients write on) gets some, from small writes on another node of its cluster
# (SOCKETs are .../nodeN/mariadbd.sock).
bench_slave_threads() {
    local threads=$1 socket other deadline=$((SECONDS + 30))
    shift
    for socket in "$@"; do
        bench_sql "$socket" "SET GLOBAL wsrep_slave_threads = $threads" || return 1
    done
    for socket in "$@"; do
        other=${socket%/node*/mariadbd.sock}/node$([[ $socket == */node1/* ]] && echo 2 || echo 1)/mariadbd.sock
        until [[ $(bench_wsrep_var "$socket" wsrep_applier_thread_count) == "$threads" ]]; do
            if ((SECONDS > deadline)); then
                echo "bench: $socket: wsrep_applier_thread_count is" \
                    "$(bench_wsrep_var "$socket" wsrep_applier_thread_count), not $threads" >&2
                return 1
            fi
            bench_sql "$other" "CREATE DATABASE IF NOT EXISTS bench_nudge;
                CREATE TABLE IF NOT EXISTS bench_nudge.t (id INT AUTO_INCREMENT PRIMARY KEY);
                INSERT INTO bench_nudge.t VALUES ()" || return 1
            sleep 0.2
        done
    done
}

# bench_server_pids DIR: the pid of every running mariadbd of the cluster in DIR, one a line.
bench_server_pids() {
    local pid_file pid
    for pid_file in "$1"/node*/mariadbd.pid; do
        pid=$(cat "$pid_file" 2>/dev/null) && bench_running "$pid" && echo "$pid"
    done
}

# Context switches of whole processes, as seen from outside.
#
# /proc/PID/status's voluntary_ctxt_switches and nonvoluntary_ctxt_switches count the main
# thread only (the kernel prints that task's own nvcsw/nivcsw), and /proc/PID/stat has no
# context-switch field at all. A process's total is the sum over its threads,
# /proc/PID/task/TID/status. The counts of a thread that has exited are folded into the
# process's signal struct, which only getrusage(RUSAGE_SELF) inside the process reads: from
# outside they are lost. So a snapshot records every thread's count, and a delta sums, per
# thread, the increase of threads present in both snapshots plus the whole count of threads
# born in between, and reports how many threads went away (whose switches between the two
# snapshots it could not see). MariaDB keeps the threads of closed connections in its thread
# cache (thread_cache_size, 151 here), so sysbench's connections are still there after a run.

# bench_ctxsw_snapshot PID...: one line per thread, "PID/TID SWITCHES" (voluntary + involuntary).
bench_ctxsw_snapshot() {
    local pid
    for pid in "$@"; do
        # -s: a thread may exit between the glob and the read.
        grep -s -H '^[a-z]*voluntary_ctxt_switches:' "/proc/$pid/task/"*/status
    done | awk -F: '{ split($1, p, "/"); sum[p[3] "/" p[5]] += $3 } END { for (t in sum) print t, sum[t] }'
}

# bench_ctxsw_delta BEFORE AFTER: "SWITCHES LOST_THREADS" between two snapshot files.
bench_ctxsw_delta() {
    awk 'NR == FNR { before[$1] = $2; next }
         { delta += ($1 in before) ? $2 - before[$1] : $2; seen[$1] = 1 }
         END { for (t in before) if (!(t in seen)) lost++; print delta + 0, lost + 0 }' "$1" "$2"
}

# bench_relay_start WORK NAME DELAYS CLUSTER_DIR...: loopback made to look like a WAN (this
# kernel has no netem). Every node's mariadbd started with PATH=WORK/bin:$PATH (a wrapper)
# runs in the cgroup NAME/nodeI of its node number, and an iptables nat chain sends every TCP
# connection it opens to 127.0.0.1 through wan-delay-proxy.py (DELAYS, and INTO_RATES and
# INTO_RATES_FROM from the environment), which finds the nodes' group ports under the
# CLUSTER_DIRs. Needs root. Sets relay_pid, relay_chain and relay_cgroups for
# bench_relay_stop, which the caller's exit trap runs.
bench_relay_start() {
    local work=$1 name=$2 delays=$3 cgroup2 base node
    shift 3
    command -v iptables >/dev/null || { echo "iptables missing: run scripts/setup.sh" >&2; return 1; }
    cgroup2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
    [[ -n $cgroup2 ]] || { echo "no cgroup2 hierarchy mounted: the relay needs one" >&2; return 1; }
    relay_chain=${name^^}
    relay_chain=${relay_chain//-/_}
    relay_cgroups=$cgroup2/$name
    mkdir -p "$work/bin" "$relay_cgroups"
    cat >"$work/bin/mariadbd" <<EOF
#!/bin/bash
for a in "\$@"; do case \$a in --defaults-file=*) config=\${a#--defaults-file=} ;; esac; done
if [[ -n \${config:-} ]]; then
    node=\$(basename "\$(dirname "\$config")")
    mkdir -p "$relay_cgroups/\$node" && echo \$\$ >"$relay_cgroups/\$node/cgroup.procs"
fi
exec /usr/sbin/mariadbd "\$@"
EOF
    chmod +x "$work/bin/mariadbd"
    # Node I's connections go to port base + I - 1.
    base=$(/usr/bin/python3 -c 'import socket
for p in range(47100, 48000, 10):
    try:
        for i in range(3): socket.socket().bind(("127.0.0.1", p + i))
        print(p); break
    except OSError: pass')
    /usr/bin/python3 bench/wan-delay-proxy.py "$base" "$delays" "$@" >"$work/proxy.log" 2>&1 &
    relay_pid=$!
    iptables -t nat -N "$relay_chain" && iptables -t nat -I OUTPUT -j "$relay_chain" || return 1
    for node in 1 2 3; do
        mkdir -p "$relay_cgroups/node$node"
        iptables -t nat -A "$relay_chain" -p tcp -d 127.0.0.1 -m cgroup --path "$name/node$node" \
            -j DNAT --to-destination "127.0.0.1:$((base + node - 1))" || return 1
    done
}

# bench_relay_cleanup WORK: for the exit trap of a script that ran bench_relay_start: stops
# the clusters WORK/lockstep and WORK/galera and the relay, and removes WORK (kept with
# BENCH_KEEP=1).
bench_relay_cleanup() {
    local d
    for d in "$1"/lockstep "$1"/galera; do [[ -d $d ]] && "$lockstep" cluster down --dir "$d" >/dev/null 2>&1; done
    bench_relay_stop
    if [[ ${BENCH_KEEP:-} == 1 ]]; then echo "bench: work directory kept in $1"; else rm -rf "$1"; fi
}

# bench_relay_stop: undoes bench_relay_start (nothing if it did not run).
bench_relay_stop() {
    [[ -n ${relay_pid:-} ]] && kill "$relay_pid" 2>/dev/null
    [[ -n ${relay_chain:-} ]] || return 0
    iptables -t nat -D OUTPUT -j "$relay_chain" 2>/dev/null
    iptables -t nat -F "$relay_chain" 2>/dev/null
    iptables -t nat -X "$relay_chain" 2>/dev/null
    rmdir "$relay_cgroups"/node* "$relay_cgroups" 2>/dev/null
}
