#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/ from real files.

    fuzz/make_corpus.py TILETRAIN_BINARY

The seeds are the tree's own files (cfgs/, tests/fixtures/, the calibrated cluster files
of bench/planner/out/, cluster/), Debian's darknet cfgs and .data files, small pictures
made here with python3-PIL, and a checkpoint written by `TILETRAIN_BINARY train` for the
net fuzz_weights loads (tests/fixtures/fc). Each input is laid out as its target reads
it (README.md): a leading selector byte where the target has one, files of one input
joined by the separator of fuzz_util.hpp. Findings' reproducers are added by hand
(fuzz/corpus/<target>/crash-*, once fixed) and are kept when this script runs again.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n#--tiletrain-fuzz-split--#\n"  # fuzz::kSeparator
DARKNET_CFG = "/usr/share/darknet/cfg"


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def fresh(target):
    """Removes the generated seeds of `target` (not the findings' reproducers)."""
    d = os.path.join(CORPUS, target)
    if os.path.isdir(d):
        for n in os.listdir(d):
            if not n.startswith("crash-") and not n.startswith("oom-") and not n.startswith("timeout-"):
                os.remove(os.path.join(d, n))


def cfg_seeds():
    fresh("fuzz_cfg")
    for n in sorted(os.listdir(os.path.join(ROOT, "cfgs"))):
        put("fuzz_cfg", "cfgs-" + n, read(os.path.join(ROOT, "cfgs", n)))
    for n in sorted(os.listdir(os.path.join(ROOT, "tests", "fixtures"))):
        p = os.path.join(ROOT, "tests", "fixtures", n, "net.cfg")
        if os.path.exists(p):
            put("fuzz_cfg", "fixture-" + n + ".cfg", read(p))
    # Darknet's: the detectors and residual nets the engine runs, and a few classifiers and
    # nets it refuses
    for n in ["yolov2.cfg", "yolov2-voc.cfg", "yolov2-tiny.cfg", "yolov2-tiny-voc.cfg", "yolov3-tiny.cfg",
              "yolov3-voc.cfg", "resnet18.cfg", "darknet53.cfg", "resnext50.cfg", "tiny.cfg", "darknet.cfg",
              "cifar.cfg", "strided.cfg", "yolov1-tiny.cfg", "rnn.cfg", "yolo9000.cfg"]:
        p = os.path.join(DARKNET_CFG, n)
        if os.path.exists(p):
            put("fuzz_cfg", "darknet-" + n, read(p))


def data_seeds():
    fresh("fuzz_data")
    names = b"circle\nsquare\ntriangle\ncross\n"
    lst = b"/data/shapes/images/train/00000.jpg\n/data/shapes/images/train/00001.jpg\n\nJPEGImages/x.png\n"
    put("fuzz_data", "data-shapes", bytes([0, 4]) + b"classes=4\ntrain=train.txt\nvalid=train.txt\nnames=names.txt\n"
        b"backup=backup/\n" + SEP + names + SEP + lst)
    put("fuzz_data", "data-comments", bytes([0, 2]) + b"# a comment\n  classes = 2 \n\ntrain  = train.txt\n"
        b"names= names.txt\neval=coco\n" + SEP + b"a\n\n b \n" + SEP + b"raw/1.JPEG\n")
    for n in ["voc.data", "coco.data"]:
        p = os.path.join(DARKNET_CFG, n)
        if os.path.exists(p):
            put("fuzz_data", "darknet-" + n, bytes([0, 20]) + read(p))
    for n in ["imagenet1k.data"]:  # a classifier's (labels=, top=)
        p = os.path.join(DARKNET_CFG, n)
        if os.path.exists(p):
            put("fuzz_data", "darknet-" + n, bytes([3, 10]) + read(p))
    put("fuzz_data", "data-classifier", bytes([3, 3]) + b"classes=3\ntrain=train.txt\nlabels=names.txt\ntop=2\n" +
        SEP + b"cat\ndog\nbird\n" + SEP + b"pics/1_cat.png\npics/2_dog.png\ncat/dog.png\nnone.png\n")
    put("fuzz_data", "list", bytes([1, 0]) + lst + b"  spaced/images/a.jpg  \r\n")
    put("fuzz_data", "labels", bytes([2, 4]) + b"0 0.5 0.5 0.25 0.25\n3 0.1 0.9 0.05 1\n\n1 1e-3 0 0.5 2.5e-1\n")
    put("fuzz_data", "labels-voc", bytes([2, 20]) + b"19 0.301 0.4402 0.598 0.8795\n11 0.5 0.5 1 1\n")


def image_seeds():
    fresh("fuzz_image")

    def pil(name, im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        put("fuzz_image", name, b.getvalue())

    rgb = Image.new("RGB", (7, 5))
    for y in range(5):
        for x in range(7):
            rgb.putpixel((x, y), (x * 36, y * 60, (x * y * 17) % 256))
    pil("rgb.png", rgb, "PNG")
    pil("rgba.png", rgb.convert("RGBA"), "PNG")
    pil("gray.png", rgb.convert("L"), "PNG")
    pil("palette.png", rgb.convert("P"), "PNG")
    pil("rgb-small.png", rgb.resize((3, 2)), "PNG")
    pil("gray16.png", rgb.convert("L").convert("I").point(lambda v: v * 257), "PNG")
    pil("rgb.jpg", rgb.resize((16, 9)), "JPEG", quality=80)
    pil("progressive.jpg", rgb.resize((9, 16)), "JPEG", quality=60, progressive=True)
    pil("gray.jpg", rgb.convert("L"), "JPEG")
    pil("rgb.bmp", rgb, "BMP")
    pil("palette.bmp", rgb.convert("P"), "BMP")
    pil("rgb.tga", rgb, "TGA")
    pil("rle.tga", rgb, "TGA", compression="tga_rle")
    pil("rgb.gif", rgb.convert("P"), "GIF")
    pil("rgb.ppm", rgb, "PPM")
    pil("gray.pgm", rgb.convert("L"), "PPM")
    pil("column.png", Image.new("RGB", (1, 40), (200, 10, 10)), "PNG")
    pil("row.png", Image.new("RGB", (40, 1), (10, 200, 10)), "PNG")
    # Radiance HDR, written by hand (PIL has no writer): 2x2, flat RGBE
    put("fuzz_image", "tiny.hdr", b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n" + bytes([128, 64, 32, 129]) * 4)


def weights_seeds(tiletrain):
    fresh("fuzz_weights")
    w = read(os.path.join(ROOT, "tests", "fixtures", "fc", "init.weights"))
    put("fuzz_weights", "weights-fixture", b"\0" + w)
    major, minor, rev = struct.unpack("<3i", w[:12])
    # Darknet before 0.2: `seen` as int32 (16-byte header)
    put("fuzz_weights", "weights-old-header", b"\0" + struct.pack("<3ii", 0, 1, 0, 64) + w[20:])
    # connected weights stored [in][out] (Darknet marks them with a version above 1000)
    put("fuzz_weights", "weights-transposed", b"\0" + struct.pack("<3i", 1001, minor, rev) + w[12:])
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(ROOT, "tests", "fixtures", "fc", "net.cfg")
        subprocess.run([tiletrain, "train", "--cfg", cfg, "--steps", "2", "--checkpoint", os.path.join(tmp, "ck"),
                        "--checkpoint-every", "1", "--save-weights", os.path.join(tmp, "trained.weights")],
                       check=True, stdout=subprocess.DEVNULL, cwd=tmp)
        put("fuzz_weights", "weights-trained", b"\0" + read(os.path.join(tmp, "trained.weights")))
        step = os.path.join(tmp, "ck", sorted(os.listdir(os.path.join(tmp, "ck")))[-1])
        put("fuzz_weights", "checkpoint-trained", b"\1" + read(os.path.join(step, "meta.json")) + SEP +
            read(os.path.join(step, "weights")) + SEP + read(os.path.join(step, "momentum")))


def trimmed_model(m, points=2):
    """A calibrated model with fewer measurement points (the seeds stay small)."""
    m = dict(m)
    m["points"] = m["points"][:points]
    for k in ["points_note", "layers_note"]:
        m.pop(k, None)
    return m


def cluster_seeds():
    fresh("fuzz_cluster")
    out = os.path.join(ROOT, "bench", "planner", "out")
    local = json.load(open(os.path.join(out, "local-cluster.json")))
    hetero = json.load(open(os.path.join(out, "hetero-cluster.json")))
    edge = json.load(open(os.path.join(out, "edge-100mbit-cluster.json")))
    for name, c, keep in [("local", local, 2), ("hetero", hetero, 1), ("edge-100mbit", edge, 1)]:
        c = dict(c)
        c["devices"] = [dict(d) for d in c["devices"][:2]]
        for d in c["devices"]:
            if isinstance(d.get("model"), dict):
                d["model"] = trimmed_model(d["model"], keep)
        if "pairs" in c.get("links", {}):
            names = {d["name"] for d in c["devices"]}
            c["links"]["pairs"] = [p for p in c["links"]["pairs"] if p["a"] in names and p["b"] in names]
        put("fuzz_cluster", "cluster-" + name + ".json", b"\0" + json.dumps(c, indent=1).encode())
    model = trimmed_model(local["devices"][0]["model"], 3)
    # a model device beside profile devices, point-to-point links, a profile of the file's own
    mixed = {"_note": "comments are keys starting with _", "name": "mixed", "comment": "seed",
             "devices": [{"name": "dev0", "profile": "pi3"},
                         {"name": "dev1", "host": "pi-b", "profile": "my-board", "speed": 0.5, "cores": 2},
                         {"name": "dev2", "cores": 8, "memory_mb": 2048, "model": trimmed_model(model, 1)}],
             "links": {"topology": "point-to-point", "bandwidth_mbit": 100, "latency_us": 200,
                       "pairs": [{"a": "dev2", "b": "dev0", "bandwidth_mbit": 94.1, "latency_us": 310},
                                 {"a": "dev1", "b": "dev0", "latency_us": 50}],
                       "shared_memory": {"bandwidth_mbit": 40000, "latency_us": 1},
                       "efficiency": {"ring": 0.9, "many_flows": 0.8, "ring_overhead_s": 0.001}},
             "profiles": {"my-board": {"cores": 2, "memory_mb": 512, "link_mbit": 100, "gflops": 3}}}
    put("fuzz_cluster", "cluster-mixed.json", b"\0" + json.dumps(mixed, indent=1).encode())
    profiles = {"devices": [{"name": "a", "profile": "pi4"}, {"name": "b", "profile": "comm-bound"}],
                "links": {"pairs": [{"a": "a", "b": "b", "bandwidth_mbit": 30}]}}
    put("fuzz_cluster", "cluster-profiles.json", b"\0" + json.dumps(profiles).encode())
    put("fuzz_cluster", "model.json", b"\1" + json.dumps(model, indent=1).encode())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cfg_seeds()
    data_seeds()
    image_seeds()
    weights_seeds(os.path.abspath(sys.argv[1]))
    cluster_seeds()
    total = 0
    for t in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, t))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        total += size
        print(f"{t}: {len(files)} seeds, {size // 1024} KB")
    print(f"total {total // 1024} KB")


if __name__ == "__main__":
    main()
