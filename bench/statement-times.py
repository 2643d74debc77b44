#!/usr/bin/env python3
"""Where one client's `oltp_write_only` transaction spends its time, statement by statement.

    statement-times.py SOCKET COUNT

COUNT times, on one connection to SOCKET, the statements of sysbench's `oltp_write_only`
transaction on the sbtest1..4 tables of 10 000 rows that bench/lib.sh prepares (`BEGIN`, an
indexed `UPDATE`, a non-indexed `UPDATE`, a `DELETE` and an `INSERT` of the same row,
`COMMIT`); prints the average milliseconds of each and of the whole. Run it against node 1 of
a Lockstep and of a Galera cluster in turn: the statements before `COMMIT` are the server's
own work, the `COMMIT` is where the provider replicates and certifies.

Needs PyMySQL (Debian: python3-pymysql; scripts/setup.sh installs it).
"""
import random
import sys
import time

import pymysql

TABLES = 4
TABLE_SIZE = 10000
NAMES = ["begin", "update_index", "update_non_index", "delete", "insert", "commit"]


def statements(rng):
    table, row = rng.randint(1, TABLES), rng.randint(1, TABLE_SIZE)
    text = lambda digits: f"{rng.randint(0, 1 << 60):0{digits}d}"
    return [
        "BEGIN",
        f"UPDATE sbtest{table} SET k = k + 1 WHERE id = {row}",
        f"UPDATE sbtest{table} SET c = '{text(120)}' WHERE id = {rng.randint(1, TABLE_SIZE)}",
        f"DELETE FROM sbtest{table} WHERE id = {row}",
        f"INSERT INTO sbtest{table} (id, k, c, pad) VALUES "
        f"({row}, {rng.randint(1, TABLE_SIZE)}, '{text(120)}', '{text(60)}')",
        "COMMIT",
    ]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    socket, count = sys.argv[1], int(sys.argv[2])
    cursor = pymysql.connect(unix_socket=socket, user="root", db="sbtest", autocommit=True).cursor()
    rng = random.Random(1)
    spent = dict.fromkeys(NAMES, 0.0)
    for _ in range(count):
        for name, statement in zip(NAMES, statements(rng)):
            start = time.perf_counter()
            cursor.execute(statement)
            spent[name] += time.perf_counter() - start
    per = {name: spent[name] / count * 1000 for name in NAMES}
    print(" ".join(f"{name}={per[name]:.3f}" for name in NAMES), f"total={sum(per.values()):.3f}")


if __name__ == "__main__":
    main()
