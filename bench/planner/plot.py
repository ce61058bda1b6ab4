#!/usr/bin/python3
"""Predicted against measured, from bench/planner/accuracy.sh.

    /usr/bin/python3 bench/planner/plot.py OUT_DIR     (OUT_DIR holds runs.jsonl)

Writes OUT_DIR/runs.csv (one row per configuration: predicted and measured step time and
peak memory, relative errors), scatter.png (predicted vs measured step time and peak
memory, the +-10 % band drawn) and summary.md (how many are within 10 %, the worst ones).
"""
import csv
import json
import os
import subprocess
import sys


def main(out):
    runs = [json.loads(line) for line in open(os.path.join(out, "runs.jsonl")) if line.strip()]
    rows = []
    for r in runs:
        p, m = r["predicted"], r["measured"]
        rows.append({
            "setting": r["setting"], "ranks": r["ranks"], "args": r["args"],
            "step_pred_s": p["step_s"], "step_meas_s": m["step_s"],
            "step_err": p["step_s"] / m["step_s"] - 1,
            "mem_pred_mb": p["peak_rss_mb_max"], "mem_meas_mb": m["peak_rss_mb_max"],
            "mem_err": p["peak_rss_mb_max"] / m["peak_rss_mb_max"] - 1,
            **{f"{k}_pred": p[k] for k in ("fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s")},
            **{f"{k}_meas": m[k] for k in ("fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s")},
        })
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    n = len(rows)
    in_step = sum(abs(r["step_err"]) <= 0.10 for r in rows)
    in_mem = sum(abs(r["mem_err"]) <= 0.10 for r in rows)
    mean_step = sum(abs(r["step_err"]) for r in rows) / n
    mean_mem = sum(abs(r["mem_err"]) for r in rows) / n
    lines = [f"# Cost model against measurement ({n} configurations)", "",
             f"- step time: {in_step}/{n} within 10 % ({100 * in_step / n:.0f} %), mean |error| {100 * mean_step:.1f} %",
             f"- peak memory: {in_mem}/{n} within 10 % ({100 * in_mem / n:.0f} %), mean |error| {100 * mean_mem:.1f} %",
             "", "| setting | ranks | options | step predicted | measured | error | peak MB predicted | measured | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -abs(r["step_err"])):
        lines.append(f"| {r['setting']} | {r['ranks']} | `{r['args']}` | {r['step_pred_s']:.3f} | {r['step_meas_s']:.3f} | "
                     f"{100 * r['step_err']:+.1f} % | {r['mem_pred_mb']:.0f} | {r['mem_meas_mb']:.0f} | {100 * r['mem_err']:+.1f} % |")
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines[:4]))

    try:
        import matplotlib
    except ImportError:
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "python3-matplotlib"],
                       check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, key, unit in ((axes[0], "step", "s"), (axes[1], "mem", "MB")):
        settings = sorted({r["setting"] for r in rows})
        for s in settings:
            xs = [r[f"{key}_meas_{unit.lower()}" if key == "mem" else "step_meas_s"] for r in rows if r["setting"] == s]
            ys = [r[f"{key}_pred_{unit.lower()}" if key == "mem" else "step_pred_s"] for r in rows if r["setting"] == s]
            ax.scatter(xs, ys, label=s, s=18)
        allv = [r["step_meas_s" if key == "step" else "mem_meas_mb"] for r in rows] + \
               [r["step_pred_s" if key == "step" else "mem_pred_mb"] for r in rows]
        lo, hi = min(allv) * 0.8, max(allv) * 1.2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.6)
        ax.plot([lo, hi], [lo * 0.9, hi * 0.9], "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"predicted ({unit})")
        ax.set_title("step time" if key == "step" else "peak memory of the largest rank")
        ax.legend(fontsize=7)
    nets = sorted({os.path.basename(r.get("cfg", "yolov2-16.cfg")).removesuffix(".cfg") for r in runs})
    fig.suptitle(f"tiletrain plan --cluster against bench ({', '.join(nets)}); dotted: +-10 %")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scatter.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out"))
