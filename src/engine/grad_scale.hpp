// verify (engine/verify.hpp): how large the sums behind a layer's parameter gradients are.
// Each gradient is a sum over cells (and samples) of products whose terms may cancel, e.g.
// behind a batch-norm, whose delta sums to zero per channel, so that the result is itself
// of the size of its rounding. What bounds the rounding (and a tiled run's other order of
// summation) is the sum of the terms' magnitudes, and Cauchy-Schwarz bounds that by norms
// the engine has at hand when it sums. Per layer, the 2-norm over the tensor's entries of
// those per-entry bounds, added up over micro-batches (and tiles):
//   weights  convolution: sqrt(window cells) ||input|| ||delta||  (delta: dL/d(conv output))
//            connected:   ||input|| ||delta||
//   biases   sqrt(cells x samples) ||delta||: Σ over cells of delta, per channel
//            (behind a batch-norm, dβ: delta = dL/d(batch-norm output), after the activation)
//   scales   batch-norm dγ = Σ delta·x̂ per channel: sqrt(Σ_c ||delta_c||² ||x̂_c||²)
#pragma once
#include <array>
#include <cstdint>

#include "model/params.hpp"

namespace tt {

struct GradScale {
  double weights = 0, biases = 0, scales = 0;
};

// A layer's parameter tensors beside their scales: weights, biases, batch-norm scales
// (`at` < 0: the layer has no such tensor).
struct ScaledTensor {
  const char* name;
  int64_t at, n;
  double scale;
};
inline std::array<ScaledTensor, 3> scaled_tensors(const ParamSlice& s, const GradScale& g) {
  return {{{"weights", s.weights, s.n_weights, g.weights},
           {"biases", s.biases, s.n_out, g.biases},
           {"scales", s.scales, s.n_out, g.scales}}};
}

}  // namespace tt
