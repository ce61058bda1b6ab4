#!/usr/bin/env bash
# A run that loses a rank loses only the steps since its last checkpoint: 4 ranks (2x2)
# train with a checkpoint every 3 steps, one rank is killed once step 6's checkpoint is
# there, and the run resumed from the newest checkpoint on 2 ranks (two tiles each) ends
# byte-identical to a run of the same length that nobody disturbed.
# Usage: kill_resume.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set +e  # the exit statuses below are checked one by one (wait, kill -0)
# On any exit, end only what this script started: the checkpointing mpirun (if it is still
# running) and the ranks it started (its children), by their PIDs.
launcher=
cleanup() {
  if [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null; then
    kill -9 "$launcher" $(pgrep -P "$launcher") 2>/dev/null
    wait "$launcher" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT  # in place of common.sh's: also removes $tmp
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 2x2 --log-every 1000 --steps 40)
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --save-weights "$tmp/ref.weights" > "$tmp/ref.log" 2>&1 ||
  { echo "FAIL: reference run"; cat "$tmp/ref.log"; exit 1; }
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --checkpoint "$tmp/ck" --checkpoint-every 3 > "$tmp/a.log" 2>&1 &
launcher=$!
# Wait for the sign of life that matters, step 6's checkpoint (its meta.json is written last),
# polling while mpirun runs (at most 30 s); then kill one of the ranks mpirun started (not the root).
for _ in $(seq 600); do
  [ -f "$tmp/ck/step-00000006/meta.json" ] && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.05
done
[ -f "$tmp/ck/step-00000006/meta.json" ] ||
  { echo "FAIL: no checkpoint of step 6 (the run ended or hung before it)"; cat "$tmp/a.log"; exit 1; }
pids=$(pgrep -P "$launcher" || true)
[ "$(echo "$pids" | grep -c .)" -eq 4 ] ||
  { echo "FAIL: mpirun does not run 4 ranks (its children: $(echo $pids))"; cat "$tmp/a.log"; exit 1; }
victim=$(echo "$pids" | sort -n | tail -n 1)
kill -9 "$victim"
wait "$launcher" && fail "the run with a dead rank exited 0"
launcher=  # ended and reaped: nothing left to end on exit
newest=$(ls "$tmp/ck" | grep '^step-' | sort | tail -n 1)
echo "killed a rank; checkpoints: $(ls -A "$tmp/ck" | tr '\n' ' ')"
[ -n "$newest" ] && [ "$newest" != step-00000040 ] || fail "newest checkpoint '$newest'"
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --resume "$tmp/ck" --save-weights "$tmp/b.weights" \
  > "$tmp/b.log" 2>&1 || { echo "FAIL: resumed run"; cat "$tmp/b.log"; exit 1; }
grep -q "resumed at step $((10#${newest#step-}))" "$tmp/b.log" || { echo "FAIL: no resume line"; cat "$tmp/b.log"; exit 1; }
cmp "$tmp/ref.weights" "$tmp/b.weights" || fail "resumed weights differ from the undisturbed run's"
echo "resumed at $newest on 2 ranks: weights byte-identical to the undisturbed run"
echo PASS
