#!/usr/bin/env bash
# Every process's peak memory from its start: a fresh run and a run resumed from a
# checkpoint, for each binary given (e.g. before and after a change), whole yolov2-voc at
# 416x416, batch 1, on P processes of this machine with --low-memory (the tail in filter
# blocks by default). Each process's peak RSS comes from /usr/bin/time (the whole process
# life: start-up, training, checkpoint, exit). Prints one line per binary and run.
#   bench/start_memory.sh [-np P] [--grid RxC] [--no-low-memory] BINARY... (default 6 processes, grid 3x2)
set -euo pipefail
cd "$(dirname "$0")/.."
np=6 grid=3x2 low_memory=(--low-memory)
while [ $# -gt 0 ]; do
  case $1 in
  -np) np=$2 && shift 2 ;;
  --grid) grid=$2 && shift 2 ;;
  --no-low-memory) low_memory=() && shift ;;
  *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: bench/start_memory.sh [-np P] [--grid RxC] [--no-low-memory] BINARY..." >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/rank.sh" <<'EOF'
#!/bin/sh
exec /usr/bin/time -f "%M" -o "$PEAKS/rank-${OMPI_COMM_WORLD_RANK}" "$@"
EOF
chmod +x "$tmp/rank.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(train --cfg /usr/share/darknet/cfg/yolov2-voc.cfg --size 416x416 --batch 1 --grid "$grid" "${low_memory[@]}"
  --threads 1)
for bin in "$@"; do
  for run in fresh resumed; do
    export PEAKS=$tmp/$run
    rm -rf "$PEAKS" && mkdir -p "$PEAKS"
    if [ $run = fresh ]; then
      rm -rf "$tmp/ckpt"
      extra=(--steps 1 --checkpoint "$tmp/ckpt" --checkpoint-every 1)
    else
      extra=(--steps 2 --resume "$tmp/ckpt")
    fi
    mpirun -np "$np" --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo "$tmp/rank.sh" "$bin" \
      "${args[@]}" "${extra[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
    python3 - "$bin" "$run" "$PEAKS" "$np" <<'PYEND'
import sys
b, run, d, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mb = [int(open(f"{d}/rank-{r}").read().split()[-1]) / 1024 for r in range(n)]
print(f"{b} {run}: peak MB per rank " + " ".join(f"{m:.1f}" for m in mb) + f"  (max {max(mb):.1f})")
PYEND
  done
done
