#!/usr/bin/env bash
# tiletrain calibrate across two emulated devices (30 Mbit/s link, CPU quotas of 0.6 and
# 0.3 of a core, 900 MB each): the cluster file it writes names both devices, finds their
# quotas (within 15 %) and memory (the cgroup's limit, not the machine's), measures the link within 25 % of its shaped rate and the slower
# device's compute about twice as long, a --low-memory chunk's collectives at about the link's
# rate, and loads as it is in plan --cluster.
# Usage: calibrate_2_devices.sh TILETRAIN_BINARY
set -euo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctc
export TILETRAIN_BIN=$1
cfg=$src/cfgs/yolov2-16.cfg  # at 128x128: steps long enough for the quotas to show
edge up --devices 2 --link 30mbit --cores 1 --device-speed 0.6 --memory 900
edge speed dev1 0.3
edge run -- calibrate --cfg "$cfg" --size 128x128 --steps 3 --out "$tmp/c.json" | tee "$tmp/log"
"$TILETRAIN_BIN" plan --cfg "$cfg" --size 128x128 --grid 1x2 --cluster "$tmp/c.json" --json >"$tmp/plan.json"
python3 - "$tmp/c.json" "$tmp/plan.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
names = sorted(d["name"] for d in c["devices"])
assert names == ["dev0", "dev1"], f"FAIL: devices {names}"
caps = {d["name"]: d["model"]["cpu_capacity"] for d in c["devices"]}
print("capacities", caps, "link", c["links"]["pairs"][0], "compute", {d["name"]: d["model"]["solo_compute_s"] for d in c["devices"]})
assert abs(caps["dev0"] / 0.6 - 1) < 0.15 and abs(caps["dev1"] / 0.3 - 1) < 0.15, f"FAIL: capacities {caps}"
mem = {d["name"]: d["memory_mb"] for d in c["devices"]}
assert all(abs(m - 900) < 1 for m in mem.values()), f"FAIL: memory {mem}, the devices have 900 MB"
pair = c["links"]["pairs"][0]
assert 22.5 <= pair["bandwidth_mbit"] <= 37.5, f"FAIL: measured {pair['bandwidth_mbit']:.1f} Mbit/s on a 30 Mbit/s link"
speed = {d["name"]: d["model"]["solo_compute_s"] for d in c["devices"]}
ratio = speed["dev1"] / speed["dev0"]
assert 1.4 <= ratio <= 3.0, f"FAIL: dev1 (0.3 of a core) is {ratio:.2f}x slower than dev0 (0.6), expected about 2"
# One rank's --low-memory chunk, gathered by the other: one flow on the link, about its rate.
eff = c["links"]["efficiency"]
assert 0.6 <= eff["chunk_gather"] <= 1.4, f"FAIL: a one-owner chunk all-gather at {eff['chunk_gather']:.2f} of the link's rate"
assert 0.6 <= eff["chunk_reduce_scatter"] <= 1.4, f"FAIL: a one-owner chunk reduce-scatter at {eff['chunk_reduce_scatter']:.2f}"
p = json.load(open(sys.argv[2]))["prediction"]
assert p["step_s"] > 0 and len(p["ranks"]) == 2, "FAIL: plan --cluster gave no prediction"
print(f"link {pair['bandwidth_mbit']:.1f} Mbit/s, {pair['latency_us']:.0f} us; dev1/dev0 compute {ratio:.2f}; predicted step {p['step_s']:.4f} s")
PY
echo PASS
