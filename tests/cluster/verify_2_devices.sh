#!/usr/bin/env bash
# Two emulated devices on a 100 Mbit/s link: a tiled run across them trains exactly like
# one process (tiletrain verify), and each rank ran on its own device (host names).
# Usage: verify_2_devices.sh TILETRAIN_BINARY
set -euo pipefail
. "$(dirname "$0")/common.sh"
cluster_test ctv
export TILETRAIN_BIN=$1
edge up --devices 2 --link 100mbit
edge run -- verify --cfg "$src/tests/fixtures/pool_mix/net.cfg" --grid 1x2 --groups none --batch 3 --steps 2 | tee "$tmp/log"
grep -q "^OK: tiled training matches untiled" "$tmp/log" || { echo "FAIL: verify did not report OK"; exit 1; }
# The same job reports where its ranks ran: one per device.
edge run -- bench --cfg "$src/tests/fixtures/pool_mix/net.cfg" --grid 1x2 --steps 1 --warmup 0 --json | tail -n1 >"$tmp/bench.json"
python3 - "$tmp/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
hosts = sorted(r.get("hosts", []))
assert hosts == ["dev0", "dev1"], f"FAIL: ranks ran on {hosts}, expected dev0 and dev1"
print("ranks on", hosts)
PY
echo PASS
