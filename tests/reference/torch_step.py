#!/usr/bin/python3
"""One training step of a Darknet cfg in PyTorch (float64), for the tests' live oracle.

    torch_step.py NET.cfg INIT.weights IN.bin OUT.bin

Builds the net from the cfg with make_fixtures.py's reference layers (the same semantics
as the committed fixtures), loads the weights, reads `input` and `truth` from IN.bin (a
tensor dump), and writes `output`, `loss`, `input_delta` and every `grad.<i>.<param>` of
one forward and backward pass to OUT.bin, and `kinks`: how many ReLU / leaky inputs lie
within 1e-5 of their layer's RMS of zero, where a float32 engine may take the other side of
the kink (a different but equally valid subgradient), so that a test can insist on none.
Exits 3 when torch is missing (the test skips).
"""
import os
import sys

try:
    import torch
except ImportError:
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as ref  # noqa: E402


KINKS = [0]
_activate = ref.activate


def activate_counting_kinks(x, act):
    if act in ("relu", "leaky"):
        rms = x.detach().pow(2).mean().sqrt()
        KINKS[0] += int((x.detach().abs() < 1e-5 * rms).sum())
    return _activate(x, act)


ref.activate = activate_counting_kinks


def main():
    cfg, weights, inp, out = sys.argv[1:5]
    hp, layers = ref.parse_cfg(open(cfg).read())
    P = ref.read_weights(weights, layers)
    d = ref.read_dump(inp)
    x = torch.from_numpy(d["input"].astype("float64")).requires_grad_(True)
    truth = torch.from_numpy(d["truth"].astype("float64"))
    leaves = {i: {k: t.clone().requires_grad_(k in ref.PARAM_ORDER) for k, t in p.items()} for i, p in P.items()}
    outs, _ = ref.forward(layers, leaves, x)
    loss, reported = ref.loss_of(layers, outs, truth.reshape(outs[-1].shape))
    loss.backward()
    T = [("output", outs[-1].detach()), ("loss", torch.tensor([reported.item()])), ("input_delta", x.grad),
         ("kinks", torch.tensor([float(KINKS[0])]))]
    for i in sorted(leaves):
        for k in ref.PARAM_ORDER:
            if k in leaves[i] and leaves[i][k].grad is not None:
                T.append(("grad.%d.%s" % (i, k), leaves[i][k].grad))
    ref.write_dump(out, [(n, t.detach().numpy()) for n, t in T])


if __name__ == "__main__":
    main()
