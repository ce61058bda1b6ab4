#!/usr/bin/env bash
# What the emulated links' delay lines (cluster/delay_line.cpp) cost this host: two
# `comm-bound-wifi` devices (600 Mbit/s, 2 ms +-0.5 round trip to the switch each), a TCP
# stream of MB megabytes from dev0 to dev1 (`edge.sh ping`), with two delay-line binaries
# OLD and NEW alternating. Prints per run the delay lines' CPU seconds (their
# /proc/PID/stat user + system time over the ping) and the stream's rate.
#   bench/delay_line_cpu.sh OLD_DELAY_LINE NEW_DELAY_LINE [ROUNDS] [MB]   (root; default 3 rounds, 200 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-3} mb=${4:-200}
export EDGE_CLUSTER=benchdl
tmp=$(mktemp -d)
trap 'cluster/edge.sh down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
cp "$old" "$tmp/old" && cp "$new" "$tmp/new"
cpu_s() {  # the summed CPU seconds of the processes running binary $1
  local t=0 p
  for p in $(pgrep -f "^$1 " || true); do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'
}
echo "| binary | delay lines' CPU s | stream |"
echo "|---|---|---|"
for ((r = 0; r < rounds; r++)); do
  for side in old new; do
    EDGE_DELAY_LINE=$tmp/$side cluster/edge.sh up --devices 2 --profile comm-bound-wifi >/dev/null
    [ -n "$(pgrep -f "^$tmp/$side " || true)" ] || { echo "delay_line_cpu.sh: no delay line runs $tmp/$side" >&2; exit 1; }
    before=$(cpu_s "$tmp/$side")
    out=$(cluster/edge.sh ping dev0 dev1 --count 20 --mb "$mb")
    after=$(cpu_s "$tmp/$side")
    echo "| $side | $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.3f", a - b }') | $(sed -n 's/TCP stream of [0-9.]* MB: //p' <<<"$out") |"
    cluster/edge.sh down >/dev/null
  done
done
