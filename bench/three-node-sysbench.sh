#!/usr/bin/env bash
# sysbench oltp_write_only and oltp_update_non_index against node 1 of a fresh 3-node cluster,
# once with the Lockstep provider and once with Galera 4, plus a standalone MariaDB (wsrep off)
# for reference: all in one run on this machine, one case after the other. Prints a table of
# TPS, p95 latency and errors per case, and the ratios Lockstep / Galera.
#
# Usage: bench/three-node-sysbench.sh [SECONDS (60)] [THREADS (8)]
# Environment:
#   LOCKSTEP_PROVIDER  Lockstep provider [default: target/release/liblockstep.so, built first]
#   GALERA_PROVIDER    [default: /usr/lib/galera/libgalera_smm.so]
#   BENCH_CASES        [default: "lockstep galera standalone"]
#   BENCH_WORKLOADS    [default: "oltp_write_only oltp_update_non_index"]
#   BENCH_TABLES, BENCH_TABLE_SIZE  sysbench data [default: 4 tables of 100000 rows]
#   BENCH_KEEP=1       keep the work directory (data, error logs, sysbench reports)
#
# A case that cannot run (no 3-node primary cluster, a sysbench failure or stall) is reported
# as FAILED with the reason, and the other cases still run. Exit status 1 if any case failed.
set -uo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
seconds=${1:-60}
threads=${2:-8}
cases=${BENCH_CASES:-lockstep galera standalone}
workloads=${BENCH_WORKLOADS:-oltp_write_only oltp_update_non_index}

if [[ " $cases " == *" lockstep "* ]]; then bench_build yes; else bench_build no; fi || exit 1

work=$(mktemp -d /tmp/lockstep-bench3.XXXXXX)
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
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

declare -A tps p95 errors note
any_failed=0

# fail CASE REASON: every workload of CASE is reported failed with REASON.
fail() {
    echo "bench: $1 failed: $2" >&2
    any_failed=1
    local workload
    for workload in $workloads; do
        [[ -n ${tps[$1/$workload]:-} ]] || note[$1/$workload]=$2
    done
}

run_case() {
    local case=$1 dir=$work/$1 provider socket report workload
    echo
    echo "== $case"
    case $case in
        standalone)
            bench_standalone_up "$dir" || { fail "$case" "the standalone server did not start"; return; }
            socket=$dir/node1/mariadbd.sock
            note[$case/version]="MariaDB $(bench_sql "$socket" "SELECT VERSION()"), wsrep_on=$(bench_sql "$socket" \
                "SELECT @@wsrep_on")"
            ;;
        lockstep | galera)
            [[ $case == lockstep ]] && provider=$LOCKSTEP_PROVIDER || provider=$GALERA_PROVIDER
            if [[ $case == lockstep && -n $lockstep_unusable ]]; then
                fail "$case" "$lockstep_unusable"
                return
            fi
            local problem
            if ! problem=$(bench_cluster_up "$dir" "$provider" 3 "$work/$case-up.log"); then
                tail -n 15 "$work/$case-up.log" >&2
                fail "$case" "no 3-node cluster: $problem"
                return
            fi
            if ! problem=$(bench_cluster_check "$dir" 3); then
                fail "$case" "no 3-node primary cluster: $problem"
                return
            fi
            socket=$dir/node1/mariadbd.sock
            note[$case/version]="$(bench_wsrep_var "$socket" wsrep_provider_name) \
$(bench_wsrep_var "$socket" wsrep_provider_version)"
            ;;
        *)
            fail "$case" "unknown case (expected lockstep, galera or standalone)"
            return
            ;;
    esac
    echo "${note[$case/version]}; preparing $BENCH_TABLES tables of $BENCH_TABLE_SIZE rows"
    if ! bench_timeout=1800 bench_prepare "$socket"; then
        fail "$case" "sysbench prepare failed"
        return
    fi
    for workload in $workloads; do
        report=$work/$case-$workload.txt
        echo "-- $workload, $threads threads, $seconds s"
        if bench_timeout=$((seconds + 120)) bench_run "$workload" "$socket" "$threads" "$seconds" >"$report" 2>&1; then
            tps[$case/$workload]=$(bench_result "$report" tps)
            p95[$case/$workload]=$(bench_result "$report" p95)
            errors[$case/$workload]=$(bench_result "$report" errors)
            grep -E '^\[|transactions:|95th percentile:|ignored errors:' "$report"
        else
            fail "$case" "sysbench $workload failed or stalled: $(grep -m1 -iE 'error|fatal' "$report" | cut -c1-160)"
        fi
    done
    if [[ $case != standalone ]]; then
        local values
        if values=$(bench_converged "$dir" 60); then
            echo "every node at wsrep_last_committed $(bench_wsrep_var "$socket" wsrep_last_committed)"
        else
            fail "$case" "nodes did not converge: wsrep_last_committed $values"
        fi
    fi
    "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1 || echo "bench: $case: clean shutdown failed" >&2
}

for case in $cases; do
    run_case "$case"
done

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f×\n", a / b }'
}

echo
echo "sysbench against node 1, $threads threads, $seconds s, $BENCH_TABLES × $BENCH_TABLE_SIZE rows, $(date -I)"
for case in $cases; do
    echo "  $case: ${note[$case/version]:-not started}"
done
echo
echo "| workload | case | TPS | p95 ms | errors | note |"
echo "|---|---|---:|---:|---:|---|"
for workload in $workloads; do
    for case in $cases; do
        label=$case
        [[ $case != standalone ]] && label="$case, 3 nodes"
        if [[ -n ${tps[$case/$workload]:-} ]]; then
            echo "| $workload | $label | ${tps[$case/$workload]} | ${p95[$case/$workload]} |" \
                "${errors[$case/$workload]} | |"
        else
            echo "| $workload | $label | FAILED | | | ${note[$case/$workload]:-} |"
        fi
    done
    if [[ " $cases " == *" lockstep "* && " $cases " == *" galera "* ]]; then
        echo "| $workload | Lockstep / Galera | $(ratio "${tps[lockstep/$workload]:-}" "${tps[galera/$workload]:-}") |" \
            "$(ratio "${p95[lockstep/$workload]:-}" "${p95[galera/$workload]:-}") | | |"
    fi
done
exit "$any_failed"
