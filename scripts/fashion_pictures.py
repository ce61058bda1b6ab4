#!/usr/bin/python3
"""Writes Fashion-MNIST as a Darknet classifier data set of PNG pictures.

    scripts/fashion_pictures.py OUT [--train N] [--valid N] [--src DIR]

OUT gets train/ and valid/ folders of 28x28 grey PNGs named NNNNN_<label>.png (the first N
training pictures and the first N test pictures), train.list and valid.list (one path per
line, as given in OUT, so relative if OUT is), labels.list and fashion.data (classes=,
train=, valid=, labels=, top=2). Darknet's classifiers find a picture's class as the one
label its path contains, so the labels are chosen to contain none of each other (T-shirt/top
is "top", ankle boot "boot") and OUT must contain none of them. Everything is written into
OUT.tmp and renamed at the end: an interrupted run leaves no half data set. An OUT (or
OUT.tmp) that exists is replaced only if this script wrote it (its marker file
.fashion_pictures), never another folder.
"""
import argparse
import gzip
import os
import shutil
import struct
import sys
import zlib

MARKER = ".fashion_pictures"  # in every folder this script writes
LABELS = ["top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]


def read_idx(path, magic):
    try:
        data = gzip.open(path).read()
    except OSError as e:
        sys.exit(f"fashion_pictures: cannot read {path}: {e}")
    if len(data) < 8 or struct.unpack(">I", data[:4])[0] != magic:
        sys.exit(f"fashion_pictures: {path}: not an IDX file of the expected kind")
    return data


def png(pixels, w, h):
    """A grey 8-bit PNG of w x h bytes."""
    raw = b"".join(b"\0" + pixels[y * w:(y + 1) * w] for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=60000, help="training pictures (at most 60000)")
    ap.add_argument("--valid", type=int, default=10000, help="held-out pictures, from the test set (at most 10000)")
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist", help="the four IDX .gz files")
    a = ap.parse_args()
    if not 1 <= a.train <= 60000 or not 1 <= a.valid <= 10000:
        sys.exit("fashion_pictures: --train must be in [1, 60000] and --valid in [1, 10000]")
    out = a.out.rstrip("/")
    for label in LABELS:
        if label in out:
            sys.exit(f"fashion_pictures: the folder '{out}' contains the label '{label}': every picture's path would "
                     f"contain it (a picture's class is the one label its path contains); choose another folder")
    tmp = out + ".tmp"
    for d in (out, tmp):
        if os.path.lexists(d) and not os.path.isfile(os.path.join(d, MARKER)):
            sys.exit(f"fashion_pictures: '{d}' exists and is not a data set this script wrote: remove it or choose "
                     f"another folder")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    open(os.path.join(tmp, MARKER), "w").close()
    lists = {}
    for part, prefix, n in (("train", "train", a.train), ("valid", "t10k", a.valid)):
        images = read_idx(os.path.join(a.src, f"{prefix}-images-idx3-ubyte.gz"), 2051)
        labels = read_idx(os.path.join(a.src, f"{prefix}-labels-idx1-ubyte.gz"), 2049)
        count, rows, cols = struct.unpack(">III", images[4:16])
        if n > count or len(images) < 16 + count * rows * cols or len(labels) < 8 + count:
            sys.exit(f"fashion_pictures: {prefix} set: {count} pictures, {n} asked (or the file is truncated)")
        os.makedirs(os.path.join(tmp, part))
        paths = []
        for i in range(n):
            label = LABELS[labels[8 + i]]
            name = f"{i:05d}_{label}.png"
            px = images[16 + i * rows * cols:16 + (i + 1) * rows * cols]
            with open(os.path.join(tmp, part, name), "wb") as f:
                f.write(png(px, cols, rows))
            paths.append(os.path.join(out, part, name))
        lists[part] = paths
        with open(os.path.join(tmp, f"{part}.list"), "w") as f:
            f.write("\n".join(paths) + "\n")
    with open(os.path.join(tmp, "labels.list"), "w") as f:
        f.write("\n".join(LABELS) + "\n")
    with open(os.path.join(tmp, "fashion.data"), "w") as f:
        f.write(f"classes={len(LABELS)}\ntrain={out}/train.list\nvalid={out}/valid.list\n"
                f"labels={out}/labels.list\ntop=2\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"fashion_pictures: {len(lists['train'])} training and {len(lists['valid'])} held-out pictures in {out}/ "
          f"(data set {out}/fashion.data)")


if __name__ == "__main__":
    main()
