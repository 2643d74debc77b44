#!/usr/bin/env bash
# The commit path, Lockstep against Galera 4 in one run: two 3-node clusters up side by side,
# sysbench oltp_update_non_index and oltp_write_only against node 1 with 1, 8 and 32 clients,
# one Lockstep run then one Galera run, ROUNDS times per case; then a read-after-write test
# (write on node 1, read at once on node 2 with wsrep_sync_wait=1, and with 0). Prints one
# table of TPS, average and p95 latency and context switches per transaction with the ratios
# Lockstep / Galera, the read-after-write table, and the issue's goals met or not.
#
# Usage: bench/commit-path.sh [SECONDS_PER_RUN (20)] [ROUNDS (2)]
# Environment:
#   LOCKSTEP_PROVIDER   Lockstep provider [default: target/release/liblockstep.so, built first]
#   GALERA_PROVIDER     [default: /usr/lib/galera/libgalera_smm.so]
#   BENCH_WORKLOADS     [default: "oltp_update_non_index oltp_write_only"]
#   BENCH_CLIENTS       sysbench threads per case [default: "1 8 32"]
#   BENCH_TABLES, BENCH_TABLE_SIZE  sysbench data [default: 4 tables of 10000 rows]
#   BENCH_SLAVE_THREADS wsrep_slave_threads on every node [default: 4]
#   BENCH_RAW_COUNT     writes per read-after-write run and mode [default: 1000]
#   BENCH_RAW_LOADS     read-after-write conditions [default: "idle loaded"]; loaded: sysbench
#                       oltp_write_only with BENCH_RAW_LOAD_CLIENTS (4) threads on node 2 meanwhile
#   BENCH_KEEP=1        keep the work directory (data, error logs, sysbench reports, samples)
#
# Context switches per transaction: voluntary + involuntary switches of every thread of the
# three mariadbd processes of the cluster under test (/proc/PID/task/*/status; see
# bench_ctxsw_snapshot in lib.sh for why not /proc/PID/status or /proc/PID/stat), from just
# before sysbench starts until every node has applied the run (same wsrep_last_committed),
# divided by the transactions sysbench reports. sysbench's own switches are not counted.
#
# Every step is bounded. A run that fails is reported and the others still run; exit status 1
# if any failed. Both clusters are stopped on exit.
set -uo pipefail
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
seconds=${1:-20}
rounds=${2:-2}
workloads=${BENCH_WORKLOADS:-oltp_update_non_index oltp_write_only}
clients_list=${BENCH_CLIENTS:-1 8 32}
slave_threads=${BENCH_SLAVE_THREADS:-4}
raw_count=${BENCH_RAW_COUNT:-1000}
raw_loads=${BENCH_RAW_LOADS:-idle loaded}
raw_load_clients=${BENCH_RAW_LOAD_CLIENTS:-4}
cases="lockstep galera"
for number in "$seconds" "$rounds" "$slave_threads" "$raw_count" $clients_list; do
    [[ $number =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [SECONDS_PER_RUN] [ROUNDS] (bad number: $number)" >&2; exit 2; }
done
# The read-after-write client needs PyMySQL; Debian's package serves the system python3, which
# another python3 first on PATH (pyenv...) may hide.
python=
for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import pymysql' 2>/dev/null; then
        python=$candidate
        break
    fi
done
if [[ -z $python ]]; then
    echo "bench: the read-after-write client needs PyMySQL: apt-get install python3-pymysql (scripts/setup.sh)" >&2
    exit 1
fi

bench_build yes || exit 1
if [[ -n $lockstep_unusable ]]; then
    echo "bench: $lockstep_unusable" >&2
    exit 1
fi
declare -A provider=([lockstep]=$LOCKSTEP_PROVIDER [galera]=$GALERA_PROVIDER)

work=$(mktemp -d /tmp/lockstep-commit-path.XXXXXX)
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local state
    for state in "$work"/*/cluster.state; do
        [[ -e $state ]] && "$lockstep" cluster down --dir "$(dirname "$state")" >/dev/null 2>&1
    done
    if [[ ${BENCH_KEEP:-} == 1 ]]; then
        echo "bench: work directory kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
any_failed=0

# ---- both clusters, at the same time
echo "== starting two 3-node clusters in $work: Lockstep and Galera"
bench_clusters_side_by_side "$work" lockstep "${provider[lockstep]}" galera "${provider[galera]}" || exit 1
declare -A version
for case in $cases; do
    socket=$work/$case/node1/mariadbd.sock
    version[$case]="$(bench_wsrep_var "$socket" wsrep_provider_name) $(bench_wsrep_var "$socket" wsrep_provider_version)"
done
bench_slave_threads "$slave_threads" "$work"/*/node*/mariadbd.sock || exit 1
for case in $cases; do
    echo "$case: ${version[$case]}, 3 nodes Synced, wsrep_slave_threads=$slave_threads," \
        "ports in $work/$case-up.log"
done

echo "== preparing $BENCH_TABLES tables of $BENCH_TABLE_SIZE rows on both"
# shellcheck disable=SC2086 # $cases is a list of names
bench_prepare_side_by_side "$work" $cases || exit 1

# ---- sysbench runs, alternating
# Sums over the rounds, per CASE/WORKLOAD/CLIENTS.
declare -A runs tps_sum avg_sum p95_sum trx_sum cs_sum ws_sum errors_sum lost_sum failed

# fmt FORMAT VALUE: VALUE formatted, or "n/a" if empty.
fmt() {
    awk -v f="$1" -v v="$2" 'BEGIN { if (v == "" || v == "-") print "n/a"; else printf f "\n", v }'
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b == 0) print "n/a";
        else printf "%.2f×\n", a / b }'
}
# mean KEY ARRAY_NAME: the array's sum for KEY over the number of runs of KEY.
mean() {
    local -n sums=$2
    [[ -n ${runs[$1]:-} ]] || return 0
    awk -v s="${sums[$1]}" -v n="${runs[$1]}" 'BEGIN { print s / n }'
}
# per_trx KEY ARRAY_NAME: the array's sum for KEY over the transactions of KEY.
per_trx() {
    local -n sums=$2
    [[ -n ${runs[$1]:-} && ${trx_sum[$1]} -gt 0 ]] || return 0
    awk -v s="${sums[$1]}" -v n="${trx_sum[$1]}" 'BEGIN { print s / n }'
}

# run_one CASE WORKLOAD CLIENTS ROUND
run_one() {
    local case=$1 workload=$2 clients=$3 round=$4 key="$1/$2/$3"
    local dir=$work/$case file=$work/$case-$workload-$clients-$round
    local pids values tps trx avg p95 errors cs lost seqno_before seqno_after
    mapfile -t pids < <(bench_server_pids "$dir")
    if ((${#pids[@]} != 3)); then
        failed[$key]="only ${#pids[@]} servers running"
        echo "$case $workload $clients clients, round $round: FAILED, ${failed[$key]}"
        return 1
    fi
    seqno_before=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_last_committed)
    bench_ctxsw_snapshot "${pids[@]}" >"$file.cs-before"
    if ! bench_timeout=$((seconds + 120)) bench_sysbench "$workload" "$dir/node1/mariadbd.sock" "--threads=$clients" \
        "--time=$seconds" --percentile=95 run >"$file.txt" 2>&1; then
        failed[$key]="sysbench failed or stalled: $(grep -m1 -iE 'error|fatal' "$file.txt" | cut -c1-160)"
        echo "$case $workload $clients clients, round $round: FAILED, ${failed[$key]}"
        return 1
    fi
    # Until every node has applied the run: the appliers' switches belong to it.
    if ! values=$(bench_converged "$dir" 60); then
        failed[$key]="nodes did not converge within 60 s: wsrep_last_committed $values"
        echo "$case $workload $clients clients, round $round: FAILED, ${failed[$key]}"
        return 1
    fi
    bench_ctxsw_snapshot "${pids[@]}" >"$file.cs-after"
    seqno_after=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_last_committed)
    read -r cs lost < <(bench_ctxsw_delta "$file.cs-before" "$file.cs-after")
    tps=$(bench_result "$file.txt" tps)
    trx=$(bench_result "$file.txt" transactions)
    avg=$(bench_result "$file.txt" avg)
    p95=$(bench_result "$file.txt" p95)
    errors=$(bench_result "$file.txt" errors)
    if [[ -z $tps || ! $trx -gt 0 || -z $avg || -z $p95 || -z $seqno_before || -z $seqno_after ]]; then
        failed[$key]="no result in the sysbench report"
        echo "$case $workload $clients clients, round $round: FAILED, ${failed[$key]}"
        return 1
    fi
    runs[$key]=$((${runs[$key]:-0} + 1))
    tps_sum[$key]=$(awk -v a="${tps_sum[$key]:-0}" -v b="$tps" 'BEGIN { print a + b }')
    avg_sum[$key]=$(awk -v a="${avg_sum[$key]:-0}" -v b="$avg" 'BEGIN { print a + b }')
    p95_sum[$key]=$(awk -v a="${p95_sum[$key]:-0}" -v b="$p95" 'BEGIN { print a + b }')
    trx_sum[$key]=$((${trx_sum[$key]:-0} + trx))
    cs_sum[$key]=$((${cs_sum[$key]:-0} + cs))
    # Writesets (seqnos) per transaction: 1 for these workloads, a check that every
    # transaction really replicated.
    ws_sum[$key]=$((${ws_sum[$key]:-0} + seqno_after - seqno_before))
    errors_sum[$key]=$((${errors_sum[$key]:-0} + ${errors:-0}))
    lost_sum[$key]=$((${lost_sum[$key]:-0} + lost))
    printf '%-8s %-21s %2s clients, round %s: %8s TPS, avg %7.3f ms, p95 %6s ms, %5.1f cs/trx, %.3f writesets/trx, %s errors%s\n' \
        "$case" "$workload" "$clients" "$round" "$tps" "$avg" "$p95" \
        "$(awk -v s="$cs" -v n="$trx" 'BEGIN { print s / n }')" \
        "$(awk -v s="$((seqno_after - seqno_before))" -v n="$trx" 'BEGIN { print s / n }')" "${errors:-0}" \
        "$( ((lost > 0)) && echo ", $lost server threads exited during the run")"
}

echo "== sysbench against node 1, $seconds s per run, $rounds round(s), Lockstep then Galera"
for workload in $workloads; do
    for clients in $clients_list; do
        for ((round = 1; round <= rounds; round++)); do
            for case in $cases; do
                run_one "$case" "$workload" "$clients" "$round" || any_failed=1
            done
        done
    done
done

# ---- read-after-write
# raw_run CASE LOAD ROUND: one read-after-write run; with LOAD=loaded, sysbench writes on node 2
# (the reading node) meanwhile.
raw_run() {
    local case=$1 load=$2 round=$3 dir=$work/$1 load_pid= status=0
    if [[ $load == loaded ]]; then
        bench_timeout=900 bench_sysbench oltp_write_only "$dir/node2/mariadbd.sock" "--threads=$raw_load_clients" \
            --time=0 run >"$work/$case-raw-load-$round.txt" 2>&1 &
        load_pid=$!
        sleep 3
    fi
    timeout --kill-after=10 600 "$python" -B bench/read-after-write.py run "$dir/node1/mariadbd.sock" \
        "$dir/node2/mariadbd.sock" "$raw_count" "$work/$case-raw-$load.samples" >"$work/$case-raw-$load-$round.log" 2>&1 ||
        status=1
    if [[ -n $load_pid ]]; then
        pkill -TERM -P "$load_pid" 2>/dev/null
        kill "$load_pid" 2>/dev/null
        wait "$load_pid" 2>/dev/null
        bench_converged "$dir" 60 >/dev/null
    fi
    return $status
}
echo "== read-after-write: write on node 1, read on node 2 ($raw_loads), $raw_count writes per mode, $rounds round(s)"
declare -A raw_failed
for load in $raw_loads; do
    for ((round = 1; round <= rounds; round++)); do
        for case in $cases; do
            if ! raw_run "$case" "$load" "$round"; then
                raw_failed[$case/$load]="round $round: $(tail -n 1 "$work/$case-raw-$load-$round.log" | cut -c1-200)"
                echo "$case read-after-write ($load) FAILED, ${raw_failed[$case/$load]}"
                any_failed=1
            else
                echo "$case read-after-write ($load) round $round done"
            fi
        done
    done
done
declare -A raw
for load in $raw_loads; do
    for case in $cases; do
        [[ -s $work/$case-raw-$load.samples ]] || continue
        while read -r kind count avg p95 max; do
            raw[$case/$load/$kind/count]=$count
            raw[$case/$load/$kind/avg]=$avg
            raw[$case/$load/$kind/p95]=$p95
            raw[$case/$load/$kind/max]=$max
        done < <("$python" -B bench/read-after-write.py summary "$work/$case-raw-$load.samples")
    done
done

# ---- report
echo
echo "sysbench against node 1 of 3, $BENCH_TABLES × $BENCH_TABLE_SIZE rows, wsrep_slave_threads=$slave_threads," \
    "$seconds s per run, $rounds round(s) per case alternating Lockstep and Galera, $(date -u '+%Y-%m-%d %H:%M UTC')"
for case in $cases; do
    echo "  $case: ${version[$case]} (${provider[$case]})"
done
echo "  TPS, avg and p95: mean over the rounds; cs/trx: context switches of the 3 mariadbd per transaction"
echo
echo "| workload | clients | Lockstep TPS | Galera TPS | TPS L/G | Lockstep avg ms | Galera avg ms | avg L/G |" \
    "Lockstep p95 ms | Galera p95 ms | p95 L/G | Lockstep cs/trx | Galera cs/trx | cs/trx L/G | errors L, G |" \
    "writesets/trx L, G |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
for workload in $workloads; do
    for clients in $clients_list; do
        l="lockstep/$workload/$clients" g="galera/$workload/$clients"
        lt=$(mean "$l" tps_sum) gt=$(mean "$g" tps_sum)
        la=$(mean "$l" avg_sum) ga=$(mean "$g" avg_sum)
        lp=$(mean "$l" p95_sum) gp=$(mean "$g" p95_sum)
        lc=$(per_trx "$l" cs_sum) gc=$(per_trx "$g" cs_sum)
        row="| $workload | $clients | $(fmt %.0f "$lt") | $(fmt %.0f "$gt") | $(ratio "$lt" "$gt")"
        row+=" | $(fmt %.3f "$la") | $(fmt %.3f "$ga") | $(ratio "$la" "$ga")"
        row+=" | $(fmt %.2f "$lp") | $(fmt %.2f "$gp") | $(ratio "$lp" "$gp")"
        row+=" | $(fmt %.1f "$lc") | $(fmt %.1f "$gc") | $(ratio "$lc" "$gc")"
        row+=" | ${errors_sum[$l]:-n/a}, ${errors_sum[$g]:-n/a}"
        row+=" | $(fmt %.3f "$(per_trx "$l" ws_sum)"), $(fmt %.3f "$(per_trx "$g" ws_sum)") |"
        echo "$row"
    done
done
notes=
for key in "${!failed[@]}"; do
    notes+="  FAILED $key (last failure): ${failed[$key]}"$'\n'
done
for key in "${!lost_sum[@]}"; do
    ((lost_sum[$key] > 0)) && notes+="  $key: ${lost_sum[$key]} server threads exited during runs (their switches are not counted)"$'\n'
done
[[ -n $notes ]] && printf '\n%s' "$notes"

raw_row() { # LOAD LABEL KIND STAT FORMAT
    local l=${raw[lockstep/$1/$3/$4]:-} g=${raw[galera/$1/$3/$4]:-}
    echo "| $2 | $(fmt "$5" "$l") | $(fmt "$5" "$g") | $(ratio "$l" "$g") |"
}
for load in $raw_loads; do
    echo
    if [[ $load == loaded ]]; then
        echo "Read-after-write, sysbench oltp_write_only with $raw_load_clients threads on node 2 meanwhile:" \
            "autocommit UPDATE of one row on node 1, then at once SELECT of it on node 2;"
    else
        echo "Read-after-write, idle clusters: autocommit UPDATE of one row on node 1, then at once SELECT of it on" \
            "node 2;"
    fi
    echo "$raw_count writes per mode and round, $rounds round(s), times in ms as seen by the client (PyMySQL)"
    echo
    echo "| $load | Lockstep | Galera | L/G |"
    echo "|---|---:|---:|---:|"
    raw_row "$load" "read with wsrep_sync_wait=1, avg ms" causal_read_ms avg %.3f
    raw_row "$load" "read with wsrep_sync_wait=1, p95 ms" causal_read_ms p95 %.3f
    raw_row "$load" "read with wsrep_sync_wait=1, max ms" causal_read_ms max %.3f
    echo "| read with wsrep_sync_wait=1 saw the new value | $(fmt '%.1f %%' "${raw[lockstep/$load/causal_fresh_pct/count]:-}") |" \
        "$(fmt '%.1f %%' "${raw[galera/$load/causal_fresh_pct/count]:-}") | |"
    raw_row "$load" "read with wsrep_sync_wait=0, avg ms" plain_read_ms avg %.3f
    raw_row "$load" "read with wsrep_sync_wait=0, p95 ms" plain_read_ms p95 %.3f
    echo "| read with wsrep_sync_wait=0 was stale | $(fmt '%.1f %%' "${raw[lockstep/$load/plain_stale_pct/count]:-}") |" \
        "$(fmt '%.1f %%' "${raw[galera/$load/plain_stale_pct/count]:-}") | |"
    raw_row "$load" "stale reads: write to first fresh read, avg ms" stale_until_fresh_ms avg %.3f
    raw_row "$load" "stale reads: write to first fresh read, p95 ms" stale_until_fresh_ms p95 %.3f
    raw_row "$load" "stale reads: write to first fresh read, max ms" stale_until_fresh_ms max %.3f
    raw_row "$load" "the write (autocommit UPDATE on node 1), avg ms" write_ms avg %.3f
    raw_row "$load" "the write (autocommit UPDATE on node 1), p95 ms" write_ms p95 %.3f
    for case in $cases; do
        [[ ${raw[$case/$load/never_fresh/count]:-0} == 0 ]] ||
            echo "  $case: ${raw[$case/$load/never_fresh/count]} writes never became visible on node 2 within 10 s"
        [[ -z ${raw_failed[$case/$load]:-} ]] || echo "  $case: read-after-write FAILED, ${raw_failed[$case/$load]}"
    done
done

# goal LABEL VALUE OP LIMIT: "met" or "NOT met" for VALUE OP LIMIT (OP: le or ge).
goal() {
    local verdict
    verdict=$(awk -v v="$2" -v op="$3" -v lim="$4" 'BEGIN { if (v == "") print "n/a";
        else if ((op == "le" && v <= lim) || (op == "ge" && v >= lim)) print "met"; else print "NOT met" }')
    echo "- $1: $(fmt %.2f× "$2") ($verdict)"
}
ratio_of() { # the plain ratio of two means, empty if either is missing
    awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b != 0) print a / b }'
}
echo
echo "Goals (Lockstep / Galera):"
for workload in $workloads; do
    [[ " $clients_list " == *" 1 "* ]] &&
        goal "1-client commit latency (avg), $workload, at most 0.80×" \
            "$(ratio_of "$(mean "lockstep/$workload/1" avg_sum)" "$(mean "galera/$workload/1" avg_sum)")" le 0.8
done
for workload in $workloads; do
    case $workload in
        oltp_update_non_index) limit=1.2 ;;
        oltp_write_only) limit=1.0 ;;
        *) continue ;;
    esac
    [[ " $clients_list " == *" 8 "* ]] &&
        goal "8-client TPS, $workload, at least ${limit}0×" \
            "$(ratio_of "$(mean "lockstep/$workload/8" tps_sum)" "$(mean "galera/$workload/8" tps_sum)")" ge "$limit"
done
for load in $raw_loads; do
    goal "causal read (wsrep_sync_wait=1 on node 2, avg, $load), at most 1.20×" \
        "$(ratio_of "${raw[lockstep/$load/causal_read_ms/avg]:-}" "${raw[galera/$load/causal_read_ms/avg]:-}")" le 1.2
    goal "delay of a stale read until fresh (avg, $load), at most 0.50×" \
        "$(ratio_of "${raw[lockstep/$load/stale_until_fresh_ms/avg]:-}" "${raw[galera/$load/stale_until_fresh_ms/avg]:-}")" le 0.5
done
echo
echo "Goals (Lockstep's causal read / its plain read; Galera's for comparison):"
for load in $raw_loads; do
    for case in $cases; do
        [[ $case == lockstep ]] || { echo "- $case, $load: $(fmt %.2f× "$(ratio_of "${raw[$case/$load/causal_read_ms/avg]:-}" "${raw[$case/$load/plain_read_ms/avg]:-}")")"; continue; }
        goal "$case, $load: a wsrep_sync_wait=1 read at most 1.20× a plain read" \
            "$(ratio_of "${raw[$case/$load/causal_read_ms/avg]:-}" "${raw[$case/$load/plain_read_ms/avg]:-}")" le 1.2
    done
done
exit "$any_failed"
