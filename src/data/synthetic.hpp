// Synthetic training data for benchmarks, smoke runs and tests: N(0,1) inputs; truth
// N(0, 0.5) for an SSE head, one-hot for a softmax head, 1-3 random boxes for a detector.
// Deterministic in `seed`.
#pragma once
#include <cstdint>
#include <vector>

#include "model/net_spec.hpp"

namespace tt {

void synthetic_batch(const NetSpec& net, int n, uint64_t seed, std::vector<float>& input, std::vector<float>& truth);

}  // namespace tt
