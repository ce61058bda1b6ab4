#!/usr/bin/env bash
# W1 on 2 MPI ranks x 1 thread (grids 1x2 and 2x1) against 1 rank and PyTorch with 2
# threads, back to back in one run. Prints one JSON line per run and the ratios.
# Also runs two independent 1-rank processes at once: 2 x (1 rank alone) / (slower of the
# two) is what this machine's two cores give when nothing is shared, the ceiling for 2 ranks.
# Usage: bench/w1_ranks.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-5}
cfg=cfgs/yolov2-16.cfg
[ -x build/tiletrain ] || scripts/setup.sh >/dev/null
one=$(build/tiletrain bench --cfg $cfg --steps "$steps" --warmup 2 --json | tail -n1)
r12=$(scripts/mpirun.sh 2 bench --cfg $cfg --grid 1x2 --steps "$steps" --warmup 2 --json | tail -n1)
r21=$(scripts/mpirun.sh 2 bench --cfg $cfg --grid 2x1 --steps "$steps" --warmup 2 --json | tail -n1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/tiletrain bench --cfg $cfg --steps "$steps" --warmup 2 --json | tail -n1 >"$tmp/a" &
build/tiletrain bench --cfg $cfg --steps "$steps" --warmup 2 --json | tail -n1 >"$tmp/b"
wait
pair=$(python3 -c 'import json,sys; print(json.dumps({"step_s": max(json.load(open(f))["step_s"] for f in sys.argv[1:])}))' "$tmp/a" "$tmp/b")
pt=$(/usr/bin/python3 bench/peers/pytorch_w1.py --threads 2 --steps "$steps" --warmup 2 | tail -n1)
printf '1 rank     %s\n1x2 ranks  %s\n2x1 ranks  %s\npytorch-2t %s\n' "$one" "$r12" "$r21" "$pt"
python3 - "$one" "$r12" "$r21" "$pt" "$pair" <<'PY'
import json, sys
one, r12, r21, pt, pair = (json.loads(a) for a in sys.argv[1:])
print(f"two independent 1-rank runs at once: slower {pair['step_s']:.3f} s; ceiling for 2 ranks "
      f"{2 * one['step_s'] / pair['step_s']:.2f}x")
for name, r in (("1x2", r12), ("2x1", r21)):
    print(f"{name}: step {r['step_s']:.3f} s = {r['step_s']/pt['step_s']:.2f}x PyTorch 2 threads ({pt['step_s']:.3f} s), "
          f"{one['step_s']/r['step_s']:.2f}x faster than 1 rank ({one['step_s']:.3f} s); "
          f"halo {r['halo_s']:.3f} s, weights {r['weights_s']:.3f} s, io {r['io_s']:.3f} s, peak RSS per rank {r['peak_rss_mb_max']:.0f} MB")
PY
