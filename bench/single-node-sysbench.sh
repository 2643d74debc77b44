#!/usr/bin/env bash
# sysbench oltp_write_only against a fresh one-node cluster: the issue-2 acceptance run.
# Usage: bench/single-node-sysbench.sh [SECONDS (60)] [THREADS (8)]
# The provider is LOCKSTEP_PROVIDER or target/release/liblockstep.so; set
# LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so for Galera's number on the same machine.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup
seconds=${1:-60}
threads=${2:-8}

cargo build --release
# The provider under test is the one just built unless named.
export LOCKSTEP_PROVIDER=${LOCKSTEP_PROVIDER:-$target_dir/release/liblockstep.so}
dir=$(mktemp -d /tmp/lockstep-bench.XXXXXX)
trap '"$lockstep" cluster down --dir "$dir" >/dev/null; rm -rf "$dir"' EXIT

"$lockstep" cluster up --nodes 1 --dir "$dir"
socket=$dir/node1/mariadbd.sock
bench_prepare "$socket"
bench_run oltp_write_only "$socket" "$threads" "$seconds" | tee "$dir/run.txt"

errors=$(bench_result "$dir/run.txt" errors)
"$lockstep" cluster status --dir "$dir"
if [[ $errors != 0 ]]; then
    echo "bench: $errors ignored errors" >&2
    exit 1
fi
