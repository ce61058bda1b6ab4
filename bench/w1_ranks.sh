#!/usr/bin/env bash
# W1 on 2 MPI ranks x 1 thread (grids 1x2 and 2x1) against 1 rank and PyTorch with 2
# threads, back to back, ROUNDS times in turn. Prints one JSON line per run, the ratios of
# each round and their medians.
# Each round also runs two independent 1-rank processes at once: 2 x (1 rank alone) /
# (slower of the two) is what this machine's two cores give when nothing is shared, the
# ceiling for 2 ranks in that round.
# Usage: bench/w1_ranks.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
# An AVX2 cap on an AVX-512 machine holds for OpenBLAS too (tiletrain's and PyTorch's).
[[ "${ONEDNN_MAX_CPU_ISA:-}" =~ ^[Aa][Vv][Xx]2 ]] && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
steps=${1:-5}
rounds=${2:-1}
cfg=cfgs/yolov2-16.cfg
# The PyTorch peer needs python3-torch, which scripts/setup.sh installs only when asked.
if [ ! -x build/tiletrain ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  TILETRAIN_WITH_TORCH=1 scripts/setup.sh tiletrain >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench() { build/tiletrain bench --cfg $cfg --threads 1 --steps "$steps" --warmup 2 --json "$@" | tail -n1; }
for r in $(seq "$rounds"); do
  bench >>"$tmp/one"
  scripts/mpirun.sh 2 bench --cfg $cfg --threads 1 --grid 1x2 --steps "$steps" --warmup 2 --json | tail -n1 >>"$tmp/r12"
  scripts/mpirun.sh 2 bench --cfg $cfg --threads 1 --grid 2x1 --steps "$steps" --warmup 2 --json | tail -n1 >>"$tmp/r21"
  bench >"$tmp/a" &
  bench >"$tmp/b"
  wait
  python3 -c 'import json,sys; print(json.dumps({"step_s": max(json.load(open(f))["step_s"] for f in sys.argv[1:])}))' \
    "$tmp/a" "$tmp/b" >>"$tmp/pair"
  /usr/bin/python3 bench/peers/pytorch_w1.py --threads 2 --steps "$steps" --warmup 2 | tail -n1 >>"$tmp/pt"
  echo "round $r done" >&2
done
for f in one r12 r21 pt; do sed "s/^/$f /" "$tmp/$f"; done
python3 - "$tmp" <<'PY'
import json, statistics, sys
d = sys.argv[1]
load = lambda name: [json.loads(l) for l in open(f"{d}/{name}") if l.strip()]
one, r12, r21, pt, pair = (load(n) for n in ("one", "r12", "r21", "pt", "pair"))
ceil, sp = [], {"1x2": [], "2x1": []}
for i in range(len(one)):
    o = one[i]["step_s"]
    ceil.append(2 * o / pair[i]["step_s"])
    line = f"round {i + 1}: 1 rank {o:.3f} s; ceiling {ceil[-1]:.2f}x"
    for name, runs in (("1x2", r12), ("2x1", r21)):
        r = runs[i]
        sp[name].append(o / r["step_s"])
        line += (f"; {name} {r['step_s']:.3f} s = {sp[name][-1]:.2f}x ({r['step_s'] / pt[i]['step_s']:.2f}x PyTorch "
                 f"2 threads), halo {r['halo_s']:.3f}, weights {r['weights_s']:.3f}, update {r['update_s']:.3f}")
    print(line)
med = statistics.median
print(f"median over {len(one)} rounds: 1x2 {med(sp['1x2']):.2f}x, 2x1 {med(sp['2x1']):.2f}x faster than 1 rank "
      f"(ceiling {med(ceil):.2f}x); PyTorch 2 threads {med(p['step_s'] for p in pt):.3f} s; "
      f"peak RSS per rank {r21[0]['peak_rss_mb_max']:.0f} MB")
PY
