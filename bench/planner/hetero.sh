#!/usr/bin/env bash
# Two devices, one at half the other's speed (cluster/edge.sh: 0.6 and 0.3 of a core here
# unless --speeds says otherwise, 1 Gbit/s): W1 on a 1x2 grid split evenly against split by speed (--col-weights 2,1),
# and on the faster device alone, each run twice, interleaved (the faster of the two counts); then calibrate and
# `plan --optimize` on that cluster, which should pick an uneven split itself.
#
#   bench/planner/hetero.sh [--out DIR] [--speeds FAST,SLOW] [--batch B]   (root: namespaces, tc, cgroups)
#
# --speeds: fractions of a core here; 0.1,0.05 gives devices of a Raspberry Pi's order
# (10-25 GFLOP/s) on an AVX-512 core, where 0.6,0.3 makes the step link-bound.
# --batch: samples per step (default W1's 1); the weight exchange is paid once per step,
# so a larger batch leaves more of the step to the compute that the split balances.
#
# Output: DIR/hetero.jsonl (bench --json of every run) and DIR/hetero-optimize.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=$here/out
fast=0.6 slow=0.3 batch=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --speeds) IFS=, read -r fast slow <<<"$2"; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    *) echo "hetero.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# shellcheck source=edge_cluster.sh
. "$here/edge_cluster.sh"
edge_cluster hetero --devices 2 --link 1gbit --cores 1 --device-speed "$fast"
cluster/edge.sh speed dev1 "$slow" >&2
cfg=cfgs/yolov2-16.cfg
: >"$out/hetero.jsonl"
for round in 1 2; do
  for split in even "--col-weights 2,1" "faster device alone"; do
    run=(cluster/edge.sh run --timeout 600 -- bench --cfg $cfg --threads 1 --batch "$batch" --grid 1x2)
    case $split in
      even) ;;
      faster*) run=(cluster/edge.sh run --devices 1 --timeout 600 -- bench --cfg $cfg --threads 1 --batch "$batch" --grid 1x1) ;;
      *) read -r -a extra <<<"$split"; run+=("${extra[@]}") ;;
    esac
    "${run[@]}" --steps 3 --warmup 1 --json |
      tail -n1 | python3 -c "import json,sys; r=json.load(sys.stdin); r['split']='$split'; r['round']=$round; print(json.dumps(r))" \
        >>"$out/hetero.jsonl"
    tail -n1 "$out/hetero.jsonl" | python3 -c "import json,sys; r=json.load(sys.stdin); print('  %-20s step %.3f s' % (r['split'], r['step_s']))" >&2
  done
done
python3 - "$out/hetero.jsonl" <<'EOF' >&2
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
best = {s: min(r["step_s"] for r in runs if r["split"] == s) for s in {r["split"] for r in runs}}
even, weighted, alone = best["even"], best["--col-weights 2,1"], best["faster device alone"]
print(f"even split {even:.3f} s, weighted by speed {weighted:.3f} s: {even / weighted:.2f}x faster; "
      f"the faster device alone {alone:.3f} s")
EOF
cluster/edge.sh run -- calibrate --cfg $cfg --threads 1 --batch "$batch" --out "$out/hetero-cluster.json" >&2
build/tiletrain plan --cfg $cfg --batch "$batch" --cluster "$out/hetero-cluster.json" --optimize | tee "$out/hetero-optimize.txt" >&2
