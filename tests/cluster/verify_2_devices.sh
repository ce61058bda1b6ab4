#!/usr/bin/env bash
# Two emulated devices on a 100 Mbit/s link: a tiled run across them trains exactly like
# one process (tiletrain verify), each rank ran on its own device (host names), and a rank
# on a device under a CPU quota of 0.9 of a core naps at once when it waits (no polling).
# Usage: verify_2_devices.sh TILETRAIN_BINARY
set -euo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctv
export TILETRAIN_BIN=$1
edge up --devices 2 --link 100mbit --device-speed 0.9
edge run -- verify --cfg "$src/tests/fixtures/pool_mix/net.cfg" --grid 1x2 --groups none --batch 3 --steps 2 | tee "$tmp/log"
grep -q "^OK: tiled training matches untiled" "$tmp/log" || { echo "FAIL: verify did not report OK"; exit 1; }
# The same job reports where its ranks ran: one per device.
# OMP_NUM_THREADS=1 in the ranks: their thread count is then the same before and after the
# command sets it, so a poll window worked out while MPI started would stand.
OMPI_MCA_mca_base_env_list=OMP_NUM_THREADS=1 \
  edge run -- bench --cfg "$src/tests/fixtures/pool_mix/net.cfg" --grid 1x2 --steps 1 --warmup 0 --json \
  >"$tmp/bench.out" 2>"$tmp/bench.err" || {
  echo "FAIL: bench across the devices failed:"
  cat "$tmp/bench.out" "$tmp/bench.err"
  exit 1
}
# (stderr apart: a rank's message written while the root prints its JSON line would cut it)
python3 - "$tmp/bench.out" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
assert lines, "FAIL: bench printed no JSON:\n" + open(sys.argv[1]).read()
r = json.loads(lines[-1])
hosts = sorted(r.get("hosts", []))
assert hosts == ["dev0", "dev1"], f"FAIL: ranks ran on {hosts}, expected dev0 and dev1"
print("ranks on", hosts)
poll = r.get("busy_poll_s_by_rank")
assert poll == [0.0, 0.0], f"FAIL: ranks under a 0.9-core quota poll {poll} s before napping, expected none"
PY
echo PASS
