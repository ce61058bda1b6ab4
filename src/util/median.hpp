// The median of a sample (the upper one of an even count; 0 for none): what bench,
// calibrate and the device model report of repeated timings.
#pragma once
#include <algorithm>
#include <vector>

namespace tt {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace tt
