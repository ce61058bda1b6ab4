#!/usr/bin/env bash
# Short version of the main job's guarantee: from the same seed and data order, 4 ranks
# on a 2x2 grid and 1 untiled process give the same loss curve (within 1e-3 relative at
# every step) and the same test accuracy (within 0.3 points).
# Usage: loss_curve.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
args=(train --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --steps 100 --log-every 50)
"$bin" "${args[@]}" --loss-log "$tmp/one.txt" > "$tmp/one.log"
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --grid 2x2 \
  --loss-log "$tmp/four.txt" > "$tmp/four.log"
python3 - "$tmp/one.txt" "$tmp/four.txt" <<'PY'
import sys
def read(p):
    lines = open(p).read().split("\n")
    losses = [float(l) for l in lines if l and not l.startswith("accuracy")]
    acc = float([l for l in lines if l.startswith("accuracy")][0].split()[1])
    return losses, acc
(a, acc_a), (b, acc_b) = read(sys.argv[1]), read(sys.argv[2])
assert len(a) == len(b) == 100, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"loss: first {a[0]:.5f} vs {b[0]:.5f}, last {a[-1]:.5f} vs {b[-1]:.5f}, worst relative difference {worst:.2e}")
print(f"accuracy: 1 rank untiled {acc_a:.2f}%, 4 ranks 2x2 {acc_b:.2f}%")
ok = worst <= 1e-3 and abs(acc_a - acc_b) <= 0.3
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
