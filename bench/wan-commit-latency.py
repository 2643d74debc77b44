#!/usr/bin/python3
"""Commit latency of one writer: wan-commit-latency.py SOCKET ROW SETTLE_SECONDS COMMITS

Autocommit single-row UPDATEs of row ROW of wan.t, one after the other, through the server
at SOCKET: for SETTLE_SECONDS first (what a writer sees while the cluster adapts to where the
writes come from), then COMMITS more, measured. Prints one line:
"first_second_avg_ms settle_commits settle_avg_ms avg_ms p50_ms p95_ms max_ms leader_before leader_after"
(the first second's commits are what a writer sees before the lead follows it)
(the leader columns are `wsrep_group_leader`, Lockstep's; "-" on Galera).
"""

import sys
import time

import pymysql


def leader(cursor):
    cursor.execute("SHOW STATUS LIKE 'wsrep_group_leader'")
    row = cursor.fetchone()
    return row[1] if row and row[1] else "-"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main():
    sock, row, settle_s, commits = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    connection = pymysql.connect(unix_socket=sock, user="root", autocommit=True)
    cursor = connection.cursor()
    before = leader(cursor)
    first, settle, times = [], [], []
    started = time.monotonic()
    value = 0
    while time.monotonic() < started + settle_s or len(times) < commits:
        value += 1
        t0 = time.monotonic()
        cursor.execute("UPDATE wan.t SET v = %s WHERE id = %s", (value, row))
        elapsed_ms = (time.monotonic() - t0) * 1000
        (settle if t0 < started + settle_s else times).append(elapsed_ms)
        if t0 < started + 1:
            first.append(elapsed_ms)
    after = leader(cursor)
    average = lambda values: sum(values) / len(values) if values else 0
    print(
        f"{average(first):.2f} {len(settle)} {average(settle):.2f} "
        f"{average(times):.2f} {percentile(times, 0.5):.2f} {percentile(times, 0.95):.2f} "
        f"{max(times):.2f} {before} {after}"
    )


if __name__ == "__main__":
    main()
