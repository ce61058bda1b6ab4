#!/usr/bin/env bash
# Several processes per device (the paper's one per core) against one per device: the W1
# step on an emulated cluster of Pi 3 devices (cluster/edge.sh), where every device's
# processes share its link. Runs
#   one per device   4 devices x 1 core, grid 2x2, one process each (the binary NEW);
#   OLD and NEW      4 devices x 4 cores, grid 4x4, four processes each (16), alternating;
# all at the same emulated core speed (so one time dilation D and link rate), W1 at batch 1
# with the paper's scheme (--backward-features exchange --overlap auto). Prints the medians
# of the step and of its parts in device seconds (measured / D), and each against the one
# per device run.
#   bench/device_chain.sh OLD_BINARY NEW_BINARY [ROUNDS] [BENCH-ARGS...]
#   (root; default 3 rounds; BENCH-ARGS default --cfg cfgs/yolov2-16.cfg --groups none --batch 1)
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(--cfg cfgs/yolov2-16.cfg --groups none --batch 1)
speed=$(awk -v h="$(nproc)" 'BEGIN { printf "%.4f", 0.9 * h / 16 }')  # 4 devices x 4 cores in 90 % of this machine
export EDGE_CLUSTER=benchdc
tmp=$(mktemp -d)
trap '"$tmp/cluster/edge.sh" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
cp "$old" "$tmp/old" && cp "$new" "$tmp/new"
# The host's one-core speed measured once (a copy of the cluster scripts prints it), so that
# both clusters get the same D and link rate (as bench/paper/run.sh does).
cp -r cluster "$tmp/cluster"
host_gflops=$(cluster/host_gflops.sh)
printf '#!/bin/sh\necho %s\n' "$host_gflops" >"$tmp/cluster/host_gflops.sh"
edge=$tmp/cluster/edge.sh
run() {  # SIDE GRID RANKS-PER-DEVICE
  TILETRAIN_BIN=$tmp/$1 "$edge" run --ranks-per-device "$3" -- bench "${extra[@]}" --threads 1 --grid "$2" \
    --backward-features exchange --overlap auto --steps 3 --warmup 1 --json 2>"$tmp/$1-$2.err" | tail -n 1 >>"$tmp/$1-$2.jsonl" ||
    { cat "$tmp/$1-$2.err" >&2; exit 1; }
}
for cores in 1 4; do
  "$edge" up --devices 4 --cores $cores --profile pi3 --device-speed "$speed" >/dev/null
  # shellcheck disable=SC1091
  dilation=$(. "/run/tiletrain-edge/$EDGE_CLUSTER/state" && echo "$dilation")
  echo "4 pi3 devices x $cores core(s): D = $dilation" >>"$tmp/dilation"
  for ((r = 0; r < rounds; r++)); do
    if [ $cores = 1 ]; then
      run new 2x2 1
    else
      run old 4x4 4
      run new 4x4 4
    fi
  done
  "$edge" down >/dev/null
done
cat "$tmp/dilation"
echo "$rounds rounds, bench ${extra[*]} --threads 1 --backward-features exchange --overlap auto"
/usr/bin/python3 - "$tmp" "$dilation" <<'PY'
import json, statistics, sys
tmp, D = sys.argv[1], float(sys.argv[2])
runs = {s: [json.loads(l) for l in open(f"{tmp}/{s}.jsonl") if l.strip()] for s in ("new-2x2", "old-4x4", "new-4x4")}
keys = ["step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "update_s"]
med = {s: {k: statistics.median(r[k] for r in runs[s]) / D for k in keys} for s in runs}
print("| part (device s, median) | 4 x 1 process | 4 x 4 processes, old | 4 x 4, new | old / 4 x 1 | new / 4 x 1 | new / old |")
print("|---|---|---|---|---|---|---|")
for k in keys:
    a, o, n = med["new-2x2"][k], med["old-4x4"][k], med["new-4x4"][k]
    print(f"| {k[:-2]} | {a:.3f} | {o:.3f} | {n:.3f} | {o / a:.2f} | {n / a:.2f} | {n / o:.2f} |")
for s in runs:
    print(f"steps (device s) {s}: " + " ".join(f"{r['step_s'] / D:.2f}" for r in runs[s]))
PY
