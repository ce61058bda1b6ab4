#!/usr/bin/env bash
# `tiletrain verify` on every cfg in cfgs/, each on a few partitions (grids, groupings, backward
# features, uneven splits) at small sizes and few steps, plus the README's example. Prints each
# run's report and a summary; exits 1 if any run fails. Results: bench/verify_sweep.md.
# Usage: bench/verify_cfgs.sh [TILETRAIN_BINARY]   (default build/tiletrain)
set -u
cd "$(dirname "$0")/.."
bin=${1:-build/tiletrain}
runs=(
  "cfgs/small-classifier.cfg --grid 2x3 --groups none --size 97x131 --batch 3 --steps 3"  # the README's example
  "cfgs/small-classifier.cfg --grid 2x2 --groups all --batch 4 --steps 3"
  "cfgs/small-classifier.cfg --grid 3x1 --groups 0,2,4 --backward-features exchange --batch 2 --steps 3"
  "cfgs/fashion-mnist.cfg --grid 2x2 --groups none --batch 8 --steps 3"
  "cfgs/fashion-mnist.cfg --grid 2x3 --groups all --batch 4 --steps 3"
  "cfgs/fashion-mnist.cfg --grid 3x3 --groups 0,2 --row-weights 2,1,1 --batch 4 --steps 3 --bn frozen"
  "cfgs/yolov2-16.cfg --grid 2x2 --groups 0,4,8,12 --size 96x96 --batch 2 --steps 2"
  "cfgs/yolov2-16.cfg --grid 1x2 --groups none --size 96x128 --steps 2"
  "cfgs/yolov2-16.cfg --grid 3x2 --groups all --size 128x96 --steps 2 --backward-features exchange"
  "cfgs/yolov2-tiny-shapes.cfg --grid 2x2 --groups none --batch 2 --steps 2"
  "cfgs/yolov2-tiny-shapes.cfg --grid 3x3 --groups all --batch 2 --steps 2"
  "cfgs/yolov2-tiny-shapes.cfg --grid 2x1 --groups 0,4,8 --size 96x160 --batch 3 --steps 2 --overlap on"
  "cfgs/mobilenetv2.cfg --grid 2x2 --groups none --size 64x64 --batch 2 --steps 2"
  "cfgs/mobilenetv2.cfg --grid 3x3 --groups all --size 96x96 --batch 2 --steps 2 --backward-features exchange"
  "cfgs/mobilenetv2.cfg --grid 1x2 --groups 0,5,9,20 --size 64x80 --batch 2 --steps 2 --bn frozen"
)
pass=0 fail=0
start=$(date +%s.%N)
for r in "${runs[@]}"; do
  echo "== verify --cfg $r"
  # shellcheck disable=SC2086
  out=$("$bin" verify --cfg $r 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -E "^verify|outputs|input deltas|gradients|after a step|running statistics|^OK|^MISMATCH|rror"
  if [ $rc -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "   -> exit status $rc"; fi
done
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "summary: ${#runs[@]} runs, $pass passed, $fail failed, ${took} s"
[ $fail -eq 0 ]
