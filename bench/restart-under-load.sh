#!/usr/bin/env bash
# A node killed and restarted while the cluster takes writes, for Lockstep and for Galera 4
# in the same run:
#
#     bench/restart-under-load.sh [ROUNDS (2)] [THREADS (8)]
#
# Per provider and round, on a 3-node cluster: sysbench `oltp_write_only` with THREADS clients
# runs on node 1 throughout; after 10 s node 3's server is killed (`kill -9`), after 5 s more
# started again (`lockstep cluster up --dir`, as an operator or systemd would). Reports how
# long node 3 took from its start to Synced and to node 1's `wsrep_last_committed` of that
# moment, and node 1's TPS. Rounds alternate between the providers. LOCKSTEP_PROVIDER names
# another Lockstep build to measure (an older one, say). Not a test.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
rounds=${1:-2}
threads=${2:-8}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "bench: $lockstep_unusable" >&2; exit 1; }

bench_remove_dirs_at_exit
bench_timeout=120

# seconds_since START: seconds (1 decimal) since START, a `date +%s.%N` value.
seconds_since() {
    awk -v start="$1" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - start }'
}

# one_round NAME PROVIDER: one kill and restart under load; prints one line.
one_round() {
    local name=$1 provider=$2 dir node3 started target synced="-" caught="-" state at deadline
    dir=$(mktemp -d /tmp/lockstep-restart-load.XXXXXX)
    bench_dirs+=("$dir")
    bench_cluster_up "$dir" "$provider" 3 "$dir/up.log" || { echo "$name: no cluster"; return; }
    bench_prepare "$dir/node1/mariadbd.sock" || { echo "$name: sysbench prepare failed"; return; }
    node3=$dir/node3/mariadbd.sock
    bench_run oltp_write_only "$dir/node1/mariadbd.sock" "$threads" 60 --mysql-ignore-errors=all >"$dir/sysbench.out" 2>&1 &
    local load=$!
    sleep 10
    kill -9 "$(cat "$dir/node3/mariadbd.pid")"
    sleep 5
    started=$(date +%s.%N)
    deadline=$((SECONDS + 90))
    timeout --kill-after=10 120 "$lockstep" cluster up --dir "$dir" >"$dir/restart.log" 2>&1 &
    local up=$!
    while ((SECONDS < deadline)); do
        state=$(bench_wsrep_var "$node3" wsrep_local_state_comment 2>/dev/null)
        if [[ $synced == - && $state == Synced ]]; then
            synced=$(seconds_since "$started")
            target=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_last_committed)
        fi
        at=$(bench_wsrep_var "$node3" wsrep_last_committed 2>/dev/null)
        if [[ $synced != - ]] && ((${at:-0} >= target)); then
            caught=$(seconds_since "$started")
            break
        fi
        sleep 0.1
    done
    wait "$up"
    wait "$load"
    echo "$name: node 3 Synced ${synced} s after its start, at node 1's commit of that moment ${caught} s; node 1 $(bench_result "$dir/sysbench.out" tps) TPS"
    "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
}

for ((round = 1; round <= rounds; round++)); do
    one_round "Lockstep (round $round)" "$LOCKSTEP_PROVIDER"
    one_round "Galera 4 (round $round)" "$GALERA_PROVIDER"
done
