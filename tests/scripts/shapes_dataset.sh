#!/usr/bin/env bash
# scripts/make_shapes_dataset.py: the same arguments give the same bytes, another seed other
# pictures; labels are Darknet's format, found by Darknet's path rule, in range; every box
# is exactly its object's mask's extent (--masks); a second run with the same arguments
# does nothing.
# Usage: shapes_dataset.sh SOURCE_DIR
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make=("/usr/bin/python3" "$src/scripts/make_shapes_dataset.py")
"${make[@]}" "$tmp/a" --train 12 --valid 4 --masks > /dev/null
"${make[@]}" "$tmp/b" --train 12 --valid 4 --masks > /dev/null
"${make[@]}" "$tmp/c" --train 12 --valid 4 --seed 2 > /dev/null
diff -r "$tmp/a/images" "$tmp/b/images" > /dev/null || { echo "FAIL: not deterministic (images)"; exit 1; }
diff -r "$tmp/a/labels" "$tmp/b/labels" > /dev/null || { echo "FAIL: not deterministic (labels)"; exit 1; }
if diff -r "$tmp/a/images" "$tmp/c/images" > /dev/null; then echo "FAIL: another seed, same pictures"; exit 1; fi
"${make[@]}" "$tmp/a" --train 12 --valid 4 --masks | grep -q "already made" || { echo "FAIL: made again"; exit 1; }
/usr/bin/python3 - "$tmp/a" <<'PY'
import os, sys
import numpy as np
from PIL import Image
out = sys.argv[1]
data = dict(l.strip().split("=", 1) for l in open(f"{out}/shapes.data") if "=" in l)
classes = int(data["classes"])
assert len(open(data["names"]).read().split()) == classes
checked = 0
for split in ("train", "valid"):
    paths = open(f"{out}/{split}.txt").read().split()
    assert len(paths) == {"train": 12, "valid": 4}[split], len(paths)
    for p in paths:
        lab = p.replace("images", "labels", 1).replace(".jpg", ".txt")
        assert os.path.exists(lab), lab
        s = Image.open(p).size[0]
        for k, line in enumerate(open(lab).read().splitlines()):
            f = line.split()
            assert len(f) == 5, (lab, line)
            c, x, y, w, h = int(f[0]), *map(float, f[1:])
            assert 0 <= c < classes and all(0 < v <= 1 for v in (x, y, w, h)), (lab, line)
            m = np.asarray(Image.open(p.replace("images", "masks", 1).replace(".jpg", f"_{k}.png")))
            ys, xs = np.nonzero(m)
            want = ((xs.min() + xs.max() + 1) / 2 / s, (ys.min() + ys.max() + 1) / 2 / s,
                    (xs.max() + 1 - xs.min()) / s, (ys.max() + 1 - ys.min()) / s)
            assert max(abs(a - b) for a, b in zip((x, y, w, h), want)) < 1e-5, (lab, line, want)
            checked += 1
assert checked >= 16, checked
print(f"{checked} boxes equal their masks' extents")
PY
echo PASS
