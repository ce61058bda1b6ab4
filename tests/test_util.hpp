// Helpers shared by the tests: relative differences and paths to the source tree.
#pragma once
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "model/net_spec.hpp"
#include "model/params.hpp"

namespace tt::test {

inline std::string source_dir() { return TILETRAIN_SOURCE_DIR; }

// ||a - b|| / ||b|| (absolute when b is all zero).
inline double rel_diff(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double norm(const float* a, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
  return std::sqrt(s);
}

// Activations and their derivatives in double, written out independently of the engine.
inline double act_ref(Act a, double v) {
  switch (a) {
    case Act::Leaky:
      return v > 0 ? v : 0.1 * v;
    case Act::Relu:
      return v > 0 ? v : 0.;
    case Act::Logistic:
      return 1. / (1. + std::exp(-v));
    case Act::Ramp:
      return (v > 0 ? v : 0.) + 0.1 * v;
    case Act::Linear:
      break;
  }
  return v;
}

inline double act_grad_ref(Act a, double v) {
  switch (a) {
    case Act::Leaky:
      return v > 0 ? 1. : 0.1;
    case Act::Relu:
      return v > 0 ? 1. : 0.;
    case Act::Logistic: {
      const double s = 1. / (1. + std::exp(-v));
      return s * (1. - s);
    }
    case Act::Ramp:
      return v > 0 ? 1.1 : 0.1;
    case Act::Linear:
      break;
  }
  return 1.;
}

// Initial parameters: Darknet init, then random biases, batch-norm scales and running
// statistics (so zero padding, frozen statistics and affine folding all matter).
inline void random_params(Params& p, const NetSpec& net, uint64_t seed) {
  init_params(p, net, seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = p.slices[l.index];
    for (int64_t i = 0; i < s.n_out; ++i) p.values[size_t(s.biases + i)] = 0.2f * nd(rng);
    if (s.scales < 0) continue;
    for (int64_t i = 0; i < s.n_out; ++i) {
      p.values[size_t(s.scales + i)] = 0.5f + ud(rng);
      p.rolling_mean[l.index][size_t(i)] = 0.2f * nd(rng);
      p.rolling_var[l.index][size_t(i)] = 0.5f + ud(rng);
    }
  }
}

}  // namespace tt::test
