# tiletrain calibrate across two emulated devices (30 Mbit/s link, CPU quotas of 0.6 and
# 0.3 of a core, 900 MB each): the cluster file it writes names both devices, finds their
# memory (the cgroup's limit, not the machine's), measures quotas, link rate and a
# --low-memory chunk's collectives no faster than the limits allow, and loads as it is in
# plan --cluster. Only bounds that a busy machine cannot break are asserted (a loaded host
# makes measurements slower, never faster); how close calibrate comes to the limits is
# measured by bench/planner/accuracy.sh, not here.
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
assert 0 < caps["dev0"] <= 0.6 * 1.15 and 0 < caps["dev1"] <= 0.3 * 1.15, f"FAIL: capacities {caps} above the quotas"
mem = {d["name"]: d["memory_mb"] for d in c["devices"]}
assert all(abs(m - 900) < 1 for m in mem.values()), f"FAIL: memory {mem}, the devices have 900 MB"
pair = c["links"]["pairs"][0]
assert 0 < pair["bandwidth_mbit"] <= 37.5, f"FAIL: measured {pair['bandwidth_mbit']:.1f} Mbit/s on a 30 Mbit/s link"
speed = {d["name"]: d["model"]["solo_compute_s"] for d in c["devices"]}
assert all(s > 0 for s in speed.values()), f"FAIL: compute times {speed}"
ratio = speed["dev1"] / speed["dev0"]
# One rank's --low-memory chunk, gathered by the other: one flow on the link, at most its rate.
eff = c["links"]["efficiency"]
assert 0 < eff["chunk_gather"] <= 1.4, f"FAIL: a one-owner chunk all-gather at {eff['chunk_gather']:.2f} of the link's rate"
assert 0 < eff["chunk_reduce_scatter"] <= 1.4, f"FAIL: a one-owner chunk reduce-scatter at {eff['chunk_reduce_scatter']:.2f}"
p = json.load(open(sys.argv[2]))["prediction"]
assert p["step_s"] > 0 and len(p["ranks"]) == 2, "FAIL: plan --cluster gave no prediction"
print(f"link {pair['bandwidth_mbit']:.1f} Mbit/s, {pair['latency_us']:.0f} us; dev1/dev0 compute {ratio:.2f}; predicted step {p['step_s']:.4f} s")
PY
echo PASS
