#!/usr/bin/env bash
# A split brain that heals, for Lockstep and for Galera 4 in the same run:
#
#     bench/split-brain.sh [WATCH_SECONDS (60)]
#
# Per provider, on a 3-node cluster: node 3 is cut off (`gmcast.isolate=1`) until it is
# non-primary, then told `pc.bootstrap=1` (a primary component of its own while nodes 1 and 2
# stay primary); node 1 inserts a row, node 3 another; the isolation ends. Every 5 s for
# WATCH_SECONDS each node's cluster status, size, wsrep_ready and rows are printed; then node
# 3 is stopped if it still runs (Lockstep's ends by itself, to be restarted into a full
# transfer), restarted (`cluster up`), and the rows of every node printed again. Not a test: it shows
# what each provider does with the two histories (docs/design/group-forced-primary.md, "Two
# primary components meet").
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
watch=${1:-60}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "bench: $lockstep_unusable" >&2; exit 1; }

bench_remove_dirs_at_exit

# node DIR N: the node's status, size, readiness and rows, on one line.
node() {
    local socket="$1/node$2/mariadbd.sock" vars rows
    vars=$(bench_sql "$socket" "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_cluster_status', 'wsrep_cluster_size', 'wsrep_ready')" 2>/dev/null)
    rows=$(bench_sql "$socket" "SELECT GROUP_CONCAT(side ORDER BY id) FROM sb.t" 2>/dev/null || echo "(refused)")
    echo "node$2: size/status/ready ${vars:--} rows ${rows:--}"
}

for provider in "$LOCKSTEP_PROVIDER" "$GALERA_PROVIDER"; do
    name=$([[ $provider == "$GALERA_PROVIDER" ]] && echo "Galera 4" || echo "Lockstep")
    dir=$(mktemp -d /tmp/lockstep-split-brain.XXXXXX)
    bench_dirs+=("$dir")
    bench_cluster_up "$dir" "$provider" 3 "$dir/first-up.log" || { echo "$name: cluster did not start"; continue; }
    bench_sql "$dir/node1/mariadbd.sock" \
        "CREATE DATABASE sb; CREATE TABLE sb.t (id INT PRIMARY KEY, side VARCHAR(10)); INSERT INTO sb.t VALUES (1, 'before')"
    sleep 1
    bench_sql "$dir/node3/mariadbd.sock" "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"
    for _ in $(seq 1 60); do
        [[ $(bench_wsrep_var "$dir/node3/mariadbd.sock" wsrep_cluster_status) == non-Primary ]] && break
        sleep 1
    done
    bench_sql "$dir/node3/mariadbd.sock" "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=1'"
    sleep 3
    bench_sql "$dir/node1/mariadbd.sock" "INSERT INTO sb.t VALUES (2, 'majority')"
    bench_sql "$dir/node3/mariadbd.sock" "INSERT INTO sb.t VALUES (3, 'forced')"
    bench_sql "$dir/node3/mariadbd.sock" "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'"
    echo "$name: node 3 forced a primary component of its own; isolation ended"
    for ((t = 5; t <= watch; t += 5)); do
        sleep 5
        echo "$name, +$t s: $(node "$dir" 1); $(node "$dir" 3)"
    done
    kill "$(cat "$dir/node3/mariadbd.pid")" 2>/dev/null
    sleep 5
    timeout --kill-after=10 180 "$lockstep" cluster up --dir "$dir" >"$dir/up.log" 2>&1
    echo "$name, node 3 restarted: $(node "$dir" 1); $(node "$dir" 2); $(node "$dir" 3)"
done
