#!/usr/bin/env bash
# Winograd F(2x2,3x3) after YOLOv2's cut, batch 1: its 16 products per layer
# (bench/kernels/winograd_probe.c) for the six 3x3 layers on 13x13 maps, then the direct
# convolutions' forward and backward-data times of those layers from `tiletrain bench
# --layers`, same sitting, THREADS threads (default 1). The products alone must come in
# well under the direct times for Winograd to pay (it also needs its transforms and a
# transformed copy of the weights at every update).
# Usage: bench/kernels/winograd_probe.sh [THREADS] [REPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-1}
reps=${2:-5}
[ -x build/tiletrain ] || scripts/setup.sh >/dev/null
arch=$(gcc -print-multiarch)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The OpenMP build of OpenBLAS, as the engine links it: it takes OMP_NUM_THREADS and
# ignores OPENBLAS_NUM_THREADS.
gcc -O3 -march=native -I"/usr/include/$arch/openblas-openmp" bench/kernels/winograd_probe.c \
  "/usr/lib/$arch/openblas-openmp/libopenblas.so" -Wl,-rpath,"/usr/lib/$arch/openblas-openmp" -o "$tmp/probe"
export OMP_NUM_THREADS=$threads
for shape in "1024 512" "1024 1024" "1024 1280"; do "$tmp/probe" $shape "$reps"; done
sed -e 's/^batch=.*/batch=1/' -e 's/^subdivisions=.*/subdivisions=1/' -e 's/^width=.*/width=416/' \
  -e 's/^height=.*/height=416/' /usr/share/darknet/cfg/yolov2.cfg > "$tmp/yolov2.cfg"
echo "direct (tiletrain bench --layers, ms per step: layer, forward, backward-data):"
build/tiletrain bench --cfg "$tmp/yolov2.cfg" --threads "$threads" --steps 3 --warmup 1 --layers 2>&1 |
  awk '$1 ~ /^(18|20|22|23|24|29)$/ && $2 == "convolutional" { print "  layer " $1 ": " $3 " / " $6 }'
