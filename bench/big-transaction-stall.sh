#!/usr/bin/env bash
# Does one huge transaction stall the cluster? Both providers in one run, clusters side by
# side, runs alternating:
#
#     bench/big-transaction-stall.sh [ROWS (2500000)] [VARIANTS ("0 1048576 10485760")]
#
# Two 3-node clusters (Lockstep, Galera 4), a table of ROWS rows (id, v INT, pad 50 bytes:
# about 150 bytes of row images per row changed) and a sysbench table of 10 000 rows.
# For each variant (wsrep_trx_fragment_size in bytes, 0 = no streaming), and each provider:
# 8 sysbench clients doing single-row autocommit updates on node 1 and 8 on node 2 for the
# whole run; after 10 s, `UPDATE big SET v = v + 1` on node 1 with that fragment size; the
# run ends 10 s after every node has caught up with node 1 (at most 5 min). Every second, on every node: wsrep_last_committed,
# wsrep_local_recv_queue, wsrep_flow_control_paused_ns and the rows of
# mysql.wsrep_streaming_log; and each sysbench's transactions in that second.
#
# Writes to BENCH_OUT (default bench/results/big-transaction-stall/) {samples,clients,updates}.csv, summary.txt and
# one chart per provider (timeline-<provider>.svg, by bench/timeline-chart.py); prints the
# summary: per run, the UPDATE's time, and over the episode (from the UPDATE's start until
# every node has committed it) seconds without a commit on each node and the commit rate
# against the rate before. Not a test: about 10 min.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
rows=${1:-2500000}
variants=${2:-"0 1048576 10485760"}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "bench: $lockstep_unusable" >&2; exit 1; }
declare -A library=([lockstep]=$LOCKSTEP_PROVIDER [galera]=$GALERA_PROVIDER)
out=${BENCH_OUT:-bench/results/big-transaction-stall}
mkdir -p "$out"

work=$(mktemp -d /tmp/lockstep-stall.XXXXXX)
trap 'for c in lockstep galera; do "$lockstep" cluster down --dir "$work/$c" >/dev/null 2>&1; done
      [[ ${BENCH_KEEP:-0} == 1 ]] || rm -rf "$work"' EXIT
socket() { echo "$work/$1/node$2/mariadbd.sock"; }

for c in lockstep galera; do
    bench_cluster_up "$work/$c" "${library[$c]}" 3 "$work/$c-up.log" || exit 1
    bench_cluster_check "$work/$c" || exit 1
    s=$(socket "$c" 1)
    bench_sql "$s" "CREATE DATABASE sbtest; CREATE DATABASE stall" || exit 1
    bench_sysbench oltp_update_non_index "$s" --tables=1 --table-size=10000 --auto_inc=off prepare >/dev/null || exit 1
    bench_sql "$s" "CREATE TABLE stall.big (id INT PRIMARY KEY, v INT, pad CHAR(50))" || exit 1
    # In pieces of 50 000 rows, each an ordinary writeset.
    for ((from = 0; from < rows; from += 50000)); do
        n=$((rows - from < 50000 ? rows - from : 50000))
        bench_sql "$s" "INSERT INTO stall.big SELECT seq + $from, 0, 'x' FROM stall.seq_1_to_$n" || exit 1
    done
    for n in 1 2 3; do bench_sql "$(socket "$c" "$n")" "SET GLOBAL wsrep_slave_threads = 4"; done
done

samples=$out/samples.csv clients=$out/clients.csv
echo "provider,fragment,time_s,node,last_committed,recv_queue,fc_paused_ns,sr_rows" >"$samples"
echo "provider,fragment,second,node,transactions" >"$clients"
updates=$out/updates.csv
echo "provider,fragment,begin_ms,end_ms,status,target" >"$updates"
summary=$out/summary.txt
{
    echo "bench/big-transaction-stall.sh $rows \"$variants\" ($(date -u +%F), commit $(git rev-parse --short HEAD))"
    echo "provider fragment: UPDATE time and status; seconds without a commit during it on nodes 1,2,3;"
    echo "  commit rate during it / before it on nodes 1,2,3 (node 1, 2: their own clients; node 3: all it applies)"
} >"$summary"

sample() { # sample PROVIDER FRAGMENT STOPFILE: one line per node about every second into $samples
    local c=$1 fragment=$2 stop=$3 n t
    while [[ ! -e $stop ]]; do
        t=$(($(date +%s%N) - start_ns))
        for n in 1 2 3; do
            bench_sql "$(socket "$c" "$n")" "SELECT
                (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LAST_COMMITTED'),
                (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE'),
                (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_FLOW_CONTROL_PAUSED_NS'),
                (SELECT COUNT(*) FROM mysql.wsrep_streaming_log)" 2>/dev/null |
                awk -v p="$c" -v f="$fragment" -v t="$t" -v n="$n" \
                    '{ printf "%s,%s,%.3f,%s,%s,%s,%s,%s\n", p, f, t / 1e9, n, $1, $2, $3, $4 }' >>"$samples"
        done
        sleep 1
    done
}

run() { # run PROVIDER FRAGMENT
    local c=$1 fragment=$2 stop=$work/stop-$1-$2 n
    rm -f "$stop"
    start_ns=$(date +%s%N)
    sample "$c" "$fragment" "$stop" &
    local sampler=$! pids=()
    for n in 1 2; do
        bench_timeout=1800 bench_sysbench oltp_update_non_index "$(socket "$c" "$n")" --tables=1 --table-size=10000 \
            --threads=8 --skip_trx=on --time=0 --events=0 --report-interval=1 --mysql-ignore-errors=all run \
            >"$work/sysbench-$c-$fragment-$n.log" 2>&1 &
        pids+=($!)
    done
    sleep 10
    local begin_ns end_ns status
    begin_ns=$(date +%s%N)
    timeout 900 mariadb --no-defaults -S "$(socket "$c" 1)" -uroot -e \
        "SET SESSION wsrep_trx_fragment_size = $fragment; UPDATE stall.big SET v = v + 1" >"$work/update-$c-$fragment.log" 2>&1
    status=$?
    end_ns=$(date +%s%N)
    # The episode lasts until every node has committed what node 1 had when the UPDATE
    # returned (the others may still be applying it), then 10 s more. At most 5 min.
    local target caught_up deadline=$((SECONDS + 300))
    target=$(bench_wsrep_var "$(socket "$c" 1)" wsrep_last_committed)
    while ((SECONDS < deadline)); do
        caught_up=yes
        for n in 2 3; do
            (($(bench_wsrep_var "$(socket "$c" "$n")" wsrep_last_committed) >= target)) || caught_up=
        done
        [[ -n $caught_up ]] && break
        sleep 0.5
    done
    sleep 10
    # Each client runs under timeout in a subshell: stop the sysbench processes themselves.
    for n in 1 2; do pkill -f -- "--mysql-socket=$(socket "$c" "$n")"; done
    wait "${pids[@]}" 2>/dev/null
    touch "$stop"
    wait "$sampler"
    for n in 1 2; do
        python3 bench/timeline-chart.py clients "$c" "$fragment" "$n" "$work/sysbench-$c-$fragment-$n.log" >>"$clients"
    done
    echo "$c,$fragment,$(((begin_ns - start_ns) / 1000000)),$(((end_ns - start_ns) / 1000000)),$status,$target" >>"$updates"
    python3 bench/timeline-chart.py summary "$out" "$c" "$fragment" >>"$summary"
    tail -1 "$summary"
}

for fragment in $variants; do
    for c in lockstep galera; do
        run "$c" "$fragment"
    done
done
for c in lockstep galera; do
    python3 bench/timeline-chart.py chart "$out" "$c" >"$out/timeline-$c.svg"
done
for c in lockstep galera; do
    for n in 1 2 3; do
        echo "$c node $n: $(bench_sql "$(socket "$c" "$n")" "SET SESSION wsrep_sync_wait = 1;
            SELECT CONCAT(SUM(v), ' ', COUNT(*)) FROM stall.big;
            SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_local_state_comment')" | tr '\n\t' '  ')"
    done
done | tee -a "$summary"
