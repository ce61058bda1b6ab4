#include "data/synthetic.hpp"

#include <random>

namespace tt {

void synthetic_batch(const NetSpec& net, int n, uint64_t seed, std::vector<float>& input, std::vector<float>& truth) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  input.resize(size_t(n * net.input().size()));
  truth.assign(size_t(n * net.output().size()), 0.f);
  for (auto& v : input) v = d(rng);
  if (net.layers.back().type == LayerType::Softmax) {
    const int64_t k = net.output().size();
    for (int s = 0; s < n; ++s) truth[size_t(s * k + int64_t(rng() % uint64_t(k)))] = 1.f;
  } else {
    for (auto& v : truth) v = 0.5f * d(rng);
  }
}

}  // namespace tt
