#!/usr/bin/python3
"""A small detection data set, made deterministically: coloured shapes on textured backgrounds.

    scripts/make_shapes_dataset.py OUT [--train N] [--valid M] [--size S] [--seed K] [--masks]

Four classes by shape (circle, square, triangle, cross), 1-4 per picture, colour independent
of the class, 15-50 % of the picture's side, overlapping a little at most; backgrounds of
stripes, gradients, noise and blobs of other colours, so that a detector has to learn shapes,
not "whatever is not background". Darknet's layout: OUT/images/{train,valid}/NNNNN.jpg,
OUT/labels/{train,valid}/NNNNN.txt ("class x y w h", normalised), OUT/train.txt and
OUT/valid.txt (absolute paths), OUT/shapes.names and OUT/shapes.data, written last.
The same arguments give the same bytes (numpy's seeded Generator, PIL's JPEG encoder), and
a finished set with the same arguments is not made again. --masks also writes each
object's mask (OUT/masks/...), which the tests use to check the boxes.

Defaults: 128x128 pictures (a YOLOv2-tiny-shaped net at 128x128 trains a step in well under
a second on one core), 1600 for training and 200 held out.
"""
import argparse
import json
import os
import sys

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ["circle", "square", "triangle", "cross"]


def background(rng, s):
    kind = rng.integers(4)
    y, x = np.mgrid[0:s, 0:s].astype(np.float32) / s
    base = rng.uniform(0, 1, 3)
    other = rng.uniform(0, 1, 3)
    if kind == 0:  # stripes at a random angle and period
        a, period = rng.uniform(0, np.pi), rng.uniform(0.05, 0.3)
        t = (np.sin((x * np.cos(a) + y * np.sin(a)) * 2 * np.pi / period) > 0)[..., None]
        img = np.where(t, base, other)
    elif kind == 1:  # a gradient
        a = rng.uniform(0, 2 * np.pi)
        t = ((x - 0.5) * np.cos(a) + (y - 0.5) * np.sin(a) + 0.5).clip(0, 1)[..., None]
        img = base * (1 - t) + other * t
    elif kind == 2:  # coarse noise
        n = rng.uniform(0, 1, (s // 8 + 1, s // 8 + 1, 3))
        img = np.kron(n, np.ones((8, 8, 1)))[:s, :s] * 0.6 + base * 0.4
    else:  # a flat colour
        img = np.broadcast_to(base, (s, s, 3)).copy()
    img = img + rng.normal(0, 0.04, (s, s, 3))  # grain
    pic = Image.fromarray((img.clip(0, 1) * 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(pic)
    for _ in range(rng.integers(0, 4)):  # blobs of other colours: distractors without corners
        cx, cy, r = rng.uniform(0, s, 2).tolist() + [rng.uniform(0.03, 0.1) * s]
        d.ellipse([cx - r, cy - r * 0.5, cx + r, cy + r * 0.5], fill=tuple(rng.integers(0, 256, 3).tolist()))
    return pic


def shape_polygon(cls, cx, cy, r, rng):
    """Points of the shape (None for the circle) and its exact extent."""
    if cls == 0:
        return None, (cx - r, cy - r, cx + r, cy + r)
    if cls == 1:
        pts = [(cx - r, cy - r), (cx + r, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    elif cls == 2:
        pts = [(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    else:
        t = r * 0.35
        pts = [(cx - t, cy - r), (cx + t, cy - r), (cx + t, cy - t), (cx + r, cy - t), (cx + r, cy + t),
               (cx + t, cy + t), (cx + t, cy + r), (cx - t, cy + r), (cx - t, cy + t), (cx - r, cy + t),
               (cx - r, cy - t), (cx - t, cy - t)]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return pts, (min(xs), min(ys), max(xs), max(ys))


def make_one(rng, s):
    pic = background(rng, s)
    d = ImageDraw.Draw(pic)
    objects, placed = [], []
    for _ in range(rng.integers(1, 5)):
        for _try in range(20):
            cls = int(rng.integers(len(CLASSES)))
            r = rng.uniform(0.075, 0.25) * s
            cx, cy = rng.uniform(r, s - r, 2)
            box = (cx - r, cy - r, cx + r, cy + r)
            # at most a little overlap with what is there
            if all(max(0, min(box[2], b[2]) - max(box[0], b[0])) * max(0, min(box[3], b[3]) - max(box[1], b[1]))
                   < 0.15 * (2 * r) ** 2 for b in placed):
                break
        else:
            continue
        pts, ext = shape_polygon(cls, cx, cy, r, rng)
        colour = tuple(rng.integers(0, 256, 3).tolist())
        mask = Image.new("L", (s, s), 0)
        md = ImageDraw.Draw(mask)
        if pts is None:
            d.ellipse(ext, fill=colour, outline=(0, 0, 0))
            md.ellipse(ext, fill=255)
        else:
            d.polygon(pts, fill=colour, outline=(0, 0, 0))
            md.polygon(pts, fill=255)
        placed.append(box)
        # the box: the drawn pixels' extent (PIL rasterises the shape's edges inclusively)
        ys, xs = np.nonzero(np.asarray(mask))
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        objects.append((cls, (x0 + x1) / 2 / s, (y0 + y1) / 2 / s, (x1 - x0) / s, (y1 - y0) / s, mask))
    return pic, objects


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=1600)
    ap.add_argument("--valid", type=int, default=200)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--masks", action="store_true")
    a = ap.parse_args()
    if a.train < 1 or a.valid < 0 or a.size < 32:
        ap.error("need --train >= 1, --valid >= 0, --size >= 32")
    out = os.path.abspath(a.out)
    stamp = json.dumps({"train": a.train, "valid": a.valid, "size": a.size, "seed": a.seed, "masks": a.masks,
                        "version": 1}, sort_keys=True)
    data_file = os.path.join(out, "shapes.data")
    stamp_file = os.path.join(out, ".stamp")
    if os.path.exists(data_file) and os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
        print(f"{data_file}: already made with these arguments")
        return
    if os.path.exists(data_file):
        os.remove(data_file)  # an interrupted or different set is not complete until this exists again
    rng = np.random.default_rng(a.seed)
    for split, count in (("train", a.train), ("valid", a.valid)):
        for sub in ("images", "labels") + (("masks",) if a.masks else ()):
            os.makedirs(os.path.join(out, sub, split), exist_ok=True)
        paths = []
        for i in range(count):
            pic, objects = make_one(rng, a.size)
            img = os.path.join(out, "images", split, f"{i:05d}.jpg")
            pic.save(img, quality=90)
            with open(os.path.join(out, "labels", split, f"{i:05d}.txt"), "w") as f:
                for cls, x, y, w, h, _ in objects:
                    f.write(f"{cls} {x:.6f} {y:.6f} {w:.6f} {h:.6f}\n")
            if a.masks:
                for k, o in enumerate(objects):
                    o[5].save(os.path.join(out, "masks", split, f"{i:05d}_{k}.png"))
            paths.append(img)
        with open(os.path.join(out, f"{split}.txt"), "w") as f:
            f.write("".join(p + "\n" for p in paths))
    with open(os.path.join(out, "shapes.names"), "w") as f:
        f.write("".join(c + "\n" for c in CLASSES))
    with open(stamp_file, "w") as f:
        f.write(stamp)
    with open(data_file + ".tmp", "w") as f:
        f.write(f"classes={len(CLASSES)}\ntrain={out}/train.txt\nvalid={out}/valid.txt\n"
                f"names={out}/shapes.names\nbackup={out}/backup\n")
    os.replace(data_file + ".tmp", data_file)
    print(f"{data_file}: {a.train} training and {a.valid} held-out pictures of {a.size}x{a.size}")


if __name__ == "__main__":
    sys.exit(main())
