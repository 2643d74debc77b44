#!/usr/bin/env bash
# Two builds of a provider side by side, for a change's before and after:
#
#     bench/ab-providers.sh LIBRARY_A LIBRARY_B [ROUNDS (2)]
#
# Two 3-node clusters (`lockstep cluster up`, TLS on), 4 × 10 000 rows (BENCH_TABLES,
# BENCH_TABLE_SIZE), wsrep_slave_threads=4;
# then ROUNDS times, A then B: sysbench on node 1 with 1 and 8 clients, each workload of
# BENCH_WORKLOADS (default `oltp_update_non_index`; 10 s each; transactions, average and p95
# latency in ms), and 1 000 read-after-writes
# (bench/read-after-write.py: node 1 writes, node 2 reads with and without wsrep_sync_wait).
# Shorter and rougher than bench/commit-path.sh, which compares with Galera.
set -uo pipefail
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
[[ $# -ge 2 ]] || { echo "usage: $0 LIBRARY_A LIBRARY_B [ROUNDS]" >&2; exit 2; }
declare -A library=([a]=$(realpath "$1") [b]=$(realpath "$2"))
rounds=${3:-2}
bench_build no || exit 1
python=/usr/bin/python3

work=$(mktemp -d /tmp/lockstep-ab.XXXXXX)
trap 'for c in a b; do "$lockstep" cluster down --dir "$work/$c" >/dev/null 2>&1; done; rm -rf "$work"' EXIT
for c in a b; do
    bench_cluster_up "$work/$c" "${library[$c]}" 3 "$work/$c-up.log" || exit 1
    bench_cluster_check "$work/$c" || exit 1
    bench_prepare "$work/$c/node1/mariadbd.sock" || exit 1
    for n in 1 2 3; do bench_sql "$work/$c/node$n/mariadbd.sock" "SET GLOBAL wsrep_slave_threads = 4"; done
done
echo "a: ${library[a]}"
echo "b: ${library[b]}"
for ((round = 1; round <= rounds; round++)); do
    for c in a b; do
        socket=$work/$c/node1/mariadbd.sock
        for workload in ${BENCH_WORKLOADS:-oltp_update_non_index}; do for clients in 1 8; do
            result=$(timeout 120 sysbench "$workload" --db-driver=mysql --mysql-socket="$socket" \
                --mysql-user=root --mysql-db=sbtest --tables="$BENCH_TABLES" --table-size="$BENCH_TABLE_SIZE" \
                --threads="$clients" --time=10 --percentile=95 run |
                awk '/transactions:/ {t = $2} /avg:/ {a = $2} /95th/ {p = $3} END {print t " trx, avg " a " ms, p95 " p " ms"}')
            echo "round $round $c, $workload, $clients client(s): $result"
        done; done
        samples=$work/$c-round$round.samples
        timeout 600 "$python" -B bench/read-after-write.py run "$socket" "$work/$c/node2/mariadbd.sock" 1000 "$samples" >/dev/null
        echo "round $round $c, read-after-write (kind count avg p95 max):" \
            "$("$python" -B bench/read-after-write.py summary "$samples" | tr '\n' ';')"
    done
done
