#!/usr/bin/env bash
# Checkpoints: a run of 6 steps on 4 ranks (2x2), and the same run stopped after 3 steps
# and resumed, end with byte-identical weights and momentum; so does the run resumed on 2
# ranks with two tiles each, and a run in one process (sums go in tile order, whatever the
# ranks: src/engine/tile_order.hpp). Also: --keep-checkpoints prunes, and --resume of an empty folder fails naming it.
# Usage: resume.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
# fashion-mnist.cfg has batch norm and a 64-image batch; dropout is checked by the unit test
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 2x2 --log-every 3)
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 6 --checkpoint "$tmp/a" --checkpoint-every 2 --keep-checkpoints 2 \
  --save-weights "$tmp/a.weights" > "$tmp/a.log"
ls "$tmp/a"
[ "$(ls "$tmp/a" | grep '^step-' | tr '\n' ' ')" = "step-00000004 step-00000006 " ] || fail "kept $(ls "$tmp/a")"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 3 --checkpoint "$tmp/b" --checkpoint-every 3 > "$tmp/b1.log"
cp -r "$tmp/b" "$tmp/c"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 6 --resume "$tmp/b" --checkpoint "$tmp/b" \
  --checkpoint-every 3 --save-weights "$tmp/b.weights" > "$tmp/b2.log"
grep -q "resumed at step 3" "$tmp/b2.log" || { echo "FAIL: no resume line"; cat "$tmp/b2.log"; exit 1; }
cmp "$tmp/a.weights" "$tmp/b.weights" || fail "resumed weights differ"
cmp "$tmp/a/step-00000006/momentum" "$tmp/b/step-00000006/momentum" || fail "momentum differs"
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --steps 6 --resume "$tmp/c" --checkpoint "$tmp/c" \
  --checkpoint-every 3 --save-weights "$tmp/c.weights" > "$tmp/c2.log"
cmp "$tmp/a.weights" "$tmp/c.weights" || fail "resumed on 2 ranks, the weights differ from 4 ranks'"
cmp "$tmp/a/step-00000006/momentum" "$tmp/c/step-00000006/momentum" || fail "momentum differs (2 ranks)"
# A whole run in one process with the four tiles ends with the same bits too.
"$bin" "${args[@]}" --steps 6 --save-weights "$tmp/d.weights" > "$tmp/d.log"
cmp "$tmp/a.weights" "$tmp/d.weights" || fail "one process and 4 ranks differ"
mkdir "$tmp/empty"
if "$bin" train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --steps 6 --resume "$tmp/empty" 2> "$tmp/err.log"; then
  fail "resuming from an empty folder succeeded"
fi
grep -q "no checkpoint in '$tmp/empty'" "$tmp/err.log" || { echo "FAIL: message"; cat "$tmp/err.log"; exit 1; }
echo PASS
