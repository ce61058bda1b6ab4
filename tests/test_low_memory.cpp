// --low-memory in one process (LocalComm): a Trainer with TrainOptions::low_memory
// (sharded weights -- one process owns every part here --, kernel-formatted weights
// staged for the running layer only, convolution outputs recomputed in backward) and
// one without, from the same parameters and data, on the same grid. Forward runs the
// same kernels on the same formatted weights, so losses, outputs, input deltas and
// predictions must be bit-identical; gradients, weights, momentum and batch-norm
// statistics within 1e-6 per tensor (||a-b||/||b||). Every step restarts the normal
// trainer from the low-memory one's state, so each step is compared from identical
// weights. (Memory use is not asserted here: see bench for that.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "data/synthetic.hpp"
#include "engine/trainer.hpp"
#include "model/params.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

constexpr double kTol = 1e-6;

// conv+bn+leaky before a max-pool (its output is recomputed in backward), a 3x3
// conv+bn+leaky into a 1x1 conv+bn+leaky (tiletrain's own 1x1 kernel), a 2/1 max-pool,
// a 1x1 linear conv with bias, SSE cost. Layers: 0 conv, 1 pool, 2 conv, 3 conv1x1,
// 4 pool, 5 conv1x1, 6 cost.
std::string cfg_text(int batch, int subdivisions, const std::string& learning_rate) {
  return "[net]\nbatch=" + std::to_string(batch) + "\nsubdivisions=" + std::to_string(subdivisions) +
         "\nwidth=23\nheight=19\nchannels=3\nlearning_rate=" + learning_rate +
         "\nmomentum=0.9\ndecay=0.0005\npolicy=constant\n"
         "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
         "[maxpool]\nsize=2\nstride=2\n"
         "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
         "[convolutional]\nbatch_normalize=1\nfilters=12\nsize=1\nstride=1\npad=0\nactivation=leaky\n"
         "[maxpool]\nsize=2\nstride=1\n"
         "[convolutional]\nfilters=4\nsize=1\nstride=1\npad=0\nactivation=linear\n"
         "[cost]\ntype=sse\n";
}

// Layers wider than one gather chunk (kChunkFloats = 2^18 floats of whole output
// channels, see Segment::plan_chunks): 1: 3x3 64->512 (chunks of 448 and 64 channels),
// 3: 1x1 512->`wide` on tiletrain's 1x1 kernel (512 and wide - 512), 4: 3x3 wide->4.
std::string big_cfg_text(const std::string& learning_rate, int wide) {
  return "[net]\nbatch=2\nsubdivisions=1\nwidth=9\nheight=7\nchannels=3\nlearning_rate=" + learning_rate +
         "\nmomentum=0.9\ndecay=0.0005\npolicy=constant\n"
         "[convolutional]\nbatch_normalize=1\nfilters=64\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
         "[convolutional]\nbatch_normalize=1\nfilters=512\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
         "[maxpool]\nsize=2\nstride=2\n"
         "[convolutional]\nbatch_normalize=1\nfilters=" +
         std::to_string(wide) +
         "\nsize=1\nstride=1\npad=0\nactivation=leaky\n"
         "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=linear\n"
         "[cost]\ntype=sse\n";
}

struct Case {
  int rows, cols;
  std::string groups;
  int cut = -1;
  BnMode bn = BnMode::Sync;
  bool need_input_delta = true;
  int subdivisions = 1;
  int wide = 0;  // > 0: big_cfg_text(wide)
  std::string describe() const {
    return (wide ? "wide layers (" + std::to_string(wide) + "), " : std::string()) + "grid " + std::to_string(rows) +
           "x" + std::to_string(cols) + ", groups " + groups + ", cut " + std::to_string(cut) + ", bn " +
           (bn == BnMode::Sync ? "sync" : "frozen") + ", need_input_delta " + (need_input_delta ? "yes" : "no") +
           ", subdivisions " + std::to_string(subdivisions);
  }
};

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Worst relative difference seen, for the log line.
struct Worst {
  double d = 0;
  std::string where;
  int bit_identical = 0, tensors = 0;
  void operator()(const std::string& what, const float* a, const float* b, size_t n, double tol = kTol) {
    if (n == 0) return;
    const double r = test::rel_diff(a, b, n);
    ++tensors;
    bit_identical += same_bits(a, b, n);
    if (!(r <= tol)) ADD_FAILURE() << what << ": low-memory vs normal relative difference " << r << " > " << tol;
    if (r > d) d = r, where = what;
  }
  void bits(const std::string& what, const float* a, const float* b, size_t n) {
    ++tensors;
    bit_identical += same_bits(a, b, n);
    EXPECT_TRUE(same_bits(a, b, n)) << what << " not bit-identical (relative difference " << test::rel_diff(a, b, n)
                                    << ")";
  }
};

void compare_params(Worst& w, const std::string& what, const NetSpec& net, const Params& layout, const float* a,
                    const float* b) {
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = layout.slices[l.index];
    const std::string p = what + " layer " + std::to_string(l.index) + " ";
    w(p + "weights", a + s.weights, b + s.weights, size_t(s.n_weights));
    w(p + "biases", a + s.biases, b + s.biases, size_t(s.n_out));
    if (s.scales >= 0) w(p + "scales", a + s.scales, b + s.scales, size_t(s.n_out));
  }
}

// `path`, `block`: kernel path and channel block of both trainers (0: this CPU's).
void run_case(const Case& c, int steps = 3, KernelPath path = KernelPath::Auto, int block = 0) {
  SCOPED_TRACE(c.describe() + ", kernels " + kernel_path_name(path) + ", block " + std::to_string(block));
  // (frozen statistics do not renormalise: a smaller rate keeps three steps finite)
  const std::string rate = c.bn == BnMode::Sync ? "1e-4" : "1e-6";
  const NetSpec net = parse_net(
      c.wide ? big_cfg_text(rate, c.wide) : cfg_text(2 * c.subdivisions, c.subdivisions, rate), "low_memory.cfg");
  Params p_low(net);
  test::random_params(p_low, net, 77);
  Params p_ref = p_low;
  TrainOptions o;
  o.rows = c.rows;
  o.cols = c.cols;
  o.groups = c.groups;
  o.cut = c.cut;
  o.bn = c.bn;
  o.need_input_delta = c.need_input_delta;
  o.seed = 5;
  o.kernels = path;
  o.channel_block = block;
  TrainOptions lo = o;
  lo.low_memory = true;
  LocalComm comm;
  Trainer low(net, p_low, lo, comm), ref(net, p_ref, o, comm);
  const int n = net.micro_batch();
  const size_t out_n = size_t(n) * size_t(net.output().size()), in_n = size_t(n) * size_t(net.input().size());
  const size_t P = size_t(p_ref.size());
  Worst w;
  std::vector<float> input, truth;
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    const std::string st = "step " + std::to_string(step) + " ";
    for (int sub = 0; sub < net.subdivisions; ++sub) {
      synthetic_batch(net, n, uint64_t(1000 + step * 10 + sub), input, truth);
      const double ll = low.forward_backward(input.data(), truth.data());
      const double lr = ref.forward_backward(input.data(), truth.data());
      ASSERT_TRUE(std::isfinite(lr));
      EXPECT_EQ(ll, lr) << st << "loss";
      if (sub == 0) losses.push_back(lr);
      const std::string ss = st + "micro-batch " + std::to_string(sub) + " ";
      w.bits(ss + "output", low.output(), ref.output(), out_n);
      if (c.need_input_delta) w.bits(ss + "input delta", low.input_delta(), ref.input_delta(), in_n);
    }
    // One process owns every part: grad() is the whole gradient in both trainers.
    ASSERT_EQ(low.grad().size(), P);
    ASSERT_EQ(ref.grad().size(), P);
    compare_params(w, st + "gradient", net, p_ref, low.grad().data(), ref.grad().data());
    low.update();
    ref.update();
    if (c.need_input_delta) {
      ASSERT_EQ(low.last_grad().size(), P);
      ASSERT_EQ(ref.last_grad().size(), P);
      compare_params(w, st + "summed gradient (last_grad)", net, p_ref, low.last_grad().data(), ref.last_grad().data());
    }
    for (float g : low.grad()) ASSERT_EQ(g, 0.f) << st << "update() left a non-zero gradient";
    compare_params(w, st + "after update: weights", net, p_ref, p_low.values.data(), p_ref.values.data());
    compare_params(w, st + "after update: momentum", net, p_ref, low.momentum().data(), ref.momentum().data());
    EXPECT_EQ(p_low.seen, p_ref.seen);
    for (const auto& l : net.layers) {
      if (!l.batch_normalize()) continue;
      const std::string p = st + "layer " + std::to_string(l.index) + " ";
      const size_t k = p_ref.rolling_mean[l.index].size();
      w(p + "rolling mean", p_low.rolling_mean[l.index].data(), p_ref.rolling_mean[l.index].data(), k);
      w(p + "rolling variance", p_low.rolling_var[l.index].data(), p_ref.rolling_var[l.index].data(), k);
    }
    // The next step starts both from the low-memory trainer's state.
    p_ref.values = p_low.values;
    p_ref.rolling_mean = p_low.rolling_mean;
    p_ref.rolling_var = p_low.rolling_var;
    ref.set_momentum(low.momentum());
    ref.reload_weights();
    // Inference forward (running statistics) from the same updated weights.
    synthetic_batch(net, n, uint64_t(5000 + step), input, truth);
    const float* pl = low.predict(input.data());
    const float* pr = ref.predict(input.data());
    w.bits(st + "predict", pl, pr, out_n);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // gather_weights() with one process: Params already whole, nothing may change.
  const ZeroPageFloats before = p_low.values;
  low.gather_weights();
  EXPECT_TRUE(same_bits(before.data(), p_low.values.data(), P));
  // Printed, not asserted: the low-memory trainer's own accounting (maps + deltas, and
  // weights/gradients/momentum + kernel copies), to see that it took another path.
  const Trainer::Memory ml = low.memory(), mr = ref.memory();
  std::printf(
      "%s: worst relative difference %.3g (%s); %d of %d tensors bit-identical; loss %.6g -> %.6g; "
      "maps+deltas %.3f vs %.3f MB, filters %.3f vs %.3f MB (low-memory vs normal)\n",
      c.describe().c_str(), w.d, w.where.empty() ? "-" : w.where.c_str(), w.bit_identical, w.tensors, losses.front(),
      losses.back(), ml.maps_mb + ml.deltas_mb, mr.maps_mb + mr.deltas_mb, ml.filters_mb, mr.filters_mb);
}

TEST(LowMemory, Grid2x2GroupsNone) { run_case({2, 2, "none"}); }
TEST(LowMemory, Grid2x2GroupsAll) { run_case({2, 2, "all"}); }
TEST(LowMemory, Grid3x2GroupsSome) { run_case({3, 2, "0,2,4"}); }
TEST(LowMemory, Grid3x2GroupsAllFrozenBn) { run_case({3, 2, "all", -1, BnMode::Frozen}); }
TEST(LowMemory, Untiled) { run_case({1, 1, "all"}); }
// Layers [3, 6) run untiled after the cut (never sharded).
TEST(LowMemory, CutInTheMiddle) { run_case({2, 2, "0,2", 3}); }
// Without need_input_delta (train and bench): layer 0 has no backward-data.
TEST(LowMemory, NoInputDelta) { run_case({2, 2, "0,3", -1, BnMode::Sync, false}); }
// Two micro-batches per batch: gradients accumulate across forward_backward calls.
TEST(LowMemory, Subdivisions) { run_case({3, 2, "none", -1, BnMode::Sync, true, 2}); }
// Layers gathered, formatted and reduced in several chunks: one tile (its gradient taken
// chunk by chunk from the kernel's layout) and four tiles (added up in a plain buffer).
TEST(LowMemory, WideLayersOneTile) { run_case({1, 1, "all", -1, BnMode::Sync, true, 1, 608}); }
TEST(LowMemory, WideLayers2x2) { run_case({2, 2, "0,3", -1, BnMode::Sync, true, 1, 608}); }
// A last chunk of 88 output channels (600 = 512 + 88, not a multiple of 16). Real nets
// have such layers: Darknet19's last convolution, 1x1 1024 -> 1000, is chunked 3 x 256 + 232.
TEST(LowMemory, WideLayersRaggedLastChunk) {
  run_case({1, 1, "all", -1, BnMode::Sync, true, 1, 600});
  run_case({2, 2, "0,3", -1, BnMode::Sync, true, 1, 600});
}
// Chunks in whole blocks of the other CPU kind's channel block (16 on an AVX2 machine,
// 8 on an AVX-512 one), on own kernels, whose weights and gradients go through the same
// row reorders.
TEST(LowMemory, OwnKernelsOtherBlock) {
  const int other = DnnlContext().config.block == 8 ? 16 : 8;
  run_case({1, 1, "all", -1, BnMode::Sync, true, 1, 608}, 2, KernelPath::Own, other);
  run_case({2, 2, "0,3", -1, BnMode::Sync, true, 1, 600}, 2, KernelPath::Own, other);
  run_case({3, 2, "0,2,4"}, 2, KernelPath::Own, other);
}

}  // namespace
}  // namespace tt
