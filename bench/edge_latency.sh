#!/usr/bin/env bash
# The emulated links' latency against what was asked (issue #33): two devices, dev1's link
# without latency, dev0's set to each round trip in turn; `edge.sh ping` measures UDP round
# trips (median of COUNT), the order of a burst, and a TCP stream's rate against the link's.
#   bench/edge_latency.sh [RATE] [COUNT] [MB]     (root; default 100mbit 300 20)
# Prints one table row per round trip asked.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-100mbit}
count=${2:-300}
mb=${3:-20}
export EDGE_CLUSTER=benchlat
trap 'cluster/edge.sh down >/dev/null 2>&1' EXIT
[ -x build/edge_delay_line ] || scripts/setup.sh edge_delay_line >/dev/null
cluster/edge.sh up --devices 2 --link "$rate" >/dev/null
echo "| dev0's RTT asked | jitter | measured min / median / p90 (ms) | burst of 200 | TCP stream ($mb MB) on a $rate link |"
echo "|---|---|---|---|---|"
for asked in "0 0" "1 0" "5 0" "5 2" "20 0"; do
  read -r rtt jitter <<<"$asked"
  cluster/edge.sh link dev0 --rtt "$rtt" --jitter "$jitter" >/dev/null
  out=$(cluster/edge.sh ping dev0 dev1 --count "$count" --mb "$mb")
  rt=$(sed -n 's/.*min \([0-9.]*\), median \([0-9.]*\), p90 \([0-9.]*\),.*/\1 \/ \2 \/ \3/p' <<<"$out")
  burst=$(sed -n 's/burst of 200: //p' <<<"$out")
  tcp=$(sed -n 's/TCP stream of [0-9.]* MB: //p' <<<"$out")
  echo "| $rtt ms | $jitter ms | $rt | $burst | $tcp |"
done
