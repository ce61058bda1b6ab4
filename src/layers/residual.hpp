// A residual join ([shortcut]) on any box: Darknet's shortcut_cpu followed by its
// activation, z = act(a + sample(b)), and its backward. `a` is the layer before (the
// output's shape and layout), `b` the `from` map, at least as large: output cell (c, y, x)
// with c < min(C) adds b's cell (c, y·stride, x·stride); the other channels are act(a).
// Layouts may differ. The values are those of the op after the cut (ops/shortcut.cpp) bit
// for bit: the same sums and the same activation functions.
#pragma once
#include "layers/tensor.hpp"
#include "model/net_spec.hpp"

namespace tt {

// How b pairs with the output: its first `channels` channels, every `stride`-th cell.
struct JoinPairing {
  int channels = 0;
  int stride = 1;
};
JoinPairing join_pairing(const LayerSpec& shortcut, const Shape& from);

// z = act(a + sample(b)) on `region` (inside a's and z's boxes; b's box covers the cells
// it samples); z may alias a.
void residual_forward(const TensorView& a, const TensorView& b, const TensorView& z, const Box& region, Act act,
                      const JoinPairing& p);
// g ← g · act'(z) on `region`, act' taken from the activation's output as Darknet's
// gradient_array takes it: dL/d(sum), which is a's delta.
void residual_backward(const TensorView& g, const TensorView& z, const Box& region, Act act);
// b's delta: db(c, y·stride, x·stride) += g(c, y, x) for c < channels, on the cells of
// `cells` (a box of b's map) that an output cell samples; g covers those output cells.
void residual_add_side(const TensorView& g, const TensorView& db, const Box& cells, const JoinPairing& p);

}  // namespace tt
