#include "data/synthetic.hpp"

#include <random>

#include "model/op_kind.hpp"

namespace tt {

void synthetic_batch(const NetSpec& net, int n, uint64_t seed, std::vector<float>& input, std::vector<float>& truth) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  input.resize(size_t(n * net.input().size()));
  truth.assign(size_t(n * net.truth_size()), 0.f);
  for (auto& v : input) v = d(rng);
  if (net.detector()) {  // 1-3 boxes per sample: x, y, w, h, class
    int classes = 1;
    for (const LayerSpec& l : net.layers)
      if (l.detector())
        classes = l.det().truth_classes();
      else if (l.is(kDetectionKind))
        classes = l.detection().classes;
    std::uniform_real_distribution<float> centre(0.05f, 0.95f), size(0.05f, 0.5f);
    for (int s = 0; s < n; ++s) {
      float* t = truth.data() + s * net.truth_size();
      const int boxes = 1 + int(rng() % 3);
      for (int b = 0; b < boxes; ++b, t += 5) {
        t[0] = centre(rng);
        t[1] = centre(rng);
        t[2] = size(rng);
        t[3] = size(rng);
        t[4] = float(rng() % uint64_t(classes));
      }
    }
  } else if (net.layers.back().is(kSoftmaxKind)) {
    const int64_t k = net.output().size();
    for (int s = 0; s < n; ++s) truth[size_t(s * k + int64_t(rng() % uint64_t(k)))] = 1.f;
  } else {
    for (auto& v : truth) v = 0.5f * d(rng);
  }
}

}  // namespace tt
