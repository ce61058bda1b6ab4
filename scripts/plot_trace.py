#!/usr/bin/python3
"""A timeline of a bench --trace file: one row per rank and lane, spans coloured by kind.

    scripts/plot_trace.py run.json --out timeline.png

The file is a Chrome/Perfetto trace (tiletrain bench --trace; ui.perfetto.dev opens it
too). Each rank has a row for its compute thread (layers forward and backward, the tail
after the cut on rank 0, the update; the tail's own layers below the tail's span) and a
row for its waits and transfers (halo, batch-norm sums, weights, scatter/gather). Steps
are the shaded bands behind the rows. Time is in ms from the barrier before the first
timed step, where the ranks' clocks were aligned. The PNG is written to a temporary
file and renamed.
"""
import argparse
import json
import os
import sys

# Fixed colours, so that the same kind looks the same in every picture.
COLOURS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "tail": "#8172b3",
    "update": "#55a868",
    "halo": "#c44e52",
    "bn": "#da8bc3",
    "weights": "#937860",
    "io": "#8c8c8c",
}
OTHER = ["#ccb974", "#64b5cd", "#2f4f4f", "#b8860b"]


def read(path):
    try:
        text = open(path).read()
    except OSError as e:
        sys.exit(f"plot_trace: cannot read {path}: {e.strerror}")
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        sys.exit(f"plot_trace: {path}:{e.lineno}: not JSON ({e.msg})")
    events = j.get("traceEvents") if isinstance(j, dict) else j
    if not isinstance(events, list):
        sys.exit(f"plot_trace: {path}: not a trace (an object with a \"traceEvents\" list is expected)")
    spans, names = [], {}
    for n, e in enumerate(events):
        if not isinstance(e, dict):
            sys.exit(f"plot_trace: {path}: event {n}: not an object")
        if e.get("ph") == "M" and isinstance(e.get("args"), dict) and "name" in e["args"]:
            names[(e.get("name"), e.get("pid"), e.get("tid"))] = str(e["args"]["name"])
        if e.get("ph") != "X":
            continue
        for k, kind in (("name", str), ("pid", int), ("tid", int), ("ts", (int, float)), ("dur", (int, float))):
            if not isinstance(e.get(k), kind) or isinstance(e.get(k), bool):
                sys.exit(f"plot_trace: {path}: event {n}: no \"{k}\" of the right type")
        if e["dur"] < 0:
            sys.exit(f"plot_trace: {path}: event {n} ({e['name']}): negative duration")
        spans.append(e)
    if not spans:
        sys.exit(f"plot_trace: {path}: no spans (events with \"ph\": \"X\")")
    about = j.get("otherData", {}) if isinstance(j, dict) else {}
    return spans, names, about if isinstance(about, dict) else {}


def depths(spans):
    """Nesting depth of each span in one row (a span inside another is one deeper)."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i]["ts"], -spans[i]["dur"]))
    stack, depth = [], [0] * len(spans)
    for i in order:
        start = spans[i]["ts"]
        while stack and stack[-1] <= start + 1e-6:
            stack.pop()
        depth[i] = len(stack)
        stack.append(start + spans[i]["dur"])
    return depth


def union(spans):
    """The time the spans cover, as sorted disjoint [a, b) intervals."""
    out = []
    for a, b in sorted((s["ts"], s["ts"] + s["dur"]) for s in spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def intersect(x, y):
    """The intervals both covers of union() cover."""
    out, j = [], 0
    for a, b in x:
        while j < len(y) and y[j][1] <= a:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            out.append([max(a, y[k][0]), min(b, y[k][1])])
            k += 1
    return out


def length_ms(iv):
    return sum(b - a for a, b in iv) / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    spans, names, about = read(a.trace)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    steps = [s for s in spans if s.get("cat") == "step"]
    rest = [s for s in spans if s.get("cat") != "step"]
    rows = sorted({(s["pid"], s["tid"]) for s in rest})
    cats = sorted({s.get("cat", "") for s in rest}, key=lambda c: (c not in COLOURS, list(COLOURS).index(c)
                                                                     if c in COLOURS else 0, c))
    colour = dict(COLOURS)
    for i, c in enumerate(c for c in cats if c not in COLOURS):
        colour[c] = OTHER[i % len(OTHER)]
    t_end = max(s["ts"] + s["dur"] for s in spans) / 1e3
    fig, ax = plt.subplots(figsize=(13, 1.6 + 0.75 * len(rows)))
    y_of = {row: len(rows) - 1 - i for i, row in enumerate(rows)}  # the first rank on top
    labels = []
    # tiletrain's lanes: tid 0 the compute thread, tid 1 its waits and transfers, which the
    # compute spans around them (a layer waiting for its halo) also cover: hatched there.
    waits = {pid: union([s for s in rest if s["pid"] == pid and s["tid"] == 1]) for pid, _ in rows}
    thin = t_end / 400  # narrower than this: a line in the span's colour (white edges would hide it)
    for row in rows:
        pid, tid = row
        mine = [s for s in rest if (s["pid"], s["tid"]) == row]
        d = depths(mine)
        levels = max(d) + 1
        y0 = y_of[row] - 0.4
        h = 0.8 / levels
        for lvl in range(levels):
            yb = (y0 + 0.8 - (lvl + 1) * h, h)  # the outermost level on top, the spans nested in it below
            for c in cats:
                bars = [(s["ts"] / 1e3, s["dur"] / 1e3) for s, k in zip(mine, d) if k == lvl and s.get("cat") == c]
                wide = [b for b in bars if b[1] >= thin]
                narrow = [b for b in bars if b[1] < thin]
                if wide:
                    ax.broken_barh(wide, yb, facecolors=colour[c], edgecolor="white", linewidth=0.4)
                if narrow:
                    ax.broken_barh(narrow, yb, facecolors=colour[c], edgecolor=colour[c], linewidth=0.6)
            for s, k in zip(mine, d):  # names only where they fit
                if k == lvl and s["dur"] / 1e3 > len(s["name"]) * t_end / 180:
                    ax.text((s["ts"] + s["dur"] / 2) / 1e3, yb[0] + h / 2, s["name"], ha="center", va="center",
                            fontsize=7, color="white", clip_on=True)
        process = names.get(("process_name", pid, None), f"rank {pid}")
        lane = names.get(("thread_name", pid, tid), f"lane {tid}")
        busy = union([s for s, k in zip(mine, d) if k == 0])
        if tid == 0 and waits[pid]:
            both = intersect(busy, waits[pid])
            hatch = [(a / 1e3, (b - a) / 1e3) for a, b in both if b - a >= thin * 1e3]
            ax.broken_barh(hatch, (y0 + 0.8 - h, h), facecolors="none", edgecolor=(1, 1, 1, 0.6), hatch="////",
                           linewidth=0)
            lane += f": {length_ms(busy) - length_ms(both):.1f} ms outside waits"
        else:
            lane += f": {length_ms(busy):.1f} ms"
        labels.append((y_of[row], f"{process}\n{lane}"))
    # Steps: shaded bands behind each rank's rows; the first rank's numbered above its rows
    # (the ranks' steps line up, as every step ends in a gradient sum).
    top = len(rows) - 0.5 + 0.3  # room for the step numbers
    pids = sorted({p for p, _ in rows})
    for pid in pids:
        ys = [y_of[r] for r in rows if r[0] == pid]
        lo, hi = (min(ys) + 0.5 - 0.5) / (top + 0.5), (max(ys) + 1) / (top + 0.5)
        for k, s in enumerate(sorted((s for s in steps if s["pid"] == pid), key=lambda s: s["ts"])):
            x0, w = s["ts"] / 1e3, s["dur"] / 1e3
            ax.axvspan(x0, x0 + w, ymin=lo, ymax=hi, color="#000000", alpha=0.07 if k % 2 == 0 else 0.14,
                       linewidth=0, zorder=0)
            if pid == pids[0]:
                ax.text(x0 + w / 2, len(rows) - 0.5 + 0.15, s["name"], ha="center", va="center", fontsize=8,
                        color="#333333", clip_on=True)
    ax.set_yticks([y for y, _ in labels])
    ax.set_yticklabels([t for _, t in labels], fontsize=8)
    ax.set_ylim(-0.5, top)
    ax.set_xlim(0, t_end * 1.005)
    for y in range(len(rows) - 1):  # a line between ranks
        if rows[len(rows) - 1 - y][0] != rows[len(rows) - 2 - y][0]:
            ax.axhline(y + 0.5, color="black", linewidth=0.8)
    ax.set_xlabel("ms since the barrier before the first timed step (where the ranks' clocks are aligned)")
    ax.grid(axis="x", alpha=0.3)
    title = os.path.basename(a.trace)
    if about.get("cfg"):
        title = (f"{os.path.basename(str(about['cfg']))}: grid {about.get('grid', '?')}, {about.get('ranks', '?')} rank(s), "
                 f"batch {about.get('batch', '?')}, {len(steps) // max(1, len({s['pid'] for s in steps}))} step(s)")
    ax.set_title(title, fontsize=10)
    handles = [Patch(facecolor=colour[c], label=c) for c in cats]
    handles.append(Patch(facecolor="#000000", alpha=0.1, label="step"))
    if any(waits.values()):
        handles.append(Patch(facecolor="#777777", edgecolor="white", hatch="////", label="compute waiting"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8, frameon=False)
    fig.tight_layout()
    tmp = a.out + ".tmp.png"
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, a.out)
    except OSError as e:
        sys.exit(f"plot_trace: cannot write {a.out}: {e.strerror}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
