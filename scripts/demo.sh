#!/usr/bin/env bash
# Builds Lockstep, starts a one-node cluster in DIR (default /tmp/lockstep-demo), runs a small
# workload that shows wsrep_last_committed growing by one per transaction, and leaves the
# cluster running. LOCKSTEP_PROVIDER=/usr/lib/galera/libgalera_smm.so runs it on Galera instead.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/lockstep-demo}

scripts/setup.sh
cargo build --release
# Honour CARGO_TARGET_DIR; the provider under test is the one just built unless named.
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
export LOCKSTEP_PROVIDER=${LOCKSTEP_PROVIDER:-$target_dir/release/liblockstep.so}
lockstep=$target_dir/release/lockstep

"$lockstep" cluster up --nodes 1 --dir "$dir"
socket=$dir/node1/mariadbd.sock

sql() {
    mariadb --no-defaults -S "$socket" -uroot -N -B -e "$1"
}
last_committed() {
    sql "SHOW STATUS LIKE 'wsrep_last_committed'" | cut -f2
}
run() {
    local before result
    before=$(last_committed)
    result=$(sql "$1")
    printf '%-75s wsrep_last_committed %s -> %s\n' "$1" "$before" "$(last_committed)"
    if [[ -n $result ]]; then
        printf '    %s\n' "$result"
    fi
}

echo
echo "== workload"
run "CREATE DATABASE IF NOT EXISTS demo"
run "CREATE TABLE IF NOT EXISTS demo.accounts (id INT PRIMARY KEY AUTO_INCREMENT, owner VARCHAR(20), balance INT)"
run "INSERT INTO demo.accounts (owner, balance) VALUES ('alice', 100)"
run "INSERT INTO demo.accounts (owner, balance) VALUES ('bob', 50)"
run "BEGIN; UPDATE demo.accounts SET balance = balance - 10 WHERE owner = 'alice'; UPDATE demo.accounts SET balance = balance + 10 WHERE owner = 'bob'; COMMIT"
run "BEGIN; DELETE FROM demo.accounts; ROLLBACK"
run "SELECT COUNT(*) FROM demo.accounts"
echo
sql "SELECT owner, balance FROM demo.accounts ORDER BY id"

echo
echo "== wsrep status"
"$lockstep" cluster status --dir "$dir"

echo
echo "The cluster keeps running. Connect with: mariadb -S $socket -uroot"
echo "Stop it with:                          $lockstep cluster down --dir $dir"
