// Prepares training batches on threads of its own while the current one trains. What a
// sample is (a detection picture with its boxes, a classifier picture with its one-hot
// class) is the caller's function; the loader decides which picture each sample of a step
// is and the seed of its random draws, so a run is reproducible and resumable from its
// step alone: sample k of step s is picture number g = s * batch + k, epoch g / N, the
// picture perm_epoch[g % N] (a permutation drawn from (seed, epoch)), its draws seeded by
// (seed, g).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/hash.hpp"

namespace tt {

// The random draws of one sample, in place of Darknet's rand().
struct SampleRng {
  uint64_t s;
  uint64_t next() { return mix(s++); }
  float uniform(float lo, float hi) {  // rand_uniform
    if (hi < lo) std::swap(lo, hi);
    return float(next() >> 40) * 0x1.0p-24f * (hi - lo) + lo;
  }
  float scale(float s) {  // rand_scale
    const float v = uniform(1, s);
    return next() % 2 ? v : float(1. / v);
  }
  int integer(int lo, int hi) {  // rand_int: [lo, hi]
    if (hi < lo) std::swap(lo, hi);
    return lo + int(next() % uint64_t(hi - lo + 1));
  }
};

class BatchLoader {
 public:
  // Fills one sample: image_floats at `image`, truth_floats at `truth`, its random draws
  // from `seed`. Throws tt::Error naming the picture if it cannot be read.
  using Sample = std::function<void(const std::string& path, uint64_t seed, float* image, float* truth)>;
  struct Options {
    std::vector<std::string> paths;
    Sample sample;
    int64_t image_floats = 0, truth_floats = 0;  // per sample
    int batch = 1;
    uint64_t seed = 1;
    bool skip_bad_images = false;  // warn and take the next picture instead of stopping
    int threads = 1;
    int prefetch = 2;  // batches prepared ahead
    std::function<void(const std::string&)> warn;
  };
  explicit BatchLoader(Options o);
  ~BatchLoader();
  // The batch of training step `step` (counted from the run's start). Blocks until it is
  // ready; rethrows a worker's error (naming the file).
  void get(int64_t step, float* images, float* truth);
  double wait_s() const { return wait_s_; }  // time get() spent blocked
  int64_t epoch_of(int64_t step) const { return step * o_.batch / int64_t(o_.paths.size()); }

 private:
  struct Batch {
    std::vector<float> images, truth;
    std::exception_ptr error;
    bool ready = false;
  };
  void work();
  void make(int64_t step, Batch& b);
  // Shared: a worker keeps its epoch's order while another drops old epochs from perms_.
  std::shared_ptr<const std::vector<uint32_t>> permutation(int64_t epoch);

  Options o_;
  std::mutex m_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> batches_;  // being made or made, by step
  int64_t next_ = 0;                  // the next step a worker takes
  int64_t wanted_ = 0;                // the step the trainer asks for next
  bool stop_ = false;
  std::mutex perm_m_;
  std::map<int64_t, std::shared_ptr<const std::vector<uint32_t>>> perms_;
  std::vector<std::thread> workers_;
  double wait_s_ = 0;
};

}  // namespace tt
