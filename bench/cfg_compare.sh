#!/usr/bin/env bash
# One training step of a whole Darknet cfg at SIZE x SIZE, batch 1: tiletrain, PyTorch (the
# same graph: bench/peers/pytorch_w1.py --cfg; a [region]/[yolo] head timed as an MSE loss,
# [softmax] as cross-entropy) and Darknet (its own library), back to back in one sitting,
# 1 thread each, or THREADS for tiletrain and PyTorch (Debian's Darknet is built without
# OpenMP: its training runs on one core whatever the machine has). DARKNET_STEPS 0 leaves
# Darknet out. Only the ratios of one run mean anything on a shared machine.
# Usage: bench/cfg_compare.sh CFG SIZE [STEPS] [DARKNET_STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
# An AVX2 cap on an AVX-512 machine holds for OpenBLAS too (tiletrain's and PyTorch's).
[[ "${ONEDNN_MAX_CPU_ISA:-}" =~ ^[Aa][Vv][Xx]2 ]] && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
cfg=${1:?usage: bench/cfg_compare.sh CFG SIZE [STEPS] [DARKNET_STEPS] [THREADS]}
size=${2:?usage: bench/cfg_compare.sh CFG SIZE [STEPS] [DARKNET_STEPS] [THREADS]}
steps=${3:-3}
dsteps=${4:-1}
threads=${5:-1}
# The PyTorch peer needs python3-torch, which scripts/setup.sh installs only when asked.
if [ ! -x build/tiletrain ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  TILETRAIN_WITH_TORCH=1 scripts/setup.sh tiletrain >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Darknet reads the cfg's batch and size: a copy at batch 1, SIZE x SIZE.
name=$(basename "$cfg")
sed -e 's/^batch=.*/batch=1/' -e 's/^subdivisions=.*/subdivisions=1/' -e "s/^width=.*/width=$size/" \
  -e "s/^height=.*/height=$size/" "$cfg" > "$tmp/$name"
tt=$(build/tiletrain bench --cfg "$tmp/$name" --threads "$threads" --steps "$steps" --warmup 1 --json | tail -n1)
pt=$(/usr/bin/python3 bench/peers/pytorch_w1.py --cfg "$tmp/$name" --size "$size" --threads "$threads" \
  --steps "$steps" --warmup 1 | tail -n1)
dn='{}'
[ "$dsteps" -gt 0 ] && dn=$(bench/peers/darknet_w1.sh --cfg "$tmp/$name" --steps "$dsteps" --warmup 0 2>/dev/null | tail -n1)
echo "tiletrain $tt"
echo "pytorch   $pt"
echo "darknet   $dn"
python3 - "$name" "$size" "$tt" "$pt" "$dn" <<'PY'
import json, sys
name, size = sys.argv[1], sys.argv[2]
tt, pt, dn = (json.loads(a) for a in sys.argv[3:6])
print(f"{name} {size}x{size} batch 1, cpu {tt['isa']}, {tt['threads']} thread(s) for tiletrain and pytorch, darknet 1: "
      f"tiletrain {tt['step_s']:.3f} s (fwd {tt['fwd_s']:.3f}, bwd {tt['bwd_s']:.3f}, update {tt['update_s']:.3f}), "
      f"peak RSS {tt['peak_rss_mb']:.0f} MB")
print(f"  pytorch {pt['step_s']:.3f} s, peak RSS {pt['peak_rss_mb']:.0f} MB: tiletrain/pytorch {tt['step_s']/pt['step_s']:.3f}")
if dn:
    print(f"  darknet {dn['step_s']:.3f} s, peak RSS {dn.get('peak_rss_mb', 0):.0f} MB: darknet/tiletrain {dn['step_s']/tt['step_s']:.1f}x")
PY
