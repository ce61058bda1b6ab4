#include "data/batch_loader.hpp"

#include <algorithm>

#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

BatchLoader::BatchLoader(Options o) : o_(std::move(o)) {
  if (o_.paths.empty()) fail("no training images");
  if (o_.batch < 1 || o_.threads < 1 || o_.prefetch < 1 || !o_.sample)
    fail("internal: loader batch, threads and prefetch >= 1, and a sample function");
  for (int i = 0; i < o_.threads; ++i) workers_.emplace_back([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

std::shared_ptr<const std::vector<uint32_t>> BatchLoader::permutation(int64_t epoch) {
  std::lock_guard<std::mutex> lk(perm_m_);
  auto it = perms_.find(epoch);
  if (it != perms_.end()) return it->second;
  while (perms_.size() > 4) perms_.erase(perms_.begin());  // only the epochs in flight
  auto p = std::make_shared<std::vector<uint32_t>>(o_.paths.size());
  for (size_t i = 0; i < p->size(); ++i) (*p)[i] = uint32_t(i);
  SampleRng rng{mix(o_.seed * 0x2545f4914f6cdd1dULL ^ mix(uint64_t(epoch)))};
  for (size_t i = p->size(); i > 1; --i) std::swap((*p)[i - 1], (*p)[size_t(rng.next() % i)]);  // Fisher-Yates
  return perms_.emplace(epoch, std::move(p)).first->second;
}

void BatchLoader::make(int64_t step, Batch& b) {
  const int64_t N = int64_t(o_.paths.size());
  const int64_t px = o_.image_floats, tr = o_.truth_floats;
  b.images.resize(size_t(o_.batch * px));
  b.truth.resize(size_t(o_.batch * tr));
  for (int k = 0; k < o_.batch; ++k) {
    const int64_t g = step * o_.batch + k;
    const std::shared_ptr<const std::vector<uint32_t>> perm = permutation(g / N);
    for (int64_t attempt = 0;; ++attempt) {
      const std::string& path = o_.paths[(*perm)[size_t((g + attempt) % N)]];
      try {
        o_.sample(path, mix(o_.seed) ^ mix(uint64_t(g)), b.images.data() + k * px, b.truth.data() + k * tr);
        break;
      } catch (const Error& e) {
        if (!o_.skip_bad_images) throw;
        if (o_.warn) o_.warn(std::string("skipping a bad image: ") + e.what());
        if (attempt + 1 >= N) fail("no readable image in the list (the last: ", e.what(), ")");
      }
    }
  }
}

void BatchLoader::work() {
  for (;;) {
    int64_t step;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stop_ || next_ < wanted_ + o_.prefetch; });
      if (stop_) return;
      step = next_++;
      batches_[step];
    }
    Batch b;
    try {
      make(step, b);
    } catch (...) {
      b.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      b.ready = true;
      if (step >= wanted_)
        batches_[step] = std::move(b);  // else: nobody wants it any more
      else
        batches_.erase(step);
    }
    cv_.notify_all();
  }
}

void BatchLoader::get(int64_t step, float* images, float* truth) {
  const double t0 = now_s();
  std::unique_lock<std::mutex> lk(m_);
  wanted_ = step;
  for (auto it = batches_.begin(); it != batches_.end() && it->first < step;)
    it = it->second.ready ? batches_.erase(it) : std::next(it);
  if (!batches_.count(step) && (next_ > step || next_ < step)) next_ = step;  // a jump (resume, evaluation)
  cv_.notify_all();
  cv_.wait(lk, [&] { return batches_.count(step) && batches_[step].ready; });
  Batch b = std::move(batches_[step]);
  batches_.erase(step);
  wanted_ = step + 1;
  lk.unlock();
  cv_.notify_all();
  wait_s_ += now_s() - t0;
  if (b.error) std::rethrow_exception(b.error);
  std::copy(b.images.begin(), b.images.end(), images);
  std::copy(b.truth.begin(), b.truth.end(), truth);
}

}  // namespace tt
