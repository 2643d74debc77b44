#!/usr/bin/env bash
# One big transaction on a 3-node cluster while another node commits: it must commit (or,
# past repl.max_ws_size, fail by itself with a clear error), the small commits must go on,
# and the cluster must stay Primary and Synced with the same data on every node.
#
#     bench/oversized-transaction.sh [ROWS (450000)] [PROVIDER] [VALUE_BYTES (150)]
#
# ROWS rows of VALUE_BYTES + 10 bytes, then one UPDATE of all of them on node 1 (with row
# images before and after, about ROWS × 2 × (VALUE_BYTES + 20) bytes of writeset);
# meanwhile node 2 inserts a row every 50 ms from 2 s before to 3 s after it. Reports
# the UPDATE's outcome and duration, node 2's largest gap between two commits, each
# node's memory (resident before the UPDATE, peak after) and state. With BENCH_HEAPTRACK=1,
# heaptrack (Debian package) is attached to nodes 1 and 2 before the UPDATE, their peak heap
# is printed at the end and the recordings are kept (BENCH_KEEP=1 keeps the directory;
# `heaptrack_print --print-peaks 1` says who held it). Not a test: minutes.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
rows=${1:-450000}
bench_build "${2:+no}" || exit 1
provider=${2:-$LOCKSTEP_PROVIDER}
value_bytes=${3:-150}

dir=$(mktemp -d /tmp/lockstep-oversized.XXXXXX)
trap '"$lockstep" cluster down --dir "$dir" >/dev/null 2>&1; [[ ${BENCH_KEEP:-0} == 1 ]] || rm -rf "$dir"' EXIT
bench_cluster_up "$dir" "$provider" 3 "$dir/up.log" || exit 1
bench_cluster_check "$dir" || exit 1
node() { echo "$dir/node$1/mariadbd.sock"; }
sql() { mariadb --no-defaults -S "$(node "$1")" -uroot -N -B -D oversized -e "$2"; }

mariadb --no-defaults -S "$(node 1)" -uroot -e "CREATE DATABASE oversized" || exit 1
sql 1 "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(200)); CREATE TABLE small (id INT PRIMARY KEY AUTO_INCREMENT, at TIMESTAMP(6))"
# In pieces of 50 000 rows (8 MB), each well under the limit.
for ((from = 0; from < rows; from += 50000)); do
    sql 1 "INSERT INTO big SELECT seq + $from, REPEAT('x', $value_bytes) FROM seq_1_to_$((rows - from < 50000 ? rows - from : 50000))" || exit 1
done

memory() { # resident and peak kB of node $1's mariadbd
    awk '/^VmRSS|^VmHWM/ { v[$1] = $2 } END { print v["VmRSS:"], v["VmHWM:"] }' "/proc/$(cat "$dir/node$1/mariadbd.pid")/status"
}
declare -A before
for n in 1 2 3; do before[$n]=$(memory "$n" | cut -d' ' -f1); done
if [[ ${BENCH_HEAPTRACK:-0} == 1 ]]; then
    command -v heaptrack >/dev/null || { echo "BENCH_HEAPTRACK=1 needs heaptrack (apt-get install heaptrack)" >&2; exit 1; }
    for n in 1 2; do
        (cd "$dir" && exec heaptrack -p "$(cat "$dir/node$n/mariadbd.pid")" >"$dir/heaptrack-$n.log" 2>&1) &
    done
    sleep 15 # attaching injects a library through gdb: seconds
fi
(
    while [[ ! -e $dir/stop ]]; do
        sql 2 "INSERT INTO small (at) VALUES (NOW(6))" 2>&1 | sed 's/^/node 2 error: /'
        sleep 0.05
    done
) &
small=$!
sleep 2
echo "== UPDATE of $rows rows on node 1, node 2 committing meanwhile"
start=$(date +%s%N)
error=$(timeout 600 mariadb --no-defaults -S "$(node 1)" -uroot -D oversized -e "UPDATE big SET v = REPEAT('y', $value_bytes)" 2>&1)
echo "exit status $?, after $(( ($(date +%s%N) - start) / 1000000 )) ms: ${error:-committed}"
sql 1 "INSERT INTO small (at) VALUES (NOW(6))" && echo "node 1 commits again at once"
sleep 3
touch "$dir/stop"
wait "$small"

gap="SELECT ROUND(MAX(g) / 1000) FROM (SELECT TIMESTAMPDIFF(MICROSECOND, LAG(at) OVER (ORDER BY id), at) AS g FROM small) x"
echo "node 2 committed $(sql 1 'SELECT COUNT(*) FROM small') rows; largest gap between two commits: $(sql 1 "$gap") ms"
for n in 1 2 3; do
    echo "node $n: resident before the UPDATE $((before[$n] / 1024)) MiB, peak $(($(memory "$n" | cut -d' ' -f2) / 1024)) MiB"
done
for n in 1 2 3; do
    echo "node $n: $(sql "$n" "SET SESSION wsrep_sync_wait = 1; SELECT CONCAT(COUNT(*), ' small rows, ') FROM small;
        SELECT CONCAT(SUM(v LIKE 'y%'), ' updated big rows; ') FROM big;
        SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_last_committed')" | tr '\n\t' '  ')"
done
if [[ ${BENCH_HEAPTRACK:-0} == 1 ]]; then
    # The recordings end with the processes.
    "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
    wait
    for f in "$dir"/heaptrack.mariadbd.*.zst; do
        heaptrack_print -f "$f" --print-peaks 0 --print-allocators 0 --print-temporary 0 --print-leaks 0 2>/dev/null |
            grep -E '^Debuggee|^peak heap' | sed 's/.*--defaults-file=.*\/\(node[0-9]\)\/.*/\1:/' | paste -sd' '
    done
fi
