#!/usr/bin/env bash
# Gradient buckets sent during backward, against the gradient sum after it: the same W1
# step on an emulated cluster (cluster/edge.sh, one core per device) with two binaries, OLD
# (no buckets) and NEW, alternating, both with --overlap on (so that the halos' overlap is
# the same on both sides and only the gradient exchange differs). Prints the medians of the
# step and of its parts in device seconds (measured / D), and NEW / OLD.
#   bench/grad_overlap.sh OLD_BINARY NEW_BINARY [ROUNDS] [PROFILE] [DEVICES] [BENCH-ARGS...]
#   (root; default 5 rounds, pi3, 2 devices, W1 at batch 1 with --groups none)
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-5} profile=${4:-pi3} devices=${5:-2}
shift $(($# < 5 ? $# : 5))
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(--cfg cfgs/yolov2-16.cfg --groups none --batch 1)
export EDGE_CLUSTER=benchgo
trap 'cluster/edge.sh down >/dev/null 2>&1' EXIT
cluster/edge.sh up --devices "$devices" --cores 1 --profile "$profile" >/dev/null
# shellcheck disable=SC1091
dilation=$(. "/run/tiletrain-edge/$EDGE_CLUSTER/state" && echo "$dilation")
tmp=$(mktemp -d)
cp "$old" "$tmp/old" && cp "$new" "$tmp/new"
for ((r = 0; r < rounds; r++)); do
  for side in old new; do
    TILETRAIN_BIN=$tmp/$side cluster/edge.sh run -- bench "${extra[@]}" --threads 1 --grid "1x$devices" --steps 3 --warmup 1 \
      --overlap on --json 2>/dev/null | tail -n 1 >>"$tmp/$side.jsonl"
  done
done
echo "$profile, $devices devices of one core, D = $dilation, $rounds rounds, bench ${extra[*]} --grid 1x$devices --overlap on"
/usr/bin/python3 - "$tmp" "$dilation" <<'PY'
import json, statistics, sys
tmp, D = sys.argv[1], float(sys.argv[2])
runs = {s: [json.loads(l) for l in open(f"{tmp}/{s}.jsonl") if l.strip()] for s in ("old", "new")}
keys = ["step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "update_s"]
print("| part (device s, median) | buckets after backward (old) | buckets during backward (new) | new / old |")
print("|---|---|---|---|")
for k in keys:
    o, n = (statistics.median(r[k] for r in runs[s]) / D for s in ("old", "new"))
    print(f"| {k[:-2]} | {o:.3f} | {n:.3f} | {n / o:.3f} |")
print("steps (device s): old " + " ".join(f"{r['step_s'] / D:.2f}" for r in runs["old"]) +
      "; new " + " ".join(f"{r['step_s'] / D:.2f}" for r in runs["new"]))
PY
rm -rf "$tmp"
