#!/usr/bin/python3
"""CSV tables and PNG plots from the runs of bench/paper/run.sh.

    /usr/bin/python3 bench/paper/plot.py OUT_DIR     (OUT_DIR holds runs.jsonl and meta.json)

Writes to OUT_DIR: runs.csv (every run), speedup.csv, memory.csv, batch_grouping.csv,
comm_bound.csv, and speedup.png, memory.png, batch_grouping.png, comm_bound.png,
time_split.png. Times are given in emulated seconds (measured here) and in device seconds
(= emulated / the time dilation D that cluster/edge.sh printed for that cluster).
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = ["fwd", "bwd", "halo", "weights", "io", "update"]
COLORS = {"fwd": "#4c72b0", "bwd": "#55a868", "halo": "#c44e52", "weights": "#8172b2",
          "io": "#ccb974", "update": "#64b5cd", "other": "#bbbbbb"}
LABELS = {"fwd": "forward", "bwd": "backward", "halo": "halo exchange", "weights": "weight exchange",
          "io": "input/output", "update": "update", "other": "rest of step (waits, not in a part)"}


def load(out):
    runs = [json.loads(line) for line in open(os.path.join(out, "runs.jsonl")) if line.strip()]
    meta = json.load(open(os.path.join(out, "meta.json"))) if os.path.exists(os.path.join(out, "meta.json")) else {}
    for r in runs:
        r["ok"] = r["status"] == "ok"
        if r["ok"]:
            D = r["dilation"]
            r["step_dev_s"] = r["step_s"] / D
            for p in PARTS:
                r[p + "_dev_s"] = r[p + "_s"] / D
            # the parts are maxima over ranks: they need not add up to the step
            r["other_dev_s"] = max(0.0, r["step_dev_s"] - sum(r[p + "_dev_s"] for p in PARTS))
            # "infinite batch": the step without the once-per-batch weight exchange and update
            r["step_inf_dev_s"] = (r["step_s"] - r["weights_s"] - r["update_s"]) / D
    return runs, meta


def write_csv(path, rows, cols):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else r[c]) for c in cols])


def cfg_label(r):
    return f"{r['devices']}d x {r['cores']}c"


def stacked(ax, xs, rows, width=0.8, hatch=None, legend=True):
    bottom = [0.0] * len(rows)
    for p in PARTS + ["other"]:
        vals = [r[p + "_dev_s"] if r["ok"] else 0.0 for r in rows]
        ax.bar(xs, vals, width, bottom=bottom, color=COLORS[p], hatch=hatch, edgecolor="white" if not hatch else "k",
               linewidth=0.3, label=LABELS[p] if legend else None)
        bottom = [b + v for b, v in zip(bottom, vals)]
    okx = [(x, r["step_dev_s"]) for x, r in zip(xs, rows) if r["ok"]]
    if okx:
        ax.hlines([p[1] for p in okx], [p[0] - width / 2 for p in okx], [p[0] + width / 2 for p in okx], color="k",
                  lw=2, zorder=5, label="step (rank 0's median; the parts are maxima over ranks)" if legend else None)
    for x, r, top in zip(xs, rows, bottom):
        if not r["ok"]:
            ax.text(x, 0, "OOM", rotation=90, ha="center", va="bottom", fontsize=7, color="red")
        elif r.get("starved"):
            ax.text(x, max(top, r["step_dev_s"]), "*", ha="center", va="bottom", fontsize=10, color="red")
    if legend and any(r.get("starved") for r in rows):
        ax.plot([], [], "r*", ls="none", label="* starved: this machine was full, the devices got less than their quota")


def speedup(runs, out, meta):
    sp = [r for r in runs if r["experiment"] == "speedup"]
    if not sp:
        return
    base = next((r for r in sp if r["tiles"] == 1 and not r["low_memory"] and r["ok"]), None)
    rows = []
    for r in sorted((r for r in sp if not r["low_memory"]), key=lambda r: (r["devices"], r["cores"])):
        low = next((x for x in sp if x["low_memory"] and x["devices"] == r["devices"] and x["cores"] == r["cores"]), None)
        row = dict(r)
        host = meta.get("host_step")
        if host and r["ok"]:  # how much of F x a core here the emulated cores delivered to forward + backward
            row["emulated_core_efficiency"] = (host["fwd_s"] + host["bwd_s"]) / (
                r["tiles"] * r["device_speed"] * (r["fwd_s"] + r["bwd_s"]))
        if base and r["ok"]:
            row["speedup_batch1"] = base["step_s"] / r["step_s"]
            row["speedup_inf_batch"] = (base["step_s"] - base["weights_s"] - base["update_s"]) / (
                r["step_s"] - r["weights_s"] - r["update_s"])
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
               "step_inf_dev_s"] + [p + "_dev_s" for p in PARTS] +
              ["speedup_batch1", "speedup_inf_batch", "emulated_core_efficiency", "peak_rss_mb_host", "peak_rss_mb_max", "cgroup_peak_mb_max",
               "lowmem_status", "lowmem_step_dev_s", "lowmem_weights_dev_s", "speedup_batch1_lowmem",
               "lowmem_peak_rss_mb_host", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 0.45 * len(rows) + 3), 8), sharex=True)
    xs = list(range(len(rows)))
    stacked(a1, xs, rows)
    a1.set_ylabel("training step, Pi 3 seconds")
    a1.set_title(f"W1 (yolov2-16, {meta.get('size', '416x416')}), batch 1, groups none, one rank per device: "
                 f"time split (max over ranks)", fontsize=9)
    a1.legend(fontsize=7, ncol=2)
    for key, lab, m in (("speedup_batch1", "batch 1", "o-"), ("speedup_inf_batch", "infinite batch (no weight exchange/update)", "s--"),
                        ("speedup_batch1_lowmem", "batch 1, --low-memory", "^")):
        pts = [(x, r[key]) for x, r in zip(xs, rows) if r.get(key) is not None]
        if pts:
            a2.plot([p[0] for p in pts], [p[1] for p in pts], m, label=lab)
    a2.axhline(1, color="k", lw=0.5)
    a2.set_ylabel("speed-up vs 1 core")
    a2.set_xticks(xs)
    a2.set_xticklabels([f"{cfg_label(r)}\n{r['tiles']}t {r['grid']}" for r in rows], fontsize=7)
    a2.set_xlabel("devices x cores per device (tiles, grid)")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    fig.tight_layout()
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
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 5.5))
    # left: one process per tile, as the paper's figure (largest process, split)
    pt = [r for r in rows if r["tiles_per_rank"] == 1]
    tiles = sorted({r["tiles"] for r in pt})
    normal = {t: max((r for r in pt if r["tiles"] == t and not r["low_memory"]), key=lambda r: r["devices"], default=None)
              for t in tiles}
    xs = list(range(len(tiles)))
    bottom = [0.0] * len(tiles)
    for key, lab, col in (("maps_mb_max", "feature maps", "#4c72b0"), ("deltas_mb_max", "delta maps", "#55a868"),
                          ("filters_mb", "filters (+ gradients, momentum, formatted)", "#8172b2"),
                          ("other_mb", "other (scratch, libraries, MPI)", "#bbbbbb")):
        vals = [normal[t][key] if normal[t] and normal[t]["ok"] else 0.0 for t in tiles]
        a1.bar(xs, vals, 0.6, bottom=bottom, color=col, label=lab)
        bottom = [b + v for b, v in zip(bottom, vals)]
    lowm = [(x, next((r["per_tile_mb"] for r in pt if r["tiles"] == t and r["low_memory"] and r["ok"]), None))
            for x, t in zip(xs, tiles)]
    lowm = [p for p in lowm if p[1] is not None]
    if lowm:
        a1.plot([p[0] for p in lowm], [p[1] for p in lowm], "kD--", label="--low-memory (total)")
    for x, t in zip(xs, tiles):
        if normal[t] and not normal[t]["ok"]:
            a1.text(x, 5, "OOM", color="red", ha="center")
    a1.set_xticks(xs)
    a1.set_xticklabels([f"{t}\n{normal[t]['devices']}x{normal[t]['cores']}" if normal[t] else str(t) for t in tiles], fontsize=8)
    a1.set_xlabel("tiles (devices x cores), one process per tile")
    a1.set_ylabel("peak RSS of the largest process, MB")
    a1.set_title("memory per tile (split: tiletrain's own accounting)", fontsize=9)
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
        a2.bar([p[0] for p in pts], [p[1] for p in pts], w * 0.95, color=col, label=lab)
        for x, _, ok in pts:
            if not ok:
                a2.text(x, 5, "OOM", rotation=90, color="red", ha="center", fontsize=7)
    a2.set_xticks(range(len(cfgs)))
    a2.set_xticklabels([f"{d}x{c}\n{d * c}t" for d, c in cfgs], fontsize=7)
    a2.axhline(rows[0]["mem_limit_mb"], color="r", lw=0.8, label="device memory limit")
    a2.set_xlabel("devices x cores per device (tiles)")
    a2.set_ylabel("peak RSS summed over a device's processes, MB (largest device)")
    a2.set_title("memory per device", fontsize=9)
    a2.set_ylim(bottom=0)
    a2.grid(alpha=0.3, axis="y")
    a2.legend(fontsize=7)
    fig.tight_layout()
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


def grouping(runs, out, exp, name, title):
    g = fastest_per_candidate(runs, exp)
    if not g:
        return
    batches = sorted({r["batch"] for r in g})
    groups = list(dict.fromkeys(r["groups"] for r in g))
    rows = []
    for b in batches:
        cand = [r for r in g if r["batch"] == b]
        for r in cand:
            row = dict(r)
            if r["ok"]:
                row["per_sample_dev_s"] = r["step_dev_s"] / b
            rows.append(row)
        ok = [r for r in cand if r["ok"]]
        if ok:
            best = dict(min(ok, key=lambda r: r["step_s"]))
            best["candidates"] = " | ".join(r["groups"] for r in cand)
            best["chosen"] = best["groups"]
            best["groups"] = "best measured"
            best["per_sample_dev_s"] = best["step_dev_s"] / b
            rows.append(best)
    write_csv(os.path.join(out, name + ".csv"), rows,
              ["batch", "groups", "chosen", "candidates", "status", "n_runs", "all_step_dev_s", "devices", "cores", "grid",
               "dilation", "device_speed", "step_s", "step_dev_s", "per_sample_dev_s", "step_inf_dev_s"] + [p + "_dev_s" for p in PARTS] +
              ["peak_rss_mb_host", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"])
    labels = groups + ["best measured"]
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(batches) * len(labels) * 0.5 + 2), 5))
    w = 0.8 / len(labels)
    for i, lab in enumerate(labels):
        sel = [(bi, r) for bi, b in enumerate(batches) for r in rows if r["batch"] == b and r["groups"] == lab]
        if not sel:
            continue
        xs = [bi + (i - (len(labels) - 1) / 2) * w for bi, _ in sel]
        stacked(ax, xs, [r for _, r in sel], width=w * 0.95, hatch=None if lab != "best measured" else "//",
                legend=(i == 0))
        for x, (_, r) in zip(xs, sel):
            txt = lab if lab != "best measured" else f"best: {r['chosen']}"
            ax.text(x, ax.get_ylim()[1] * 0.01, txt, rotation=90, ha="center", va="bottom", fontsize=6, color="k")
    ax.set_xticks(range(len(batches)))
    ax.set_xticklabels([f"batch {b}" for b in batches])
    ax.set_ylabel("training step (whole batch), device seconds")
    ax.set_title(title + "\nbars per batch: groups " + " / ".join(labels) +
                 " (hatched: the fastest measured of the candidates;\nno cost-model optimizer yet)", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name + ".png"), dpi=120)
    plt.close(fig)


def time_split(runs, out):
    ok = [r for r in runs if r["status"] in ("ok", "oom")]
    if not ok:
        return
    fig, ax = plt.subplots(figsize=(max(10, 0.22 * len(ok) + 2), 6))
    xs = list(range(len(ok)))
    stacked(ax, xs, ok, width=0.8)
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r['experiment']} {r['devices']}x{r['cores']} r{r['ranks_per_device']} b{r['batch']} "
                        f"{r['groups']}{' LM' if r['low_memory'] else ''}" for r in ok], rotation=90, fontsize=6)
    ax.set_ylabel("step, device seconds (symlog)")
    ax.set_title("time split of every run (devices x cores, r = ranks per device, b = batch, LM = --low-memory)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
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
        L.append("| devices x cores | tiles | grid | step Pi 3 s | fwd | bwd | halo | weights | io | update | "
                 "speed-up batch 1 | speed-up inf. batch | --low-memory speed-up | CPU: busy here / devices' quota / others |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        binf = base["step_s"] - base["weights_s"] - base["update_s"]
        for r in sp:
            low = next((x for x in ok if x["experiment"] == "speedup" and x["low_memory"] and
                        (x["devices"], x["cores"]) == (r["devices"], r["cores"])), None)
            L.append(f"| {r['devices']} x {r['cores']} | {r['tiles']} | {r['grid']} | {r['step_dev_s']:.2f} | " +
                     " | ".join(f"{r[p + '_dev_s']:.2f}" for p in PARTS) +
                     f" | {base['step_s'] / r['step_s']:.2f} | {binf / (r['step_s'] - r['weights_s'] - r['update_s']):.2f} | " +
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
    for exp, title in (("batch", "6 Pi 3 devices x 4 cores"), ("comm", "2 comm-bound devices x 1 core")):
        g = fastest_per_candidate(runs, exp)
        if not g:
            continue
        nr = max(r["n_runs"] for r in g)
        L.append(f"{title}: step in device seconds, fastest of {nr} run(s) of each candidate (the fastest candidate "
                 f"of each batch in bold; weights = weight exchange)")
        L.append("")
        groups = list(dict.fromkeys(r["groups"] for r in g))
        L.append("| batch | " + " | ".join(groups) + " | best measured | weights (none) | halo (none) | CPU (none): busy / quota / others |")
        L.append("|---" * (len(groups) + 5) + "|")
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
            L.append(f"| {b} | " + " | ".join(cells) + f" | {best['groups'] if best else ''} | " +
                     (f"{n['weights_dev_s']:.2f} | {n['halo_dev_s']:.2f} | {cpu(n)}"
                      if n and n["ok"] else " | | ") + " |")
        L.append("")
    open(os.path.join(out, "summary.md"), "w").write("\n".join(L) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "full")
    runs, meta = load(out)
    cols = ["id", "experiment", "status", "devices", "cores", "tiles", "grid", "ranks_per_device", "tiles_per_rank",
            "batch", "groups", "low_memory", "size", "steps", "warmup", "profile", "dilation", "device_speed",
            "link_bps", "host_gflops", "step_s", "step_dev_s"] + [p + "_s" for p in PARTS] + \
           ["peak_rss_mb_max", "peak_rss_mb_host", "cgroup_peak_mb_max", "maps_mb_max", "deltas_mb_max", "filters_mb",
            "mem_limit_mb", "wall_s", "loadavg", "busy_cores", "quota_cores", "used_cores", "others_cores", "starved"]
    write_csv(os.path.join(out, "runs.csv"), runs, cols)
    speedup(runs, out, meta)
    memory(runs, out, meta)
    grouping(runs, out, "batch", "batch_grouping", "6 Pi 3 devices x 4 cores (24 tiles, one rank per device)")
    grouping(runs, out, "comm", "comm_bound", "2 comm-bound devices x 1 core (1x2 tiles)")
    time_split(runs, out)
    summary(runs, out, meta)
    print(f"plot.py: {len(runs)} runs -> {out}/*.csv, *.png")


if __name__ == "__main__":
    main()
