#!/usr/bin/python3
"""Loss, learning rate, throughput and accuracy/mAP curves of training runs, from train --metrics files.

    scripts/plot_metrics.py run.jsonl [more.jsonl ...] --out loss.png [--log]

Each file has one JSON object per line: logged steps ("step", "loss", "lr", loss parts
"loss_*", "batch" and "step_s" or, in older files, "images_per_s") and evaluations
("accuracy" or "map"). One panel for the loss and its parts against the step, one for the
learning rate, one for the throughput (images/s) when a file has it, one for accuracy/mAP
when a file has them. The PNG is written to a temporary file and renamed.
"""
import argparse
import json
import os
import sys


def read(path):
    rows = []
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        sys.exit(f"plot_metrics: cannot read {path}: {e.strerror}")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"plot_metrics: {path}:{n}: not JSON ({e.msg})")
        if not isinstance(row, dict) or "step" not in row:
            sys.exit(f"plot_metrics: {path}:{n}: an object with a \"step\" is expected")
        if "loss" not in row and "accuracy" not in row and "map" not in row:
            sys.exit(f"plot_metrics: {path}:{n}: neither \"loss\" nor \"accuracy\"/\"map\"")
        rows.append(row)
    if not rows:
        sys.exit(f"plot_metrics: {path}: no metrics")
    return rows


def throughput(row):
    """Images/s at a logged step: batch / seconds per step over the window since the line
    before; older files have only the mean since the run started ("images_per_s")."""
    if row.get("step_s", 0) > 0 and "batch" in row:
        return row["batch"] / row["step_s"]
    return row.get("images_per_s", float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--log", action="store_true", help="loss on a log scale")
    a = ap.parse_args()
    runs = [(os.path.basename(p), read(p)) for p in a.files]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    has_eval = any("accuracy" in r or "map" in r for _, rows in runs for r in rows)
    has_speed = any("step_s" in r or "images_per_s" in r for _, rows in runs for r in rows)
    panels = 2 + has_speed + has_eval
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.2 + 2.15 * panels), sharex=True)
    speed_ax = axes[2] if has_speed else None
    eval_ax = axes[-1] if has_eval else None
    for name, rows in runs:
        logged = [r for r in rows if "loss" in r]
        steps = [r["step"] for r in logged]
        axes[0].plot(steps, [r["loss"] for r in logged], label=f"{name} loss")
        for k in sorted({k for r in logged for k in r if k.startswith("loss_")}):
            axes[0].plot(steps, [r.get(k, float("nan")) for r in logged], "--", label=f"{name} {k[5:]}")
        axes[1].plot(steps, [r.get("lr", float("nan")) for r in logged], label=name)
        if speed_ax is not None:
            timed = [r for r in logged if "step_s" in r or "images_per_s" in r]
            if timed:
                windowed = all("step_s" in r for r in timed)
                speed_ax.plot([r["step"] for r in timed], [throughput(r) for r in timed], ".-",
                              label=name if windowed else f"{name} (mean since start)")
        if eval_ax is not None:
            ev = [r for r in rows if "accuracy" in r or "map" in r]
            if ev:
                eval_ax.plot([r["step"] for r in ev], [r.get("map", r.get("accuracy")) for r in ev], "o-",
                             label=f"{name} {'mAP@0.5' if any('map' in r for r in ev) else 'accuracy'}")
    axes[0].set_ylabel("loss per image")
    if a.log:
        axes[0].set_yscale("log")
    axes[1].set_ylabel("learning rate")
    if speed_ax is not None:
        speed_ax.set_ylabel("images/s")
        speed_ax.set_ylim(bottom=0)
    if eval_ax is not None:
        eval_ax.set_ylabel("accuracy / mAP")
        eval_ax.set_ylim(0, 1)
    axes[-1].set_xlabel("step")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = a.out + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, a.out)
    names = ["loss", "learning rate"] + ["images/s"] * has_speed + ["accuracy/mAP"] * has_eval
    print(f"wrote {a.out} (panels: {', '.join(names)})")


if __name__ == "__main__":
    main()
