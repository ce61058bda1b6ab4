#!/usr/bin/env bash
# One process holding all four tiles (they add into one gradient, one after another:
# Segment::tile_grads) ends a run with the same bits as four ranks (separate gradients
# summed in tile order), on each kernel path and at batches 1 (the own kernels add into the
# gradient directly) and 2 (through a scratch). The momentum after the last step is the
# sum of the gradients: compared too, as a weight update can round a gradient's last bits away.
# Usage: one_process_bits.sh TILETRAIN_BINARY SOURCE_DIR
set -eu
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)
for kernels in own onednn; do
  for batch in 1 2; do
    args=(train --cfg "$src/cfgs/yolov2-16.cfg" --size 64x96 --batch "$batch" --grid 2x2 --groups 0,4,8
          --kernels "$kernels" --steps 3 --threads 1)
    rm -rf "$tmp/ranks" "$tmp/one"
    "${mpi[@]}" -np 4 "$bin" "${args[@]}" --checkpoint "$tmp/ranks" --checkpoint-every 3 \
      --save-weights "$tmp/ranks.weights" > "$tmp/ranks.log"
    "$bin" "${args[@]}" --checkpoint "$tmp/one" --checkpoint-every 3 --save-weights "$tmp/one.weights" > "$tmp/one.log"
    cmp "$tmp/ranks.weights" "$tmp/one.weights" ||
      { echo "FAIL: --kernels $kernels --batch $batch: one process and 4 ranks end with different weights"; exit 1; }
    cmp "$tmp/ranks/step-00000003/momentum" "$tmp/one/step-00000003/momentum" ||
      { echo "FAIL: --kernels $kernels --batch $batch: one process and 4 ranks end with different momentum"; exit 1; }
    echo "same bits: --kernels $kernels --batch $batch"
  done
done
echo PASS
