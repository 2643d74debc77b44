#!/usr/bin/env python3
"""Per-second timelines of bench/big-transaction-stall.sh: parsing, summary, SVG charts.

    timeline-chart.py clients PROVIDER FRAGMENT NODE SYSBENCH_LOG   # CSV rows of one sysbench
    timeline-chart.py summary DIR PROVIDER FRAGMENT                 # one summary line of a run
    timeline-chart.py chart DIR PROVIDER > timeline.svg             # one chart per provider

DIR holds samples.csv (wsrep status of every node, about every second), clients.csv (each
sysbench's transactions per second) and updates.csv (when the big UPDATE ran). Standard
library only: the charts are plain SVG.
"""
import csv
import math
import re
import sys
from collections import defaultdict

NODE_COLOURS = {1: "#1f77b4", 2: "#d62728", 3: "#2ca02c"}


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def clients(provider, fragment, node, log):
    """sysbench --report-interval=1 lines: `[ 12s ] thds: 8 tps: 1234.56 qps: ...`."""
    line = re.compile(r"^\[ *(\d+)s \].*?tps: ([\d.]+)")
    with open(log) as f:
        for text in f:
            m = line.match(text)
            if m:
                print(f"{provider},{fragment},{m.group(1)},{node},{m.group(2)}")


def at(points, t):
    """The value of the piecewise-linear curve through `points` ((time, value), by time) at t."""
    if t <= points[0][0]:
        return points[0][1]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t <= t1:
            return v0 + (v1 - v0) * (t - t0) / max(t1 - t0, 1e-3)
    return points[-1][1]


def run_data(directory, provider, fragment):
    """Commits per second on each node, by second since the run's start, and the UPDATE."""
    update = next(
        u for u in read(f"{directory}/updates.csv") if u["provider"] == provider and u["fragment"] == fragment
    )
    samples = defaultdict(list)
    extra = defaultdict(dict)
    for s in read(f"{directory}/samples.csv"):
        if s["provider"] == provider and s["fragment"] == fragment and s["last_committed"]:
            node = int(s["node"])
            t = float(s["time_s"])
            samples[node].append((t, int(s["last_committed"])))
            extra[node][int(t)] = (int(s["recv_queue"] or 0), int(s["fc_paused_ns"] or 0), int(s["sr_rows"] or 0))
    # Node 3 has no clients: what it commits is what it applies. Samples come about every
    # second, not on the second: commits in second s (from s - 1 to s) are read off the
    # last-committed curve, linear between samples.
    applied = {}
    for node, points in samples.items():
        applied[node] = {s: at(points, s) - at(points, s - 1) for s in range(1, int(points[-1][0]) + 1)}
    own = defaultdict(dict)
    for c in read(f"{directory}/clients.csv"):
        if c["provider"] == provider and c["fragment"] == fragment:
            own[int(c["node"])][int(c["second"])] = float(c["transactions"])
    commits = {1: own[1], 2: own[2], 3: applied.get(3, {})}
    begin, end = int(update["begin_ms"]) / 1000, int(update["end_ms"]) / 1000
    # The episode ends when every node has committed what node 1 had when the UPDATE returned
    # (read then: a value interpolated between samples may fall short of the UPDATE's own
    # seqno, and ended a Lockstep episode before the others had applied it).
    settled = end
    if samples.get(1):
        target = int(update["target"])
        later = [t for t, _ in samples[1] if t >= end]
        settled = next((t for t in later if all(at(samples[n], t) >= target for n in samples)), later[-1] if later else end)
    return commits, applied, extra, begin, end, settled, int(update["status"])


def summary(directory, provider, fragment):
    commits, _, _, begin, end, settled, status = run_data(directory, provider, fragment)
    # The seconds the episode overlaps (second s is the time from s - 1 to s), and the whole
    # seconds before it (after sysbench's first).
    during = range(int(begin) + 1, math.ceil(settled) + 1)
    before = range(2, int(begin))
    stalled, ratio = [], []
    for node in (1, 2, 3):
        rate = commits[node]
        stalled.append(sum(1 for s in during if rate.get(s, 0) == 0))
        base = sum(rate.get(s, 0) for s in before) / max(len(before), 1)
        mean = sum(rate.get(s, 0) for s in during) / max(len(during), 1)
        ratio.append(mean / base if base else 0.0)
    label = variant_label(fragment)
    outcome = "committed" if status == 0 else f"FAILED (exit {status})"
    print(
        f"{provider} {label}: UPDATE {end - begin:.1f} s, {outcome}; all nodes caught up {settled - end:.1f} s later; "
        f"stalled s {','.join(map(str, stalled))}; "
        f"rate during/before {','.join(f'{r:.2f}' for r in ratio)}"
    )


def variant_label(fragment):
    """'no streaming', '1 MB fragments', '256 KB fragments' for a fragment size in bytes."""
    size = int(fragment)
    if size == 0:
        return "no streaming"
    if size % 1048576 == 0:
        return f"{size // 1048576} MB fragments"
    return f"{size // 1024} KB fragments" if size % 1024 == 0 else f"{size} B fragments"


def chart(directory, provider):
    fragments = sorted({u["fragment"] for u in read(f"{directory}/updates.csv") if u["provider"] == provider}, key=int)
    panel_w, panel_h, left, top, gap = 760, 170, 60, 70, 60
    width = left + panel_w + 220
    height = top + len(fragments) * (panel_h + gap)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="15">{provider}: commits per second on each node; '
        "shaded: the big UPDATE on node 1, then until every node has committed it</text>",
    ]
    for i, fragment in enumerate(fragments):
        commits, _, extra, begin, end, settled, status = run_data(directory, provider, fragment)
        y0 = top + i * (panel_h + gap)
        seconds = max([max(r, default=0) for r in commits.values()] + [int(end) + 1])
        peak = max([max(r.values(), default=0) for r in commits.values()] + [1])
        x = lambda s: left + s * panel_w / max(seconds, 1)  # noqa: E731
        y = lambda v: y0 + panel_h - v * panel_h / peak  # noqa: E731
        label = variant_label(fragment)
        if status != 0:
            label += f" (UPDATE failed, exit {status})"
        out.append(
            f'<text x="{left}" y="{y0 - 8}" font-size="13">{label}: UPDATE {end - begin:.1f} s, '
            f"every node caught up {settled - end:.1f} s later</text>"
        )
        out.append(
            f'<rect x="{x(begin):.1f}" y="{y0}" width="{x(end) - x(begin):.1f}" height="{panel_h}" fill="#dddddd"/>'
            f'<rect x="{x(end):.1f}" y="{y0}" width="{x(settled) - x(end):.1f}" height="{panel_h}" fill="#f2f2f2"/>'
        )
        out.append(
            f'<rect x="{left}" y="{y0}" width="{panel_w}" height="{panel_h}" fill="none" stroke="#888888"/>'
        )
        for tick in range(0, 5):
            v = peak * tick / 4
            out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
        for s in range(0, seconds + 1, 10):
            out.append(f'<text x="{x(s):.1f}" y="{y0 + panel_h + 14}" text-anchor="middle">{s} s</text>')
        for node, rate in commits.items():
            points = " ".join(f"{x(s):.1f},{y(rate.get(s, 0)):.1f}" for s in range(1, seconds + 1))
            out.append(f'<polyline points="{points}" fill="none" stroke="{NODE_COLOURS[node]}" stroke-width="1.5"/>')
        streaming = max((e[2] for n in extra.values() for e in n.values()), default=0)
        queue = max((e[0] for n in extra.values() for e in n.values()), default=0)
        out.append(
            f'<text x="{left + panel_w + 10}" y="{y0 + panel_h - 30}">apply queue max {queue}</text>'
            f'<text x="{left + panel_w + 10}" y="{y0 + panel_h - 14}">streaming log max {streaming}</text>'
        )
    for k, (node, what) in enumerate(
        [(1, "node 1: its 8 clients"), (2, "node 2: its 8 clients"), (3, "node 3: everything applied")]
    ):
        yy = top + 10 + 18 * k
        out.append(
            f'<line x1="{left + panel_w + 10}" y1="{yy}" x2="{left + panel_w + 30}" y2="{yy}" '
            f'stroke="{NODE_COLOURS[node]}" stroke-width="2"/>'
            f'<text x="{left + panel_w + 34}" y="{yy + 4}">{what}</text>'
        )
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"clients": clients, "summary": summary, "chart": chart}[command](*args)
