#!/usr/bin/env bash
# Commit latency across sites, both providers in one run (issue 14 item 4):
#
#     bench/wan-latency.sh [COMMITS (300)] [DELAYS ("1-2=5,1-3=15,2-3=25")] [SETTLE_SECONDS (5)]
#
# Three sites, one node each, with one-way delays between them (DELAYS, in ms: by default
# round trips of 10 ms between nodes 1 and 2, 30 ms between 1 and 3, 50 ms between 2 and 3).
# This kernel has no netem, so the delays come from a relay (wan-delay-proxy.py): every
# node's mariadbd runs in its own cgroup (a `mariadbd` wrapper put first in PATH for
# `lockstep cluster up`), and an iptables nat rule per cgroup sends every TCP connection it
# opens to 127.0.0.1 through the relay, which holds each chunk for the delay between the two
# nodes' sites. A Lockstep and a Galera 4 3-node cluster (TLS on both) are up side by side
# the whole run. Then, for writer node 1, 2, 3 in turn, Lockstep then Galera: autocommit
# single-row UPDATEs on that node, one after the other, SETTLE_SECONDS first (the lead
# follows the writes meanwhile) and COMMITS more measured. Reported per writer and provider:
# commit latency average, median, p95 and max of the measured commits, the average of the
# first second's (before the lead has followed the writer) and of the settling ones,
# Lockstep's leader before and after (`wsrep_group_leader`), and the round trips to the
# writer's nearest majority (with 3 nodes: the nearest other node) and to the farthest node.
# Needs root (cgroups, iptables). Rules, cgroups and clusters are removed on exit.
set -uo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_setup || exit 1
commits=${1:-300}
delays=${2:-1-2=5,1-3=15,2-3=25}
settle=${3:-5}
bench_build || exit 1
[[ -z $lockstep_unusable ]] || { echo "$lockstep_unusable" >&2; exit 1; }
work=$(mktemp -d /tmp/lockstep-wan.XXXXXX)
trap 'bench_relay_cleanup "$work"' EXIT
bench_relay_start "$work" lockstep-wan "$delays" "$work/lockstep" "$work/galera" || exit 1

for name in lockstep galera; do
    library=$LOCKSTEP_PROVIDER
    [[ $name == galera ]] && library=$GALERA_PROVIDER
    PATH=$work/bin:$PATH bench_cluster_up "$work/$name" "$library" 3 "$work/$name-up.log" ||
        { echo "$name: FAILED (cluster up)"; exit 1; }
    bench_cluster_check "$work/$name" || { echo "$name: FAILED (not synced)"; exit 1; }
    bench_sql "$work/$name/node1/mariadbd.sock" "CREATE DATABASE wan;
        CREATE TABLE wan.t (id INT PRIMARY KEY, v INT NOT NULL); INSERT INTO wan.t VALUES (1, 0), (2, 0), (3, 0)" ||
        exit 1
done
# Every group connection goes through the relay: the peer of each socket a node accepted on
# its group port is the relay's (python3), not another node's. (A node's outgoing socket
# still names the peer's group port: the nat rule rewrites packets, not sockets.)
group_ports=$(sed -n 's/^# Ports: .*group \([0-9]*\),.*/\1/p' "$work"/*/node*/my.cnf | paste -sd'|')
read -r relayed direct < <(ss -tnpH state established | awk -v ports="^($group_ports)\$" '
    { owner[$3] = $0 ~ /mariadbd/ ? "node" : "other"; split($3, local, ":"); if (local[2] ~ ports) accepted[$3] = $4 }
    END { for (s in accepted) { if (owner[accepted[s]] == "node") d++; else r++ } print r + 0, d + 0 }')
echo "delays (one way, ms): $delays; group connections through the relay: $relayed, direct: $direct"
[[ $direct == 0 ]] || { echo "FAILED: some group connections bypass the relay"; exit 1; }

# nearest_rtt NODE: the round trip to the nearest other node (a majority of 3 with NODE);
# farthest_rtt NODE: to the farthest.
rtt() {
    tr ',' '\n' <<<"$delays" | awk -F'[-=]' -v n="$1" -v pick="$2" '
        $1 == n || $2 == n { d = 2 * $3; if (best == "" || (pick == "min" ? d < best : d > best)) best = d }
        END { print best }'
}

printf '%-6s %-8s %8s %8s %8s %8s %9s %10s %11s %9s %9s\n' writer provider "avg ms" "p50 ms" "p95 ms" "max ms" \
    "1st s avg" "settle avg" leader "near RTT" "far RTT"
for writer in 1 2 3; do
    for name in lockstep galera; do
        line=$(/usr/bin/python3 bench/wan-commit-latency.py "$work/$name/node$writer/mariadbd.sock" "$writer" \
            "$settle" "$commits") || { echo "$name writer $writer: FAILED"; continue; }
        read -r first_avg _ settle_avg avg p50 p95 max before after <<<"$line"
        printf '%-6s %-8s %8s %8s %8s %8s %9s %10s %11s %9s %9s\n' "node$writer" "$name" "$avg" "$p50" "$p95" "$max" \
            "$first_avg" "$settle_avg" "$before>$after" "$(rtt "$writer" min)" "$(rtt "$writer" max)"
    done
done
