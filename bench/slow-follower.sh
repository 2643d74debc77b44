#!/usr/bin/env bash
# A follower on a slow link, both providers in one run:
#
#     bench/slow-follower.sh [SECONDS (60)] [RATE_KIB (256)] [GCACHE (8M)] [THREADS (4)]
#
# Three nodes; everything that goes into node 3 over group connections is carried at most
# RATE_KIB KiB a second by the relay of wan-delay-proxy.py (no delay; see wan-latency.sh for
# the cgroups and nat rules that route every node's connections through it), and every node
# has gcache.size=GCACHE; the link slows once the data is loaded. A Lockstep and a Galera 4 cluster are up side by side; for each in
# turn, sysbench oltp_write_only with THREADS clients on node 1 for SECONDS, then no writes
# for up to 120 s while node 3 catches up. Sampled every second on each cluster: node 1's and
# node 3's wsrep_last_committed, node 3's state, node 1's wsrep_flow_control_paused.
# Reported per provider: transactions and TPS, seconds of the run without a commit on node 1,
# node 3's largest lag (seqnos), the seconds it was not Synced (or not running), whether it
# reached node 1's last commit afterwards, the MB node 1 replicated and the MB the relay
# carried into node 3 meanwhile (a copy of each writeset is about as much; more means sent
# again), and the flow-control and state-transfer lines of the error logs. Needs root
# (cgroups, iptables). Rules, cgroups and clusters are removed on exit.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
seconds=${1:-60}
rate_kib=${2:-256}
gcache=${3:-8M}
threads=${4:-4}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "$lockstep_unusable" >&2; exit 1; }
work=$(mktemp -d /tmp/lockstep-slow.XXXXXX)
trap 'bench_relay_cleanup "$work"' EXIT
INTO_RATES="3=$rate_kib" INTO_RATES_FROM="$work/slow" INTO_COUNTS="$work/counts" \
    bench_relay_start "$work" lockstep-slow "1-2=0,1-3=0,2-3=0" "$work/lockstep" "$work/galera" || exit 1

declare -A library=([lockstep]=$LOCKSTEP_PROVIDER [galera]=$GALERA_PROVIDER)
for name in lockstep galera; do
    PATH=$work/bin:$PATH timeout --kill-after=10 600 "$lockstep" cluster up --nodes 3 --dir "$work/$name" \
        --provider "${library[$name]}" --provider-options "gcache.size=$gcache" >"$work/$name-up.log" 2>&1 ||
        { tail -5 "$work/$name-up.log"; echo "$name: FAILED (cluster up)"; exit 1; }
    bench_cluster_check "$work/$name" || { echo "$name: FAILED (not synced)"; exit 1; }
    bench_prepare "$work/$name/node1/mariadbd.sock" || { echo "$name: FAILED (prepare)"; exit 1; }
    bench_converged "$work/$name" 300 >/dev/null || { echo "$name: FAILED (prepare not replicated)"; exit 1; }
done
# The link into node 3 slows down now (the relay's INTO_RATES_FROM).
touch "$work/slow"
echo "into node 3: at most $rate_kib KiB/s; gcache.size=$gcache; $threads clients on node 1 for $seconds s"

# sample DIR FILE: one line a second until killed: "SECOND NODE1_COMMITTED NODE3_COMMITTED
# NODE3_STATE NODE1_PAUSED" (NODE3_* "-" while node 3 does not answer).
sample() {
    local second=0 one three state paused
    while :; do
        one=$(bench_wsrep_var "$1/node1/mariadbd.sock" wsrep_last_committed 2>/dev/null)
        paused=$(bench_wsrep_var "$1/node1/mariadbd.sock" wsrep_flow_control_paused 2>/dev/null)
        three=$(timeout 2 mariadb --no-defaults -S "$1/node3/mariadbd.sock" -uroot -N -B -e \
            "SHOW STATUS WHERE Variable_name IN ('wsrep_last_committed', 'wsrep_local_state_comment')" 2>/dev/null |
            sort | cut -f2 | paste -sd' ')
        read -r three state <<<"${three:-- -}"
        echo "$second ${one:--} ${three:--} ${state:--} ${paused:--}" >>"$2"
        second=$((second + 1))
        sleep 1
    done
}

# into_node3 DIR: bytes the relay carried so far into node 3 of the cluster in DIR.
into_node3() {
    awk -v dir="$1" '$1 == dir && $2 == 3 { n = $3 } END { print n + 0 }' "$work/counts" 2>/dev/null || echo 0
}

printf '%-8s %7s %7s %12s %10s %14s %10s %11s %13s\n' provider trx TPS "no-commit s" "max lag" "node3 !Synced" \
    "caught up" "MB written" "MB to node3"
for name in lockstep galera; do
    dir=$work/$name
    written=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_replicated_bytes)
    carried=$(into_node3 "$dir")
    sample "$dir" "$work/$name.samples" &
    sampler=$!
    bench_timeout=$((seconds + 60)) bench_run oltp_write_only "$dir/node1/mariadbd.sock" "$threads" "$seconds" \
        >"$work/$name.sysbench" 2>&1
    last=$(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_last_committed)
    caught="no"
    for _ in $(seq 120); do
        reached=$(bench_wsrep_var "$dir/node3/mariadbd.sock" wsrep_last_committed 2>/dev/null)
        [[ -n $reached && $reached -ge $last ]] && { caught="yes"; break; }
        sleep 1
    done
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    sleep 1
    written=$((($(bench_wsrep_var "$dir/node1/mariadbd.sock" wsrep_replicated_bytes) - written) >> 20))
    carried=$((($(into_node3 "$dir") - carried) >> 20))
    read -r stalled lag not_synced < <(awk -v run="$seconds" '
        NR > 1 && $1 <= run && $2 == prev { stalled++ } { prev = $2 }
        $1 <= run && $3 ~ /^[0-9]+$/ && $2 - $3 > lag { lag = $2 - $3 }
        $1 <= run && $4 != "Synced" { not_synced++ }
        END { print stalled + 0, lag + 0, not_synced + 0 }' "$work/$name.samples")
    printf '%-8s %7s %7s %12s %10s %14s %10s %11s %13s\n' "$name" "$(bench_result "$work/$name.sysbench" transactions)" \
        "$(bench_result "$work/$name.sysbench" tps)" "$stalled" "$lag" "$not_synced" "$caught" "$written" "$carried"
done
for name in lockstep galera; do
    echo "--- $name: flow control and state transfers (error logs)"
    grep -h -i -E "flow control|writers (wait|no longer)|go on without" "$work/$name"/node*/error.log | cut -c1-260 | tail -20
    grep -h -E "state transfer needed: yes|needs a full state transfer|SST succeeded" "$work/$name"/node*/error.log |
        cut -c1-200 | tail -10
done
