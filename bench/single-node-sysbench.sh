#!/usr/bin/env bash
# sysbench oltp_write_only against a fresh one-node cluster: the issue-2 acceptance run.
# Usage: bench/single-node-sysbench.sh [SECONDS (60)] [THREADS (8)]
# The provider is LOCKSTEP_PROVIDER or target/release/liblockstep.so; set
# LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so for Galera's number on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
threads=${2:-8}

cargo build --release
# Honour CARGO_TARGET_DIR; the provider under test is the one just built unless named.
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
export LOCKSTEP_PROVIDER=${LOCKSTEP_PROVIDER:-$target_dir/release/liblockstep.so}
lockstep=$target_dir/release/lockstep
dir=$(mktemp -d /tmp/lockstep-bench.XXXXXX)
trap '"$lockstep" cluster down --dir "$dir" >/dev/null; rm -rf "$dir"' EXIT

"$lockstep" cluster up --nodes 1 --dir "$dir"
socket=$dir/node1/mariadbd.sock
mariadb --no-defaults -S "$socket" -uroot -e "CREATE DATABASE sbtest"

sysbench_cmd=(sysbench oltp_write_only --db-driver=mysql "--mysql-socket=$socket" --mysql-user=root
    --mysql-db=sbtest --tables=4 --table-size=100000 --db-ps-mode=disable)
"${sysbench_cmd[@]}" --threads=4 prepare >/dev/null
"${sysbench_cmd[@]}" --threads="$threads" --time="$seconds" --report-interval=10 run | tee "$dir/run.txt"

errors=$(awk '/ignored errors:/ {print $3}' "$dir/run.txt")
"$lockstep" cluster status --dir "$dir"
if [[ $errors != 0 ]]; then
    echo "bench: $errors ignored errors" >&2
    exit 1
fi
