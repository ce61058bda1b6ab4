#!/usr/bin/env bash
# Links with latency (cluster/edge.sh --rtt, build/edge_delay_line): a device's round trip is
# added to every frame it sends or gets, in order, its link's rate limit still holds, bytes
# arrive intact, a tiled run across delayed links stays exact, and bad values are refused.
# Only lower bounds on time are checked (a busy machine can only add to them).
# Usage: latency.sh TILETRAIN_BINARY EDGE_DELAY_LINE_BINARY
set -euo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctl
export TILETRAIN_BIN=$1 EDGE_DELAY_LINE=$2
fail() { echo "FAIL: $*"; exit 1; }
num() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" "$2" | head -1; }

edge up --devices 2 --link 20mbit --rtt 4 | tee "$tmp/up"
grep -q "dev0 .*RTT 4 ms" "$tmp/up" || fail "status does not show dev0's 4 ms round trip"
# Device to device: both links, 8 ms at least, every time.
edge ping dev0 dev1 --count 50 | tee "$tmp/both"
awk -v m="$(num min "$tmp/both")" 'BEGIN { exit !(m >= 8.0) }' || fail "round trip under 8 ms over two 4 ms links"
grep -q "burst of 200: 0 lost, 0 out of order" "$tmp/both" || fail "datagrams lost or reordered"

# One delayed link, with jitter: order kept, the rate limit holds, the bytes arrive intact.
edge link dev1 --rtt 0
edge link dev0 --rtt 4 --jitter 2
edge ping dev0 dev1 --count 50 --mb 4 | tee "$tmp/jitter"
awk -v m="$(num min "$tmp/jitter")" 'BEGIN { exit !(m >= 2.0) }' || fail "round trip under 4 - 2 ms with jitter 2"
grep -q "burst of 200: 0 lost, 0 out of order" "$tmp/jitter" || fail "jitter reordered or lost datagrams"
grep -q "intact" "$tmp/jitter" || fail "the TCP stream's bytes changed on the way"
rate=$(sed -n 's/.*TCP stream of 4 MB: \([0-9.]*\) Mbit.*/\1/p' "$tmp/jitter")
awk -v r="$rate" 'BEGIN { exit !(r > 0 && r <= 21) }' || fail "a 20 Mbit/s link carried $rate Mbit/s with latency on"

# Latency off again: the device is back on the bridge, round trips well under 4 ms.
edge link dev0 --rtt 0 --jitter 0
edge ping dev0 dev1 --count 20 | tee "$tmp/off"
awk -v m="$(num min "$tmp/off")" 'BEGIN { exit !(m < 3.0) }' || fail "a round trip of $(num min "$tmp/off") ms with latency off"

# A tiled run across delayed links trains exactly like one process.
edge link dev0 --rtt 2 --jitter 1
edge run -- verify --cfg "$src/tests/fixtures/pool_mix/net.cfg" --grid 1x2 --groups none --batch 2 --steps 2 | tee "$tmp/verify"
grep -q "^OK: tiled training matches untiled" "$tmp/verify" || fail "verify across delayed links did not report OK"

# Bad values: a clear message naming the option, non-zero exit, the link unchanged.
for bad in "link dev0 --rtt -1" "link dev0 --rtt abc" "link dev0 --jitter 20000" "link dev5 --rtt 1"; do
  # shellcheck disable=SC2086
  if edge $bad >"$tmp/bad" 2>&1; then fail "'edge.sh $bad' succeeded"; fi
  grep -qE "rtt|jitter|no device" "$tmp/bad" || fail "'edge.sh $bad' said: $(cat "$tmp/bad")"
done
edge status >"$tmp/status"
grep -q "dev0 .*RTT 2 ms +-1 ms" "$tmp/status" || fail "a refused change altered dev0's link"
echo PASS
