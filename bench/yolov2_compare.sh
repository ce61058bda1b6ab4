#!/usr/bin/env bash
# The whole YOLOv2 (Darknet's /usr/share/darknet/cfg/yolov2.cfg at 416x416, batch 1), one
# training step: tiletrain, PyTorch (the same graph, the region loss as an MSE head:
# bench/peers/pytorch_w1.py --cfg) and Darknet (its own library), back to back in one
# sitting, 1 thread each, or THREADS for tiletrain and PyTorch (Debian's Darknet is built
# without OpenMP: its training runs on one core whatever the machine has). Only the ratios
# of one run mean anything on a shared machine.
# Usage: bench/yolov2_compare.sh [STEPS] [DARKNET_STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
# An AVX2 cap on an AVX-512 machine holds for OpenBLAS too (tiletrain's and PyTorch's).
[[ "${ONEDNN_MAX_CPU_ISA:-}" =~ ^[Aa][Vv][Xx]2 ]] && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
steps=${1:-3}
dsteps=${2:-1}
threads=${3:-1}
cfg=/usr/share/darknet/cfg/yolov2.cfg
# The PyTorch peer needs python3-torch, which scripts/setup.sh installs only when asked.
if [ ! -x build/tiletrain ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  TILETRAIN_WITH_TORCH=1 scripts/setup.sh tiletrain >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Darknet reads the cfg's batch and size: a copy at batch 1, 416x416.
sed -e 's/^batch=.*/batch=1/' -e 's/^subdivisions=.*/subdivisions=1/' -e 's/^width=.*/width=416/' \
  -e 's/^height=.*/height=416/' "$cfg" > "$tmp/yolov2.cfg"
tt=$(build/tiletrain bench --cfg "$tmp/yolov2.cfg" --threads "$threads" --steps "$steps" --warmup 1 --json | tail -n1)
pt=$(/usr/bin/python3 bench/peers/pytorch_w1.py --cfg "$tmp/yolov2.cfg" --size 416 --threads "$threads" --steps "$steps" \
  --warmup 1 | tail -n1)
dn=$(bench/peers/darknet_w1.sh --cfg "$tmp/yolov2.cfg" --steps "$dsteps" --warmup 0 2>/dev/null | tail -n1)
echo "tiletrain $tt"
echo "pytorch   $pt"
echo "darknet   $dn"
python3 - "$tt" "$pt" "$dn" <<'PY'
import json, sys
tt, pt, dn = (json.loads(a) for a in sys.argv[1:4])
print(f"yolov2 416x416 batch 1, cpu {tt['isa']}, {tt['threads']} thread(s) for tiletrain and pytorch, darknet 1: tiletrain {tt['step_s']:.3f} s (fwd {tt['fwd_s']:.3f}, bwd {tt['bwd_s']:.3f}, "
      f"update {tt['update_s']:.3f}), peak RSS {tt['peak_rss_mb']:.0f} MB")
print(f"  pytorch {pt['step_s']:.3f} s, peak RSS {pt['peak_rss_mb']:.0f} MB: tiletrain/pytorch {tt['step_s']/pt['step_s']:.3f}")
print(f"  darknet {dn['step_s']:.3f} s, peak RSS {dn.get('peak_rss_mb', 0):.0f} MB: darknet/tiletrain {dn['step_s']/tt['step_s']:.1f}x")
PY
