#!/usr/bin/env bash
# The distributed breakdown table: W1 on grids 1x1, 1x2, 2x2, 3x3 and 6x4, one tile per
# rank (oversubscribed on this machine), groupings none and all, with and without
# --low-memory. Prints a Markdown row per run: the five parts of the step (slowest rank)
# and memory per rank (largest) and per host.
# Usage: bench/w1_grid_table.sh [STEPS]   (after 3 warm-up steps: MPI connects peers lazily)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
[ -x build/tiletrain ] || scripts/setup.sh >/dev/null
echo "| grid | ranks | groups | memory | step s | forward | backward | halo | weights | io | peak MB/rank | MB/host | maps MB | deltas MB | filters MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for grid in 1x1 1x2 2x2 3x3 6x4; do
  n=$(( ${grid%x*} * ${grid#*x} ))
  for groups in none all; do
    for mode in "" --low-memory; do
      j=$(scripts/mpirun.sh "$n" bench --cfg cfgs/yolov2-16.cfg --threads 1 --grid "$grid" --groups "$groups" $mode \
          --steps "$steps" --warmup 3 --json 2>/dev/null | tail -n1)
      python3 -c "
import json,sys; r=json.loads(sys.argv[1])
m = 'low' if r['low_memory'] else 'default'
print(f\"| {r['grid']} | {r['ranks']} | {r['groups']} | {m} | {r['step_s']:.3f} | {r['fwd_s']:.3f} | {r['bwd_s']:.3f} | {r['halo_s']:.3f} | {r['weights_s']:.3f} | {r['io_s']:.3f} | {r['peak_rss_mb_max']:.1f} | {r['peak_rss_mb_host']:.0f} | {r['maps_mb_max']:.1f} | {r['deltas_mb_max']:.1f} | {r['filters_mb']:.1f} |\")" "$j"
    done
  done
done
