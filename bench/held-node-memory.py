#!/usr/bin/python3
"""Memory of a node whose appliers are held while the others write big transactions.

    bench/held-node-memory.py PROVIDER [ROWS (300)] [ROW_MB (1)]

Starts a 3-node cluster (`lockstep cluster up`, TLS on) with PROVIDER. Node 3 desyncs and
takes FLUSH TABLES WITH READ LOCK, as a donor of a mysqldump or rsync transfer does: its
appliers wait, and flow control does not count it. Node 1 then commits ROWS transactions of
one ROW_MB-megabyte row each. Prints node 3's resident memory (VmRSS) before, its peak while
held, and after it is released and has caught up; then checks that node 3 holds every row.
The cluster is stopped at the end. Run it with Galera's library too (PROVIDER
/usr/lib/galera/libgalera_smm.so, with LOCKSTEP_NO_TLS=1) to compare.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

import pymysql

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKSTEP = os.path.join(ROOT, "target", "release", "lockstep")


def connect(directory, node):
    return pymysql.connect(unix_socket=f"{directory}/node{node}/mariadbd.sock", user="root", autocommit=True)


def scalar(conn, sql):
    with conn.cursor() as c:
        c.execute(sql)
        row = c.fetchone()
        return row[-1] if row else None


def rss_mb(directory, node):
    with open(f"{directory}/node{node}/mariadbd.pid") as f:
        pid = f.read().strip()
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    provider = os.path.abspath(sys.argv[1])
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    row_mb = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    directory = tempfile.mkdtemp(prefix="lockstep-held-")
    up = [LOCKSTEP, "cluster", "up", "--nodes", "3", "--dir", directory, "--provider", provider]
    if os.environ.get("LOCKSTEP_NO_TLS"):
        up.append("--no-tls")
    subprocess.run(up, check=True, stdout=subprocess.DEVNULL, timeout=600)
    try:
        writer, held = connect(directory, 1), connect(directory, 3)
        with writer.cursor() as c:
            c.execute("CREATE DATABASE IF NOT EXISTS held")
            c.execute("CREATE TABLE held.t (id INT PRIMARY KEY, b LONGBLOB)")
        time.sleep(1)
        before = rss_mb(directory, 3)
        with held.cursor() as c:
            c.execute("SET GLOBAL wsrep_desync = ON")
            c.execute("FLUSH TABLES WITH READ LOCK")
        peak = [before]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_mb(directory, 3))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample)
        sampler.start()
        blob = os.urandom(row_mb << 20)
        started = time.monotonic()
        with writer.cursor() as c:
            for i in range(rows):
                c.execute("INSERT INTO held.t VALUES (%s, %s)", (i, blob))
        written = time.monotonic() - started
        time.sleep(2)
        queued = scalar(held, "SHOW STATUS LIKE 'wsrep_local_recv_queue'")
        with held.cursor() as c:
            c.execute("UNLOCK TABLES")
            c.execute("SET GLOBAL wsrep_desync = OFF")
        target = scalar(writer, "SHOW STATUS LIKE 'wsrep_last_committed'")
        deadline = time.monotonic() + 600
        while int(scalar(held, "SHOW STATUS LIKE 'wsrep_last_committed'")) < int(target):
            if time.monotonic() > deadline:
                raise SystemExit("node 3 did not catch up within 600 s")
            time.sleep(0.5)
        stop.set()
        sampler.join()
        after = rss_mb(directory, 3)
        count = scalar(held, "SELECT COUNT(*) FROM held.t")
        print(f"provider {provider}: {rows} rows of {row_mb} MB written on node 1 in {written:.1f} s")
        print(f"node 3 VmRSS: before {before:.0f} MB, peak while held {peak[0]:.0f} MB, after {after:.0f} MB; "
              f"recv queue while held {queued}; rows on node 3 {count} of {rows}")
        if int(count) != rows:
            raise SystemExit("node 3 is missing rows")
    finally:
        subprocess.run([LOCKSTEP, "cluster", "down", "--dir", directory], stdout=subprocess.DEVNULL, timeout=300)


if __name__ == "__main__":
    main()
