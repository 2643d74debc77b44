#!/usr/bin/env bash
# Do parallel appliers pay off, and how long does flow control hold the writers? Both
# providers in one run (issue 13 item 5):
#
#     bench/applier.sh [SECONDS (30)] [CLIENTS (16)] [ROUNDS (1)]
#
# A Lockstep and a Galera 4 3-node cluster up side by side (`lockstep cluster up`, TLS on,
# flow control at its defaults on both), sysbench data (BENCH_TABLES x BENCH_TABLE_SIZE,
# default 4 x 10000) prepared on node 1 of each. For wsrep_slave_threads 1, then 4 (on every
# node), ROUNDS times, a Lockstep run then a Galera run: sysbench oltp_write_only, CLIENTS
# threads on node 1, SECONDS long. Per run: TPS; the share of the run node 1's writers were
# held by flow control (wsrep_flow_control_paused_ns, whose pause is the cluster's); the
# flow-control stops the other nodes sent (wsrep_flow_control_sent); their apply queue
# sampled every second (average and largest); wsrep_cert_deps_distance (node 2) and
# wsrep_apply_window (node 2, the writesets applied at once on average). Every node must
# reach the same wsrep_last_committed after each run.
set -uo pipefail
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
seconds=${1:-30}
clients=${2:-16}
rounds=${3:-1}
for number in "$seconds" "$clients" "$rounds"; do
    [[ $number =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [SECONDS] [CLIENTS] [ROUNDS] (bad number: $number)" >&2; exit 2; }
done
bench_build yes || exit 1
[[ -z $lockstep_unusable ]] || { echo "bench: $lockstep_unusable" >&2; exit 1; }
work=$(mktemp -d /tmp/lockstep-applier.XXXXXX)
cleanup() {
    for d in "$work"/lockstep "$work"/galera; do [[ -d $d ]] && "$lockstep" cluster down --dir "$d" >/dev/null 2>&1; done
    if [[ ${BENCH_KEEP:-} == 1 ]]; then echo "bench: work directory kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== two 3-node clusters in $work, $BENCH_TABLES tables of $BENCH_TABLE_SIZE rows on each"
bench_clusters_side_by_side "$work" lockstep "$LOCKSTEP_PROVIDER" galera "$GALERA_PROVIDER" || exit 1
bench_prepare_side_by_side "$work" lockstep galera || exit 1

# sample_queues DIR FILE: every second, the apply queue of nodes 2 and 3, one line each.
sample_queues() {
    while :; do
        for node in 2 3; do
            echo "$node $(bench_wsrep_var "$1/node$node/mariadbd.sock" wsrep_local_recv_queue)"
        done >>"$2"
        sleep 1
    done
}

# node_sum DIR VARIABLE NODE...: the sum of VARIABLE over those nodes.
node_sum() {
    local dir=$1 variable=$2 node sum=0
    shift 2
    for node in "$@"; do sum=$((sum + $(bench_wsrep_var "$dir/node$node/mariadbd.sock" "$variable"))); done
    echo "$sum"
}

printf '%-8s %8s %6s %9s %9s %8s %11s %11s %14s %12s\n' provider appliers round TPS "paused %" "fc sent" \
    "queue avg" "queue max" "deps distance" "apply window"
status=0
# Applier counts alternate within each round, so a drift over the run (purge, the group's
# log) does not fall on one count.
for ((round = 1; round <= rounds; round++)); do
    for threads in 1 4; do
        bench_slave_threads "$threads" "$work"/*/node*/mariadbd.sock || exit 1
        for name in lockstep galera; do
            dir=$work/$name file=$work/$name-$threads-$round
            for node in 1 2 3; do bench_sql "$dir/node$node/mariadbd.sock" "FLUSH STATUS" || exit 1; done
            paused0=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_flow_control_paused_ns)
            sent0=$(node_sum "$dir" wsrep_flow_control_sent 2 3)
            started=$(date +%s%N)
            sample_queues "$dir" "$file.queues" &
            sampler=$!
            bench_timeout=$((seconds + 120)) bench_sysbench oltp_write_only "$dir/node1/mariadbd.sock" \
                "--threads=$clients" "--time=$seconds" run >"$file.txt" 2>&1
            ok=$?
            elapsed_ns=$(($(date +%s%N) - started))
            paused1=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_flow_control_paused_ns)
            sent1=$(node_sum "$dir" wsrep_flow_control_sent 2 3)
            kill "$sampler" 2>/dev/null
            wait "$sampler" 2>/dev/null
            if ((ok != 0)); then
                echo "$name $threads appliers: FAILED (sysbench: $(grep -m1 -iE 'error|fatal' "$file.txt" | cut -c1-160))"
                status=1
                continue
            fi
            deps=$(bench_wsrep_var "$dir/node2/mariadbd.sock" wsrep_cert_deps_distance)
            window=$(bench_wsrep_var "$dir/node2/mariadbd.sock" wsrep_apply_window)
            values=$(bench_converged "$dir" 120) || { echo "$name: nodes differ after the run: $values"; status=1; }
            tps=$(bench_result "$file.txt" tps)
            awk -v n="$name" -v t="$threads" -v r="$round" -v tps="$tps" -v p=$((paused1 - paused0)) \
                -v e="$elapsed_ns" -v s=$((sent1 - sent0)) -v d="$deps" -v w="$window" '
                { sum += $2; if ($2 > max) max = $2; count++ }
                END { printf "%-8s %8d %6d %9.0f %9.2f %8d %11.1f %11d %14.1f %12.2f\n",
                      n, t, r, tps, 100 * p / e, s, count ? sum / count : 0, max, d, w }' "$file.queues" |
                tee -a "$work/rows"
        done
    done
done
# The same as one table per applier count, means over the rounds (what bench/table-chart.py draws).
echo
echo "sysbench oltp_write_only, $clients clients on node 1 of 3, $seconds s, means over $rounds round(s):"
echo
echo "| appliers | Lockstep TPS | Galera TPS | TPS L/G | Lockstep paused % | Galera paused % | Lockstep queue avg | Galera queue avg |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk '{ k = $1 " " $2; n[k]++; tps[k] += $4; paused[k] += $5; queue[k] += $7; appliers[$2] = 1 }
    END {
        for (a in appliers) {
            l = "lockstep " a; g = "galera " a
            if (!n[l] || !n[g]) continue
            printf "| %d | %.0f | %.0f | %.2f× | %.2f | %.2f | %.1f | %.1f |\n", a, tps[l] / n[l], tps[g] / n[g],
                (tps[l] / n[l]) / (tps[g] / n[g]), paused[l] / n[l], paused[g] / n[g], queue[l] / n[l], queue[g] / n[g]
        }
    }' "$work/rows" 2>/dev/null | sort -n -t'|' -k2
exit "$status"
