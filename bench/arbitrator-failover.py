#!/usr/bin/python3
"""Two data nodes and an arbitrator, one data node killed: what a writer on the other sees.

    bench/arbitrator-failover.py [ROUNDS (1)]

For Lockstep (`lockstep cluster up --nodes 2 --arbitrator`: `lockstep arbitrator`) and Galera 4
(`--provider /usr/lib/galera/libgalera_smm.so --arbitrator=/usr/bin/garbd`, Debian's
galera-arbitrator-4), ROUNDS times each, both ways: node 2 is killed (SIGKILL) while a writer
on node 1 inserts a row every 20 ms, then node 2 is restarted; then the same with node 1
killed and the writer on node 2. Lockstep's lead follows the writes, so in those two cases the
dead node does not lead; a third case kills the node that leads (Lockstep's
wsrep_group_leader; Galera has none: node 2) with a writer on the other node that starts at
the kill, so the time includes an election. Per case: the longest time between two commits
(from the kill in the third case), the statements that failed (and their errors), the time
until the survivor reports wsrep_cluster_size 2, and whether it stayed Primary. Not a test:
about a minute per case.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

import pymysql

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKSTEP = os.path.join(ROOT, "target/release/lockstep")
GALERA = "/usr/lib/galera/libgalera_smm.so"
WRITE_EVERY_S = 0.02
WATCH_S = 25


def lockstep(*args, timeout=300):
    return subprocess.run([LOCKSTEP, *args], check=True, timeout=timeout, capture_output=True, text=True)


def connect(socket):
    return pymysql.connect(unix_socket=socket, user="root", autocommit=True, connect_timeout=5, read_timeout=30,
                           write_timeout=30)


def status(socket, name):
    try:
        with connect(socket) as c, c.cursor() as cur:
            cur.execute(f"SHOW STATUS LIKE '{name}'")
            row = cur.fetchone()
            return row[1] if row else None
    except pymysql.MySQLError:
        return None


class Writer(threading.Thread):
    """Inserts a row every WRITE_EVERY_S on one node; records each commit and each failure."""

    def __init__(self, socket, first_id):
        super().__init__(daemon=True)
        self.socket, self.next_id = socket, first_id
        self.commits, self.failures, self.stop = [], [], False

    def run(self):
        conn = None
        while not self.stop:
            started = time.monotonic()
            try:
                if conn is None:
                    conn = connect(self.socket)
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO fo.t VALUES ({self.next_id})")
                self.next_id += 1
                self.commits.append(time.monotonic())
            except pymysql.MySQLError as e:
                self.failures.append((time.monotonic() - started, e.args[0] if e.args else "?"))
                conn = None
            time.sleep(max(0.0, WRITE_EVERY_S - (time.monotonic() - started)))


def one_case(work, name, dies, survives, first_id, write_before=True):
    socket = f"{work}/node{survives}/mariadbd.sock"
    writer = Writer(socket, first_id)
    if write_before:
        writer.start()
        time.sleep(2)
    pid = int(open(f"{work}/node{dies}/mariadbd.pid").read())
    killed = time.monotonic()
    os.kill(pid, 9)
    if not write_before:
        writer.commits.append(killed)
        writer.start()
    size2_at, primary_always = None, True
    while time.monotonic() < killed + WATCH_S:
        if status(socket, "wsrep_cluster_status") != "Primary":
            primary_always = False
        if size2_at is None and status(socket, "wsrep_cluster_size") == "2":
            size2_at = time.monotonic() - killed
        time.sleep(0.05)
    writer.stop = True
    writer.join()
    after = [t for t in writer.commits if t >= killed - 1]
    gaps = [b - a for a, b in zip(after, after[1:])]
    errors = {}
    for _, code in writer.failures:
        errors[code] = errors.get(code, 0) + 1
    what = "killed" if write_before else "killed (it led), writer from the kill"
    print(f"{name}: node{dies} {what}, writer on node{survives}: longest gap between commits "
          f"{max(gaps) if gaps else float('nan'):.2f} s; failed statements {len(writer.failures)} "
          f"{dict(sorted(errors.items()))}; size 2 after "
          f"{'never' if size2_at is None else f'{size2_at:.1f} s'}; Primary throughout: {primary_always}",
          flush=True)
    lockstep("cluster", "up", "--dir", work)
    return writer.next_id


def run(name, provider_args, rounds):
    work = tempfile.mkdtemp(prefix="lockstep-failover.")
    try:
        lockstep("cluster", "up", "--nodes", "2", "--dir", work, *provider_args)
        with connect(f"{work}/node1/mariadbd.sock") as c, c.cursor() as cur:
            cur.execute("CREATE DATABASE fo")
            cur.execute("CREATE TABLE fo.t (id INT PRIMARY KEY)")
        next_id = 1
        for _ in range(rounds):
            next_id = one_case(work, name, 2, 1, next_id)
            next_id = one_case(work, name, 1, 2, next_id)
            leader = status(f"{work}/node1/mariadbd.sock", "wsrep_group_leader")
            dies = 1 if leader == "node1" else 2
            next_id = one_case(work, name, dies, 3 - dies, next_id, write_before=False)
    finally:
        subprocess.run([LOCKSTEP, "cluster", "down", "--dir", work], capture_output=True, timeout=300)
        subprocess.run(["rm", "-rf", work])


def main(argv):
    rounds = int(argv[1]) if len(argv) > 1 else 1
    for _ in range(rounds):
        run("Lockstep", ["--arbitrator"], 1)
        run("Galera 4", ["--provider", GALERA, "--arbitrator=/usr/bin/garbd"], 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
