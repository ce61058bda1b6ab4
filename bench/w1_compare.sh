#!/usr/bin/env bash
# Runs tiletrain (default kernels, then own kernels only), PyTorch and Darknet on W1 back
# to back in one sitting and prints one JSON line per system, then the ratios. The
# machine is shared: only the ratios taken in the same run mean anything.
# Usage: bench/w1_compare.sh [THREADS] [STEPS]   (Darknet is single-threaded; skipped for THREADS>1)
# Extra environment is passed through, e.g. ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}
steps=${2:-5}
cfg=cfgs/yolov2-16.cfg
[ -x build/tiletrain ] || scripts/setup.sh >/dev/null
tt=$(build/tiletrain bench --cfg $cfg --threads "$threads" --steps "$steps" --warmup 2 --json | tail -n1)
own=$(build/tiletrain bench --cfg $cfg --threads "$threads" --steps "$steps" --warmup 2 --json --kernels own | tail -n1)
pt=$(/usr/bin/python3 bench/peers/pytorch_w1.py --threads "$threads" --steps "$steps" --warmup 2 | tail -n1)
echo "tiletrain     $tt"
echo "tiletrain-own $own"
echo "pytorch       $pt"
dn=""
if [ "$threads" = 1 ]; then
  dn=$(bench/peers/darknet_w1.sh --steps 2 --warmup 1 2>/dev/null | tail -n1)
  echo "darknet       $dn"
fi
python3 - "$tt" "$own" "$pt" "$dn" <<'PY'
import json, sys
tt, own, pt = (json.loads(a) for a in sys.argv[1:4])
print(f"cpu {tt['isa']}, channel block {tt['channel_block']}; pytorch BLAS: {pt.get('blas')}")
print(f"tiletrain/pytorch step time: {tt['step_s']/pt['step_s']:.3f}  "
      f"(tiletrain {tt['step_s']:.3f} s, pytorch {pt['step_s']:.3f} s)")
print(f"own kernels/default step time: {own['step_s']/tt['step_s']:.3f}  (own {own['step_s']:.3f} s)")
print(f"peak RSS: tiletrain {tt['peak_rss_mb']:.0f} MB (own kernels {own['peak_rss_mb']:.0f} MB), "
      f"pytorch {pt['peak_rss_mb']:.0f} MB ({pt.get('rss_above_interpreter_mb', 0):.0f} MB above the interpreter)")
if sys.argv[4]:
    dn = json.loads(sys.argv[4])
    print(f"darknet/tiletrain step time: {dn['step_s']/tt['step_s']:.1f}x, darknet/own kernels: "
          f"{dn['step_s']/own['step_s']:.1f}x  (darknet {dn['step_s']:.2f} s, peak RSS {dn['peak_rss_mb']:.0f} MB)")
PY
