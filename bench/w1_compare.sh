#!/usr/bin/env bash
# Runs tiletrain, PyTorch and Darknet on W1 back to back in one sitting and prints one
# JSON line per system, then the ratios. The machine is shared: only the ratios taken
# in the same run mean anything.
# Usage: bench/w1_compare.sh [THREADS] [STEPS]   (Darknet is single-threaded; skipped for THREADS>1)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}
steps=${2:-5}
cfg=cfgs/yolov2-16.cfg
[ -x build/tiletrain ] || scripts/setup.sh >/dev/null
tt=$(build/tiletrain bench --cfg $cfg --threads "$threads" --steps "$steps" --warmup 2 --json | tail -n1)
pt=$(/usr/bin/python3 bench/peers/pytorch_w1.py --threads "$threads" --steps "$steps" --warmup 2 | tail -n1)
echo "tiletrain $tt"
echo "pytorch   $pt"
dn=""
if [ "$threads" = 1 ]; then
  dn=$(bench/peers/darknet_w1.sh --steps 2 --warmup 1 2>/dev/null | tail -n1)
  echo "darknet   $dn"
fi
python3 - "$tt" "$pt" "$dn" <<'PY'
import json, sys
tt, pt = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"tiletrain/pytorch step time: {tt['step_s']/pt['step_s']:.3f}  "
      f"(tiletrain {tt['step_s']:.3f} s, pytorch {pt['step_s']:.3f} s)")
print(f"peak RSS: tiletrain {tt['peak_rss_mb']:.0f} MB, pytorch {pt['peak_rss_mb']:.0f} MB "
      f"({pt.get('rss_above_interpreter_mb', 0):.0f} MB above the interpreter)")
if sys.argv[3]:
    dn = json.loads(sys.argv[3])
    print(f"darknet/tiletrain step time: {dn['step_s']/tt['step_s']:.1f}x  (darknet {dn['step_s']:.2f} s, "
          f"peak RSS {dn['peak_rss_mb']:.0f} MB)")
PY
