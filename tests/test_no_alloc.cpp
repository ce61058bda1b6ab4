// The training step allocates no buffers: every tensor, kernel and argument list is set
// up when the Trainer is built. What remains is oneDNN's own per-call bookkeeping inside
// dnnl_primitive_execute (a small argument map per primitive call), which no caller can
// avoid; so this counts every operator new during steps and requires each to be small.
// Large buffers (tt::Buffer) are anonymous mmaps, which operator new does not see: this
// binary's own mmap (mmap_probe.hpp) counts every mmap call, and none may happen while counting.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <vector>

#include "data/synthetic.hpp"
#include "engine/trainer.hpp"
#include "mmap_probe.hpp"
#include "test_util.hpp"

namespace {
std::atomic<long> g_news{0};
std::atomic<size_t> g_largest{0};
std::atomic<bool> g_counting{false};
long g_mmaps = 0;  // mmap calls (by any caller) during the last largest_new_during
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_news.fetch_add(1, std::memory_order_relaxed);
    size_t prev = g_largest.load();
    while (n > prev && !g_largest.compare_exchange_weak(prev, n)) {
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer), so that every new the
// operator delete below frees came from malloc (AddressSanitizer, scripts/sanitize.sh,
// reports a nothrow new of its own freed by free() as a mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
// GCC cannot see that this operator new allocates with malloc.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace tt {
namespace {

// Largest single allocation made while f runs (0 if none).
size_t largest_new_during(const std::function<void()>& f) {
  g_news = 0;
  g_largest = 0;
  const long mmaps = test::mmap_calls();
  g_counting = true;
  f();
  g_counting = false;
  g_mmaps = test::mmap_calls() - mmaps;
  return g_largest.load();
}

// The counters see what they must: a small new, and a Buffer (an mmap).
TEST(NoAllocation, CountersSeeAllocations) {
  EXPECT_GE(largest_new_during([] { delete new std::vector<float>(4096); }), 4096 * sizeof(float));
  largest_new_during([] { Buffer b(1 << 20); });
  EXPECT_GE(g_mmaps, 1);
}

TEST(NoAllocation, TrainingStepsAllocateNothing) {
  for (const char* cfg :
       {"/cfgs/small-classifier.cfg", "/tests/fixtures/fc/net.cfg", "/tests/fixtures/pool_mix/net.cfg"}) {
    for (auto [rows, cols] : {std::pair{1, 1}, std::pair{2, 2}})
      for (KernelPath path : {KernelPath::Auto, KernelPath::Own}) {
        SCOPED_TRACE(std::string(cfg) + " grid " + std::to_string(rows) + "x" + std::to_string(cols) + " kernels " +
                     kernel_path_name(path));
        NetSpec net = load_net(test::source_dir() + cfg);
        Params params(net);
        init_params(params, net, 3);
        TrainOptions opt;
        opt.rows = rows;
        opt.cols = cols;
        opt.kernels = path;
        LocalComm comm;
        Trainer tr(net, params, opt, comm);
        std::vector<float> input, truth;
        synthetic_batch(net, net.batch, 5, input, truth);
        tr.train_step(input.data(), truth.data());  // first step: oneDNN compiles its kernels
        // Every map of these nets is larger than 1 KB; oneDNN's bookkeeping is ~100 bytes.
        const size_t largest = largest_new_during([&] {
          for (int i = 0; i < 3; ++i) tr.train_step(input.data(), truth.data());
        });
        EXPECT_LE(largest, 1024u) << g_news.load() << " allocations in 3 steps";
        EXPECT_EQ(g_mmaps, 0) << "buffers mapped during training steps";
      }
  }
}

}  // namespace
}  // namespace tt
