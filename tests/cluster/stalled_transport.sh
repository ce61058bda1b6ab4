#!/usr/bin/env bash
# TCP between two devices is dropped in the middle of a training run while UDP still
# passes (every process keeps beating, so none counts as lost): all ranks end up waiting
# with no data arriving. The job must end with a non-zero status soon after the stall
# timeout, say that the transport is stuck, and leave no weights file. It is what a
# failed Open MPI TCP connection looked like (the job hung, every process alive). A job
# started while TCP is still dropped must end too (no beats yet: the start has a deadline
# of its own). Then,
# on a link so slow that the gradient sum takes seconds, a stall timeout of 1 s must not
# fire: data arriving slowly is progress.
# Usage: stalled_transport.sh TILETRAIN_BINARY
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_test cst
export TILETRAIN_BIN=$1
command -v iptables >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null
} || { echo "FAIL: could not install iptables"; exit 1; }
edge up --devices 2 --link 100mbit || exit 1
for d in 0 1; do
  # TCP keeps retrying the dropped segments (Linux's 15 minutes) instead of giving up
  # after edge.sh's 13 s: the stall stays a stall.
  ip netns exec tt-cst-dev$d sysctl -q -w net.ipv4.tcp_retries2=15
done
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 1x2 --log-every 5)
edge run -- "${args[@]}" --stall-timeout 15 --epochs 50 --save-weights "$tmp/out.weights" >"$tmp/log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "step 5/" "$tmp/log" && break; sleep 0.1; done
grep -q "step 5/" "$tmp/log" || { echo "FAIL: training never got going"; cat "$tmp/log"; exit 1; }
ip netns exec tt-cst-dev0 iptables -A INPUT -p tcp -s 10.77.0.2 -j DROP
ip netns exec tt-cst-dev1 iptables -A INPUT -p tcp -s 10.77.0.1 -j DROP
blocked_at=$(date +%s)
for _ in $(seq 900); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: the job still runs 90 s after TCP between the devices stopped"; cat "$tmp/log"; kill -9 $job; exit 1
fi
wait $job
rc=$?
took=$(($(date +%s) - blocked_at))
cat "$tmp/log"
echo "job ended with status $rc, ${took} s after TCP between the devices stopped"
[ $rc -ne 0 ] || { echo "FAIL: status 0 with the transport stuck"; exit 1; }
grep -q "no data arriving (--stall-timeout 15)" "$tmp/log" || { echo "FAIL: no message saying the transport is stuck"; exit 1; }
if grep -q "lost rank" "$tmp/log"; then echo "FAIL: a live peer was called lost"; exit 1; fi
if ls "$tmp"/out.weights* >/dev/null 2>&1; then echo "FAIL: a weights file was written"; ls -la "$tmp"; exit 1; fi
start=$(date +%s)
timeout 120 "$edge" run -- "${args[@]}" --stall-timeout 10 --steps 2 >"$tmp/log1" 2>&1
rc=$?
cat "$tmp/log1"
echo "a job started with TCP dropped ended with status $rc after $(($(date +%s) - start)) s"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: status $rc (124: still running after 120 s)"; exit 1; }
grep -q "could not exchange their first messages within 10 s" "$tmp/log1" || {
  echo "FAIL: no message saying the start is stuck"; exit 1; }
# 13 MB of gradients and weights over 10 Mbit/s: waits of seconds with data flowing.
edge up --devices 2 --link 10mbit >/dev/null || exit 1
edge run -- train --cfg "$src/cfgs/yolov2-16.cfg" --grid 1x2 --size 96x96 --steps 2 --stall-timeout 1 >"$tmp/log2" 2>&1 || {
  echo "FAIL: a run over a slow link stopped with --stall-timeout 1"; cat "$tmp/log2"; exit 1; }
cat "$tmp/log2"
awk '/^step 1:/ { gsub(/[()]/, ""); for (i = 1; i <= NF; i++) if ($(i + 1) == "s,") t = $i }
     END { if (t + 0 < 3) { print "FAIL: a step took " t " s: too short to have had long waits"; exit 1 } }' "$tmp/log2" || exit 1
echo PASS
