#!/usr/bin/env bash
# bench --trace under mpirun: 2 ranks on a 1x2 grid write ONE trace (rank 0 gathers the
# other's spans): a process per rank named "rank N (host)", each with its steps, its
# layers forward and backward, halo and weight exchanges and the update; the tail after
# the cut on rank 0 only; spans of one lane nested or disjoint. Prints the spans per rank
# and category.
# Usage: trace.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
command -v mpirun > /dev/null || { echo "skipped: no mpirun"; exit 77; }
"${mpi[@]}" -np 2 "$bin" bench \
  --cfg "$src/cfgs/small-classifier.cfg" --threads 1 --batch 4 --grid 1x2 --steps 2 --warmup 1 \
  --trace "$tmp/run.json" > "$tmp/out.log"
grep "wrote .*run.json: .* on 2 rank(s)" "$tmp/out.log" || { echo "FAIL: no 'wrote' line:"; cat "$tmp/out.log"; exit 1; }
/usr/bin/python3 - "$tmp/run.json" <<'PY'
import collections, json, sys
j = json.load(open(sys.argv[1]))
spans = [e for e in j["traceEvents"] if e["ph"] == "X"]
names = {e["pid"]: e["args"]["name"] for e in j["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
fail = []
if sorted({e["pid"] for e in spans}) != [0, 1]:
    fail.append(f"pids {sorted({e['pid'] for e in spans})}, not [0, 1]")
for pid in (0, 1):
    if not names.get(pid, "").startswith(f"rank {pid} ("):
        fail.append(f"process {pid} is named {names.get(pid)!r}")
    cats = collections.Counter(e["cat"] for e in spans if e["pid"] == pid)
    print(f"rank {pid}: " + ", ".join(f"{c} {n}" for c, n in sorted(cats.items())))
    if cats["step"] != 2:
        fail.append(f"rank {pid}: {cats['step']} steps, not 2")
    for c in ("forward", "backward", "halo", "weights", "update", "io"):
        if cats[c] == 0:
            fail.append(f"rank {pid}: no {c} span")
    if (cats["tail"] > 0) != (pid == 0):
        fail.append(f"rank {pid}: {cats['tail']} tail spans (the tail runs on rank 0 only)")
    for tid in (0, 1):  # nested or disjoint, in whole nanoseconds
        lane = sorted(((round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3), e["name"]) for e in spans
                       if e["pid"] == pid and e["tid"] == tid), key=lambda s: (s[0], -s[1]))
        stack = []
        for a, b, name in lane:
            while stack and stack[-1][1] <= a:
                stack.pop()
            if stack and b > stack[-1][1]:
                fail.append(f"rank {pid} lane {tid}: {name} overlaps {stack[-1][2]}")
            stack.append((a, b, name))
for f in fail:
    print("FAIL:", f)
print("PASS" if not fail else "FAIL")
sys.exit(1 if fail else 0)
PY
