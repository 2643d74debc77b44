#!/usr/bin/env python3
"""Read-after-write across two nodes of one cluster, for bench/commit-path.sh.

    read-after-write.py run WRITER_SOCKET READER_SOCKET COUNT SAMPLES_FILE
    read-after-write.py summary SAMPLES_FILE...

`run` uses one connection to the writer node and two to the reader node, all idle otherwise,
and the table sbtest.raw (id INT PRIMARY KEY, v BIGINT), which it creates if missing. Then:

  causal: COUNT times, an autocommit UPDATE of the row on the writer, then at once, on the
          reader with wsrep_sync_wait=1, SELECT of the row: the read's latency, and whether it
          saw the value just written (it must).
  plain:  COUNT times the same with wsrep_sync_wait=0: the first read's latency and whether
          it was stale; if stale, the read is repeated until fresh, and the time from the
          end of the write to the first fresh read is recorded.

Each sample is appended to SAMPLES_FILE as one line, "KIND VALUE" (milliseconds or 0/1), so
several rounds can go into one file. `summary` prints, for every kind, "KIND count avg p95
max" (p95 by nearest rank), and the fractions: "causal_fresh_pct" and "plain_stale_pct".

Needs PyMySQL (Debian: python3-pymysql; scripts/setup.sh installs it).
"""
import sys
import time

# A stale read polls for the fresh value at most this long before giving up.
FRESH_TIMEOUT_S = 10.0


def connect(socket):
    import pymysql  # imported here so that `summary` runs without it

    return pymysql.connect(
        unix_socket=socket,
        user="root",
        autocommit=True,
        connect_timeout=10,
        read_timeout=60,
        write_timeout=60,
    )


def run(writer_socket, reader_socket, count, out_path):
    writer = connect(writer_socket)
    causal_reader = connect(reader_socket)
    plain_reader = connect(reader_socket)
    w, rc, rp = writer.cursor(), causal_reader.cursor(), plain_reader.cursor()
    w.execute("CREATE TABLE IF NOT EXISTS sbtest.raw (id INT PRIMARY KEY, v BIGINT NOT NULL)")
    w.execute("INSERT INTO sbtest.raw VALUES (1, 0) ON DUPLICATE KEY UPDATE v = 0")
    rc.execute("SET SESSION wsrep_sync_wait = 1")
    rp.execute("SET SESSION wsrep_sync_wait = 0")
    # The row (and the table) exist on the reader before the first timed read.
    rc.execute("SELECT v FROM sbtest.raw WHERE id = 1")
    rc.fetchall()
    # Values never repeat across runs into the same file, so a stale read cannot look fresh.
    base = time.time_ns() // 1000
    now = time.perf_counter
    lines = []
    for i in range(1, count + 1):
        value = base * 10 + i * 2
        t0 = now()
        w.execute("UPDATE sbtest.raw SET v = %s WHERE id = 1", (value,))
        start = now()
        lines.append(f"write_ms {(start - t0) * 1e3:.4f}")
        rc.execute("SELECT v FROM sbtest.raw WHERE id = 1")
        seen = rc.fetchone()[0]
        lines.append(f"causal_read_ms {(now() - start) * 1e3:.4f}")
        lines.append(f"causal_fresh {int(seen == value)}")
    for i in range(1, count + 1):
        value = base * 10 + i * 2 + 1
        t0 = now()
        w.execute("UPDATE sbtest.raw SET v = %s WHERE id = 1", (value,))
        written = now()
        lines.append(f"write_ms {(written - t0) * 1e3:.4f}")
        rp.execute("SELECT v FROM sbtest.raw WHERE id = 1")
        seen = rp.fetchone()[0]
        lines.append(f"plain_read_ms {(now() - written) * 1e3:.4f}")
        lines.append(f"plain_stale {int(seen != value)}")
        if seen != value:
            while seen != value and now() - written < FRESH_TIMEOUT_S:
                rp.execute("SELECT v FROM sbtest.raw WHERE id = 1")
                seen = rp.fetchone()[0]
            if seen == value:
                lines.append(f"stale_until_fresh_ms {(now() - written) * 1e3:.4f}")
            else:
                lines.append("never_fresh 1")
    with open(out_path, "a", encoding="ascii") as out:
        out.write("\n".join(lines) + "\n")
    for connection in (writer, causal_reader, plain_reader):
        connection.close()


def summary(paths):
    samples = {}
    for path in paths:
        with open(path, encoding="ascii") as f:
            for line in f:
                kind, value = line.split()
                samples.setdefault(kind, []).append(float(value))
    for kind in ("causal_read_ms", "plain_read_ms", "stale_until_fresh_ms", "write_ms"):
        values = sorted(samples.get(kind, []))
        if not values:
            print(f"{kind} 0 - - -")
            continue
        p95 = values[max(0, -(-len(values) * 95 // 100) - 1)]
        avg = sum(values) / len(values)
        print(f"{kind} {len(values)} {avg:.3f} {p95:.3f} {values[-1]:.3f}")
    for kind, name in (("causal_fresh", "causal_fresh_pct"), ("plain_stale", "plain_stale_pct")):
        values = samples.get(kind, [])
        print(f"{name} {100 * sum(values) / len(values):.1f}" if values else f"{name} -")
    print(f"never_fresh {int(sum(samples.get('never_fresh', [])))}")


def main(argv):
    if len(argv) == 6 and argv[1] == "run":
        run(argv[2], argv[3], int(argv[4]), argv[5])
    elif len(argv) >= 3 and argv[1] == "summary":
        summary(argv[2:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
