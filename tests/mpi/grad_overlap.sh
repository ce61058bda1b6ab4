#!/usr/bin/env bash
# Gradients sent in buckets while backward runs (--overlap on) do leave during backward:
# the trace shows, on every rank, releases of buckets before the step's gradient sum began.
# That the result keeps one process's bits is one_process_bits.sh's to check.
# Usage: grad_overlap.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
command -v mpirun > /dev/null || { echo "skipped: no mpirun"; exit 77; }
export OMP_NUM_THREADS=1
"${mpi[@]}" -np 3 "$bin" bench \
  --cfg "$src/cfgs/yolov2-16.cfg" --size 96x96 --threads 1 --grid 1x3 --steps 2 --warmup 1 --overlap on \
  --trace "$tmp/run.json" > "$tmp/bench.log" || { echo "FAIL: bench --trace:"; cat "$tmp/bench.log"; exit 1; }
/usr/bin/python3 - "$tmp/run.json" <<'PY'
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
fail = []
for pid in (0, 1, 2):
    mine = [e for e in spans if e["pid"] == pid]
    sums = sorted(e["ts"] for e in mine if e["name"] == "gradient sum")
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine if e["cat"] == "step")
    buckets = [e["ts"] for e in mine if e["name"] == "gradient bucket"]
    if len(sums) != 2 or len(steps) != 2:
        fail.append(f"rank {pid}: {len(steps)} steps and {len(sums)} gradient sums, not 2 of each")
        continue
    for (a, b), s in zip(steps, sums):
        early = [t for t in buckets if a <= t < s]
        print(f"rank {pid}: {len(early)} bucket(s) sent before the gradient sum of the step at {a:.0f} us")
        if len(early) < 2:
            fail.append(f"rank {pid}: {len(early)} gradient bucket(s) left before the step's gradient sum, not 2 or more")
for f in fail:
    print("FAIL:", f)
print("PASS" if not fail else "FAIL")
sys.exit(1 if fail else 0)
PY
