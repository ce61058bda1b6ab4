// The device interface (device/device.hpp): the engine's maps, their element-wise work and
// the SGD update go through the Trainer's device, so that another backend is a new Device
// and not a rewrite. A device that counts what it is asked and hands it to the CPU must see
// every kind of work, and train bit for bit as the CPU alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "data/synthetic.hpp"
#include "device/device.hpp"
#include "engine/trainer.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

class CountingDevice final : public Device {
 public:
  std::map<std::string, int> calls;
  int64_t live_floats = 0;

  float* allocate(size_t floats) override {
    ++calls["allocate"];
    live_floats += int64_t(floats);
    return cpu().allocate(floats);
  }
  void release(float* p, size_t floats) override {
    ++calls["release"];
    live_floats -= int64_t(floats);
    cpu().release(p, floats);
  }
  void discard(float* p, size_t n) override {
    ++calls["discard"];
    cpu().discard(p, n);
  }
  void copy_region(const TensorView& src, const TensorView& dst, const Box& region) override {
    ++calls["copy_region"];
    cpu().copy_region(src, dst, region);
  }
  void add_region(const TensorView& src, const TensorView& dst, const Box& region) override {
    ++calls["add_region"];
    cpu().add_region(src, dst, region);
  }
  void copy_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                     const Box& region) override {
    ++calls["copy_channels"];
    cpu().copy_channels(src, src_c0, dst, dst_c0, channels, region);
  }
  void add_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                    const Box& region) override {
    ++calls["add_channels"];
    cpu().add_channels(src, src_c0, dst, dst_c0, channels, region);
  }
  void zero(const TensorView& t) override {
    ++calls["zero"];
    cpu().zero(t);
  }
  void zero_outside(const TensorView& t, const Box& keep) override {
    ++calls["zero_outside"];
    cpu().zero_outside(t, keep);
  }
  void compact_region(TensorView& t, const Box& keep) override {
    ++calls["compact_region"];
    cpu().compact_region(t, keep);
  }
  void channel_sums(const TensorView& y, const Box& region, double* sum, double* sq) override {
    ++calls["channel_sums"];
    cpu().channel_sums(y, region, sum, sq);
  }
  void affine_act_forward(const TensorView& y, const TensorView& z, const Box& region, const float* a, const float* b,
                          Act act) override {
    ++calls["affine_act_forward"];
    cpu().affine_act_forward(y, z, region, a, b, act);
  }
  void act_backward(const TensorView& g, const TensorView& y, const Box& region, const float* a, const float* b,
                    Act act) override {
    ++calls["act_backward"];
    cpu().act_backward(g, y, region, a, b, act);
  }
  void act_backward_bn_sums(const TensorView& g, const TensorView& y, const Box& region, const Box& own, const float* a,
                            const float* b, Act act, const double* mean, const double* rstd, double* sum_g,
                            double* sum_gx) override {
    ++calls["act_backward_bn_sums"];
    cpu().act_backward_bn_sums(g, y, region, own, a, b, act, mean, rstd, sum_g, sum_gx);
  }
  void bn_backward_apply(const TensorView& g, const TensorView& y, const Box& region, const float* k1, const float* k2,
                         const float* k3, const float* mean) override {
    ++calls["bn_backward_apply"];
    cpu().bn_backward_apply(g, y, region, k1, k2, k3, mean);
  }
  bool sgd(float* w, float* v, const float* g, int64_t begin, int64_t end, const SgdStep& s) override {
    ++calls["sgd"];
    return cpu().sgd(w, v, g, begin, end, s);
  }

 private:
  static Device& cpu() { return cpu_device(); }
};

// A batch-normalized convolution ending a group (its delta exchanged after batch-norm
// backward), a max-pool, a plain convolution, a dense head.
const char* kCfg =
    "[net]\nbatch=2\nsubdivisions=1\nwidth=16\nheight=16\nchannels=3\nlearning_rate=0.01\nmomentum=0.9\n"
    "decay=0.0005\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=relu\n"
    "[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=leaky\n"
    "[connected]\noutput=4\nactivation=linear\n"
    "[softmax]\n";

TEST(Device, TheEngineRunsItsMapsAndUpdateOnTheTrainersDevice) {
  const NetSpec net = parse_net(kCfg, "device.cfg");
  Params on_cpu(net);
  test::random_params(on_cpu, net, 11);
  Params counted = on_cpu;
  CountingDevice dev;
  {
    TrainOptions o;
    o.rows = 2;
    o.cols = 2;
    o.groups = "0,2";
    LocalComm comm;
    TrainOptions od = o;
    od.device = &dev;
    Trainer a(net, on_cpu, o, comm), b(net, counted, od, comm);
    std::vector<float> input, truth;
    for (int step = 0; step < 3; ++step) {
      synthetic_batch(net, net.batch, 500 + uint64_t(step), input, truth);
      const double la = a.train_step(input.data(), truth.data());
      const double lb = b.train_step(input.data(), truth.data());
      ASSERT_TRUE(std::isfinite(la));
      EXPECT_EQ(la, lb) << "step " << step;
    }
    for (const char* kind : {"allocate", "copy_region", "zero", "channel_sums", "affine_act_forward",
                             "act_backward_bn_sums", "act_backward", "bn_backward_apply", "sgd"})
      EXPECT_GT(dev.calls[kind], 0) << kind << ": the engine did this work without its device";
    EXPECT_GT(dev.live_floats, 0);
  }
  EXPECT_EQ(dev.live_floats, 0) << "the trainer's buffers were not all given back to their device";
  EXPECT_EQ(dev.calls["allocate"], dev.calls["release"]);
  EXPECT_EQ(std::memcmp(on_cpu.values.data(), counted.values.data(), on_cpu.values.size() * sizeof(float)), 0)
      << "training on the counting device is not bit for bit training on the CPU";
}

TEST(Device, BufferKnowsItsDeviceAndGivesItsMemoryBack) {
  CountingDevice dev;
  {
    Buffer b(1000, dev);
    EXPECT_EQ(&b.device(), &dev);
    EXPECT_EQ(dev.live_floats, 1000);
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], 0.f) << "a new buffer reads as zeros";
    Buffer moved = std::move(b);
    EXPECT_EQ(&moved.device(), &dev);
  }
  EXPECT_EQ(dev.live_floats, 0);
  EXPECT_EQ(&Buffer(4).device(), &cpu_device());
}

// Darknet's rule, v = m·v − g − decay·batch·w, w += rate/batch·v, and an update that makes a
// weight infinite is reported.
TEST(Device, CpuSgdIsDarknetsRuleAndReportsInfinity) {
  std::vector<float> w = {1.f, -2.f, 0.5f, 3.f}, v = {0.1f, 0.f, -0.2f, 1.f}, g = {0.3f, -0.1f, 0.f, 2.f};
  const SgdStep s{.rate = 0.1f, .momentum = 0.9f, .decay = 0.01f, .batch = 4.f};
  std::vector<float> want_w = w, want_v = v;
  for (size_t i = 1; i < 3; ++i) {
    want_v[i] = s.momentum * v[i] - g[i] - s.decay * s.batch * w[i];
    want_w[i] = w[i] + (s.rate / s.batch) * want_v[i];
  }
  EXPECT_TRUE(cpu_device().sgd(w.data(), v.data(), g.data(), 1, 3, s));
  for (size_t i = 0; i < w.size(); ++i) {  // (a compiler may fuse either side's multiply-adds)
    EXPECT_FLOAT_EQ(w[i], want_w[i]) << i;
    EXPECT_FLOAT_EQ(v[i], want_v[i]) << i;
  }
  std::vector<float> big = {std::numeric_limits<float>::max()}, mv = {0.f}, mg = {-std::numeric_limits<float>::max()};
  EXPECT_FALSE(
      cpu_device().sgd(big.data(), mv.data(), mg.data(), 0, 1, {.rate = 100.f, .momentum = 0, .decay = 0, .batch = 1}));
}

}  // namespace
}  // namespace tt
