#!/usr/bin/env bash
# Every node of a 3-node cluster down at once, then `lockstep cluster up --dir` (every node
# started at once, none with --wsrep-new-cluster, a crashed one at its --wsrep-recover
# position), for Lockstep and for Galera 4 in the same run:
#
#     bench/whole-cluster-restart.sh [ROUNDS (2)]
#
# Per provider and round: 3 writers (one per node) insert rows; after 1.5 s every mariadbd is
# killed with SIGKILL; then `cluster up` is timed until every node reports wsrep_ready=ON
# (bounded: 120 s), and every node must be Primary, Synced, size 3, with the same row count.
# Then the same after `lockstep cluster down` (a clean stop of every node). Not a test: it
# prints what each provider did and how long it took.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
rounds=${1:-2}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "bench: $lockstep_unusable" >&2; exit 1; }

bench_remove_dirs_at_exit

# restart DIR: seconds until `cluster up` returned, or "failed (...)".
restart() {
    local started=$SECONDS
    if timeout --kill-after=10 120 "$lockstep" cluster up --dir "$1" >"$1/up.log" 2>&1 && bench_cluster_check "$1" >/dev/null; then
        echo "$((SECONDS - started)) s"
    else
        echo "failed after $((SECONDS - started)) s ($(grep -m1 -o '\[ERROR\].*' "$1/up.log" | cut -c1-120))"
        "$lockstep" cluster down --dir "$1" >/dev/null 2>&1
        pkill -9 -f "$1/" 2>/dev/null
    fi
}

rows() {
    local socket counts=()
    for socket in "$1"/node*/mariadbd.sock; do
        counts+=("$(bench_sql "$socket" "SELECT COUNT(*) FROM r.t" 2>/dev/null || echo '-')")
    done
    echo "${counts[*]}"
}

for provider in "$LOCKSTEP_PROVIDER" "$GALERA_PROVIDER"; do
    name=$([[ $provider == "$GALERA_PROVIDER" ]] && echo "Galera 4" || echo "Lockstep")
    dir=$(mktemp -d /tmp/lockstep-restart.XXXXXX)
    bench_dirs+=("$dir")
    bench_cluster_up "$dir" "$provider" 3 "$dir/first-up.log" || { echo "$name: cluster did not start"; continue; }
    bench_sql "$dir/node1/mariadbd.sock" "CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY AUTO_INCREMENT, node INT)"
    for ((round = 1; round <= rounds; round++)); do
        for n in 1 2 3; do
            (for _ in $(seq 1 2000); do bench_sql "$dir/node$n/mariadbd.sock" "INSERT INTO r.t (node) VALUES ($n)" 2>/dev/null || break; done) &
        done
        sleep 1.5
        kill -9 $(bench_server_pids "$dir") 2>/dev/null
        wait
        echo "$name, round $round, every node killed: back in $(restart "$dir"); rows per node: $(rows "$dir")"
        "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
        echo "$name, round $round, every node stopped cleanly: back in $(restart "$dir"); rows per node: $(rows "$dir")"
    done
done
