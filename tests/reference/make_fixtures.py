#!/usr/bin/python3
"""Generate PyTorch reference fixtures for tiletrain (Darknet training semantics).

Run with Debian's interpreter (it has torch):   /usr/bin/python3 tests/reference/make_fixtures.py

Writes tests/fixtures/<net>/{net.cfg, init.weights, ref.bin}.  All math is float64
in torch; everything stored is float32.  The reference starts from the float32-rounded
values that are written to disk, so a float32 engine reading init.weights/ref.bin
starts from exactly the same numbers.

Options:
  --check-only      run the self-checks, write nothing
  --no-check        skip the self-checks
  --darknet         additionally cross-check against Debian's libdarknet.so (no-BN
                    variants of the nets: exact; BN nets: only layer 0's rolling
                    statistics, since Darknet's own BN uses different epsilons)
  --out DIR         fixture root (default: <repo>/tests/fixtures)

Semantics implemented (see tests/reference/README.md and docs/DESIGN "Semantics to
match"):
  conv      pad=1 -> padding=size/2 else `padding` (default 0); bias only without BN;
            groups=G: F.conv2d(groups=G), weights (filters, c/G, k, k)
  shortcut  act(x + out[from]) of two maps of one shape
  BN        train mode, batch stats over N,H,W, biased var, eps 1e-5 inside sqrt,
            y = scales*x_hat + biases; rolling_mean <- .99 rm + .01 mean,
            rolling_variance <- .99 rv + .01 unbiased_var
  maxpool   padding default size-1; out = (H + padding - size)/stride + 1;
            window i covers [i*stride - padding/2, +size); out-of-map cells ignored
  avgpool   global mean over H,W
  connected y = W x + b on the CHW-flattened input
  softmax   over the flattened per-sample input; loss = cross-entropy,
            dL/dlogits = p - truth
  cost sse  L = 0.5 sum (out-truth)^2 over the batch; reported loss = sum (out-truth)^2
  SGD       v <- m v - g - decay*B*w (weights only), w <- w + lr/B v; biases/scales
            without decay.
"""
import argparse
import ctypes
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
DT = torch.float64
BN_EPS = 1e-5
LEAKY = 0.1

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# --------------------------------------------------------------------------------------
# Nets (Darknet cfg text).  Layer index i counts sections after [net], 0-based.
# --------------------------------------------------------------------------------------
NET_HDR = """[net]
batch={batch}
subdivisions=1
width={w}
height={h}
channels={c}
learning_rate=0.01
momentum=0.9
decay=0.0005
policy=constant
max_batches=100
"""

NETS = {}

NETS["bn_stride"] = NET_HDR.format(batch=2, c=3, h=17, w=19) + """
# 0: 8x17x19
[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

# 1: 8x9x10
[maxpool]
size=2
stride=2

# 2: 16x5x5
[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=leaky

# 3: 8x5x5 (no BN: has biases; pad=1 with size=1 means padding 0)
[convolutional]
filters=8
size=1
stride=1
pad=1
activation=linear

# 4
[cost]
type=sse
"""

NETS["pool_mix"] = NET_HDR.format(batch=2, c=4, h=23, w=21) + """
# 0: 8x23x21 (5x5, pad=1 -> padding 2)
[convolutional]
batch_normalize=1
filters=8
size=5
stride=1
pad=1
activation=relu

# 1: 8x12x11 (padding 2, window offset -1)
[maxpool]
size=3
stride=2

# 2: 12x12x11
[convolutional]
batch_normalize=1
filters=12
size=1
stride=1
pad=1
activation=logistic

# 3: 8x6x6
[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

# 4: 8x6x6 (size 2 stride 1: padding 1, offset 0, last window half outside)
[maxpool]
size=2
stride=1

# 5
[cost]
type=sse
"""

NETS["classifier"] = NET_HDR.format(batch=3, c=1, h=16, w=16) + """
# 0: 8x16x16
[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

# 1: 8x8x8
[maxpool]
size=2
stride=2

# 2: 16x8x8
[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=leaky

# 3: 16x4x4
[maxpool]
size=2
stride=2

# 4: 10x4x4
[convolutional]
filters=10
size=1
stride=1
activation=linear

# 5: 10
[avgpool]

# 6: 10 (loss: cross-entropy against one-hot truth)
[softmax]
groups=1
"""

NETS["fc"] = NET_HDR.format(batch=2, c=2, h=9, w=9) + """
# 0: 6x7x7 (no pad key, padding=0)
[convolutional]
batch_normalize=1
filters=6
size=3
stride=1
padding=0
activation=leaky

# 1: 7 (input 6*7*7 = 294, CHW order)
[connected]
output=7
activation=leaky

# 2: 5
[connected]
output=5
activation=linear

# 3
[cost]
type=sse
"""

# MobileNetV2's blocks in small: an inverted residual (1x1 expansion, depthwise 3x3, linear
# projection, shortcut), a strided depthwise, a grouped 3x3 (two channels into three), then
# Darknet's classifier head.
NETS["inverted_residual"] = NET_HDR.format(batch=2, c=3, h=13, w=11) + """
# 0: 8x13x11
[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=relu

# 1: 24x13x11 (expansion)
[convolutional]
batch_normalize=1
filters=24
size=1
stride=1
pad=1
activation=relu

# 2: 24x13x11 (depthwise)
[convolutional]
batch_normalize=1
filters=24
size=3
stride=1
pad=1
groups=24
activation=relu

# 3: 8x13x11 (linear projection)
[convolutional]
batch_normalize=1
filters=8
size=1
stride=1
pad=1
activation=linear

# 4: 8x13x11
[shortcut]
from=-4
activation=linear

# 5: 8x7x6 (strided depthwise, bias)
[convolutional]
filters=8
size=3
stride=2
pad=1
groups=8
activation=leaky

# 6: 12x7x6 (groups of two channels into three)
[convolutional]
batch_normalize=1
filters=12
size=3
stride=1
pad=1
groups=4
activation=relu

# 7: 6x7x6
[convolutional]
filters=6
size=1
stride=1
pad=1
activation=linear

# 8: 6
[avgpool]

# 9: 6
[softmax]
groups=1
"""

# Hand-computed layer output shapes (per sample), checked against the implementation.
HAND_SHAPES = {
    # maxpool 2/2 pad 1: (17+1-2)/2+1=9, (19+1-2)/2+1=10; conv s2 p1: (9+2-3)/2+1=5, (10-1)/2+1=5
    "bn_stride": [(8, 17, 19), (8, 9, 10), (16, 5, 5), (8, 5, 5), (8, 5, 5)],
    # conv5 p2: same; maxpool 3/2 pad 2: (23+2-3)/2+1=12, (21+2-3)/2+1=11;
    # conv3 s2 p1: (12-1)/2+1=6, (11-1)/2+1=6; maxpool 2/1 pad 1: 6+1-2+1=6
    "pool_mix": [(8, 23, 21), (8, 12, 11), (12, 12, 11), (8, 6, 6), (8, 6, 6), (8, 6, 6)],
    "classifier": [(8, 16, 16), (8, 8, 8), (16, 8, 8), (16, 4, 4), (10, 4, 4), (10,), (10,)],
    # conv3 p0: 9-3+1 = 7
    "fc": [(6, 7, 7), (7,), (5,), (5,)],
    # conv3 s2 p1: (13-1)/2+1 = 7, (11-1)/2+1 = 6
    "inverted_residual": [(8, 13, 11), (24, 13, 11), (24, 13, 11), (8, 13, 11), (8, 13, 11), (8, 7, 6), (12, 7, 6),
                          (6, 7, 6), (6,), (6,)],
}

SEEDS = {"bn_stride": 101, "pool_mix": 202, "classifier": 303, "fc": 404, "inverted_residual": 505}

# --------------------------------------------------------------------------------------
# cfg parsing (just enough Darknet)
# --------------------------------------------------------------------------------------


def parse_cfg(text):
    sections = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            sections.append((line.strip("[]").strip(), {}))
        else:
            k, v = line.split("=", 1)
            sections[-1][1][k.strip()] = v.strip()
    assert sections[0][0] in ("net", "network")
    net = sections[0][1]
    layers = []
    c, h, w = int(net["channels"]), int(net["height"]), int(net["width"])
    shape = (c, h, w)
    for typ, o in sections[1:]:
        gi = lambda k, d: int(o.get(k, d))
        L = {"type": typ}
        if typ in ("convolutional", "conv"):
            L["type"] = "conv"
            size = gi("size", 1)
            stride = gi("stride", 1)
            padding = gi("padding", 0)
            if gi("pad", 0):
                padding = size // 2
            C, H, W = shape
            L.update(filters=gi("filters", 1), size=size, stride=stride, padding=padding,
                     bn=bool(gi("batch_normalize", 0)), act=o.get("activation", "logistic"),
                     c=C, groups=gi("groups", 1))
            assert C % L["groups"] == 0 and L["filters"] % L["groups"] == 0
            oh = (H + 2 * padding - size) // stride + 1
            ow = (W + 2 * padding - size) // stride + 1
            shape = (L["filters"], oh, ow)
        elif typ in ("maxpool", "max"):
            L["type"] = "maxpool"
            stride = gi("stride", 1)
            size = gi("size", stride)
            padding = gi("padding", size - 1)
            C, H, W = shape
            L.update(size=size, stride=stride, padding=padding)
            shape = (C, (H + padding - size) // stride + 1, (W + padding - size) // stride + 1)
        elif typ in ("avgpool", "avg"):
            L["type"] = "avgpool"
            shape = (shape[0],)
        elif typ in ("connected", "conn"):
            L["type"] = "connected"
            inputs = int(np.prod(shape))
            L.update(inputs=inputs, outputs=gi("output", 1), act=o.get("activation", "logistic"))
            shape = (L["outputs"],)
        elif typ in ("softmax", "soft"):
            L["type"] = "softmax"
            assert gi("groups", 1) == 1
            shape = (int(np.prod(shape)),)
        elif typ == "shortcut":
            frm = gi("from", 0)
            L.update(frm=len(layers) + frm if frm < 0 else frm, act=o.get("activation", "linear"))
            assert layers[L["frm"]]["out_shape"] == shape, "only shortcuts of one shape"
        elif typ == "cost":
            assert o.get("type", "sse") == "sse"
        else:
            raise ValueError("unsupported layer " + typ)
        L["out_shape"] = shape
        layers.append(L)
    hp = dict(batch=int(net["batch"]) // int(net.get("subdivisions", 1)) * int(net.get("subdivisions", 1)),
              lr=float(net["learning_rate"]), momentum=float(net["momentum"]),
              decay=float(net["decay"]), input_shape=(c, h, w))
    assert net.get("policy", "constant") == "constant"
    return hp, layers


# --------------------------------------------------------------------------------------
# Reference layer implementations (float64)
# --------------------------------------------------------------------------------------


def activate(x, act):
    if act == "leaky":
        return F.leaky_relu(x, LEAKY)       # grad: x>0 ? 1 : 0.1   (Darknet's)
    if act == "relu":
        return F.relu(x)                    # grad: x>0             (Darknet's)
    if act == "linear":
        return x
    if act == "logistic":
        return torch.sigmoid(x)             # grad: y(1-y)          (Darknet's)
    raise ValueError(act)


def maxpool_darknet(x, size, stride, padding):
    """Darknet maxpool: window of output i covers input [i*stride - padding/2, +size),
    cells outside the map ignored.  Output (H + padding - size)/stride + 1."""
    H, W = x.shape[2], x.shape[3]
    lo = padding // 2
    hi = padding - lo
    xp = F.pad(x, (lo, hi, lo, hi), value=float("-inf"))
    y = F.max_pool2d(xp, size, stride)
    assert y.shape[2] == (H + padding - size) // stride + 1
    assert y.shape[3] == (W + padding - size) // stride + 1
    return y


def batchnorm_train(x, gamma, beta):
    mean = x.mean(dim=(0, 2, 3))
    var = x.var(dim=(0, 2, 3), unbiased=False)
    xh = (x - mean[None, :, None, None]) / torch.sqrt(var[None, :, None, None] + BN_EPS)
    y = gamma[None, :, None, None] * xh + beta[None, :, None, None]
    uvar = x.detach().var(dim=(0, 2, 3), unbiased=True)
    return y, mean.detach(), uvar


def forward(layers, P, x):
    """Training-mode forward.  P[i] is a dict of tensors.  Returns (outs, rolling)
    where rolling[i] = (new_rolling_mean, new_rolling_variance) for BN layers."""
    outs, rolling = [], {}
    for i, L in enumerate(layers):
        t = L["type"]
        if t == "conv":
            p = P[i]
            z = F.conv2d(x, p["weights"], None if L["bn"] else p["biases"],
                         stride=L["stride"], padding=L["padding"], groups=L["groups"])
            if L["bn"]:
                z, m, uv = batchnorm_train(z, p["scales"], p["biases"])
                rolling[i] = (0.99 * p["rolling_mean"] + 0.01 * m,
                              0.99 * p["rolling_variance"] + 0.01 * uv)
            x = activate(z, L["act"])
        elif t == "shortcut":
            x = activate(x + outs[L["frm"]], L["act"])
        elif t == "maxpool":
            x = maxpool_darknet(x, L["size"], L["stride"], L["padding"])
        elif t == "avgpool":
            x = x.mean(dim=(2, 3))
        elif t == "connected":
            p = P[i]
            x = activate(x.reshape(x.shape[0], -1) @ p["weights"].t() + p["biases"], L["act"])
        elif t == "softmax":
            x = x.reshape(x.shape[0], -1)
            L_logits = x
            x = torch.softmax(x, dim=1)
            x.logits = L_logits  # keep logits for a numerically clean CE
        elif t == "cost":
            pass  # identity; the cost layer's "output" is its input (the prediction)
        outs.append(x)
    return outs, rolling


def loss_of(layers, outs, truth):
    """Returns (L for autograd, reported loss)."""
    last = layers[-1]["type"]
    out = outs[-1]
    if last == "cost":
        d = out - truth
        return 0.5 * (d * d).sum(), (d * d).sum()
    if last == "softmax":
        ce = -(truth * torch.log_softmax(out.logits, dim=1)).sum()
        return ce, ce
    raise ValueError("net must end in [cost] or [softmax]")


PARAM_ORDER = ("weights", "biases", "scales")


def sgd_step(layers, P, grads, V, hp):
    """Darknet SGD: v <- m v - g - decay*B*w (weights only); w <- w + lr/B v."""
    B, lr, m, dec = hp["batch"], hp["lr"], hp["momentum"], hp["decay"]
    for i, p in P.items():
        for k in PARAM_ORDER:
            if k not in p:
                continue
            g = grads[i][k]
            v = m * V[i][k] - g
            if k == "weights":
                v = v - dec * B * p[k]
            V[i][k] = v
            p[k] = p[k] + (lr / B) * v


def train_steps(layers, P, x, truth, hp, nsteps):
    """Runs nsteps training steps in place on P.  Returns a record of step 0 and losses."""
    V = {i: {k: torch.zeros_like(t) for k, t in p.items() if k in PARAM_ORDER} for i, p in P.items()}
    rec = {"losses": []}
    for step in range(nsteps):
        leaves = {i: {k: p[k].detach().clone().requires_grad_(k in PARAM_ORDER) for k in p}
                  for i, p in P.items()}
        xin = x.detach().clone().requires_grad_(True)
        outs, rolling = forward(layers, leaves, xin)
        L, rep = loss_of(layers, outs, truth)
        L.backward()
        grads = {i: {k: t.grad.detach().clone() for k, t in lp.items() if k in PARAM_ORDER}
                 for i, lp in leaves.items()}
        rec["losses"].append(rep.item())
        if step == 0:
            rec["outs"] = [o.detach().clone() for o in outs]
            rec["loss"] = rep.item()
            rec["input_delta"] = xin.grad.detach().clone()
            rec["grads"] = grads
        for i, (rm, rv) in rolling.items():
            P[i]["rolling_mean"] = rm.detach()
            P[i]["rolling_variance"] = rv.detach()
        sgd_step(layers, P, grads, V, hp)
    return rec


# --------------------------------------------------------------------------------------
# Init, I/O
# --------------------------------------------------------------------------------------


def f32(a):
    """Round to float32, return float64 torch tensor."""
    return torch.from_numpy(np.asarray(a, dtype=np.float32).astype(np.float64))


def init_params(layers, rng):
    P = {}
    for i, L in enumerate(layers):
        if L["type"] == "conv":
            oc, ic, k = L["filters"], L["c"] // L["groups"], L["size"]
            fan_in = ic * k * k
            p = {"weights": f32(rng.normal(0, np.sqrt(2.0 / fan_in), (oc, ic, k, k))),
                 "biases": f32(rng.normal(0, 0.1, oc))}
            if L["bn"]:
                p["scales"] = f32(rng.uniform(0.8, 1.2, oc))
                p["rolling_mean"] = f32(rng.normal(0, 0.1, oc))
                p["rolling_variance"] = f32(rng.uniform(0.5, 1.5, oc))
            P[i] = p
        elif L["type"] == "connected":
            P[i] = {"weights": f32(rng.normal(0, np.sqrt(2.0 / L["inputs"]), (L["outputs"], L["inputs"]))),
                    "biases": f32(rng.normal(0, 0.1, L["outputs"]))}
    return P


def write_weights(path, layers, P):
    with open(path, "wb") as f:
        f.write(struct.pack("<iii", 0, 2, 0))
        f.write(struct.pack("<Q", 0))
        for i, L in enumerate(layers):
            if i not in P:
                continue
            p = P[i]
            keys = ["biases"]
            if L["type"] == "conv" and L["bn"]:
                keys += ["scales", "rolling_mean", "rolling_variance"]
            keys += ["weights"]
            for k in keys:
                f.write(p[k].numpy().astype("<f4").tobytes())


def read_weights(path, layers, bn_override=None):
    """Reads a Darknet .weights file (major 0 minor 2) back into a P dict (float64)."""
    data = open(path, "rb").read()
    major, minor, rev = struct.unpack_from("<iii", data, 0)
    off = 12 + (8 if (major * 10 + minor) >= 2 else 4)
    P = {}

    def take(n):
        nonlocal off
        a = np.frombuffer(data, dtype="<f4", count=n, offset=off)
        off += 4 * n
        return torch.from_numpy(a.astype(np.float64))
    for i, L in enumerate(layers):
        if L["type"] == "conv":
            oc = L["filters"]
            p = {"biases": take(oc)}
            if L["bn"]:
                p["scales"], p["rolling_mean"], p["rolling_variance"] = take(oc), take(oc), take(oc)
            ic = L["c"] // L["groups"]
            p["weights"] = take(oc * ic * L["size"] ** 2).reshape(oc, ic, L["size"], L["size"])
            P[i] = p
        elif L["type"] == "connected":
            p = {"biases": take(L["outputs"])}
            p["weights"] = take(L["outputs"] * L["inputs"]).reshape(L["outputs"], L["inputs"])
            P[i] = p
    assert off == len(data), (off, len(data))
    return P


def write_dump(path, tensors):
    with open(path, "wb") as f:
        f.write(b"TTDUMP1\n")
        f.write(struct.pack("<I", len(tensors)))
        for name, t in tensors:
            a = np.ascontiguousarray(np.asarray(t, dtype="<f4"))
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb)
            f.write(struct.pack("<I", a.ndim))
            f.write(struct.pack("<%dI" % a.ndim, *a.shape))
            f.write(a.tobytes())


def read_dump(path):
    data = open(path, "rb").read()
    assert data[:8] == b"TTDUMP1\n"
    (n,), off = struct.unpack_from("<I", data, 8), 12
    out = {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", data, off); off += 4
        name = data[off:off + ln].decode(); off += ln
        (nd,) = struct.unpack_from("<I", data, off); off += 4
        dims = struct.unpack_from("<%dI" % nd, data, off); off += 4 * nd
        cnt = int(np.prod(dims)) if nd else 1
        out[name] = np.frombuffer(data, "<f4", cnt, off).reshape(dims); off += 4 * cnt
    assert off == len(data)
    return out


# --------------------------------------------------------------------------------------
# Fixture generation
# --------------------------------------------------------------------------------------


def make_inputs(hp, layers, rng):
    B = hp["batch"]
    x = f32(rng.normal(0, 1, (B,) + hp["input_shape"]))
    out_shape = layers[-1]["out_shape"]
    if layers[-1]["type"] == "softmax":
        cls = rng.integers(0, out_shape[0], B)
        truth = torch.zeros((B,) + out_shape, dtype=DT)
        truth[torch.arange(B), torch.from_numpy(cls)] = 1.0
    else:
        truth = f32(rng.normal(0, 0.5, (B,) + out_shape))
    return x, truth


def build_fixture(name, cfg_text, outdir):
    hp, layers = parse_cfg(cfg_text)
    assert [L["out_shape"] for L in layers] == HAND_SHAPES[name], \
        (name, [L["out_shape"] for L in layers])
    rng = np.random.default_rng(SEEDS[name])
    P = init_params(layers, rng)
    x, truth = make_inputs(hp, layers, rng)

    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "net.cfg"), "w") as f:
        f.write(cfg_text)
    write_weights(os.path.join(d, "init.weights"), layers, P)
    # round-trip check of the weights writer
    P2 = read_weights(os.path.join(d, "init.weights"), layers)
    for i in P:
        for k in P[i]:
            assert torch.equal(P[i][k], P2[i][k]), (name, i, k)

    rec = train_steps(layers, P, x, truth, hp, 3)

    T = [("input", x), ("truth", truth), ("output", rec["outs"][-1])]
    for i, o in enumerate(rec["outs"]):
        T.append(("out.%d" % i, o))
    T.append(("loss", torch.tensor([rec["loss"]])))
    T.append(("input_delta", rec["input_delta"]))
    for i in sorted(rec["grads"]):
        for k in PARAM_ORDER:
            if k in rec["grads"][i]:
                T.append(("grad.%d.%s" % (i, k), rec["grads"][i][k]))
    for i in sorted(P):
        for k in ("weights", "biases", "scales", "rolling_mean", "rolling_variance"):
            if k in P[i]:
                T.append(("step3.%d.%s" % (i, k), P[i][k]))
    T.append(("step3.loss", torch.tensor(rec["losses"])))
    write_dump(os.path.join(d, "ref.bin"), [(n, t.detach().numpy()) for n, t in T])
    back = read_dump(os.path.join(d, "ref.bin"))
    assert list(back) == [n for n, _ in T]
    sz = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    assert sz < 150 * 1024, (name, sz)
    print("%-11s %6d bytes  %3d tensors  loss/step: %s" %
          (name, sz, len(T), ", ".join("%.6g" % l for l in rec["losses"])))


# --------------------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------------------


def maxpool_bruteforce(x, size, stride, padding, dy):
    """Literal transcription of Darknet's forward/backward_maxpool_layer (numpy)."""
    B, C, H, W = x.shape
    oh = (H + padding - size) // stride + 1
    ow = (W + padding - size) // stride + 1
    off = -(padding // 2)
    y = np.zeros((B, C, oh, ow))
    dx = np.zeros_like(x)
    for b in range(B):
        for c in range(C):
            for i in range(oh):
                for j in range(ow):
                    best, bi = -np.finfo(np.float32).max, None
                    for n in range(size):
                        for m in range(size):
                            r, s = off + i * stride + n, off + j * stride + m
                            if 0 <= r < H and 0 <= s < W and x[b, c, r, s] > best:
                                best, bi = x[b, c, r, s], (r, s)
                    y[b, c, i, j] = best
                    dx[b, c, bi[0], bi[1]] += dy[b, c, i, j]
    return y, dx


def manual_bn_backward(x, gamma, dy):
    M = x.shape[0] * x.shape[2] * x.shape[3]
    mu = x.mean(dim=(0, 2, 3), keepdim=True)
    var = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
    g = gamma[None, :, None, None]
    inv = 1.0 / torch.sqrt(var + BN_EPS)
    xh = (x - mu) * inv
    dgamma = (dy * xh).sum(dim=(0, 2, 3))
    dbeta = dy.sum(dim=(0, 2, 3))
    dxh = dy * g
    dx = inv / M * (M * dxh - dxh.sum(dim=(0, 2, 3), keepdim=True)
                    - xh * (dxh * xh).sum(dim=(0, 2, 3), keepdim=True))
    return dx, dgamma, dbeta


def self_checks():
    rng = np.random.default_rng(7)
    # 1. maxpool vs a literal Darknet transcription, many geometries (incl. even/odd maps)
    n = 0
    for H, W in ((17, 19), (23, 21), (6, 6), (5, 8), (7, 7)):
        for size, stride, padding in ((2, 2, 1), (3, 2, 2), (2, 1, 1), (3, 1, 2), (3, 3, 2),
                                      (2, 2, 0), (3, 2, 0), (5, 2, 4), (4, 2, 3)):
            if H + padding < size or W + padding < size:
                continue
            # continuous values, and relu-like values full of ties (first max wins)
            for xa in (rng.normal(size=(2, 3, H, W)),
                       np.maximum(rng.integers(-3, 2, size=(2, 3, H, W)), 0).astype(np.float64)):
                x = torch.tensor(xa, requires_grad=True)
                y = maxpool_darknet(x, size, stride, padding)
                dya = rng.normal(size=tuple(y.shape))
                y.backward(torch.tensor(dya))
                yr, dxr = maxpool_bruteforce(xa, size, stride, padding, dya)
                assert y.shape == yr.shape, (H, W, size, stride, padding)
                assert np.array_equal(y.detach().numpy(), yr), (H, W, size, stride, padding)
                assert np.allclose(x.grad.numpy(), dxr, rtol=0, atol=1e-14)
            n += 1
    print("check: maxpool == Darknet transcription (fwd+bwd, incl. ties), %d geometries" % n)

    # 2. BN backward: autograd == closed-form standard BN backward
    x = torch.tensor(rng.normal(1.0, 2.0, (3, 4, 5, 6)), requires_grad=True)
    gamma = torch.tensor(rng.uniform(0.5, 1.5, 4), requires_grad=True)
    beta = torch.tensor(rng.normal(0, 1, 4), requires_grad=True)
    y, _, _ = batchnorm_train(x, gamma, beta)
    dy = torch.tensor(rng.normal(size=(3, 4, 5, 6)))
    y.backward(dy)
    dx, dg, db = manual_bn_backward(x.detach(), gamma.detach(), dy)
    for a, b in ((x.grad, dx), (gamma.grad, dg), (beta.grad, db)):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    print("check: BN autograd == closed-form BN backward")

    # 3. gradcheck of a tiny net covering every layer type (float64 finite differences)
    tiny = NET_HDR.format(batch=2, c=2, h=7, w=6) + """
[convolutional]
batch_normalize=1
filters=3
size=3
stride=2
pad=1
activation=leaky
[maxpool]
size=3
stride=2
[convolutional]
filters=4
size=1
activation=logistic
[connected]
output=5
activation=relu
[connected]
output=3
activation=linear
[softmax]
"""
    hp, layers = parse_cfg(tiny)
    P = init_params(layers, rng)
    x0, truth = make_inputs(hp, layers, rng)
    keys = [(i, k) for i in sorted(P) for k in PARAM_ORDER if k in P[i]]

    def fn(xin, *flat):
        Q = {i: dict(P[i]) for i in P}
        for (i, k), t in zip(keys, flat):
            Q[i][k] = t
        outs, _ = forward(layers, Q, xin)
        return loss_of(layers, outs, truth)[0]
    args = [x0.clone().requires_grad_(True)] + [P[i][k].clone().requires_grad_(True) for i, k in keys]
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6, rtol=1e-5)
    tiny_sse = tiny.replace("[softmax]\n", "[cost]\ntype=sse\n")
    hp, layers = parse_cfg(tiny_sse)
    x0, truth = make_inputs(hp, layers, rng)
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6, rtol=1e-5)
    print("check: gradcheck tiny net (conv-bn s2, maxpool, conv, connected x2, softmax-CE / sse)")

    # 4. loss-gradient conventions: softmax-CE -> p - truth;  sse -> out - truth
    z = torch.tensor(rng.normal(size=(3, 6)), requires_grad=True)
    t = torch.zeros(3, 6); t[0, 1] = t[1, 5] = t[2, 0] = 1
    ce = -(t * torch.log_softmax(z, 1)).sum()
    ce.backward()
    assert torch.allclose(z.grad, torch.softmax(z, 1) - t)
    print("check: d CE / d logits == p - truth")

    # 5. Darknet SGD == torch.optim.SGD(lr, momentum, weight_decay=decay) on grad/B
    B, lr, mom, dec = 2, 0.01, 0.9, 0.0005
    hp = dict(batch=B, lr=lr, momentum=mom, decay=dec)
    w0 = torch.tensor(rng.normal(size=10)); b0 = torch.tensor(rng.normal(size=4))
    P = {0: {"weights": w0.clone(), "biases": b0.clone()}}
    V = {0: {"weights": torch.zeros(10), "biases": torch.zeros(4)}}
    tw = w0.clone().requires_grad_(True); tb = b0.clone().requires_grad_(True)
    ow = torch.optim.SGD([tw], lr=lr, momentum=mom, weight_decay=dec)
    ob = torch.optim.SGD([tb], lr=lr, momentum=mom)
    for _ in range(5):
        g = {0: {"weights": torch.tensor(rng.normal(size=10)), "biases": torch.tensor(rng.normal(size=4))}}
        sgd_step(None, P, g, V, hp)
        tw.grad = g[0]["weights"] / B; tb.grad = g[0]["biases"] / B
        ow.step(); ob.step()
    assert torch.allclose(P[0]["weights"], tw.detach(), rtol=1e-13, atol=1e-14)
    assert torch.allclose(P[0]["biases"], tb.detach(), rtol=1e-13, atol=1e-14)
    print("check: Darknet SGD == torch.optim.SGD(weight_decay, momentum) on g/B")


# --------------------------------------------------------------------------------------
# Optional cross-check against Debian's libdarknet (2018 pjreddie darknet)
# --------------------------------------------------------------------------------------


class Matrix(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_int), ("cols", ctypes.c_int),
                ("vals", ctypes.POINTER(ctypes.POINTER(ctypes.c_float)))]


class Data(ctypes.Structure):
    _fields_ = [("w", ctypes.c_int), ("h", ctypes.c_int), ("X", Matrix), ("y", Matrix),
                ("shallow", ctypes.c_int), ("num_boxes", ctypes.c_void_p), ("boxes", ctypes.c_void_p)]


def _matrix(a):
    a = np.ascontiguousarray(a.reshape(a.shape[0], -1), dtype=np.float32)
    rows = (ctypes.POINTER(ctypes.c_float) * a.shape[0])()
    for r in range(a.shape[0]):
        rows[r] = a[r].ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    return Matrix(a.shape[0], a.shape[1], rows), (a, rows)


def rel(a, b):
    a = np.asarray(a, np.float64); b = np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


# Darknet (this 2018 version) loses gradient where a map that a [shortcut] reads also feeds a
# 1x1 convolution: a 1x1 layer's backward writes its input delta with gemm(..., beta=0, imd)
# straight into the previous layer's delta (convolutional_layer.c, `if (l.size == 1) c = imd`),
# overwriting what the shortcut's backward added there before. Measured on
# "inverted_residual": parameters after 3 steps 5.1e-3 apart from PyTorch's; with the
# expansion made 3x3 (col2im adds), 6.8e-8. tiletrain keeps the true gradient (PyTorch's),
# so the cross-check trains that variant. ResNet-50 and MobileNetV2 in Darknet's format have
# this shape in every block.
DARKNET_TRAINABLE = {
    "inverted_residual": lambda t: t.replace("filters=24\nsize=1", "filters=24\nsize=3"),
}


def darknet_check(libpath="/usr/lib/darknet/libdarknet.so"):
    lib = ctypes.CDLL(libpath)
    lib.load_network.restype = ctypes.c_void_p
    lib.load_network.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.train_network.restype = ctypes.c_float
    lib.train_network.argtypes = [ctypes.c_void_p, Data]
    lib.network_predict.restype = ctypes.POINTER(ctypes.c_float)
    lib.network_predict.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
    lib.save_weights.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.free_network.argtypes = [ctypes.c_void_p]
    tmp = tempfile.mkdtemp(prefix="ttdn_")
    worst = 0.0
    try:
        for name, cfg in NETS.items():
            cfg = DARKNET_TRAINABLE.get(name, lambda t: t)(cfg)
            for variant in ("nobn", "bn"):
                text = cfg if variant == "bn" else cfg.replace("batch_normalize=1\n", "")
                hp, layers = parse_cfg(text)
                rng = np.random.default_rng(SEEDS[name] + 1000)
                P = init_params(layers, rng)
                x, truth = make_inputs(hp, layers, rng)
                cfgp, wp = os.path.join(tmp, name + ".cfg"), os.path.join(tmp, name + ".w")
                open(cfgp, "w").write(text)
                write_weights(wp, layers, P)
                sys.stdout.flush()
                net = lib.load_network(cfgp.encode(), wp.encode(), 1)
                B = hp["batch"]
                xa = x.numpy().astype(np.float32).reshape(B, -1).copy()
                nsteps = 3 if variant == "nobn" else 1
                outp = lib.network_predict(net, xa.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
                n_out = int(np.prod(layers[-1]["out_shape"])) * B
                dn_out = np.ctypeslib.as_array(outp, (n_out,)).copy()
                X, kx = _matrix(x.numpy()); Y, ky = _matrix(truth.numpy())
                d = Data(0, 0, X, Y, 1, None, None)
                dn_losses = [lib.train_network(net, d) * B for _ in range(nsteps)]
                outw = os.path.join(tmp, name + ".out.w")
                lib.save_weights(net, outw.encode())
                lib.free_network(net)
                Pd = read_weights(outw, layers)
                Pr = {i: {k: t.clone() for k, t in p.items()} for i, p in P.items()}
                rec = train_steps(layers, Pr, x, truth, hp, nsteps)
                if variant == "nobn":
                    r_out = rel(dn_out, rec["outs"][-1].numpy().ravel())
                    r_loss = rel(dn_losses, rec["losses"])
                    r_w = max(rel(Pd[i][k], Pr[i][k]) for i in Pr for k in Pr[i])
                    worst = max(worst, r_out, r_loss, r_w)
                    print("darknet %-10s no-BN: rel err output %.1e  loss x3 %.1e  params after 3 steps %.1e"
                          % (name, r_out, r_loss, r_w))
                    assert r_out < 1e-5 and r_loss < 1e-5 and r_w < 1e-5
                else:
                    i0 = 0
                    r_rm = rel(Pd[i0]["rolling_mean"], Pr[i0]["rolling_mean"])
                    r_rv = rel(Pd[i0]["rolling_variance"], Pr[i0]["rolling_variance"])
                    r_loss = rel(dn_losses, rec["losses"])
                    r_w = max(rel(Pd[i][k], Pr[i][k]) for i in Pr for k in ("weights", "biases", "scales")
                              if k in Pr[i])
                    print("darknet %-10s BN:    layer0 rolling_mean %.1e rolling_var %.1e | "
                          "(info, Darknet BN eps differs) loss %.1e params after 1 step %.1e"
                          % (name, r_rm, r_rv, r_loss, r_w))
                    assert r_rm < 1e-5 and r_rv < 1e-5
    finally:
        shutil.rmtree(tmp)
    print("check: Darknet cross-check passed (worst no-BN rel err %.1e)" % worst)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--darknet", action="store_true")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    a = ap.parse_args()
    torch.manual_seed(0)
    if not a.no_check:
        self_checks()
    if a.darknet:
        darknet_check()
    if a.check_only:
        return
    for name, cfg in NETS.items():
        build_fixture(name, cfg, a.out)


if __name__ == "__main__":
    main()
