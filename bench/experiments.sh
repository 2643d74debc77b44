#!/usr/bin/env bash
# Every experiment that compares Lockstep with Galera 4, one after the other, with charts:
#
#     bench/experiments.sh [OUT (bench/results/experiments)]
#
#   1. the commit path and propagation (bench/commit-path.sh 20 2: sysbench with 1, 8 and 32
#      clients; a read on node 2 right after a write on node 1, idle and with sysbench on
#      node 2, wsrep_sync_wait 1 and 0);
#   2. parallel appliers and flow control (bench/applier.sh 30 16 2);
#   3. one huge transaction among small ones (bench/big-transaction-stall.sh: no streaming,
#      1 MB and 10 MB fragments; its own timelines under bench/results/big-transaction-stall/).
# Each report goes to OUT/NAME.md, and the Lockstep/Galera tables of the first two to
# OUT/NAME.svg (bench/table-chart.py). About 45 minutes on the 2-core machine. A failed
# experiment is reported and the next one still runs (exit status 1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:-bench/results/experiments}
mkdir -p "$out" || exit 1
python=/usr/bin/python3
status=0

# run NAME TITLE COMMAND...: the report in OUT/NAME.md, its chart in OUT/NAME.svg.
run() {
    local name=$1 title=$2
    shift 2
    echo "== $name: $*"
    {
        echo "\`$*\` ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null))"
        echo
        "$@"
    } 2>&1 | tee "$out/$name.md"
    ((PIPESTATUS[0] == 0)) || { echo "$name: FAILED (report in $out/$name.md)"; status=1; }
    if [[ -n $title ]]; then
        "$python" bench/table-chart.py "$out/$name.md" "$title" >"$out/$name.svg" ||
            { echo "$name: no chart"; status=1; }
    fi
}

run commit-path "Commit path and propagation, 3 nodes each, bench/commit-path.sh 20 2" bench/commit-path.sh 20 2
run applier "Parallel appliers and flow control, bench/applier.sh 30 16 2" bench/applier.sh 30 16 2
run big-transaction-stall "" bench/big-transaction-stall.sh
echo "== reports and charts in $out; big-transaction timelines in bench/results/big-transaction-stall/"
exit "$status"
