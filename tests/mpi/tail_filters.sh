#!/usr/bin/env bash
# The layers after the cut split by filters (--tail filters): whole yolov2-voc.cfg (a
# 96x96 input, 2 micro-batches a step) on a 2x2 grid ends with byte-identical weights and
# momentum on 1, 2 and 4 processes (the blocks follow the tiles, not the processes), with
# the layer-before-the-cut gradients in buckets (--overlap on) too, with a checkpoint
# half-way (the root gathers whole weights and momentum, then each process hands back
# what it does not keep), and a run stopped on 2 processes and resumed on 4; the losses
# printed are the same; with --low-memory (its sums are its own) a checkpoint every step
# leaves the weights as none does; --tail auto picks filter blocks here and the root for
# a tail without convolutions; yolov3-tiny (route,
# upsample, two [yolo]) on 1 and 3. A folder trained with the tail on the root is told the
# bits change; what cannot run is refused naming why, with a non-zero exit.
# Usage: tail_filters.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
# --threads 1: some kernels sum over their threads (docs/status.md, known limits)
base=(train --cfg /usr/share/darknet/cfg/yolov2-voc.cfg --size 96x96 --batch 2 --subdivisions 2 --grid 2x2
  --threads 1 --log-every 1)
args=("${base[@]}" --tail filters)
"$bin" "${args[@]}" --tiles-per-rank 4 --steps 4 --checkpoint "$tmp/one" --checkpoint-every 4 \
  --save-weights "$tmp/one.weights" > "$tmp/one.log"
for n in 2 4; do
  "${mpi[@]}" -np $n "$bin" "${args[@]}" --tiles-per-rank $((4 / n)) --steps 4 --checkpoint "$tmp/p$n" \
    --checkpoint-every 2 --save-weights "$tmp/p$n.weights" > "$tmp/p$n.log"
  cmp "$tmp/one.weights" "$tmp/p$n.weights" || fail "$n processes end with other weights than one"
  cmp "$tmp/one/step-00000004/momentum" "$tmp/p$n/step-00000004/momentum" || fail "$n processes: momentum differs"
done
[ "$(grep '^step' "$tmp/one.log" | cut -d'(' -f1)" = "$(grep '^step' "$tmp/p4.log" | cut -d'(' -f1)" ] ||
  { paste "$tmp/one.log" "$tmp/p4.log"; fail "the logged losses differ"; }
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --overlap on --steps 4 --save-weights "$tmp/ov.weights" > "$tmp/ov.log"
cmp "$tmp/one.weights" "$tmp/ov.weights" || fail "4 processes with --overlap on end with other weights"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --low-memory --steps 2 --save-weights "$tmp/lm.weights" > "$tmp/lm.log"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --low-memory --steps 2 --checkpoint "$tmp/lmc" --checkpoint-every 1 \
  --save-weights "$tmp/lmc.weights" > "$tmp/lmc.log"
cmp "$tmp/lm.weights" "$tmp/lmc.weights" || fail "--low-memory: checkpoints every step changed the weights"
# ... and with two blocks of each layer a process, one after the other in the staging buffers.
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --low-memory --steps 2 --save-weights "$tmp/lm2.weights" \
  > "$tmp/lm2.log"
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --low-memory --steps 2 --checkpoint "$tmp/lm2c" \
  --checkpoint-every 1 --save-weights "$tmp/lm2c.weights" > "$tmp/lm2c.log"
cmp "$tmp/lm2.weights" "$tmp/lm2c.weights" || fail "--low-memory on 2 processes: checkpoints changed the weights"
# Stopped after 2 steps on 2 processes, resumed on 4.
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --steps 2 --checkpoint "$tmp/r" --checkpoint-every 2 \
  > "$tmp/r1.log"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 4 --resume "$tmp/r" --checkpoint "$tmp/r" --checkpoint-every 2 \
  --save-weights "$tmp/r.weights" > "$tmp/r2.log" 2> "$tmp/r2.err"
grep -q "resumed at step 2" "$tmp/r2.log" || { cat "$tmp/r2.log"; fail "no resume line"; }
grep -q "note: resuming" "$tmp/r2.err" && fail "a resume onto more processes said it changes the bits"
cmp "$tmp/one.weights" "$tmp/r.weights" || fail "resumed on 4 processes, the weights differ"
cmp "$tmp/one/step-00000004/momentum" "$tmp/r/step-00000004/momentum" || fail "resumed: momentum differs"
# The same folder continued with the tail on the root: told the bits change.
"${mpi[@]}" -np 4 "$bin" "${args[@]/filters/root}" --steps 5 --resume "$tmp/r" --checkpoint "$tmp/r" \
  --checkpoint-every 5 > /dev/null 2> "$tmp/root.err"
grep -q "note: resuming a run trained on grid 2x2, 2 micro-batches, filter blocks after the cut on grid 2x2, 2 micro-batches" \
  "$tmp/root.err" || { cat "$tmp/root.err"; fail "no note when a filter-block run goes on with the tail on the root"; }
# --tail auto (the default): filter blocks here; the root where no convolution follows the cut.
"${mpi[@]}" -np 2 "$bin" "${base[@]}" --tiles-per-rank 2 --steps 4 --checkpoint "$tmp/auto" \
  --save-weights "$tmp/auto.weights" > "$tmp/auto.log"
cmp "$tmp/one.weights" "$tmp/auto.weights" || fail "--tail auto on 2 processes ends with other weights than filter blocks on one"
grep -q "filter blocks after the cut" "$tmp/auto/run.json" || fail "--tail auto's run.json does not say filter blocks"
"${mpi[@]}" -np 4 "$bin" train --cfg "$src/cfgs/fashion-mnist.cfg" --grid 2x2 --steps 1 --threads 1 \
  --checkpoint "$tmp/fm" > /dev/null
grep -q '"grid": "2x2"' "$tmp/fm/run.json" || { cat "$tmp/fm/run.json"; fail "--tail auto split a tail without convolutions"; }
# yolov3-tiny: 1 and 3 processes.
y3=(train --cfg /usr/share/darknet/cfg/yolov3-tiny.cfg --size 96x96 --batch 2 --grid 1x3 --tail filters --threads 1
  --steps 2)
"$bin" "${y3[@]}" --tiles-per-rank 3 --save-weights "$tmp/y1.weights" > "$tmp/y1.log"
"${mpi[@]}" -np 3 "$bin" "${y3[@]}" --save-weights "$tmp/y3.weights" > "$tmp/y3.log"
cmp "$tmp/y1.weights" "$tmp/y3.weights" || fail "yolov3-tiny: 1 and 3 processes end with other weights"
# Refusals: exit status 2 and the reason, on the root's stderr.
short=(train --cfg "$src/cfgs/fashion-mnist.cfg" --steps 1 --threads 1 --tail filters)
refused 2 "with --replicas each process runs a whole copy: use one of them" "${short[@]}" --replicas 2
refused 1 "--tail: tiles not in {root,filters,auto}" "${short[@]/filters/tiles}"
echo PASS
