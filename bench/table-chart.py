#!/usr/bin/env python3
"""Bar charts of the Lockstep / Galera tables in a benchmark report.

    table-chart.py REPORT TITLE > chart.svg

REPORT is the text a benchmark printed (bench/commit-path.sh, bench/applier.sh): every
Markdown table in it with a column "Lockstep X" and a column "Galera X" (or "Lockstep" and
"Galera") becomes one panel per such pair; each row is a pair of bars, Lockstep's and
Galera's, scaled to the larger of the two and labelled with both values and their ratio, so
rows in different units (ms, %, TPS) share a panel. Rows without two numbers are left out.
The panel's title is the first line of the paragraph above the table and the column's name.
"""
import html
import re
import sys

LOCKSTEP_COLOUR = "#1f77b4"
GALERA_COLOUR = "#ff7f0e"
WIDTH = 900
LABEL_WIDTH = 330
BAR_HEIGHT = 11
ROW_GAP = 8
NUMBER = re.compile(r"-?[0-9][0-9 ]*(?:\.[0-9]+)?")


def number(cell):
    """The first number in a table cell ("5 329", "0.54 %", "1.18×"), or None."""
    match = NUMBER.search(cell.replace("\u202f", " "))
    if not match:
        return None
    return float(match.group(0).replace(" ", ""))


def tables(lines):
    """(caption, header cells, rows of cells) of every Markdown table."""
    caption = ""
    previous = ""
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].strip().startswith("|---"):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            yield caption, header, rows
            continue
        if line and not previous:
            # The first line of the paragraph above the table names it.
            caption = line
        previous = line
        i += 1


def short(caption, limit=110):
    """The caption up to its last comma within `limit` characters."""
    caption = caption.rstrip(":;")
    if len(caption) <= limit:
        return caption
    cut = max(caption.rfind(",", 0, limit), caption.rfind(":", 0, limit))
    return caption[:cut] if cut > limit // 2 else caption[: limit - 1] + "…"


def panels(lines):
    """(title, [(label, lockstep, galera)]) for every Lockstep/Galera column pair."""
    for caption, header, rows in tables(lines):
        for li, name in enumerate(header):
            if not name.startswith("Lockstep"):
                continue
            what = name[len("Lockstep"):].strip()
            gi = next((j for j, n in enumerate(header) if n.startswith("Galera") and n[len("Galera"):].strip() == what), None)
            if gi is None:
                continue
            first = min(j for j, n in enumerate(header) if n.startswith("Lockstep") or n.startswith("Galera"))
            bars = []
            for row in rows:
                if len(row) <= max(li, gi):
                    continue
                lv, gv = number(row[li]), number(row[gi])
                if lv is None or gv is None:
                    continue
                # A bare number ("8") is named by its column ("clients 8").
                cells = [f"{h} {c}" if NUMBER.fullmatch(c) else c for h, c in zip(header, row[:first]) if c]
                bars.append((" ".join(cells), lv, gv))
            if bars:
                yield f"{short(caption)}{': ' + what if what else ''}", bars


def svg(title, all_panels):
    out = []
    y = 40
    for panel_title, bars in all_panels:
        out.append(f'<text x="10" y="{y}" font-weight="bold">{html.escape(panel_title)}</text>')
        y += 14
        for label, lv, gv in bars:
            top = max(lv, gv) or 1.0
            span = WIDTH - LABEL_WIDTH - 170
            out.append(f'<text x="10" y="{y + BAR_HEIGHT + 2}">{html.escape(label[:52])}</text>')
            for k, (value, colour) in enumerate(((lv, LOCKSTEP_COLOUR), (gv, GALERA_COLOUR))):
                width = max(1.0, span * value / top)
                by = y + k * BAR_HEIGHT
                out.append(f'<rect x="{LABEL_WIDTH}" y="{by}" width="{width:.1f}" height="{BAR_HEIGHT - 1}" fill="{colour}"/>')
                out.append(f'<text x="{LABEL_WIDTH + width + 4:.1f}" y="{by + BAR_HEIGHT - 2}" font-size="10">{value:g}</text>')
            ratio = f"{lv / gv:.2f}×" if gv else ""
            out.append(f'<text x="{WIDTH - 60}" y="{y + BAR_HEIGHT + 2}">{ratio}</text>')
            y += 2 * BAR_HEIGHT + ROW_GAP
        y += 16
    legend = (
        f'<rect x="10" y="8" width="12" height="10" fill="{LOCKSTEP_COLOUR}"/><text x="26" y="17">Lockstep</text>'
        f'<rect x="100" y="8" width="12" height="10" fill="{GALERA_COLOUR}"/><text x="116" y="17">Galera 4</text>'
        f'<text x="{WIDTH - 60}" y="17">L / G</text>'
        f'<text x="200" y="17" font-weight="bold">{html.escape(title)}</text>'
    )
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y}" font-family="sans-serif" font-size="12">'
    return "\n".join([head, f'<rect width="{WIDTH}" height="{y}" fill="white"/>', legend, *out, "</svg>"])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        found = list(panels(f.read().splitlines()))
    if not found:
        sys.exit(f"{sys.argv[1]}: no table with Lockstep and Galera columns")
    print(svg(sys.argv[2], found))


if __name__ == "__main__":
    main()
