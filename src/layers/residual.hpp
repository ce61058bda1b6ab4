// A residual join ([shortcut] of two maps of the same shape) on any box (b's layout may
// differ from a's and z's): Darknet's shortcut_cpu followed by its activation, z = act(a + b), and its
// backward. The values are those of the op after the cut (ops/shortcut.cpp) bit for bit:
// the same sum and the same activation functions.
#pragma once
#include "layers/tensor.hpp"
#include "model/net_spec.hpp"

namespace tt {

// z = act(a + b) on `region` (inside all three boxes); z may alias a.
void residual_forward(const TensorView& a, const TensorView& b, const TensorView& z, const Box& region, Act act);
// g ← g · act'(z) on `region`, act' taken from the activation's output as Darknet's
// gradient_array takes it: dL/d(sum), which both inputs receive.
void residual_backward(const TensorView& g, const TensorView& z, const Box& region, Act act);

}  // namespace tt
