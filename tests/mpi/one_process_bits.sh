#!/usr/bin/env bash
# Ranks end a run with the same bits as one process holding every tile: weights, and the
# momentum after the last step (the sum of the gradients: a weight update can round a
# gradient's last bits away).
#  - One process holding all four tiles (they add into one gradient, one after another:
#    Segment::tile_grads) against four ranks (separate gradients summed in tile order), on
#    each kernel path and at batches 1 (the own kernels add into the gradient directly) and
#    2 (through a scratch).
#  - Gradients sent in buckets while backward runs (--overlap on), three ranks with two
#    tiles each: with a tail after the cut (its gradient straight from the root), the own
#    kernels, two micro-batches a step (only the last one's backward sends), and a residual
#    net (joins).
#  - Several processes per device (--ranks-per-device): the sum runs as a chain over the
#    devices and the weights cross each device once (engine/device_chain.hpp); devices of
#    unequal process counts, several tiles per process, a tail, a residual net.
# Usage: one_process_bits.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
export OMP_NUM_THREADS=1

# same_bits LABEL RANKS "RANK-ONLY OPTIONS" TRAIN-ARGS...: 3 steps on RANKS ranks and on one process
same_bits() {
  local label=$1 np=$2 rank_opts
  read -r -a rank_opts <<< "$3"
  shift 3
  local args=(train "$@" --steps 3 --threads 1)
  rm -rf "$tmp/ranks" "$tmp/one"
  "${mpi[@]}" -np "$np" "$bin" "${args[@]}" "${rank_opts[@]}" --checkpoint "$tmp/ranks" --checkpoint-every 3 \
    --save-weights "$tmp/ranks.weights" > "$tmp/ranks.log" || { echo "FAIL: $label on $np ranks:"; cat "$tmp/ranks.log"; exit 1; }
  "$bin" "${args[@]}" --checkpoint "$tmp/one" --checkpoint-every 3 --save-weights "$tmp/one.weights" > "$tmp/one.log"
  cmp "$tmp/ranks.weights" "$tmp/one.weights" ||
    fail "$label: one process and $np ranks end with different weights"
  cmp "$tmp/ranks/step-00000003/momentum" "$tmp/one/step-00000003/momentum" ||
    fail "$label: one process and $np ranks end with different momentum"
  echo "same bits: $label"
}

for kernels in own onednn; do
  for batch in 1 2; do
    same_bits "--kernels $kernels --batch $batch" 4 "" --cfg "$src/cfgs/yolov2-16.cfg" --size 64x96 --batch "$batch" \
      --grid 2x2 --groups 0,4,8 --kernels "$kernels"
  done
done

sed 's/^subdivisions=1$/subdivisions=2/' "$src/cfgs/fashion-mnist.cfg" > "$tmp/two-micro.cfg"
grep -q '^subdivisions=2$' "$tmp/two-micro.cfg" || fail "could not make a cfg of two micro-batches"
buckets="--tiles-per-rank 2 --overlap on"
same_bits "buckets, yolov2-tiny-voc" 3 "$buckets" --cfg /usr/share/darknet/cfg/yolov2-tiny-voc.cfg --size 96x96 \
  --batch 2 --grid 2x3 --groups 0,4
same_bits "buckets, W1, own kernels" 3 "$buckets" --cfg "$src/cfgs/yolov2-16.cfg" --size 64x96 --batch 1 --grid 2x3 \
  --groups none --kernels own
same_bits "buckets, two micro-batches" 3 "$buckets" --cfg "$tmp/two-micro.cfg" --batch 8 --grid 2x3
same_bits "buckets, resnet18" 3 "$buckets" --cfg /usr/share/darknet/cfg/resnet18.cfg --size 64x64 --batch 2 --grid 2x3 \
  --tail root
same_bits "2 devices of 2 and 1 processes, tail" 3 "--ranks-per-device 2 --tiles-per-rank 2" \
  --cfg /usr/share/darknet/cfg/yolov2-tiny-voc.cfg --size 96x96 --batch 2 --grid 2x3 --groups 0,4
same_bits "3 devices of 2 processes, resnet18" 6 "--ranks-per-device 2" --cfg /usr/share/darknet/cfg/resnet18.cfg \
  --size 64x64 --batch 2 --grid 2x3 --tail root
same_bits "devices of 4 and 2 processes, own kernels" 6 "--ranks-per-device 4" --cfg "$src/cfgs/yolov2-16.cfg" \
  --size 64x96 --batch 1 --grid 2x3 --kernels own
echo PASS
