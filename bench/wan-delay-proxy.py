#!/usr/bin/python3
"""A TCP relay that makes loopback look like a WAN between sites (this kernel has no netem).

    wan-delay-proxy.py BASE_PORT DELAYS CLUSTER_DIR...

Environment: INTO_RATES, e.g. "3=256": what goes into node 3 over group connections (either
way they were opened) is carried at most 256 KiB a second, a slow link into that node; with
INTO_RATES_FROM=FILE, only once FILE exists (so that a cluster can be filled at full speed).
With INTO_COUNTS=FILE, the bytes carried at the slow rate are written to FILE every second, a
line "CLUSTER_DIR NODE BYTES" per cluster and node.

Node I of every cluster runs in its own cgroup; an iptables nat rule (see wan-latency.sh)
sends every TCP connection it opens to 127.0.0.1 to BASE_PORT + I - 1 here instead. The relay
reads the original destination (SO_ORIGINAL_DST), connects to it and forwards both ways,
holding every chunk for the one-way delay between node I's site and the destination's:
the destination is the node whose group port it is (from the "# Ports:" line of the
`my.cnf` files under CLUSTER_DIR/node*/); other ports (state transfers) pass undelayed.

DELAYS: one-way milliseconds per pair of nodes, e.g. "1-2=5,1-3=15,2-3=25" (node 1 and
node 2 are one site apart by 5 ms each way, so a round trip between them takes 10 ms).
"""

import asyncio
import glob
import os
import re
import socket
import struct
import sys

SO_ORIGINAL_DST = 80
CHUNK = 256 << 10
# Chunks held per direction before the relay stops reading (TCP then slows the sender).
QUEUE_CHUNKS = 256
# What a slow link carries at a time: 31 ms at 256 KiB/s.
SLOW_SLICE = 8 << 10
RATES_FROM = os.environ.get("INTO_RATES_FROM")
COUNTS_TO = os.environ.get("INTO_COUNTS")
# (cluster dir, node) -> bytes carried at the slow rate into that node.
slow_bytes = {}


def group_ports(cluster_dirs):
    """Group port -> (node number, cluster dir), read from the nodes' my.cnf files."""
    ports = {}
    for cluster in cluster_dirs:
        for cnf in glob.glob(f"{cluster}/node*/my.cnf"):
            node = int(re.search(r"node(\d+)/my\.cnf$", cnf).group(1))
            with open(cnf) as f:
                found = re.search(r"^# Ports: .*group (\d+),", f.read(), re.M)
            if found:
                ports[int(found.group(1))] = (node, cluster)
    return ports


async def write_counts():
    while True:
        await asyncio.sleep(1)
        with open(COUNTS_TO + ".new", "w") as f:
            for (cluster, node), count in sorted(slow_bytes.items()):
                f.write(f"{cluster} {node} {count}\n")
        os.replace(COUNTS_TO + ".new", COUNTS_TO)


def original_destination(sock):
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed), port


async def pump(reader, writer, delay_s, rate=None, counted=None):
    """Copies reader to writer, each chunk `delay_s` after it arrived, in order, and at most
    `rate` bytes a second when given (counting them under `counted` in `slow_bytes`)."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue(QUEUE_CHUNKS)

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not rate or (RATES_FROM and not os.path.exists(RATES_FROM)):
                writer.write(data)
                await writer.drain()
                continue
            # In slices, so that a slow link carries a steady stream, not a burst a second.
            for start in range(0, len(data), SLOW_SLICE):
                piece = data[start : start + SLOW_SLICE]
                writer.write(piece)
                await writer.drain()
                slow_bytes[counted] = slow_bytes.get(counted, 0) + len(piece)
                await asyncio.sleep(len(piece) / rate)

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(CHUNK):
            await queue.put((loop.time() + delay_s, data))
    except (ConnectionError, OSError):
        pass
    await queue.put((loop.time() + delay_s, None))
    try:
        await sender
        writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def relay(source_node, delays, rates, cluster_dirs, client_reader, client_writer):
    host, port = original_destination(client_writer.get_extra_info("socket"))
    destination, cluster = group_ports(cluster_dirs).get(port, (None, None))
    pair = tuple(sorted((source_node, destination))) if destination else None
    delay_s = delays.get(pair, 0) / 1000
    try:
        server_reader, server_writer = await asyncio.open_connection(host, port)
    except OSError:
        client_writer.close()
        return
    for w in (client_writer, server_writer):
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    into_server = rates.get(destination) if destination else None
    into_client = rates.get(source_node) if destination else None
    await asyncio.gather(
        pump(client_reader, server_writer, delay_s, into_server, (cluster, destination)),
        pump(server_reader, client_writer, delay_s, into_client, (cluster, source_node)),
    )
    for w in (client_writer, server_writer):
        w.close()


async def main():
    base_port = int(sys.argv[1])
    delays = {}
    for item in sys.argv[2].split(","):
        pair, ms = item.split("=")
        a, b = sorted(int(n) for n in pair.split("-"))
        delays[(a, b)] = float(ms)
    rates = {}
    for item in filter(None, os.environ.get("INTO_RATES", "").split(",")):
        node, kib = item.split("=")
        rates[int(node)] = float(kib) * 1024
    cluster_dirs = sys.argv[3:]
    nodes = sorted({n for pair in delays for n in pair})
    servers = []
    for node in nodes:
        handler = lambda r, w, node=node: relay(node, delays, rates, cluster_dirs, r, w)
        servers.append(await asyncio.start_server(handler, "127.0.0.1", base_port + node - 1))
    print("relaying", flush=True)
    counting = [write_counts()] if COUNTS_TO else []
    await asyncio.gather(*(s.serve_forever() for s in servers), *counting)


if __name__ == "__main__":
    asyncio.run(main())
