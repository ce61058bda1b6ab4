#!/usr/bin/env bash
# A device throttled to a tenth of its speed in the middle of a run slows the step but
# loses nothing: the weights are bit-identical to an unthrottled run from the same seed.
# Usage: throttle.sh TILETRAIN_BINARY
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctt
export TILETRAIN_BIN=$1
edge up --devices 2 --link 100mbit --device-speed 0.8 || exit 1
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 2x1 --steps 40 --log-every 5 --seed 7)
edge run -- "${args[@]}" --save-weights "$tmp/plain.weights" >"$tmp/plain.log" 2>&1 || {
  echo "FAIL: the unthrottled run failed"; cat "$tmp/plain.log"; exit 1; }
edge run -- "${args[@]}" --save-weights "$tmp/slow.weights" >"$tmp/slow.log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "step 5/" "$tmp/slow.log" && break; sleep 0.1; done
grep -q "step 5/" "$tmp/slow.log" || { echo "FAIL: training never got going"; cat "$tmp/slow.log"; exit 1; }
edge speed dev1 0.08
wait $job || { echo "FAIL: the throttled run failed"; cat "$tmp/slow.log"; exit 1; }
grep -q "step 40/" "$tmp/slow.log" || { echo "FAIL: the throttled run did not finish its 40 steps"; cat "$tmp/slow.log"; exit 1; }
grep "images/s" "$tmp/plain.log" | tail -n 2
grep "images/s" "$tmp/slow.log" | tail -n 2
throttled=$(awk '/^nr_throttled/ { print $2 }' /sys/fs/cgroup/cpu/tiletrain-edge/ctt/dev1/cpu.stat 2>/dev/null || echo "?")
echo "dev1 throttled $throttled times"
cmp "$tmp/plain.weights" "$tmp/slow.weights" || { echo "FAIL: the weights differ"; exit 1; }
echo "PASS: weights identical"
