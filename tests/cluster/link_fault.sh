#!/usr/bin/env bash
# A device's link goes down in the middle of a training run (3 devices, 100 Mbit/s): the
# job must end with a non-zero status within 60 s, name the rank and host it lost, and
# leave no weights file, not even a partial one. With the link back up, a new run succeeds.
# Usage: link_fault.sh TILETRAIN_BINARY
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctf
export TILETRAIN_BIN=$1
edge up --devices 3 --link 100mbit || exit 1
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 1x3 --log-every 5)
edge run -- "${args[@]}" --epochs 50 --save-weights "$tmp/out.weights" >"$tmp/log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "step 5/" "$tmp/log" && break; sleep 0.1; done
grep -q "step 5/" "$tmp/log" || { echo "FAIL: training never got going"; cat "$tmp/log"; exit 1; }
edge link dev2 down
down_at=$(date +%s)
for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: the job still runs 60 s after dev2's link went down"; cat "$tmp/log"; kill -9 $job; exit 1
fi
wait $job
rc=$?
took=$(($(date +%s) - down_at))
cat "$tmp/log"
echo "job ended with status $rc, ${took} s after dev2's link went down"
[ $rc -ne 0 ] || { echo "FAIL: status 0 after losing a device"; exit 1; }
grep -q "lost rank 2 on host dev2" "$tmp/log" || { echo "FAIL: no message naming rank 2 on dev2"; exit 1; }
if ls "$tmp"/out.weights* >/dev/null 2>&1; then echo "FAIL: a weights file was written"; ls -la "$tmp"; exit 1; fi
edge link dev2 up
edge run -- "${args[@]}" --steps 10 --save-weights "$tmp/out.weights" >"$tmp/log2" 2>&1 || {
  echo "FAIL: the run after the link came back failed"; cat "$tmp/log2"; exit 1; }
[ -s "$tmp/out.weights" ] || { echo "FAIL: no weights after the run with the link back"; exit 1; }
echo PASS
