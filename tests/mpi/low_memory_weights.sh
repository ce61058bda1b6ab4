#!/usr/bin/env bash
# --low-memory keeps each rank's part of the sharded convolution weights only; before
# --save-weights the parts are gathered onto rank 0. The same short synthetic run on 4
# ranks (2x2), with and without --low-memory, must write .weights files of the full
# expected size (header + every parameter and batch-norm statistic of the cfg) whose
# values agree to 1e-5 (relative, whole file and largest element difference against the
# largest value). Burn-in is removed from the cfg so the 5 steps really move the weights
# (a rank part left ungathered would differ from the trained values). With a checkpoint
# every step the --low-memory run ends byte-identical to the one without.
# Usage: low_memory_weights.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
sed '/^burn_in/d' "$src/cfgs/small-classifier.cfg" > "$tmp/net.cfg"
args=(train --cfg "$tmp/net.cfg" --steps 5 --grid 2x2 --seed 3)
run() {  # name, extra arguments
  local name=$1
  shift
  if ! timeout 120 "${mpi[@]}" -np 4 "$bin" "${args[@]}" \
    "$@" --save-weights "$tmp/$name.weights" > "$tmp/$name.log" 2>&1; then
    echo "FAIL: the $name run failed"
    cat "$tmp/$name.log"
    exit 1
  fi
  grep -q "^saved " "$tmp/$name.log" || { echo "FAIL: the $name run saved nothing"; cat "$tmp/$name.log"; exit 1; }
  grep "^step 4:" "$tmp/$name.log" | sed "s/^/$name: /"
}
run normal
run low --low-memory
# A checkpoint every step: each process hands back the weights and momentum it gathered
# and does not keep; the steps after it must not notice.
run low_ckpt --low-memory --checkpoint "$tmp/ckpt" --checkpoint-every 1
cmp "$tmp/low.weights" "$tmp/low_ckpt.weights" || fail "--low-memory: checkpoints every step changed the weights"
# Expected size: 20-byte header, then every parameter (the info table's total) and, for
# each batch-normalised convolution, its running mean and variance (2 x filters).
"$bin" info --cfg "$tmp/net.cfg" > "$tmp/info.txt"
python3 - "$tmp/info.txt" "$tmp/normal.weights" "$tmp/low.weights" <<'PY'
import math, os, re, struct, sys
info, normal, low = sys.argv[1:]
text = open(info).read()
params = int(re.search(r"^total: (\d+) parameters", text, re.M).group(1))
stats = 0
for line in text.splitlines():
    f = line.split()
    if len(f) > 2 and f[0].isdigit() and f[1].endswith("+bn"):
        out = [t for t in f if re.fullmatch(r"\d+x\d+x\d+", t)][1]
        stats += 2 * int(out.split("x")[0])
expected = 20 + 4 * (params + stats)
ok = True
def read(path):
    global ok
    data = open(path, "rb").read()
    if len(data) != expected:
        print(f"FAIL: {os.path.basename(path)} has {len(data)} bytes, expected {expected} "
              f"({params} parameters + {stats} batch-norm statistics)")
        ok = False
    major, minor, rev, seen = struct.unpack("<iiiQ", data[:20])
    n = (len(data) - 20) // 4
    return (major, minor, rev, seen), struct.unpack(f"<{n}f", data[20:20 + 4 * n])
(ha, a), (hb, b) = read(low), read(normal)
print(f"files: {expected} bytes expected; header low {ha}, normal {hb}")
if ha != hb or ha[:3] != (0, 2, 0) or ha[3] != 5 * 32:
    print("FAIL: headers differ or are not version 0.2.0 with 160 images seen")
    ok = False
if len(a) != len(b):
    print("FAIL: the files hold different numbers of values")
    sys.exit(1)
if not all(math.isfinite(x) for x in a):
    print("FAIL: non-finite values in the low-memory file")
    ok = False
num = sum((x - y) ** 2 for x, y in zip(a, b))
den = sum(y * y for y in b)
rel = math.sqrt(num / den)
big = max(abs(y) for y in b)
worst = max(range(len(a)), key=lambda i: abs(a[i] - b[i]))
rel_max = abs(a[worst] - b[worst]) / big
zeros = sum(1 for x, y in zip(a, b) if x == 0.0 and y != 0.0)
print(f"low-memory vs normal: ||a-b||/||b|| {rel:.3g}; largest difference {abs(a[worst] - b[worst]):.3g} "
      f"at value {worst} (of {len(a)}), {rel_max:.3g} of the largest value; {zeros} value(s) zero only in low-memory")
if not (rel <= 1e-5 and rel_max <= 1e-5):
    print("FAIL: the weights differ by more than 1e-5")
    ok = False
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
