#!/usr/bin/python3
"""CSV tables and PNG plots from the runs of bench/paper/run.sh.

    /usr/bin/python3 bench/paper/plot.py OUT_DIR     (OUT_DIR holds runs.jsonl and meta.json)

Writes to OUT_DIR: runs.csv (every run), speedup.csv, memory.csv, batch_grouping.csv,
comm_bound.csv, and speedup.png, memory.png, batch_grouping.png, comm_bound.png,
time_split.png. Times are given in emulated seconds (measured here) and in device seconds
(= emulated / the time dilation D that cluster/edge.sh printed for that cluster).

The stacked parts are rank 0's (bench's per-rank table, kept in runs.jsonl as by_rank, or
read from raw/ID.log for older runs): rank 0 reports the step, and its parts add up to it
when a run times one step. plot.py checks this for every bar it draws and prints the
largest gap per plot (target: within 2 %).
"""
import csv
import json
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = ["fwd", "bwd", "halo", "weights", "io", "update"]
TOL = 0.02  # stacked parts must add up to the step within this
CHECKS = {}  # plot name -> [(run id, step, sum of parts)]
CAVEAT = ("Pi 3 seconds = emulated seconds / D, D = a Pi 3 core's sgemm (5.5 GFLOP/s) / an emulated core's speed in "
          "tiletrain's own convolutions here (x86, AVX-512). They assume tiletrain's ARM (NEON) kernels reach the same "
          "fraction of a Pi 3 core's sgemm speed as its x86 kernels reach here: NOT measured on a Pi.")
CAVEAT_COMM = ("comm-bound devices are not a real device: 140 GFLOP/s per core (25x a Pi 3 core, a stand-in for the paper's "
               "Jetson Nano GPUs) on 1 Gbit/s (comm-bound) or 600 Mbit/s with 2 ms +-0.5 ms to the access point "
               "(comm-bound-wifi); device s = emulated s / D as for Pi 3s.")

COLORS = {"fwd": "#4c72b0", "bwd": "#55a868", "halo": "#c44e52", "weights": "#8172b2",
          "io": "#ccb974", "update": "#64b5cd", "other": "#bbbbbb"}
LABELS = {"fwd": "forward", "bwd": "backward", "halo": "halo exchange", "weights": "weight exchange",
          "io": "input/output", "update": "update", "other": "rest of step (waits, not in a part)"}


def by_rank_from_log(path):
    """bench's per-rank table (stderr with --json) from a run's raw log."""
    if not os.path.exists(path):
        return []
    num = r"(-?[0-9.]+)"
    keys = ("step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s", "peak_mb")
    return [dict(rank=int(m[0]), host=m[1], **{k: float(v) for k, v in zip(keys, m[2:])})
            for m in re.findall(r"(?m)^(\d+)\s+(\S+)" + r"\s+".join([""] + [num] * 7) + r"\s+\|\s+" + num,
                                open(path, errors="replace").read())]


def load(out):
    runs = [json.loads(line) for line in open(os.path.join(out, "runs.jsonl")) if line.strip()]
    meta = json.load(open(os.path.join(out, "meta.json"))) if os.path.exists(os.path.join(out, "meta.json")) else {}
    for r in runs:
        r["ok"] = r["status"] == "ok"
        r.setdefault("chosen", "")
        r.setdefault("predicted_step_s", None)
        if r["ok"]:
            D = r["dilation"]
            ranks = (r.get("by_rank") or by_rank_from_log(os.path.join(out, "raw", r["id"] + ".err")) or
                     by_rank_from_log(os.path.join(out, "raw", r["id"] + ".log")))
            r0 = next((x for x in ranks if x["rank"] == 0), None)
            if r0 is None:
                sys.exit(f"plot.py: run {r['id']} has no per-rank table (by_rank in runs.jsonl or raw/{r['id']}.log)")
            r["step_dev_s"] = r["step_s"] / D
            for p in PARTS:
                r[p + "_r0_s"] = r0[p + "_s"]
                r[p + "_dev_s"] = r0[p + "_s"] / D  # rank 0's part: these add up to rank 0's step
                r[p + "_max_dev_s"] = r[p + "_s"] / D  # the largest over ranks (bench's JSON)
            parts = sum(r[p + "_dev_s"] for p in PARTS)
            r["parts_sum_dev_s"] = parts
            r["parts_gap"] = (parts - r["step_dev_s"]) / r["step_dev_s"]
            r["other_dev_s"] = max(0.0, r["step_dev_s"] - parts)
            if r.get("predicted_step_s") is not None:
                r["predicted_dev_s"] = r["predicted_step_s"] / D
            # "infinite batch": the step without the once-per-batch weight exchange and update
            r["step_inf_dev_s"] = r["step_dev_s"] - r["weights_dev_s"] - r["update_dev_s"]
    return runs, meta


def check(name, rows):
    """Records that the stacked parts of each bar of plot `name` add up to its step."""
    CHECKS.setdefault(name, []).extend((r["id"], r["step_dev_s"], r["parts_sum_dev_s"]) for r in rows if r["ok"])


def report_checks():
    lines = []
    for name, c in CHECKS.items():
        if not c:
            continue
        worst = max(c, key=lambda x: abs(x[2] - x[1]) / x[1])
        gap = (worst[2] - worst[1]) / worst[1]
        bad = sum(1 for x in c if abs(x[2] - x[1]) / x[1] > TOL)
        lines.append(f"{name}: {len(c)} bars, rank 0's parts add up to the step within {abs(gap):.2%} "
                     f"(worst: {worst[0]}, parts {worst[2]:.3f} s vs step {worst[1]:.3f} s) - " +
                     ("OK" if bad == 0 else f"{bad} bar(s) OVER {TOL:.0%}"))
    for line in lines:
        print("plot.py: " + line)
    return lines


def caveat(fig, comm=False):
    fig.text(0.005, 0.003, CAVEAT_COMM if comm else CAVEAT, fontsize=6.5, ha="left", va="bottom", wrap=True,
             color="#444444")


def write_csv(path, rows, cols):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else r[c]) for c in cols])


def cfg_label(r):
    return f"{r['devices']}d x {r['cores']}c"


def stacked(ax, xs, rows, width=0.8, hatch=None, legend=True, horizontal=False):
    """Rank 0's parts stacked, its step as a black mark; OOM and starved runs marked."""
    bottom = [0.0] * len(rows)
    bar = ax.barh if horizontal else ax.bar
    for p in PARTS + ["other"]:
        vals = [r[p + "_dev_s"] if r["ok"] else 0.0 for r in rows]
        if p == "other" and not any(v > 0.002 * max(r["step_dev_s"] for r in rows if r["ok"]) for v in vals):
            continue  # nothing worth a colour
        kw = dict(left=bottom) if horizontal else dict(bottom=bottom)
        bar(xs, vals, width, color=COLORS[p], hatch=hatch, edgecolor="white" if not hatch else "k",
            linewidth=0.3, label=LABELS[p] if legend else None, **kw)
        bottom = [b + v for b, v in zip(bottom, vals)]
    okx = [(x, r["step_dev_s"]) for x, r in zip(xs, rows) if r["ok"]]
    if okx:
        lines = ax.vlines if horizontal else ax.hlines
        lines([p[1] for p in okx], [p[0] - width / 2 for p in okx], [p[0] + width / 2 for p in okx], color="k",
              lw=2, zorder=5, label="step (rank 0's; its parts stacked)" if legend else None)
    for x, r, top in zip(xs, rows, bottom):
        if not r["ok"]:
            if horizontal:
                ax.text(0, x, " OOM", ha="left", va="center", fontsize=7, color="red")
            else:
                ax.text(x, 0, "OOM", rotation=90, ha="center", va="bottom", fontsize=7, color="red")
        elif r.get("starved"):
            if horizontal:
                ax.text(max(top, r["step_dev_s"]), x, "*", ha="left", va="center", fontsize=10, color="red")
            else:
                ax.text(x, max(top, r["step_dev_s"]), "*", ha="center", va="bottom", fontsize=10, color="red")
    if legend and any(r.get("starved") for r in rows):
        ax.plot([], [], "r*", ls="none", label="* starved: this machine was full, the devices got less than their quota")


def speedup(runs, out, meta):
    sp = [r for r in runs if r["experiment"] == "speedup"]
    if not sp:
        return
    base = next((r for r in sp if r["tiles"] == 1 and not r["low_memory"] and r["ok"]), None)
    rows = []
    for r in sorted((r for r in sp if not r["low_memory"]), key=lambda r: (r["tiles"], r["devices"])):
        low = next((x for x in sp if x["low_memory"] and x["devices"] == r["devices"] and x["cores"] == r["cores"]), None)
        row = dict(r)
        host = meta.get("host_step")
        if host and r["ok"]:  # how much of F x a core here the emulated cores delivered to forward + backward
            row["emulated_core_efficiency"] = (host["fwd_s"] + host["bwd_s"]) / (
                r["tiles"] * r["device_speed"] * (r["fwd_s"] + r["bwd_s"]))
        if base and r["ok"]:
            row["speedup_batch1"] = base["step_s"] / r["step_s"]
            row["speedup_inf_batch"] = base["step_inf_dev_s"] / r["step_inf_dev_s"]
        if low is not None:
            row["lowmem_status"] = low["status"]
            if low["ok"]:
                row["lowmem_step_dev_s"] = low["step_dev_s"]
                row["lowmem_weights_dev_s"] = low["weights_dev_s"]
                row["lowmem_peak_rss_mb_host"] = low["peak_rss_mb_host"]
                if base:
                    row["speedup_batch1_lowmem"] = base["step_s"] / low["step_s"]
        rows.append(row)
    write_csv(os.path.join(out, "speedup.csv"), rows,
              ["devices", "cores", "tiles", "grid", "batch", "groups", "status", "dilation", "step_s", "step_dev_s",
               "step_inf_dev_s"] + [p + "_dev_s" for p in PARTS] + ["parts_gap"] + [p + "_max_dev_s" for p in PARTS] +
              ["speedup_batch1", "speedup_inf_batch", "emulated_core_efficiency", "peak_rss_mb_host", "peak_rss_mb_max", "cgroup_peak_mb_max",
               "lowmem_status", "lowmem_step_dev_s", "lowmem_weights_dev_s", "speedup_batch1_lowmem",
               "lowmem_peak_rss_mb_host", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(9, 0.6 * len(rows) + 3), 8.5), sharex=True)
    xs = list(range(len(rows)))
    stacked(a1, xs, rows)
    check("speedup.png", rows)
    a1.set_ylabel("training step, Pi 3 seconds")
    a1.set_title(f"Experiment 1: W1 (yolov2-16, {meta.get('size', '416x416')}), batch 1, groups none, one rank per "
                 f"device;\nrank 0's time split, which adds up to its step", fontsize=9)
    a1.legend(fontsize=7, ncol=2)
    for key, lab, m in (("speedup_batch1", "batch 1", "o-"), ("speedup_inf_batch", "infinite batch (no weight exchange/update)", "s--"),
                        ("speedup_batch1_lowmem", "batch 1, --low-memory", "^")):
        pts = [(x, r[key]) for x, r in zip(xs, rows) if r.get(key) is not None]
        if pts:
            a2.plot([p[0] for p in pts], [p[1] for p in pts], m, label=lab)
    a2.axhline(1, color="k", lw=0.5)
    a2.set_ylabel("speed-up vs 1 core")
    a2.set_xticks(xs)
    a2.set_xticklabels([f"{r['devices']} x {r['cores']}\n{r['tiles']} tiles\ngrid {r['grid']}" for r in rows], fontsize=8)
    a2.set_xlabel("devices x cores per device")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    caveat(fig)
    fig.savefig(os.path.join(out, "speedup.png"), dpi=120)
    plt.close(fig)


def memory(runs, out, meta):
    mem = [r for r in runs if r["experiment"] in ("speedup", "memory")]
    if not mem:
        return
    rows = []
    for r in sorted(mem, key=lambda r: (r["tiles"], r["devices"], r["tiles_per_rank"], r["low_memory"])):
        row = dict(r)
        row["layout"] = "process per tile" if r["tiles_per_rank"] == 1 else "rank per device"
        if r["ranks_per_device"] == 1 and r["tiles_per_rank"] == 1:
            row["layout"] = "process per tile = rank per device"
        if r["ok"]:
            row["per_process_mb"] = r["peak_rss_mb_max"]
            row["per_device_mb"] = r["peak_rss_mb_host"]
            row["other_mb"] = r["peak_rss_mb_max"] - r["maps_mb_max"] - r["deltas_mb_max"] - r["filters_mb"]
            if r["tiles_per_rank"] == 1:
                row["per_tile_mb"] = r["peak_rss_mb_max"]
        rows.append(row)
    write_csv(os.path.join(out, "memory.csv"), rows,
              ["tiles", "devices", "cores", "grid", "layout", "ranks_per_device", "tiles_per_rank", "low_memory", "status",
               "per_tile_mb", "per_process_mb", "per_device_mb", "cgroup_peak_mb_max", "maps_mb_max", "deltas_mb_max",
               "filters_mb", "other_mb", "mem_limit_mb"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 6))
    # left: per tile, beside the paper's figure (one process per tile, as the paper's engine)
    pt = [r for r in rows if r["tiles_per_rank"] == 1]
    tiles = sorted({r["tiles"] for r in rows})
    normal = {t: max((r for r in pt if r["tiles"] == t and not r["low_memory"]), key=lambda r: r["devices"], default=None)
              for t in tiles}
    xs = list(range(len(tiles)))
    bottom = [0.0] * len(tiles)
    for key, lab, col in (("maps_mb_max", "feature maps", "#4c72b0"), ("deltas_mb_max", "delta maps", "#55a868"),
                          ("filters_mb", "filters (+ gradients, momentum, formatted)", "#8172b2"),
                          ("other_mb", "other (scratch, libraries, MPI)", "#bbbbbb")):
        vals = [normal[t][key] if normal[t] and normal[t]["ok"] else 0.0 for t in tiles]
        a1.bar(xs, vals, 0.6, bottom=bottom, color=col, label=lab + " (one process per tile)" if key == "maps_mb_max" else lab)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for x, t, top in zip(xs, tiles, bottom):
        if normal[t] and normal[t]["ok"]:
            a1.text(x, top + 4, f"{top:.0f}", ha="center", va="bottom", fontsize=8)
        elif normal[t]:
            a1.text(x, 5, "OOM", color="red", ha="center")
    lowm = [(x, next((r["per_tile_mb"] for r in pt if r["tiles"] == t and r["low_memory"] and r["ok"]), None))
            for x, t in zip(xs, tiles)]
    lowm = [p for p in lowm if p[1] is not None]
    if lowm:
        a1.plot([p[0] for p in lowm], [p[1] for p in lowm], "kD--", label="one process per tile, --low-memory")
        for x, v in lowm:
            a1.text(x + 0.12, v, f"{v:.0f}", fontsize=8, va="center")
    # one rank per device running C tiles: its memory shared out over them
    rpd = [(x, min((r["peak_rss_mb_max"] / r["tiles_per_rank"] for r in rows if r["tiles"] == t and r["ok"] and
                    r["tiles_per_rank"] > 1 and not r["low_memory"]), default=None)) for x, t in zip(xs, tiles)]
    rpd = [p for p in rpd if p[1] is not None]
    if rpd:
        a1.plot([p[0] for p in rpd], [p[1] for p in rpd], "o:", color="#dd8452",
                label="one rank per device (C tiles): its RSS / C")
    # the paper: about 400 MB with 1 tile, about 50 MB with 24 (Darknet, one process per tile, Pi 3)
    pap = [(x, {1: 400, 24: 50}[t]) for x, t in zip(xs, tiles) if t in (1, 24)]
    if pap:
        a1.plot([p[0] for p in pap], [p[1] for p in pap], "r*", ls="none", ms=14, label="the paper (Darknet): ~400 MB at 1 tile, ~50 at 24")
    a1.set_xticks(xs)
    a1.set_xticklabels([f"{t}\n({normal[t]['devices']} x {normal[t]['cores']})" if normal[t] else str(t) for t in tiles],
                       fontsize=8)
    a1.set_xlabel("tiles (devices x cores of the one-process-per-tile run)")
    a1.set_ylabel("MB per tile (peak RSS of the largest process)")
    a1.set_title("Experiment 2: memory PER TILE, beside the paper's 400 -> 50 MB per tile\n"
                 "(split: tiletrain's own accounting of the largest process)", fontsize=9)
    a1.set_ylim(0, max([430] + bottom) * 1.08)
    a1.grid(alpha=0.3, axis="y")
    a1.legend(fontsize=7)
    # right: per device, every configuration: one rank per device and one process per tile, +- --low-memory
    cfgs = sorted({(r["devices"], r["cores"]) for r in rows}, key=lambda dc: (dc[0] * dc[1], dc[1]))
    series = (("rank per device", False, "#4c72b0", "one rank per device"),
              ("rank per device", True, "#9ab0d8", "one rank per device, --low-memory"),
              ("process per tile", False, "#c44e52", "one process per tile"),
              ("process per tile", True, "#e6a0a2", "one process per tile, --low-memory"))
    w = 0.8 / len(series)
    for i, (lay, low, col, lab) in enumerate(series):
        pts = []
        for j, (d, c) in enumerate(cfgs):
            r = next((r for r in rows if (r["devices"], r["cores"]) == (d, c) and r["low_memory"] == low and
                      lay in r["layout"]), None)
            if r is not None:
                pts.append((j + (i - 1.5) * w, r["per_device_mb"] if r["ok"] else 0.0, r["ok"]))
        if not pts:
            continue
        a2.bar([p[0] for p in pts], [p[1] for p in pts], w * 0.95, color=col, label=lab)
        for x, _, ok in pts:
            if not ok:
                a2.text(x, 5, "OOM", rotation=90, color="red", ha="center", fontsize=7)
    a2.set_xticks(range(len(cfgs)))
    a2.set_xticklabels([f"{d}x{c}\n{d * c}t" for d, c in cfgs], fontsize=7)
    a2.axhline(rows[0]["mem_limit_mb"], color="r", lw=0.8, label="device memory limit")
    a2.set_xlabel("devices x cores per device (tiles)")
    a2.set_ylabel("peak RSS summed over a device's processes, MB (largest device)")
    a2.set_title("memory PER DEVICE (the abstract's 'up to 8x less per device')", fontsize=9)
    a2.set_ylim(bottom=0)
    a2.grid(alpha=0.3, axis="y")
    a2.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.text(0.005, 0.003, "Memory is measured here (x86), not on a Pi; ARM builds of the same code hold the same "
             "buffers, but libraries and kernel scratch differ.", fontsize=6.5, color="#444444")
    fig.savefig(os.path.join(out, "memory.png"), dpi=120)
    plt.close(fig)


def fastest_per_candidate(runs, exp):
    """One run per (batch, groups): the fastest successful of its repetitions (other people's
    work on this machine only slows a run down), else the first failed one; n_runs = how many."""
    pick = {}
    for r in runs:
        if r["experiment"] != exp:
            continue
        k = (r["batch"], r["groups"])
        cur = pick.get(k)
        if cur is None or (r["ok"] and (not cur["ok"] or r["step_s"] < cur["step_s"])):
            pick[k] = dict(r)
        pick[k]["n_runs"] = sum(1 for x in runs if x["experiment"] == exp and (x["batch"], x["groups"]) == k)
        pick[k]["all_step_dev_s"] = " ".join(f"{x['step_dev_s']:.2f}" for x in runs if x["experiment"] == exp and
                                             (x["batch"], x["groups"]) == k and x["ok"])
    return list(pick.values())


def short(g):
    return "optimizer's\nchoice" if g == "optimizer" else g


def grouping(runs, out, exps, name, comm=False):
    """exps: [(experiment, title)], one row of panels each, one panel per batch."""
    rows = []
    for exp, _ in exps:
        for b in sorted({r["batch"] for r in fastest_per_candidate(runs, exp)}):
            cand = [r for r in fastest_per_candidate(runs, exp) if r["batch"] == b]
            for r in cand:
                row = dict(r)
                if r["ok"]:
                    row["per_sample_dev_s"] = r["step_dev_s"] / b
                rows.append(row)
            ok = [r for r in cand if r["ok"]]
            if ok:
                best = dict(min(ok, key=lambda r: r["step_s"]))
                best["candidates"] = " | ".join(r["groups"] for r in cand)
                best["chosen"] = best["groups"] + (f" ({best['chosen']})" if best["chosen"] else "")
                best["groups"] = "best measured"
                best["per_sample_dev_s"] = best["step_dev_s"] / b
                rows.append(best)
    if not rows:
        return
    write_csv(os.path.join(out, name + ".csv"), rows,
              ["experiment", "profile", "rtt_ms", "jitter_ms", "batch", "groups", "chosen", "predicted_dev_s",
               "candidates", "status", "n_runs", "all_step_dev_s", "devices", "cores", "grid", "args", "dilation",
               "device_speed", "step_s", "step_dev_s", "per_sample_dev_s", "step_inf_dev_s"] +
              [p + "_dev_s" for p in PARTS] + ["parts_gap"] + [p + "_max_dev_s" for p in PARTS] +
              ["peak_rss_mb_host", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"])
    exps = [(e, t) for e, t in exps if any(r["experiment"] == e for r in rows)]
    batches = sorted({r["batch"] for r in rows})
    fig, axes = plt.subplots(len(exps), len(batches), figsize=(4.2 * len(batches) + 1, 4.6 * len(exps) + 0.6),
                             squeeze=False)
    drawn = []
    for ei, (exp, title) in enumerate(exps):
        for bi, b in enumerate(batches):
            ax = axes[ei][bi]
            sel = [r for r in rows if r["experiment"] == exp and r["batch"] == b and r["groups"] != "best measured"]
            if not sel:
                ax.set_visible(False)
                continue
            xs = list(range(len(sel)))
            stacked(ax, xs, sel, width=0.7, legend=(ei == 0 and bi == 0))
            drawn += sel
            ok = [r for r in sel if r["ok"]]
            best = min(ok, key=lambda r: r["step_s"]) if ok else None
            for x, r in zip(xs, sel):
                if r["groups"] == "optimizer":  # its own series: hatched
                    ax.bar([x], [r["step_dev_s"]], 0.7, fill=False, hatch="//", edgecolor="k", lw=0.5)
                    if r.get("predicted_dev_s") is not None:
                        ax.hlines([r["predicted_dev_s"]], x - 0.35, x + 0.35, colors="#d62728", linestyles="--", lw=2,
                                  zorder=6, label="optimizer's prediction" if ei == 0 and bi == 0 else None)
                if r["ok"]:
                    top = max(r["step_dev_s"], r.get("predicted_dev_s") or 0) if r["groups"] == "optimizer" else r["step_dev_s"]
                    ax.text(x, top * 1.01, f"{r['step_dev_s']:.2f}" + (" *" if r is best else ""),
                            ha="center", va="bottom", fontsize=8, fontweight="bold" if r is best else None)
            ax.set_xticks(xs)
            ax.set_xticklabels([short(r["groups"]) for r in sel], fontsize=8)
            ax.set_ylim(0, max(max(r["step_dev_s"], r.get("predicted_dev_s") or 0) for r in ok) * 1.18 if ok else 1)
            ax.set_title(f"{title}\nbatch {b}", fontsize=9)
            if bi == 0:
                ax.set_ylabel("training step (whole batch), device s")
            ax.grid(alpha=0.3, axis="y")
            opt = next((r for r in sel if r["groups"] == "optimizer" and r["chosen"]), None)
            if opt:
                ax.set_xlabel("groups\noptimizer: " + "\n".join(textwrap.wrap(opt["chosen"], 52, break_on_hyphens=False,
                                                                           break_long_words=False)), fontsize=7)
            else:
                ax.set_xlabel("groups", fontsize=8)
    check(name + ".png", drawn)
    top = 1 - 0.75 / fig.get_figheight()
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="upper center", ncol=5, fontsize=8,
               bbox_to_anchor=(0.5, 1.0))
    fig.text(0.5, top, "rank 0's parts stacked (they add up to its step); * = fastest measured in the panel;\n"
             "hatched = the first choice of tiletrain plan --optimize on a cluster file calibrated on this emulated "
             "cluster; red dashes = its prediction", ha="center", va="bottom", fontsize=8)
    fig.tight_layout(rect=(0, 0.045, 1, top - 0.005))
    caveat(fig, comm)
    fig.savefig(os.path.join(out, name + ".png"), dpi=110)
    plt.close(fig)


EXP_TITLES = {"speedup": "1. speed-up: batch 1, groups none",
              "batch": "3. batch x grouping: 6 Pi 3 x 4 cores",
              "comm": "4. comm-bound, 2 devices (no latency)",
              "commwifi": "4. comm-bound-wifi, 2 devices (2 ms RTT)"}


def time_split(runs, out):
    """One panel per experiment, horizontal bars, linear axis: rank 0's parts of every timed
    run (grouping candidates: the fastest of their runs). Memory runs (first step, no
    warm-up) are left out."""
    panels = []
    for exp in EXP_TITLES:
        if exp == "speedup":
            sel = sorted((r for r in runs if r["experiment"] == exp),
                         key=lambda r: (r["tiles"], r["devices"], r["low_memory"]))
            lab = [f"{r['devices']} x {r['cores']}{' low-mem' if r['low_memory'] else ''}" for r in sel]
        else:
            sel = sorted(fastest_per_candidate(runs, exp), key=lambda r: r["batch"])
            lab = [f"batch {r['batch']}, " + (f"optimizer: {r.get('grid_rc', '?')} on {r['devices']} dev"
                                               if r["groups"] == "optimizer" else r["groups"]) for r in sel]
        if sel:
            panels.append((exp, sel, lab))
    if not panels:
        return
    n = sum(len(p[1]) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 0.28 * n + 1.3 * len(panels) + 1),
                             gridspec_kw={"height_ratios": [len(p[1]) + 1.5 for p in panels]}, squeeze=False)
    drawn = []
    for i, (exp, sel, lab) in enumerate(panels):
        ax = axes[i][0]
        ys = list(range(len(sel)))[::-1]
        stacked(ax, ys, sel, width=0.75, legend=(i == 0), horizontal=True)
        drawn += sel
        ax.set_yticks(ys)
        ax.set_yticklabels(lab, fontsize=8)
        ax.set_title(EXP_TITLES[exp], fontsize=9, loc="left")
        ax.set_xlabel("step, device seconds" if exp in ("comm", "commwifi") else "step, Pi 3 seconds", fontsize=8)
        ax.grid(alpha=0.3, axis="x")
    check("time_split.png", drawn)
    top = 1 - 0.45 / fig.get_figheight()
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="upper center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, top))
    caveat(fig)
    fig.savefig(os.path.join(out, "time_split.png"), dpi=110)
    plt.close(fig)


def cpu(r):
    """busy cores here / the devices' quota / others' cores (if measured), STARVED if others + quota > cores"""
    t = f"{r.get('busy_cores', float('nan')):.2f} / {r.get('quota_cores', float('nan')):.2f}"
    if "others_cores" in r:
        t += f" / {r['others_cores']:.2f}" + (" STARVED" if r.get("starved") else "")
    return t


def summary(runs, out, meta):
    """summary.md: the headline numbers that README.md puts beside the paper's statements."""
    L = [f"# Summary of {out} ({meta.get('command', '')}, {meta.get('date', '')}, commit {meta.get('commit', '')})", ""]
    ok = [r for r in runs if r["ok"]]
    sp = sorted((r for r in ok if r["experiment"] == "speedup" and not r["low_memory"]),
                key=lambda r: (r["devices"], r["cores"]))
    base = next((r for r in sp if r["tiles"] == 1), None)
    if base:
        h = meta.get("host_step")
        L.append(f"- 1 tile (1 device x 1 core): step {base['step_s']:.2f} s emulated = {base['step_dev_s']:.2f} Pi 3 s "
                 f"(D = {base['dilation']:.3f})" + (
                     f"; unthrottled here {h['step_s']:.3f} s, so an emulated core delivered "
                     f"{h['step_s'] / (base['device_speed'] * base['step_s']):.0%} of {base['device_speed']} core"
                     if h else ""))
        L.append("")
        L.append("Parts: rank 0's (they add up to its step).")
        L.append("")
        L.append("| devices x cores | tiles | grid | step Pi 3 s | fwd | bwd | halo | weights | io | update | "
                 "speed-up batch 1 | speed-up inf. batch | --low-memory speed-up | CPU: busy here / devices' quota / others |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sp:
            low = next((x for x in ok if x["experiment"] == "speedup" and x["low_memory"] and
                        (x["devices"], x["cores"]) == (r["devices"], r["cores"])), None)
            L.append(f"| {r['devices']} x {r['cores']} | {r['tiles']} | {r['grid']} | {r['step_dev_s']:.2f} | " +
                     " | ".join(f"{r[p + '_dev_s']:.2f}" for p in PARTS) +
                     f" | {base['step_s'] / r['step_s']:.2f} | {base['step_inf_dev_s'] / r['step_inf_dev_s']:.2f} | " +
                     (f"{base['step_s'] / low['step_s']:.2f}" if low else "") +
                     f" | {cpu(r)} |")
        L.append("")
    mem = [r for r in runs if r["experiment"] in ("speedup", "memory")]
    if mem:
        L.append("| devices x cores | tiles | processes per device | --low-memory | status | largest process MB | "
                 "largest device MB | maps | deltas | filters | cgroup peak MB |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(mem, key=lambda r: (r["tiles"], r["devices"], r["ranks_per_device"], r["low_memory"])):
            if r["ok"]:
                L.append(f"| {r['devices']} x {r['cores']} | {r['tiles']} | {r['ranks_per_device']} | "
                         f"{'yes' if r['low_memory'] else 'no'} | ok | {r['peak_rss_mb_max']:.0f} | "
                         f"{r['peak_rss_mb_host']:.0f} | {r['maps_mb_max']:.1f} | {r['deltas_mb_max']:.1f} | "
                         f"{r['filters_mb']:.1f} | {r['cgroup_peak_mb_max']:.0f} |")
            else:
                L.append(f"| {r['devices']} x {r['cores']} | {r['tiles']} | {r['ranks_per_device']} | "
                         f"{'yes' if r['low_memory'] else 'no'} | {r['status']} | | | | | | |")
        L.append("")
    for exp, title in (("batch", "6 Pi 3 devices x 4 cores"), ("comm", "2 comm-bound devices x 1 core"),
                       ("commwifi", "2 comm-bound-wifi devices x 1 core (2 ms +-0.5 ms round trip to the access point)")):
        g = fastest_per_candidate(runs, exp)
        if not g:
            continue
        nr = max(r["n_runs"] for r in g)
        L.append(f"{title}: step in device seconds, fastest of {nr} run(s) of each candidate (the fastest candidate "
                 f"of each batch in bold; weights = weight exchange)")
        L.append("")
        groups = list(dict.fromkeys(r["groups"] for r in g))
        L.append("| batch | " + " | ".join(groups) + " | best measured | none / best | optimizer's choice (predicted device s) "
                 "| weights (none) | halo (none) | CPU (none): busy / quota / others |")
        L.append("|---" * (len(groups) + 7) + "|")
        for b in sorted({r["batch"] for r in g}):
            cand = {r["groups"]: r for r in g if r["batch"] == b}
            oks = [r for r in cand.values() if r["ok"]]
            best = min(oks, key=lambda r: r["step_s"]) if oks else None
            cells = []
            for gr in groups:
                r = cand.get(gr)
                if r is None:
                    cells.append("")
                elif not r["ok"]:
                    cells.append(r["status"])
                else:
                    c = f"{r['step_dev_s']:.2f}"
                    cells.append(f"**{c}**" if r is best else c)
            n = cand.get("none")
            o = cand.get("optimizer")
            ratio = f"{n['step_s'] / best['step_s']:.2f}" if best and n and n["ok"] else ""
            ochosen = (f"{o['chosen']} ({o['predicted_dev_s']:.2f})" if o and o.get("predicted_dev_s") is not None
                       else "")
            L.append(f"| {b} | " + " | ".join(cells) + f" | {best['groups'] if best else ''} | {ratio} | {ochosen} | " +
                     (f"{n['weights_dev_s']:.2f} | {n['halo_dev_s']:.2f} | {cpu(n)}"
                      if n and n["ok"] else " | | ") + " |")
        L.append("")
    L.append("Stacked parts against the step (plot.py's check, target: within 2 %):")
    L.append("")
    L += ["- " + line for line in report_checks()]
    open(os.path.join(out, "summary.md"), "w").write("\n".join(L) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "full")
    runs, meta = load(out)
    cols = ["id", "experiment", "status", "devices", "cores", "tiles", "grid", "ranks_per_device", "tiles_per_rank",
            "batch", "groups", "low_memory", "size", "steps", "warmup", "profile", "dilation", "device_speed",
            "link_bps", "rtt_ms", "jitter_ms", "host_gflops", "args", "chosen", "predicted_step_s", "step_s", "step_dev_s"] + \
           [p + "_s" for p in PARTS] + [p + "_r0_s" for p in PARTS] + ["parts_gap"] + \
           ["peak_rss_mb_max", "peak_rss_mb_host", "cgroup_peak_mb_max", "maps_mb_max", "deltas_mb_max", "filters_mb",
            "mem_limit_mb", "wall_s", "loadavg", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"]
    write_csv(os.path.join(out, "runs.csv"), runs, cols)
    speedup(runs, out, meta)
    memory(runs, out, meta)
    grouping(runs, out, [("batch", "3. 6 Pi 3 devices x 4 cores (24 tiles)")], "batch_grouping")
    grouping(runs, out, [("comm", "4. comm-bound, 2 devices, no latency"),
                         ("commwifi", "4. comm-bound-wifi, 2 devices, 2 ms RTT")], "comm_bound", comm=True)
    time_split(runs, out)
    summary(runs, out, meta)
    print(f"plot.py: {len(runs)} runs -> {out}/*.csv, *.png")


if __name__ == "__main__":
    main()
