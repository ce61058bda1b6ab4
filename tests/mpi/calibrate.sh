#!/usr/bin/env bash
# tiletrain calibrate under mpirun (3 ranks on this machine): one cluster file with this
# host as its one device, the ranks' shared-memory link measured, loadable as it is by
# plan --cluster and plan --optimize.
# Usage: calibrate.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set -o pipefail
cfg=$src/tests/fixtures/pool_mix/net.cfg
timeout 300 "${mpi[@]}" -np 3 "$bin" calibrate --cfg "$cfg" --steps 3 --out "$tmp/c.json"
"$bin" plan --cfg "$cfg" --grid 3x1 --cluster "$tmp/c.json" --json >"$tmp/plan.json"
"$bin" plan --cfg "$cfg" --cluster "$tmp/c.json" --optimize >"$tmp/opt.txt"
python3 - "$tmp/c.json" "$tmp/plan.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert len(c["devices"]) == 1, f"FAIL: {len(c['devices'])} devices for one host"
m = c["devices"][0]["model"]
assert m["concurrent_ranks"] == 3, f"FAIL: concurrent_ranks {m['concurrent_ranks']}, expected 3"
shm = c["links"]["shared_memory"]
assert shm["bandwidth_mbit"] > 1000, f"FAIL: shared memory at {shm['bandwidth_mbit']:.0f} Mbit/s"
p = json.load(open(sys.argv[2]))["prediction"]
assert len(p["ranks"]) == 3 and p["step_s"] > 0, "FAIL: no prediction for 3 ranks"
print(f"shared memory {shm['bandwidth_mbit']:.0f} Mbit/s, {shm['latency_us']:.1f} us; predicted step {p['step_s']:.4f} s")
PY
grep -q "mpirun -np" "$tmp/opt.txt" || { echo "FAIL: --optimize printed no command line"; cat "$tmp/opt.txt"; exit 1; }
echo PASS
