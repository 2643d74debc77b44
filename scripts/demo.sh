#!/usr/bin/env bash
# Builds Lockstep, starts a 3-node cluster on loopback in DIR (default /tmp/lockstep-demo) and
# shows synchronous multi-master replication: a write on node 1 read at once on node 3, and two
# nodes updating the same row at the same time (one commits, the other gets ERROR 1213). Leaves
# the cluster running. LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so runs the same demo on
# Galera 4. Re-running on the same DIR restarts (or reuses) the cluster there.
#
# Usage: scripts/demo.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-/tmp/lockstep-demo}")
nodes=3

scripts/setup.sh
cargo build --release
# Honour CARGO_TARGET_DIR; the provider under test is the one just built unless named.
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
provider=$(realpath -ms "${LOCKSTEP_PROVIDER:-$target_dir/release/liblockstep.so}")
export LOCKSTEP_PROVIDER=$provider
lockstep=$target_dir/release/lockstep

socket() {
    echo "$dir/node$1/mariadbd.sock"
}
# sql NODE STATEMENTS: tab-separated rows, no column names; bounded.
sql() {
    timeout 30 mariadb --no-defaults -S "$(socket "$1")" -uroot -N -B -e "$2"
}
status_var() {
    sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2
}
last_committed() {
    local node
    for node in 1 2 3; do
        printf '  node%s %s' "$node" "$(status_var "$node" wsrep_last_committed)"
    done
    echo
}

# A cluster left in DIR by an earlier run is restarted by `cluster up`, but only if it is the
# one asked for: 3 nodes on this provider. An older one (the one-node demo, or the other
# provider) is replaced, as long as DIR holds nothing but what `cluster up` wrote.
state=$dir/cluster.state
if [[ -e $state ]]; then
    old_provider=$(awk '$1 == "provider" { print $2 }' "$state")
    old_nodes=$(grep -c '^node ' "$state" || true)
    if [[ $(realpath -m "$old_provider") != "$(realpath -m "$provider")" || $old_nodes != "$nodes" ]]; then
        echo "demo: $dir holds a $old_nodes-node cluster on $old_provider; replacing it"
        "$lockstep" cluster down --dir "$dir" >/dev/null
        extra=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name cluster.state ! -name 'node[0-9]*' | head -n 3)
        if [[ -n $extra ]]; then
            echo "demo: $dir holds other files too ($extra...); pick another DIR" >&2
            exit 1
        fi
        rm -rf "$dir"
    fi
fi

echo
echo "== starting a $nodes-node cluster in $dir"
if ! timeout 600 "$lockstep" cluster up --nodes "$nodes" --dir "$dir"; then
    echo "demo: the cluster in $dir did not start; its error logs are $dir/node*/error.log" >&2
    if [[ -e $state ]]; then
        echo "demo: to start afresh: $lockstep cluster down --dir $dir && rm -rf $dir" >&2
    fi
    exit 1
fi

# `cluster up` returns once every node is ready; a joiner may still be catching up.
deadline=$((SECONDS + 60))
for node in 1 2 3; do
    until [[ "$(status_var "$node" wsrep_cluster_size 2>/dev/null) $(status_var "$node" \
        wsrep_local_state_comment 2>/dev/null)" == "3 Synced" ]]; do
        if ((SECONDS > deadline)); then
            echo "demo: node$node is not Synced in a cluster of 3 after 60 s:" >&2
            "$lockstep" cluster status --dir "$dir" >&2
            exit 1
        fi
        sleep 0.2
    done
done
echo "provider: $(status_var 1 wsrep_provider_name) $(status_var 1 wsrep_provider_version)," \
    "cluster size $(status_var 1 wsrep_cluster_size), every node Synced"

sql 1 "CREATE DATABASE IF NOT EXISTS demo;
       CREATE TABLE IF NOT EXISTS demo.notes (id INT PRIMARY KEY, note VARCHAR(80));
       CREATE TABLE IF NOT EXISTS demo.accounts (id INT PRIMARY KEY, owner VARCHAR(20), balance INT);
       REPLACE INTO demo.accounts VALUES (1, 'alice', 100)"

echo
echo "== 1. a write on node 1, read at once on node 3"
note="written on node 1 at $(date +%T.%N | cut -c1-12)"
echo "wsrep_last_committed before:$(last_committed)"
sql 1 "REPLACE INTO demo.notes VALUES (1, '$note')"
echo "node 1: REPLACE INTO demo.notes VALUES (1, '$note')"
echo "node 3: SET SESSION wsrep_sync_wait=1; SELECT note FROM demo.notes WHERE id=1"
read_back=$(sql 3 "SET SESSION wsrep_sync_wait=1; SELECT note FROM demo.notes WHERE id=1")
echo "        -> '$read_back'"
echo "wsrep_last_committed after: $(last_committed)"
if [[ $read_back != "$note" ]]; then
    echo "demo: node 3 read '$read_back', expected '$note'" >&2
    exit 1
fi

echo
echo "== 2. nodes 1 and 2 update the same row at the same time"
# Two client sessions kept open through fifos, so both transactions hold their update until
# we commit them, node 1 first.
fifo_dir=$(mktemp -d /tmp/lockstep-demo-fifos.XXXXXX)
session_pids=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local pid
    for pid in "${session_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    rm -rf "$fifo_dir"
}
trap cleanup EXIT
# A session that stopped must make a write fail, not kill this script.
trap '' PIPE
for node in 1 2; do
    mkfifo "$fifo_dir/to_node$node"
    # --unbuffered: each result is written out at once; the client stops at the first error.
    timeout 60 mariadb --no-defaults -S "$(socket "$node")" -uroot -N -B --unbuffered \
        <"$fifo_dir/to_node$node" >"$fifo_dir/from_node$node" 2>&1 &
    session_pids+=($!)
done
exec {to_node1}>"$fifo_dir/to_node1" {to_node2}>"$fifo_dir/to_node2"

# send NODE STATEMENT: runs STATEMENT in NODE's session; waits (10 s at most) until it is done.
# Fails if the session stopped (an error), leaving its output in $fifo_dir/from_nodeNODE.
marker=0
send() {
    local node=$1 fd deadline=$((SECONDS + 10))
    [[ $node == 1 ]] && fd=$to_node1 || fd=$to_node2
    marker=$((marker + 1))
    { printf '%s;\nSELECT "done %s";\n' "$2" "$marker" >&"$fd"; } 2>/dev/null || return 1
    until grep -qx "done $marker" "$fifo_dir/from_node$node"; do
        if ! kill -0 "${session_pids[$((node - 1))]}" 2>/dev/null || ((SECONDS > deadline)); then
            return 1
        fi
        sleep 0.05
    done
}

update1="UPDATE demo.accounts SET balance = balance + 10 WHERE id = 1"
update2="UPDATE demo.accounts SET balance = balance - 30 WHERE id = 1"
if ! { send 1 "BEGIN" && send 1 "$update1"; }; then
    cat "$fifo_dir/from_node1" >&2
    exit 1
fi
echo "node 1: BEGIN; $update1;   (held open)"
if ! { send 2 "BEGIN" && send 2 "$update2"; }; then
    cat "$fifo_dir/from_node2" >&2
    exit 1
fi
echo "node 2: BEGIN; $update2;   (held open)"
if send 1 "COMMIT"; then
    echo "node 1: COMMIT -> OK"
else
    echo "node 1: COMMIT -> $(grep -m1 '^ERROR' "$fifo_dir/from_node1")"
fi
if send 2 "COMMIT"; then
    echo "node 2: COMMIT -> OK"
else
    echo "node 2: COMMIT -> $(grep -m1 '^ERROR' "$fifo_dir/from_node2" | sed 's/ at line [0-9]*//')"
fi
exec {to_node1}>&- {to_node2}>&-
wait "${session_pids[@]}" 2>/dev/null || true
session_pids=()

balances=()
for node in 1 2 3; do
    balance=$(sql "$node" "SET SESSION wsrep_sync_wait=1; SELECT balance FROM demo.accounts WHERE id = 1")
    echo "node $node: balance = $balance"
    balances+=("$balance")
done
case "${balances[*]}" in
    "110 110 110") echo "node 1 won (100 + 10 = 110 everywhere); node 2's transaction was rolled back: retry it" ;;
    "70 70 70") echo "node 2 won (100 - 30 = 70 everywhere); node 1's transaction was rolled back" ;;
    *)
        echo "demo: the nodes disagree or the result is unexpected: ${balances[*]}" >&2
        exit 1
        ;;
esac

echo
echo "== 3. cluster status"
"$lockstep" cluster status --dir "$dir"

echo
echo "The cluster keeps running. Connect to node N with: mariadb -S $dir/nodeN/mariadbd.sock -uroot"
echo "Stop it with:                                     $lockstep cluster down --dir $dir"
