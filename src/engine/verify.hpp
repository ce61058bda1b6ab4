// verify: a tiled run against one untiled process, trained side by side from the same state,
// every tensor compared at every step. Used by `tiletrain verify` and the tests.
#pragma once
#include <array>
#include <cstdint>
#include <functional>

#include "comm/comm.hpp"
#include "engine/trainer.hpp"
#include "model/net_spec.hpp"

namespace tt {

// The largest difference of each kind of tensor over all steps, and where it was. Each kind
// is judged against its own scale (what a difference is divided by) and tolerance:
//   outputs            bit for bit: both runs cut the net at the same layer, the forward
//                      kernels of a tiled map do not sum by its size and batch-norm
//                      statistics are summed in double, so the design makes them identical
//   input deltas       ||untiled||
//   gradients          ||tiled - untiled|| / max(||untiled||, the sum-of-magnitudes bound of
//                      engine/grad_scale.hpp, measured on the untiled run): weights, biases and
//                      batch-norm scales. A gradient is a sum that may cancel to nearly zero
//                      (behind a batch-norm, whose delta sums to zero per channel) while its
//                      rounding stays of the size of its terms: against the bound, rounding
//                      passes, and a partition that drops or doubles cells does not.
//   after a step       weights, biases, scales: over max(||untiled||, lr/B (G + momentum
//                      ||v|| + decay B ||w||)), the size of what Darknet's update adds
//                      (v = momentum v - g - decay B w, w += lr/B v; G the gradient's scale
//                      above, v and w as both runs start the step), so that a bias that
//                      starts at 0 is judged as its gradient is.
//   running statistics batch-norm rolling mean and variance after a step, over ||untiled||
//                      (forward is identical: they differ at most by their own rounding)
// The tolerance 1e-5 of those scales is about 170 fp32 roundings (6e-8) of the sum of
// magnitudes. Two orders of summation of the same terms differ by a rounding per addition
// along their accumulation chains, which add up as a square root when the roundings are
// independent (and the blocked kernels keep chains short); a relative difference in the delta
// summed enters a gradient at most in proportion (Cauchy-Schwarz), and the input deltas are
// held to the same 1e-5. A partition defect (a row of cells left out or counted twice) moves
// a sum by about that row's share of it, far beyond (tests/test_verify.cpp).
struct VerifyReport {
  enum Kind {
    kOutputs,
    kInputDeltas,
    kWeightGradients,
    kBiasGradients,
    kScaleGradients,  // batch-norm γ
    kWeights,         // after a step, likewise the two below
    kBiases,
    kScales,
    kRunningStats,
    kKinds
  };
  struct Worst {
    double diff = 0;  // the largest difference, over the kind's scale
    int layer = -1;   // where (-1: not a layer's tensor, or none differed)
  };
  std::array<Worst, kKinds> worst{};
  int cut = 0;  // both runs' cut

  static constexpr double kTolerance = 1e-5;
  static double tolerance(int kind) { return kind == kOutputs ? 0 : kTolerance; }
  static const char* name(int kind);   // "bias gradients", ...
  static const char* scale(int kind);  // what it is divided by, in a few words
  bool ok(int kind) const { return worst[size_t(kind)].diff <= tolerance(kind); }
  bool ok() const;
  // The worst over a range of kinds [first, last) (e.g. all gradients), and its layer.
  Worst worst_of(int first, int last) const;
  Worst gradients() const { return worst_of(kWeightGradients, kWeights); }
  Worst after_step() const { return worst_of(kWeights, kKinds); }
  double outputs() const { return worst[kOutputs].diff; }
  double input_deltas() const { return worst[kInputDeltas].diff; }
};

// How verify judges one gradient tensor: ||tiled - untiled|| / max(||untiled||, scale), where
// `scale` bounds the sum of magnitudes that was summed into it (0: none known); a zero
// denominator gives the absolute difference.
double gradient_difference(const float* tiled, const float* untiled, size_t n, double scale);

// Trains `steps` steps of synthetic batches (from `seed`) with the partition `opt` on every
// process of `comm` and, on the root, with one untiled process cut at the same layer. Both
// start each step from the same weights and optimizer state: after a step the untiled run
// continues from the tiled run's state, because training amplifies last-bit differences from
// step to step (chaotically, and through max-pool near-ties), which says nothing about the
// partition. `started` sees the tiled trainer once it is set up. The report is whole on the root.
VerifyReport verify_training(const NetSpec& net, const TrainOptions& opt, Comm& comm, uint64_t seed, int steps,
                             const std::function<void(const Trainer&)>& started = {});

}  // namespace tt
