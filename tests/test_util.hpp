// Helpers shared by the tests: relative differences and paths to the source tree.
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "model/net_spec.hpp"

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

// Activations and their derivatives in double, written out independently of the engine.
inline double act_ref(Act a, double v) {
  switch (a) {
    case Act::Leaky:
      return v > 0 ? v : 0.1 * v;
    case Act::Relu:
      return v > 0 ? v : 0.;
    case Act::Logistic:
      return 1. / (1. + std::exp(-v));
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
    case Act::Linear:
      break;
  }
  return 1.;
}

}  // namespace tt::test
