#!/usr/bin/env bash
# Data parallel (--replicas): fashion-mnist.cfg (batch norm, a connected layer) with its 64-image batch
# in 4 micro-batches on 1, 2, 3 and 4 copies ends with byte-identical weights and momentum; so
# do 4 copies sending their gradients during backward (--overlap on), a run of 2 copies
# stopped after 3 steps and resumed on 4, and copies tiled 2x1 inside each process on 1 and 2. What cannot run is refused naming why, with a non-zero exit.
# Usage: replicas.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
# --threads 1: some kernels sum over their threads (docs/status.md, known limits)
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --subdivisions 4 --threads 1 --log-every 3)
"$bin" "${args[@]}" --replicas 1 --steps 6 --checkpoint "$tmp/one" --checkpoint-every 6 \
  --save-weights "$tmp/one.weights" > "$tmp/one.log"
for n in 2 3 4; do  # 3: micro-batches 0, 1 and 2-3
  "${mpi[@]}" -np $n "$bin" "${args[@]}" --replicas $n --steps 6 --checkpoint "$tmp/c$n" --checkpoint-every 6 \
    --save-weights "$tmp/c$n.weights" > "$tmp/c$n.log"
  cmp "$tmp/one.weights" "$tmp/c$n.weights" || fail "$n copies end with other weights than one"
  cmp "$tmp/one/step-00000006/momentum" "$tmp/c$n/step-00000006/momentum" || fail "$n copies: momentum differs"
done
# Gradients sent in buckets while the last micro-batch's backward runs: the same bits.
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --replicas 4 --overlap on --steps 6 --save-weights "$tmp/ov.weights" > "$tmp/ov.log"
cmp "$tmp/one.weights" "$tmp/ov.weights" || fail "4 copies with --overlap on end with other weights"
# The losses printed are the same too (summed in micro-batch order on the root).
[ "$(grep '^step' "$tmp/one.log" | cut -d'(' -f1)" = "$(grep '^step' "$tmp/c4.log" | cut -d'(' -f1)" ] ||
  { paste "$tmp/one.log" "$tmp/c4.log"; fail "the logged losses differ"; }
# Stopped after 3 steps on 2 copies, resumed on 4.
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --replicas 2 --steps 3 --checkpoint "$tmp/r" --checkpoint-every 3 > "$tmp/r1.log"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --replicas 4 --steps 6 --resume "$tmp/r" --checkpoint "$tmp/r" \
  --checkpoint-every 3 --save-weights "$tmp/r.weights" > "$tmp/r2.log" 2> "$tmp/r2.err"
grep -q "resumed at step 3" "$tmp/r2.log" || { cat "$tmp/r2.log"; fail "no resume line"; }
grep -q "note: resuming" "$tmp/r2.err" && fail "a resume onto more copies said it changes the bits"
# A plain (tiled) run resuming that folder is told it leaves the bits of the copies.
cp -r "$tmp/r" "$tmp/p"
"$bin" "${args[@]}" --steps 7 --resume "$tmp/p" --checkpoint "$tmp/p" --checkpoint-every 7 2> "$tmp/p.err" > /dev/null
grep -q "note: resuming a run trained on grid 1x1, 4 micro-batches, data parallel on grid 1x1, 4 micro-batches" \
  "$tmp/p.err" || { cat "$tmp/p.err"; fail "no note when a data-parallel run goes on tiled"; }
cmp "$tmp/one.weights" "$tmp/r.weights" || fail "resumed on 4 copies, the weights differ"
cmp "$tmp/one/step-00000006/momentum" "$tmp/r/step-00000006/momentum" || fail "resumed: momentum differs"
# Each copy tiled 2x1 in its process: 1 and 2 copies agree.
"$bin" "${args[@]}" --replicas 1 --grid 2x1 --steps 2 --save-weights "$tmp/t1.weights" > "$tmp/t1.log"
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --replicas 2 --grid 2x1 --steps 2 --save-weights "$tmp/t2.weights" > "$tmp/t2.log"
cmp "$tmp/t1.weights" "$tmp/t2.weights" || fail "tiled copies: 1 and 2 differ"
# Refusals: exit status 2 and the reason, on the root's stderr.
short=(train --cfg "$src/cfgs/fashion-mnist.cfg" --steps 1 --threads 1)
refused 3 "--replicas 2 runs one whole copy of the net per process, but 3 process(es) were started" \
  "${short[@]}" --replicas 2
refused 4 "a batch of 64 in 2 micro-batch(es) leaves some copies without one" "${short[@]}" --subdivisions 2 --replicas 4
refused 2 "with --replicas every process holds a whole copy" "${short[@]}" --subdivisions 2 --replicas 2 --low-memory
refused 2 "a copy tiled into several tiles adds them up after backward" "${short[@]}" --subdivisions 2 --replicas 2 \
  --grid 2x1 --overlap on
refused 1 "--subdivisions 5: a batch of 64 does not split into that many micro-batches" "${short[@]}" --subdivisions 5
echo PASS
