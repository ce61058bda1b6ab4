#!/usr/bin/python3
"""Each layer's mean time per step and pass, per rank, from bench --layers --json.

    tiletrain bench --cfg net.cfg --layers --json > bench.json
    scripts/plot_layers.py bench.json --out layers.png

The file holds bench's JSON line (its last non-empty line is read, so a log that ends
with it will do). One panel per rank; per layer a forward bar (the convolution or
max-pool, then batch-norm and activation) and a backward bar (batch-norm and activation,
backward-data, backward-weights), in ms per step. Layers from the cut on run on rank 0
only. The PNG is written to a temporary file and renamed.
"""
import argparse
import json
import os
import sys

# (key in layer_times, legend, colour): forward in blues, backward in oranges.
PASSES = [
    ("fwd_s", "forward: convolution / pooling", "#4c72b0"),
    ("fwd_pointwise_s", "forward: batch-norm + activation", "#8fb0d9"),
    ("bwd_pointwise_s", "backward: batch-norm + activation (+ recompute)", "#f2b27e"),
    ("bwd_data_s", "backward: data (input delta)", "#dd8452"),
    ("bwd_weights_s", "backward: weights", "#a3512a"),
]
SHORT = {"convolutional": "conv", "connected": "fc"}


def read(path):
    try:
        lines = [l for l in open(path).read().splitlines() if l.strip()]
    except OSError as e:
        sys.exit(f"plot_layers: cannot read {path}: {e.strerror}")
    if not lines:
        sys.exit(f"plot_layers: {path}: empty (expected the output of tiletrain bench --layers --json)")
    try:
        j = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        sys.exit(f"plot_layers: {path}:{len(lines)}: not JSON ({e.msg})")
    ranks = j.get("layer_times") if isinstance(j, dict) else None
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, list) and r for r in ranks):
        sys.exit(f"plot_layers: {path}: no \"layer_times\" (run tiletrain bench with --layers --json)")
    for r, layers in enumerate(ranks):
        for n, e in enumerate(layers):
            bad = [k for k, _, _ in PASSES if not isinstance(e, dict) or not isinstance(e.get(k), (int, float))]
            if bad:
                sys.exit(f"plot_layers: {path}: rank {r}, layer {n}: no number \"{bad[0]}\"")
    return j, ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    j, ranks = read(a.bench_json)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(ranks[0])
    names = [f"{e.get('layer', i)} {SHORT.get(e.get('type', ''), e.get('type', ''))}".strip()
             for i, e in enumerate(ranks[0])]
    fig, axes = plt.subplots(len(ranks), 1, figsize=(max(8, 0.45 * n + 3), 1.2 + 2.6 * len(ranks)), sharex=True,
                             sharey=True, squeeze=False)
    w = 0.38
    has_cut = isinstance(j.get("cut"), int) and 0 < j["cut"] < n
    for r, (ax, layers) in enumerate(zip(axes[:, 0], ranks)):
        for side, keys in ((-1, PASSES[:2]), (1, PASSES[2:])):  # forward left of the layer, backward right
            bottom = [0.0] * n
            for key, label, colour in keys:
                ms = [1e3 * e[key] for e in layers]
                ax.bar([i + side * w / 2 for i in range(n)], ms, w, bottom=bottom, color=colour,
                       label=label if r == 0 else None)
                bottom = [b + m for b, m in zip(bottom, ms)]
        if has_cut:
            ax.axvline(j["cut"] - 0.5, color="black", linestyle="--", linewidth=0.8)
        host = j.get("hosts", [])
        ax.set_ylabel(f"rank {r}" + (f" ({host[r]})" if r < len(host) else "") + "\nms per step")
        ax.grid(axis="y", alpha=0.3)
    ax = axes[-1, 0]
    ax.set_xticks(range(n))
    ax.set_xticklabels(names, rotation=60 if n > 12 else 0, ha="right" if n > 12 else "center", fontsize=8)
    ax.set_xlabel("layer (left bar forward, right bar backward" +
                  ("; right of the dashed line: after the cut, on rank 0 only)" if has_cut else ")"))
    title = os.path.basename(a.bench_json)
    if j.get("cfg"):
        title = (f"{os.path.basename(str(j['cfg']))}: grid {j.get('grid', '?')}, {len(ranks)} rank(s), batch "
                 f"{j.get('batch', '?')}, mean of {j.get('steps', '?')} step(s)")
    axes[0, 0].set_title(title, fontsize=10)
    fig.legend(loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if len(ranks) > 1 else 0.1, 1, 1))
    tmp = a.out + ".tmp.png"
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, a.out)
    except OSError as e:
        sys.exit(f"plot_layers: cannot write {a.out}: {e.strerror}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
