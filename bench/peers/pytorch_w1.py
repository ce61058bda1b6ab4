#!/usr/bin/python3
"""PyTorch (CPU) peer benchmark for workload W1: YOLOv2 layers 0-15, 416x416x3, batch 1.

Run with Debian's interpreter (it has torch 1.13; the python3 first on PATH may not):

    /usr/bin/python3 bench/peers/pytorch_w1.py --threads 1 --steps 3 --warmup 1

The network mirrors cfgs/yolov2-16.cfg: every conv is Conv2d(bias=False) +
BatchNorm2d + LeakyReLU(0.1) ("same" padding: Darknet's pad=1 means size//2, so
1x1 convs are unpadded), maxpools are MaxPool2d(2, 2), and the [cost] type=sse
layer is 0.5 * sum((out - target)^2) against a fixed random target (its gradient
is Darknet's delta up to sign). Optimizer: SGD lr 0.001, momentum 0.9, weight
decay 0.0005 on the conv weights only (Darknet decays only weights, not the BN
scales/biases). Training mode throughout (batch-stat BN).

Each timed step is zero_grad + forward + loss + backward + optimizer.step; a
clock around each phase gives fwd_s (forward + loss), bwd_s (backward) and
update_s (zero_grad + optimizer.step). All reported times are medians over the
timed steps (warm-up steps excluded).

stdout: progress lines, then one JSON object on the last line.
"""
import argparse
import json
import os
import re
import resource
import statistics
import sys
import time


def rss_now_mb():
    """Current resident set size in MB (from /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def blas_libs():
    """Which BLAS the process has mapped (Debian's libblas.so.3 alternative decides)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"blas|blis|mkl", path.rsplit("/", 1)[-1]):
                libs.add(os.path.realpath(path))
    return sorted(libs)


def rss_peak_mb():
    """Peak resident set size of this process in MB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


rss_interpreter_mb = rss_now_mb()
import torch  # noqa: E402  (imported after the interpreter-baseline RSS reading)
import torch.nn as nn  # noqa: E402

rss_after_torch_mb = rss_now_mb()

# (kind, filters, size) in cfg order; all convs stride 1, "same" padding.
W1_LAYERS = [
    ("conv", 32, 3), ("max",),
    ("conv", 64, 3), ("max",),
    ("conv", 128, 3), ("conv", 64, 1), ("conv", 128, 3), ("max",),
    ("conv", 256, 3), ("conv", 128, 1), ("conv", 256, 3), ("max",),
    ("conv", 512, 3), ("conv", 256, 1), ("conv", 512, 3), ("conv", 256, 1),
]


def build_w1(in_ch=3, hw=416):
    mods, flop, c, s = [], 0, in_ch, hw
    for spec in W1_LAYERS:
        if spec[0] == "conv":
            _, f, k = spec
            mods += [nn.Conv2d(c, f, k, stride=1, padding=k // 2, bias=False),
                     nn.BatchNorm2d(f),
                     nn.LeakyReLU(0.1, inplace=True)]
            flop += 2 * s * s * f * c * k * k
            c = f
        else:
            mods.append(nn.MaxPool2d(2, 2))
            s //= 2
    return nn.Sequential(*mods), flop, (c, s, s)


def read_cfg(path):
    """Darknet cfg sections as (name, {key: value}) in order."""
    sections = []
    for raw in open(path):
        line = raw.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("["):
            sections.append((line.strip("[]"), {}))
        else:
            k, v = line.split("=", 1)
            sections[-1][1][k.strip()] = v.strip()
    return sections


def activation(name):
    """Darknet's activation as modules (linear: none)."""
    if name == "leaky":
        return [nn.LeakyReLU(0.1, inplace=True)]
    if name == "relu":
        return [nn.ReLU(inplace=True)]
    if name == "logistic":
        return [nn.Sigmoid()]
    if name == "linear":
        return []
    raise SystemExit(f"activation={name} is not supported by this peer")


class DarknetNet(nn.Module):
    """A Darknet cfg as a PyTorch graph, for timing: [convolutional] (+BN, groups=, leaky,
    relu or linear), [maxpool] (Darknet's padding), [route], [shortcut] of one shape, [reorg]
    (a space-to-depth reshape of the same cost; Darknet's index order differs), [upsample],
    [avgpool]; a [region]/[yolo] head is replaced by the MSE loss on its input (the issue's
    timing rule), a [softmax] head by cross-entropy."""

    def __init__(self, cfg, size):
        super().__init__()
        secs = read_cfg(cfg)
        c, h, w = int(secs[0][1].get("channels", 3)), size, size
        self.specs, self.mods, shapes, self.flop = [], nn.ModuleList(), [], 0
        for name, kv in secs[1:]:
            mod = None
            if name in ("convolutional", "conv"):
                f, k, st = int(kv["filters"]), int(kv.get("size", 1)), int(kv.get("stride", 1))
                pad = k // 2 if int(kv.get("pad", 0)) else 0
                bn = int(kv.get("batch_normalize", 0))
                groups = int(kv.get("groups", 1))
                layers = [nn.Conv2d(c, f, k, stride=st, padding=pad, bias=not bn, groups=groups)]
                if bn:
                    layers.append(nn.BatchNorm2d(f))
                layers += activation(kv.get("activation", "logistic"))
                mod = nn.Sequential(*layers)
                h, w = (h + 2 * pad - k) // st + 1, (w + 2 * pad - k) // st + 1
                self.flop += 2 * h * w * f * c // groups * k * k
                c = f
                spec = ("seq",)
            elif name in ("maxpool", "max"):
                k, st = int(kv.get("size", 1)), int(kv.get("stride", 1))
                padding = int(kv.get("padding", k - 1))
                spec = ("max", k, st, padding)
                h, w = (h + padding - k) // st + 1, (w + padding - k) // st + 1
            elif name == "route":
                idx = [int(v) for v in kv["layers"].split(",")]
                idx = [i if i >= 0 else len(shapes) + i for i in idx]
                spec = ("route", idx)
                c = sum(shapes[i][0] for i in idx)
                h, w = shapes[idx[0]][1], shapes[idx[0]][2]
            elif name == "shortcut":
                frm = int(kv["from"])
                spec = ("shortcut", frm if frm >= 0 else len(shapes) + frm)
                mod = nn.Sequential(*activation(kv.get("activation", "linear")))
            elif name in ("avgpool", "avg"):
                spec = ("avg",)
                h = w = 1
            elif name in ("softmax", "soft"):
                spec = ("softmax",)
            elif name == "reorg":
                st = int(kv.get("stride", 1))
                spec = ("reorg", st)
                c, h, w = c * st * st, h // st, w // st
            elif name == "upsample":
                st = int(kv.get("stride", 2))
                spec = ("up", st)
                h, w = h * st, w * st
            elif name in ("region", "yolo"):
                spec = ("head",)
            else:
                raise SystemExit(f"{cfg}: [{name}] is not supported by this peer")
            self.specs.append(spec)
            self.mods.append(mod if mod is not None else nn.Identity())
            shapes.append((c, h, w))
        self.heads = [i for i, s in enumerate(self.specs) if s[0] in ("head", "softmax")]
        self.head_shapes = [shapes[i] for i in self.heads]
        self.classifier = bool(self.heads) and self.specs[self.heads[-1]][0] == "softmax"

    def forward(self, x):
        outs, heads = [], []
        for spec, mod in zip(self.specs, self.mods):
            kind = spec[0]
            if kind == "seq":
                x = mod(x)
            elif kind == "max":
                _, k, st, padding = spec
                if padding:
                    x = nn.functional.pad(x, (padding // 2, padding - padding // 2, padding // 2, padding - padding // 2),
                                          value=float("-inf"))
                x = nn.functional.max_pool2d(x, k, st)
            elif kind == "route":
                x = torch.cat([outs[i] for i in spec[1]], 1)
            elif kind == "shortcut":
                add = outs[spec[1]]
                if add.shape != x.shape:  # Darknet's: a larger map sampled with a stride, the first min(C) channels
                    add = add[:, :, ::add.shape[2] // x.shape[2], ::add.shape[3] // x.shape[3]]
                    m = min(add.shape[1], x.shape[1])
                    x = torch.cat([x[:, :m] + add[:, :m], x[:, m:]], 1)
                else:
                    x = x + add
                x = mod(x)
            elif kind == "avg":
                x = x.mean((2, 3), keepdim=True)
            elif kind == "softmax":
                heads.append(x.flatten(1))
            elif kind == "reorg":
                x = nn.functional.pixel_unshuffle(x, spec[1])
            elif kind == "up":
                x = nn.functional.interpolate(x, scale_factor=spec[1], mode="nearest")
            elif kind == "head":
                heads.append(x)
            outs.append(x)
        return heads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--steps", type=int, default=3, help="timed training steps (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed warm-up steps (default 1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cfg", help="a Darknet cfg instead of W1 (region/yolo heads timed as an MSE loss, softmax as "
                    "cross-entropy)")
    ap.add_argument("--size", type=int, default=416, help="input width and height with --cfg (default 416)")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("need --steps >= 1, --warmup >= 0, --threads >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    if args.cfg:
        model = DarknetNet(args.cfg, args.size)
        fwd_flop, hw = model.flop, args.size
        targets = [torch.rand(1, *s) for s in model.head_shapes]
    else:
        model, fwd_flop, out_shape = build_w1()
        hw = 416
        targets = [torch.rand(1, *out_shape)]
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() == 4]      # conv weights
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 4]   # BN gamma/beta
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 0.0005},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.001, momentum=0.9)
    x = torch.rand(1, 3, hw, hw)

    t_step, t_fwd, t_bwd, t_upd, t_warm, losses = [], [], [], [], [], []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        outs = model(x)
        outs = outs if isinstance(outs, list) else [outs]
        if args.cfg and model.classifier:
            loss = nn.functional.cross_entropy(outs[0], torch.zeros(1, dtype=torch.long), reduction="sum")
        else:
            loss = sum(0.5 * (o - t).pow(2).sum() for o, t in zip(outs, targets))
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        lv = loss.item()
        losses.append(lv)
        tag = " (warmup)" if i < args.warmup else ""
        print(f"pytorch_w1: step {i}{tag} {t4 - t0:.3f} s loss {lv:.6g}", flush=True)
        if i < args.warmup:
            t_warm.append(t4 - t0)
        else:
            t_step.append(t4 - t0)
            t_fwd.append(t2 - t1)
            t_bwd.append(t3 - t2)
            t_upd.append((t1 - t0) + (t4 - t3))

    peak = rss_peak_mb()
    step_s = statistics.median(t_step)
    res = {
        "system": "pytorch",
        "threads": args.threads,
        "step_s": round(step_s, 4),
        "min_step_s": round(min(t_step), 4),
        "fwd_s": round(statistics.median(t_fwd), 4),
        "bwd_s": round(statistics.median(t_bwd), 4),
        "update_s": round(statistics.median(t_upd), 4),
        "peak_rss_mb": round(peak, 1),
        "rss_above_interpreter_mb": round(peak - rss_after_torch_mb, 1),
        "rss_interpreter_mb": round(rss_interpreter_mb, 1),
        "rss_after_import_torch_mb": round(rss_after_torch_mb, 1),
        "steps": args.steps,
        "warmup": args.warmup,
        "fwd_gflop": round(fwd_flop * 1e-9, 3),
        "step_gflops_per_s": round(3 * fwd_flop * 1e-9 / step_s, 2),
        "all_step_s": [round(t, 4) for t in t_step],
        "warmup_step_s": [round(t, 4) for t in t_warm],
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "torch": torch.__version__,
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "blas": blas_libs(),
        "python": sys.executable,
    }
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
