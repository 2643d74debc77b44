#!/usr/bin/python3
"""A node catches up a big gap by incremental transfer while the others keep writing.

    bench/ist-gap.py PROVIDER MB

A 3-node cluster (`lockstep cluster up`, TLS) on PROVIDER: node 1 keeps a 16 MiB writeset
cache, nodes 2 and 3 4 GiB, and node 3 asks node 2 for its state (`wsrep_sst_donor`). Node 3
shuts down; node 1 writes MB rows of 1 MiB (8 per transaction); then node 3 starts again while
a writer on node 1 inserts a row every 10 ms. Node 2 stays up throughout while nodes 1 and 3
restart to take their settings, so it leads (the big writesets, in parts, keep the lead where
it is): it brings node 3's group log up to date, and sends the gap from its cache (Galera's
IST; node 1's cache no longer holds it). Reports how long node 3 took to be
ready, the writer's longest pause between two commits from 1 s before the restart, the peak
RSS growth of nodes 1 and 2 over their RSS before it (sampled every 0.1 s), node 3's peak RSS,
every leader node 1 reported (`wsrep_group_leader`), the rows on each node, and node 3's line
for the transfer. Galera 4 too (`/usr/lib/galera/libgalera_smm.so`). Not a test: about 1 minute
per 600 MB.
"""
import glob
import os
import subprocess
import sys
import tempfile
import threading
import time

import pymysql

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKSTEP = os.path.join(ROOT, "target/release/lockstep")


def lockstep(*args):
    done = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise RuntimeError(f"lockstep {' '.join(args)} failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")


def edit(path, old, new):
    text = open(path).read()
    open(path, "w").write(text.replace(old, new, 1))


class Cluster:
    def __init__(self, work):
        self.work = work

    def connect(self, n):
        return pymysql.connect(unix_socket=f"{self.work}/node{n}/mariadbd.sock", user="root", autocommit=True,
                               read_timeout=600)

    def rss_mb(self, n):
        try:
            pid = open(f"{self.work}/node{n}/mariadbd.pid").read().strip()
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) // 1024
        except OSError:
            return None
        return None


def run(provider, mb, work):
    c = Cluster(work)
    lockstep("cluster", "up", "--nodes", "3", "--dir", work, "--provider", provider,
             "--provider-options", "gcache.size=4G")
    # Nodes 1 and 3 restart with their own settings; node 2 stays up and keeps the group
    # (Galera would need a bootstrap after a whole-cluster stop).
    for n in (3, 1):
        c.connect(n).cursor().execute("SHUTDOWN")
        time.sleep(3)
    edit(f"{work}/node1/my.cnf", "gcache.size=4G", "gcache.size=16M")
    edit(f"{work}/node3/my.cnf", "[mariadbd]\n", "[mariadbd]\nwsrep_sst_donor = node2\n")
    lockstep("cluster", "up", "--dir", work)
    cur = c.connect(1).cursor()
    cur.execute("CREATE DATABASE b")
    cur.execute("CREATE TABLE b.big (id INT AUTO_INCREMENT PRIMARY KEY, v LONGBLOB)")
    cur.execute("CREATE TABLE b.small (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    c.connect(3).cursor().execute("SHUTDOWN")
    time.sleep(3)
    for _ in range(mb // 8):
        cur.execute("BEGIN")
        for _ in range(8):
            cur.execute("INSERT INTO b.big (v) VALUES (CONCAT(RANDOM_BYTES(1024), REPEAT(MD5(RAND()), 32736)))")
        cur.execute("COMMIT")
    time.sleep(2)
    before = {n: c.rss_mb(n) for n in (1, 2)}
    peak = {1: before[1], 2: before[2], 3: 0}
    commits, failures, leaders, stop = [], [], [], threading.Event()

    def writer():
        w = c.connect(1).cursor()
        while not stop.is_set():
            started = time.monotonic()
            try:
                w.execute("INSERT INTO b.small (v) VALUES (1)")
                commits.append(time.monotonic())
            except pymysql.MySQLError as e:
                failures.append(e.args[0] if e.args else "?")
                w = c.connect(1).cursor()
            time.sleep(max(0.0, 0.01 - (time.monotonic() - started)))

    def sampler():
        s = c.connect(1).cursor()
        while not stop.is_set():
            s.execute("SHOW STATUS LIKE 'wsrep_group_leader'")
            leader = (s.fetchone() or (None, "none (Galera)"))[1]
            if not leaders or leaders[-1] != leader:
                leaders.append(leader)
            for n in (1, 2, 3):
                peak[n] = max(peak[n], c.rss_mb(n) or 0)
            time.sleep(0.1)

    threads = [threading.Thread(target=f, daemon=True) for f in (writer, sampler)]
    for t in threads:
        t.start()
    time.sleep(1)
    restarted = time.monotonic()
    try:
        lockstep("cluster", "up", "--dir", work)
        took = f"{time.monotonic() - restarted:.1f} s"
    except RuntimeError as e:
        took = f"never ({str(e).splitlines()[0][:200]})"
    time.sleep(2)
    stop.set()
    stopped = time.monotonic()
    for t in threads:
        t.join()
    # A pause still running at the end counts up to it.
    times = [t for t in commits if t >= restarted - 1]
    gaps = [b - a for a, b in zip([restarted - 1] + times, times + [stopped])]
    rows = []
    for n in (1, 2, 3):
        try:
            r = c.connect(n).cursor()
            r.execute("SELECT COUNT(*), SUM(LENGTH(v)) FROM b.big")
            rows.append(tuple(int(v or 0) for v in r.fetchone()))
        except pymysql.MySQLError:
            rows.append("down")
    log3 = "".join(open(f).read() for f in glob.glob(f"{work}/node3/error.log"))
    # Our line, or Galera's.
    transfer = [line for line in log3.splitlines() if "incremental state transfer received" in line
                or "IST received" in line]
    print(f"{os.path.basename(provider)}, gap {mb} MB: node 3 ready after {took}; writer on node 1: longest pause "
          f"{max(gaps):.2f} s over {len(times)} commits ({len(failures)} failed); RSS growth node 1 {peak[1] - before[1]} MB, node 2 (donor) "
          f"{peak[2] - before[2]} MB; node 3 peak {peak[3]} MB; leaders {leaders}; rows (count, bytes) {rows}; "
          f"{transfer[-1].split('WSREP: ')[-1] if transfer else 'no incremental transfer received'}", flush=True)


def main(argv):
    provider, mb = os.path.abspath(argv[1]), int(argv[2])
    work = tempfile.mkdtemp(prefix="lockstep-ist-gap.")
    try:
        run(provider, mb, work)
    finally:
        subprocess.run([LOCKSTEP, "cluster", "down", "--dir", work], capture_output=True, timeout=300)
        if not os.environ.get("BENCH_KEEP"):
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
