#!/usr/bin/env bash
# A whole network on an emulated cluster of Pi 4s (cluster/edge.sh, profile pi4: 4 cores,
# 1 Gbit/s): one device against 4, at batch 1 and 4, tiled (2x2, the layers after the cut on
# rank 0, or split by filters over the 4: --tail filters) and data parallel (--replicas 4, one micro-batch per device; also with the
# gradients sent during backward, --overlap on). One process per
# device with --threads 4. Prints the medians of the step (device seconds: measured / D), the
# speed-up over one device at the same batch, and the largest rank's peak RSS.
#   bench/whole_network.sh [ROUNDS] [CFG] [SIZE]
#   (root; default 2 rounds, Debian's yolov2-voc.cfg at 416x416)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2} cfg=${2:-/usr/share/darknet/cfg/yolov2-voc.cfg} size=${3:-416x416}
speed=$(awk -v h="$(nproc)" 'BEGIN { printf "%.4f", 0.9 * h / 16 }')  # 4 devices x 4 cores in 90 % of this machine
export EDGE_CLUSTER=benchwn
tmp=$(mktemp -d)
trap 'cluster/edge.sh down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
cluster/edge.sh up --devices 4 --profile pi4 --device-speed "$speed" >/dev/null
# shellcheck disable=SC1091
dilation=$(. "/run/tiletrain-edge/$EDGE_CLUSTER/state" && echo "$dilation")
run() {  # NAME DEVICES BENCH-ARGS...
  local name=$1 devices=$2
  shift 2
  cluster/edge.sh run --devices "$devices" -- bench --cfg "$cfg" --size "$size" --threads 4 --steps 3 --warmup 1 \
    --json "$@" 2>"$tmp/$name.err" | tail -n 1 >>"$tmp/$name.jsonl" || { cat "$tmp/$name.err" >&2; exit 1; }
}
for ((r = 0; r < rounds; r++)); do
  run one-b1 1 --batch 1
  run one-b4 1 --batch 4
  run tiled-b1 4 --batch 1 --grid 2x2 --tail root
  run tiled-b4 4 --batch 4 --grid 2x2 --tail root
  run filters-b1 4 --batch 1 --grid 2x2 --tail filters
  run filters-b4 4 --batch 4 --grid 2x2 --tail filters
  run filters-lm-b1 4 --batch 1 --grid 2x2 --tail filters --low-memory
  run filters-lm-b4 4 --batch 4 --grid 2x2 --tail filters --low-memory
  run replicas-b4 4 --batch 4 --subdivisions 4 --replicas 4
  run replicas-b4-overlap 4 --batch 4 --subdivisions 4 --replicas 4 --overlap on
done
echo "4 pi4 devices (1 Gbit/s), device speed $speed of a core here: D = $dilation; $rounds rounds"
echo "bench --cfg $cfg --size $size --threads 4 --steps 3 --warmup 1 (one process per device)"
/usr/bin/python3 - "$tmp" "$dilation" <<'PY'
import json, statistics, sys
tmp, D = sys.argv[1], float(sys.argv[2])
def load(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl") if l.strip()]
rows = [("one device", "one-b1", "one-b4"), ("4 devices, tiled 2x2", "tiled-b1", "tiled-b4"),
        ("4 devices, tiled 2x2, filter blocks after the cut (--tail filters)", "filters-b1", "filters-b4"),
        ("4 devices, the same with --low-memory", "filters-lm-b1", "filters-lm-b4"),
        ("4 devices, data parallel (--replicas 4)", None, "replicas-b4"),
        ("4 devices, data parallel, gradients during backward (--overlap on)", None, "replicas-b4-overlap")]
base = {b: statistics.median(r["step_s"] for r in load(f"one-b{b}")) / D for b in (1, 4)}
print("| run | batch 1: step (device s) | speed-up | peak MB | batch 4: step (device s) | speed-up | peak MB | weights s (b4) |")
print("|---|---|---|---|---|---|---|---|")
for label, b1, b4 in rows:
    cells = []
    for b, name in ((1, b1), (4, b4)):
        if name is None:
            cells += ["—", "—", "—"]
            continue
        runs = load(name)
        step = statistics.median(r["step_s"] for r in runs) / D
        cells += [f"{step:.2f}", f"{base[b] / step:.2f}x", f"{max(r['peak_rss_mb_max'] for r in runs):.0f}"]
    w = statistics.median(r["weights_s"] for r in load(b4)) / D
    print(f"| {label} | " + " | ".join(cells) + f" | {w:.2f} |")
for name in ("one-b1", "one-b4", "tiled-b1", "tiled-b4", "filters-b1", "filters-b4", "filters-lm-b1", "filters-lm-b4",
             "replicas-b4", "replicas-b4-overlap"):
    print(f"steps (device s) {name}: " + " ".join(f"{r['step_s'] / D:.2f}" for r in load(name)))
PY
