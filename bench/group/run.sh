#!/usr/bin/env bash
# Group-layer benchmark: 3 members in one process over loopback TCP, ordering
# throughput and latency for 1 KiB and 64 KiB writesets, with and without fsync
# (gcache.sync), then with one client per member: the latency a lone commit pays.
# A benchmark, not a test. Usage: bench/group/run.sh [writesets per case]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p lockstep-cli
./target/release/lockstep bench --writesets "${1:-10000}" --sizes 1024,65536 --fsync both
./target/release/lockstep bench --writesets "${1:-10000}" --sizes 1024 --clients 3 --fsync both
