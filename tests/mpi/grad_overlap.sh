#!/usr/bin/env bash
# Gradients sent in buckets while backward runs (--overlap on) end a run with the same bits
# as one process: weights and momentum, with a tail after the cut (its gradient straight
# from the root), two tiles on each of three ranks, with two micro-batches a step (only the
# last one's backward sends), and on a residual net (joins). The trace shows that buckets
# did leave during backward: on every rank, before the step's gradient sum began.
# Usage: grad_overlap.sh TILETRAIN_BINARY SOURCE_DIR
set -eu
bin=$1
src=$2
command -v mpirun > /dev/null || { echo "skipped: no mpirun"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)
sed 's/^subdivisions=1$/subdivisions=2/' "$src/cfgs/fashion-mnist.cfg" > "$tmp/two-micro.cfg"
grep -q '^subdivisions=2$' "$tmp/two-micro.cfg" || { echo "FAIL: could not make a cfg of two micro-batches"; exit 1; }
runs=("--cfg /usr/share/darknet/cfg/yolov2-tiny-voc.cfg --size 96x96 --batch 2 --grid 2x3 --groups 0,4"
      "--cfg $src/cfgs/yolov2-16.cfg --size 64x96 --batch 1 --grid 2x3 --groups none --kernels own"
      "--cfg $tmp/two-micro.cfg --batch 8 --grid 2x3"
      "--cfg /usr/share/darknet/cfg/resnet18.cfg --size 64x64 --batch 2 --grid 2x3")
for run in "${runs[@]}"; do
  read -r -a args <<< "train $run --steps 3 --threads 1"
  rm -rf "$tmp/ranks" "$tmp/one"
  "${mpi[@]}" -np 3 "$bin" "${args[@]}" --tiles-per-rank 2 --overlap on --checkpoint "$tmp/ranks" \
    --checkpoint-every 3 --save-weights "$tmp/ranks.weights" > "$tmp/ranks.log" ||
    { echo "FAIL: $run on 3 ranks:"; cat "$tmp/ranks.log"; exit 1; }
  "$bin" "${args[@]}" --checkpoint "$tmp/one" --checkpoint-every 3 --save-weights "$tmp/one.weights" > "$tmp/one.log"
  cmp "$tmp/ranks.weights" "$tmp/one.weights" ||
    { echo "FAIL: $run: one process and 3 ranks sending buckets end with different weights"; exit 1; }
  cmp "$tmp/ranks/step-00000003/momentum" "$tmp/one/step-00000003/momentum" ||
    { echo "FAIL: $run: one process and 3 ranks sending buckets end with different momentum"; exit 1; }
  echo "same bits: $run"
done

"${mpi[@]}" -np 3 "$bin" bench --cfg "$src/cfgs/yolov2-16.cfg" --size 96x96 --threads 1 --grid 1x3 --steps 2 \
  --warmup 1 --overlap on --trace "$tmp/run.json" > "$tmp/bench.log" ||
  { echo "FAIL: bench --trace:"; cat "$tmp/bench.log"; exit 1; }
/usr/bin/python3 - "$tmp/run.json" <<'PY'
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
fail = []
for pid in (0, 1, 2):
    mine = [e for e in spans if e["pid"] == pid]
    sums = sorted(e["ts"] for e in mine if e["name"] == "gradient sum")
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine if e["cat"] == "step")
    buckets = [e["ts"] for e in mine if e["name"] == "gradient bucket"]
    if len(sums) != 2 or len(steps) != 2:
        fail.append(f"rank {pid}: {len(steps)} steps and {len(sums)} gradient sums, not 2 of each")
        continue
    for (a, b), s in zip(steps, sums):
        early = [t for t in buckets if a <= t < s]
        print(f"rank {pid}: {len(early)} bucket(s) sent before the gradient sum of the step at {a:.0f} us")
        if len(early) < 2:
            fail.append(f"rank {pid}: {len(early)} gradient bucket(s) left before the step's gradient sum, not 2 or more")
for f in fail:
    print("FAIL:", f)
print("PASS" if not fail else "FAIL")
sys.exit(1 if fail else 0)
PY
