// Helpers shared by the tests: relative differences and paths to the source tree.
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

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

}  // namespace tt::test
