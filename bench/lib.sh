# shellcheck shell=bash
# Helpers shared by the sysbench benchmarks; sourced, not run.
#
# bench_setup moves to the workspace root and sets:
#   target_dir  the cargo target directory (CARGO_TARGET_DIR honoured)
#   lockstep    the `lockstep` CLI that starts and stops local clusters
# sysbench tables: BENCH_TABLES (4) tables of BENCH_TABLE_SIZE (100000) rows.

BENCH_TABLES=${BENCH_TABLES:-4}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-100000}
# The reference provider, installed by scripts/setup.sh.
GALERA_PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}

bench_setup() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
    target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
    lockstep=$target_dir/release/lockstep
}

# bench_sql SOCKET STATEMENT: tab-separated rows, no column names.
bench_sql() {
    mariadb --no-defaults -S "$1" -uroot -N -B -e "$2"
}

# bench_sysbench WORKLOAD SOCKET [sysbench options and command...]
bench_sysbench() {
    local workload=$1 socket=$2
    shift 2
    # bench_timeout, if set, bounds the run in seconds: a stalled cluster must not hang the script.
    timeout --kill-after=10 "${bench_timeout:-0}" \
        sysbench "$workload" --db-driver=mysql "--mysql-socket=$socket" --mysql-user=root --mysql-db=sbtest \
        "--tables=$BENCH_TABLES" "--table-size=$BENCH_TABLE_SIZE" --db-ps-mode=disable "$@"
}

# bench_prepare SOCKET: creates and fills the sbtest database.
bench_prepare() {
    bench_sql "$1" "CREATE DATABASE sbtest" &&
        bench_sysbench oltp_write_only "$1" --threads=4 prepare >/dev/null
}

# bench_run WORKLOAD SOCKET THREADS SECONDS: the run's report on stdout.
bench_run() {
    bench_sysbench "$1" "$2" "--threads=$3" "--time=$4" --report-interval=10 run
}

# bench_result FILE FIELD: FIELD of the sysbench report in FILE, one of
#   tps (transactions per second), p95 (95th percentile latency, ms), errors (ignored errors).
bench_result() {
    case $2 in
        tps) awk '/^ *transactions:/ { gsub(/\(/, "", $3); print $3 }' "$1" ;;
        p95) awk '/^ *95th percentile:/ { print $3 }' "$1" ;;
        errors) awk '/^ *ignored errors:/ { print $3 }' "$1" ;;
        *) return 1 ;;
    esac
}

# bench_wsrep_var SOCKET NAME: the value of a wsrep status variable.
bench_wsrep_var() {
    bench_sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2
}

# bench_standalone_up DIR: a MariaDB server with wsrep off, configured exactly like a node of a
# local cluster. `lockstep cluster up` writes (and briefly starts, with Galera) a one-node
# cluster in DIR; node1 then runs alone with --wsrep-on=OFF and no provider. Socket:
# DIR/node1/mariadbd.sock. `lockstep cluster down --dir DIR` stops it (it finds the server by
# its pid file).
bench_standalone_up() {
    local dir=$1 node=$1/node1
    "$lockstep" cluster up --nodes 1 --dir "$dir" --provider "$GALERA_PROVIDER" >/dev/null &&
        "$lockstep" cluster down --dir "$dir" >/dev/null || return 1
    mariadbd "--defaults-file=$node/my.cnf" --wsrep-on=OFF --wsrep-provider=none \
        </dev/null >"$node/mariadbd.out" 2>&1 &
    local pid=$! deadline=$((SECONDS + 90))
    until bench_sql "$node/mariadbd.sock" "SELECT 1" >/dev/null 2>&1; do
        if ((SECONDS > deadline)) || ! bench_running "$pid"; then
            echo "bench: standalone server in $node did not start; see $node/error.log" >&2
            "$lockstep" cluster down --dir "$dir" >/dev/null 2>&1
            return 1
        fi
        sleep 0.2
    done
}

# bench_running PID: true while PID has not exited (zombies count as exited).
bench_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat != *") "[ZX]* ]]
}
