#!/usr/bin/env bash
# Does an emulated device compute at the speed its quota intends? One device of one core at
# F of a core here (cluster/edge.sh --cores 1 --device-speed F), W1 at one thread: its step
# should be the unthrottled step here / F, and its convolutions F x this core's
# (cluster/host_gflops.sh run inside the device). Prints one row per F; ROUNDS rounds each,
# medians, the unthrottled step measured in every round beside the throttled one.
#   bench/edge_speed.sh [ROUNDS] [F...]     (root; default 3 rounds, F = 0.5 0.25 0.1)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
speeds=("$@")
[ ${#speeds[@]} -gt 0 ] || speeds=(0.5 0.25 0.1)
export EDGE_CLUSTER=benchspd
trap 'cluster/edge.sh down >/dev/null 2>&1' EXIT
[ -x build/tiletrain ] || scripts/setup.sh tiletrain >/dev/null
step() { "$@" bench --cfg cfgs/yolov2-16.cfg --threads 1 --steps 3 --warmup 1 --json | tail -n1 |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["step_s"])'; }
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| F | W1 step here (s) | W1 step on the device (s) | here / (F x device): 1 = as intended | convolutions in the device / (F x here) |"
echo "|---|---|---|---|---|"
for f in "${speeds[@]}"; do
  cluster/edge.sh up --devices 1 --link 1gbit --cores 1 --device-speed "$f" >/dev/null
  here=() dev=() conv=()
  for ((r = 0; r < rounds; r++)); do
    here+=("$(step build/tiletrain)")
    dev+=("$(step cluster/edge.sh exec dev0 -- env OMP_NUM_THREADS=1 "$PWD/build/tiletrain")")
    g_here=$(cluster/host_gflops.sh --rounds 2)
    g_dev=$(cluster/edge.sh exec dev0 -- env OMP_NUM_THREADS=1 "$PWD/cluster/host_gflops.sh" --rounds 2)
    conv+=("$(awk -v d="$g_dev" -v h="$g_here" -v f="$f" 'BEGIN { printf "%.3f", d / (f * h) }')")
  done
  h=$(echo "${here[*]}" | median) d=$(echo "${dev[*]}" | median) c=$(echo "${conv[*]}" | median)
  echo "| $f | $h | $d | $(awk -v h="$h" -v d="$d" -v f="$f" 'BEGIN { printf "%.3f", h / (f * d) }') | $c |"
  cluster/edge.sh down >/dev/null
done
