#!/usr/bin/env bash
# A run that loses a rank loses only the steps since its last checkpoint: 4 ranks (2x2)
# train with a checkpoint every 3 steps, one rank is killed once step 6's checkpoint is
# there, and the run resumed from the newest checkpoint on 2 ranks (two tiles each) ends
# byte-identical to a run of the same length that nobody disturbed.
# Usage: kill_resume.sh TILETRAIN_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'pkill -9 -f "$tmp/ck" 2>/dev/null; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 2x2 --log-every 1000 --steps 40)
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --save-weights "$tmp/ref.weights" > "$tmp/ref.log" 2>&1 ||
  { echo "FAIL: reference run"; cat "$tmp/ref.log"; exit 1; }
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --checkpoint "$tmp/ck" --checkpoint-every 3 > "$tmp/a.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [ -f "$tmp/ck/step-00000006/meta.json" ] && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.05
done
pids=$(pgrep -f -- "--checkpoint $tmp/ck" | grep -v "^$launcher\$" || true)
victim=$(echo "$pids" | sort -n | tail -n 1)
[ -n "$victim" ] || { echo "FAIL: no rank to kill (the run ended before step 6?)"; cat "$tmp/a.log"; exit 1; }
kill -9 "$victim"
wait "$launcher" && { echo "FAIL: the run with a dead rank exited 0"; exit 1; }
newest=$(ls "$tmp/ck" | grep '^step-' | sort | tail -n 1)
echo "killed a rank; checkpoints: $(ls -A "$tmp/ck" | tr '\n' ' ')"
[ -n "$newest" ] && [ "$newest" != step-00000040 ] || { echo "FAIL: newest checkpoint '$newest'"; exit 1; }
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --resume "$tmp/ck" --save-weights "$tmp/b.weights" \
  > "$tmp/b.log" 2>&1 || { echo "FAIL: resumed run"; cat "$tmp/b.log"; exit 1; }
grep -q "resumed at step $((10#${newest#step-}))" "$tmp/b.log" || { echo "FAIL: no resume line"; cat "$tmp/b.log"; exit 1; }
cmp "$tmp/ref.weights" "$tmp/b.weights" || { echo "FAIL: resumed weights differ from the undisturbed run's"; exit 1; }
echo "resumed at $newest on 2 ranks: weights byte-identical to the undisturbed run"
echo PASS
