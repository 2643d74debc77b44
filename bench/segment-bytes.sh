#!/usr/bin/env bash
# Bytes a writeset costs to cross into another site (`gmcast.segment`), both providers:
#
#     bench/segment-bytes.sh [WRITES (200)] [ROW_BYTES (20000)] [DATA (repeat)]
#
# For each provider (Lockstep, then Galera 4) and each layout (every node in segment 0; node 1
# in segment 0, nodes 2 and 3 in segment 1; the same with `socket.compression=yes` on every
# node, Lockstep only: Galera has no such option): a 3-node cluster (`lockstep cluster up`,
# TLS on); for the segment layouts nodes 2 and 3 are restarted one at a time with
# `gmcast.segment=1` (as an operator would; node 1 stays up; with compression, node 1 is
# restarted first with it); then WRITES autocommit UPDATEs on node 1, each replacing a row's
# ROW_BYTES-byte value: one letter repeated (DATA=repeat, which deflate shrinks to almost
# nothing) or random hexadecimal digits (DATA=random, about half of which deflate can save:
# the hard case). Byte counters are the kernel's:
# one iptables OUTPUT rule per TCP connection between node 1 and node 2 or 3 (every
# established socket of node 1's mariadbd whose peer socket belongs to node 2's or 3's),
# counting what node 1 sends on it (IP packets, headers and TLS included). Reported: those
# bytes per writeset, and per writeset byte (node 1's wsrep_replicated_bytes): the copies
# of each writeset that entered segment 1 (Galera: two without segments, one with).
# Needs root (iptables; `scripts/setup.sh` installs it). Rules are removed on exit.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
writes=${1:-200}
row_bytes=${2:-20000}
data=${3:-repeat}
[[ $data == repeat || $data == random ]] || { echo "DATA is repeat or random, not $data" >&2; exit 2; }
command -v iptables >/dev/null || { echo "iptables missing: run scripts/setup.sh" >&2; exit 1; }
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "$lockstep_unusable" >&2; exit 1; }
chain=LOCKSTEP_SEGMENT_BYTES
work=$(mktemp -d /tmp/lockstep-segments.XXXXXX)
cleanup() {
    iptables -D OUTPUT -j "$chain" 2>/dev/null
    iptables -F "$chain" 2>/dev/null
    iptables -X "$chain" 2>/dev/null
    for d in "$work"/*/; do "$lockstep" cluster down --dir "$d" >/dev/null 2>&1; done
    rm -rf "$work"
}
trap cleanup EXIT
iptables -N "$chain" && iptables -I OUTPUT -j "$chain" || exit 1

# pid_of NODE_DIR
pid_of() { cat "$1/mariadbd.pid"; }

# count_connections DIR: one rule per TCP connection from node 1 to node 2 or 3.
count_connections() {
    local dir=$1 n1 peers rules=0
    n1=$(pid_of "$dir/node1")
    peers="$(pid_of "$dir/node2")|$(pid_of "$dir/node3")"
    iptables -F "$chain"
    # Every established loopback socket with its owner: "local peer pid".
    ss -tnpH state established | awk '{
        pid = ""; if (match($0, /pid=[0-9]+/)) pid = substr($0, RSTART + 4, RLENGTH - 4)
        print $3, $4, pid }' >"$dir.sockets"
    while read -r local peer pid; do
        [[ $pid == "$n1" ]] || continue
        if grep -Eq "^$peer $local ($peers)\$" "$dir.sockets"; then
            iptables -A "$chain" -p tcp -s "${local%:*}" --sport "${local##*:}" -d "${peer%:*}" --dport "${peer##*:}"
            rules=$((rules + 1))
        fi
    done <"$dir.sockets"
    echo "$rules"
}

counted_bytes() { iptables -L "$chain" -n -v -x | awk 'NR > 2 { sum += $2 } END { print sum + 0 }'; }

# new_values: WRITES UPDATE statements of row 1, each with a new ROW_BYTES-byte value.
new_values() {
    if [[ $data == repeat ]]; then
        for ((i = 1; i <= writes; i++)); do
            echo "UPDATE s.t SET v = REPEAT(CHAR(65 + $i % 26), $row_bytes) WHERE id = 1;"
        done
    else
        /usr/bin/python3 -c 'import os, sys
for _ in range(int(sys.argv[1])):
    print("UPDATE s.t SET v = \x27%s\x27 WHERE id = 1;" % os.urandom(int(sys.argv[2]) // 2).hex())' "$writes" "$row_bytes"
    fi
}

# run PROVIDER_NAME LIBRARY LAYOUT ("flat", "segments" or "compressed")
run() {
    local name=$1 library=$2 layout=$3 dir=$work/$1-$3 socket rules before after replicated0 replicated1 n
    bench_cluster_up "$dir" "$library" 3 "$dir-up.log" || { echo "$name $layout: FAILED (cluster up)"; return 1; }
    if [[ $layout == compressed ]]; then
        bench_restart_with "$dir" "$library" 1 "socket.compression=yes" 3 || { echo "$name $layout: FAILED (restart of node 1)"; return 1; }
    fi
    if [[ $layout != flat ]]; then
        local options="gmcast.segment=1"
        [[ $layout == compressed ]] && options+=";socket.compression=yes"
        for n in 2 3; do
            bench_restart_with "$dir" "$library" "$n" "$options" 3 || { echo "$name $layout: FAILED (restart of node $n)"; return 1; }
        done
    fi
    bench_cluster_check "$dir" || { echo "$name $layout: FAILED (not synced)"; return 1; }
    socket=$dir/node1/mariadbd.sock
    bench_sql "$socket" "CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY, v LONGBLOB NOT NULL);
        INSERT INTO s.t VALUES (1, '')" || return 1
    sleep 1
    rules=$(count_connections "$dir")
    replicated0=$(bench_wsrep_var "$socket" wsrep_replicated_bytes)
    before=$(counted_bytes)
    new_values | mariadb --no-defaults -S "$socket" -uroot
    bench_converged "$dir" >/dev/null 2>&1
    sleep 1
    after=$(counted_bytes)
    replicated1=$(bench_wsrep_var "$socket" wsrep_replicated_bytes)
    awk -v n="$name" -v l="$layout" -v w="$writes" -v b=$((after - before)) -v r=$((replicated1 - replicated0)) \
        -v c="$rules" 'BEGIN {
        printf "%-8s %-9s connections %d: %d bytes into segment 1 for %d writesets of %d bytes: %.0f bytes each, %.2f copies\n",
            n, l, c, b, w, r / w, b / w, b / r }'
}

for layout in flat segments; do
    run lockstep "$LOCKSTEP_PROVIDER" "$layout"
    run galera "$GALERA_PROVIDER" "$layout"
done
run lockstep "$LOCKSTEP_PROVIDER" compressed
