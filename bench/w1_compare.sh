#!/usr/bin/env bash
# Runs tiletrain (default kernels, then own kernels only) and PyTorch on W1 back to back,
# ROUNDS times in turn, then Darknet once, and prints one JSON line per run, then the
# ratios: per round, their median, and the ratio of the fastest steps seen over all rounds.
# The machine is shared with other VMs whose load comes and goes within a minute: only
# ratios taken in the same round mean anything, and taking turns keeps a slow spell from
# falling on one system only.
# Usage: bench/w1_compare.sh [THREADS] [STEPS] [ROUNDS]   (Darknet is single-threaded; skipped for THREADS>1)
# Extra environment is passed through, e.g. ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# An AVX2 cap on an AVX-512 machine holds for OpenBLAS too (tiletrain's and PyTorch's).
[[ "${ONEDNN_MAX_CPU_ISA:-}" =~ ^[Aa][Vv][Xx]2 ]] && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
threads=${1:-1}
steps=${2:-5}
rounds=${3:-1}
cfg=cfgs/yolov2-16.cfg
# The PyTorch peer needs python3-torch, which scripts/setup.sh installs only when asked.
if [ ! -x build/tiletrain ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  TILETRAIN_WITH_TORCH=1 scripts/setup.sh tiletrain >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  build/tiletrain bench --cfg $cfg --threads "$threads" --steps "$steps" --warmup 2 --json | tail -n1 >>"$tmp/tt"
  build/tiletrain bench --cfg $cfg --threads "$threads" --steps "$steps" --warmup 2 --json --kernels own |
    tail -n1 >>"$tmp/own"
  /usr/bin/python3 bench/peers/pytorch_w1.py --threads "$threads" --steps "$steps" --warmup 2 | tail -n1 >>"$tmp/pt"
  echo "round $r: tiletrain $(tail -n1 "$tmp/tt" | cut -c1-60)..." >&2
done
echo -n >"$tmp/dn"
[ "$threads" = 1 ] && bench/peers/darknet_w1.sh --steps 2 --warmup 1 2>/dev/null | tail -n1 >"$tmp/dn"
sed 's/^/tiletrain     /' "$tmp/tt"
sed 's/^/tiletrain-own /' "$tmp/own"
sed 's/^/pytorch       /' "$tmp/pt"
sed 's/^/darknet       /' "$tmp/dn"
python3 - "$tmp" <<'PY'
import json, statistics, sys
d = sys.argv[1]
load = lambda name: [json.loads(l) for l in open(f"{d}/{name}") if l.strip()]
tt, own, pt, dn = load("tt"), load("own"), load("pt"), load("dn")
print(f"cpu {tt[0]['isa']}, channel block {tt[0]['channel_block']}; pytorch BLAS: {pt[0].get('blas')}")
ratio, own_ratio = [], []
for i, (a, o, p) in enumerate(zip(tt, own, pt)):
    ratio.append(a["step_s"] / p["step_s"])
    own_ratio.append(o["step_s"] / a["step_s"])
    print(f"round {i + 1}: tiletrain {a['step_s']:.3f} s, own kernels {o['step_s']:.3f} s, pytorch {p['step_s']:.3f} s: "
          f"tiletrain/pytorch {ratio[-1]:.3f}, own/default {own_ratio[-1]:.3f}")
fast = lambda runs: min(r["min_step_s"] for r in runs)
print(f"tiletrain/pytorch step time: median of rounds {statistics.median(ratio):.3f} "
      f"(range {min(ratio):.3f}-{max(ratio):.3f}); fastest steps {fast(tt):.3f} / {fast(pt):.3f} s = {fast(tt) / fast(pt):.3f}")
print(f"own kernels/default step time: median of rounds {statistics.median(own_ratio):.3f}; "
      f"fastest steps {fast(own) / fast(tt):.3f}")
print(f"peak RSS: tiletrain {tt[0]['peak_rss_mb']:.0f} MB (own kernels {own[0]['peak_rss_mb']:.0f} MB), "
      f"pytorch {pt[0]['peak_rss_mb']:.0f} MB ({pt[0].get('rss_above_interpreter_mb', 0):.0f} MB above the interpreter)")
if dn:
    dn, a, o = dn[0], tt[-1], own[-1]
    print(f"darknet/tiletrain step time (last round): {dn['step_s']/a['step_s']:.1f}x, darknet/own kernels: "
          f"{dn['step_s']/o['step_s']:.1f}x  (darknet {dn['step_s']:.2f} s, peak RSS {dn['peak_rss_mb']:.0f} MB)")
PY
