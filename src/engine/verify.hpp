// verify: a tiled run against one untiled process, trained side by side from the same state,
// every tensor compared at every step. Used by `tiletrain verify` and the tests.
#pragma once
#include <cstdint>
#include <functional>

#include "comm/comm.hpp"
#include "engine/trainer.hpp"
#include "model/net_spec.hpp"

namespace tt {

// The largest difference of each kind of tensor over all steps, and where it was.
struct VerifyReport {
  // ||tiled - untiled|| / ||untiled||: the net's output and the input delta.
  double outputs = 0, input_deltas = 0;
  // Per parameter tensor, ||tiled - untiled|| over the size of what was summed into it: a
  // convolution's weight gradient is a sum of products of its input and output delta, which
  // cancel to nearly zero in front of a batch-norm (whose delta sums to zero per channel), so
  // fp32 rounding alone can exceed 1e-5 of the result. By Cauchy-Schwarz the sum of the
  // products' magnitudes is at most sqrt(window) ||input|| ||delta|| (per micro-batch):
  // that bound, measured on the untiled run, is the scale. Other tensors: over ||untiled||.
  double gradients = 0;
  double weights = 0;  // weights and batch-norm statistics after each step, over ||untiled||
  int gradient_layer = -1, weight_layer = -1;
  int cut = 0;  // the tiled run's cut

  static constexpr double kTolerance = 1e-5;
  bool ok() const {
    return outputs <= kTolerance && input_deltas <= kTolerance && gradients <= kTolerance && weights <= kTolerance;
  }
};

// How verify judges one gradient tensor: ||tiled - untiled|| / max(||untiled||, scale), where
// `scale` bounds the sum of magnitudes that was summed into it (0: none known); a zero
// denominator gives the absolute difference.
double gradient_difference(const float* tiled, const float* untiled, size_t n, double scale);

// Trains `steps` steps of synthetic batches (from `seed`) with the partition `opt` on every
// process of `comm` and, on the root, with one untiled process. Both start each step from
// the same weights and optimizer state: after a step the untiled run continues from the
// tiled run's state, because training amplifies last-bit differences from step to step
// (chaotically, and through max-pool near-ties), which says nothing about the partition.
// `started` sees the tiled trainer once it is set up. The report is whole on the root.
VerifyReport verify_training(const NetSpec& net, const TrainOptions& opt, Comm& comm, uint64_t seed, int steps,
                             const std::function<void(const Trainer&)>& started = {});

}  // namespace tt
