// The op contract (src/ops/op.hpp), checked for every op through the interface alone:
// backward adds into the input gradients (a map read by two ops gets the sum), its
// gradients match central differences of forward (in double-checked float, per input and
// per parameter), forward is deterministic, and what a loss writes is the gradient of its
// value. A new op gets all of this from one line in kCases.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"
#include "test_util.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

struct OpCase {
  const char* name;
  const char* cfg;  // the op under test is the net's last layer, unless `layer` says otherwise
  int layer = -1;
  // Backward is the gradient of forward (false for Darknet's detector layers, whose
  // backward passes on the loss's delta, and softmax, which passes it through: those are
  // checked through their loss, OpLoss).
  bool gradient = true;
};

const OpCase kCases[] = {
    {"route",
     "[net]\nwidth=5\nheight=4\nchannels=3\n[maxpool]\nsize=1\nstride=1\n[convolutional]\nfilters=2\nsize=1\n"
     "activation=linear\n[route]\nlayers=-1,-2\n"},
    {"shortcut",
     "[net]\nwidth=5\nheight=4\nchannels=3\n[convolutional]\nfilters=3\nsize=1\nactivation=linear\n"
     "[maxpool]\nsize=1\nstride=1\n[shortcut]\nfrom=-2\nactivation=leaky\n"},
    {"shortcut_from_larger",  // resnet's first block: 4 channels onto 6, a 6x8 map onto a 3x4 one
     "[net]\nwidth=8\nheight=6\nchannels=4\n[maxpool]\nsize=1\nstride=1\n[convolutional]\nfilters=6\nsize=1\n"
     "stride=2\nactivation=linear\n[shortcut]\nfrom=0\nactivation=logistic\n"},
    {"shortcut_from_smaller",
     "[net]\nwidth=3\nheight=2\nchannels=5\n[maxpool]\nsize=1\nstride=1\n[upsample]\nstride=2\n[convolutional]\n"
     "filters=4\nsize=1\nactivation=linear\n[shortcut]\nfrom=-3\n"},
    {"reorg", "[net]\nwidth=6\nheight=4\nchannels=4\n[reorg]\nstride=2\n"},
    {"reorg_reverse", "[net]\nwidth=3\nheight=2\nchannels=8\n[reorg]\nstride=2\nreverse=1\n"},
    {"reorg_flatten", "[net]\nwidth=3\nheight=2\nchannels=4\n[reorg]\nstride=1\nflatten=1\n"},
    {"reorg_flatten_reverse", "[net]\nwidth=2\nheight=2\nchannels=8\n[reorg]\nstride=2\nreverse=1\nflatten=1\n"},
    {"reorg_extra", "[net]\nwidth=3\nheight=3\nchannels=2\n[reorg]\nstride=1\nextra=1\n"},
    {"upsample", "[net]\nwidth=3\nheight=2\nchannels=2\n[upsample]\nstride=2\n"},
    {"upsample_scaled", "[net]\nwidth=3\nheight=3\nchannels=2\n[upsample]\nstride=3\nscale=0.5\n"},
    {"upsample_down", "[net]\nwidth=4\nheight=6\nchannels=2\n[upsample]\nstride=-2\n"},
    {"avgpool", "[net]\nwidth=4\nheight=3\nchannels=3\n[avgpool]\n"},
    {"connected_linear", "[net]\nwidth=3\nheight=2\nchannels=2\n[connected]\noutput=5\nactivation=linear\n"},
    {"connected_leaky", "[net]\nwidth=3\nheight=2\nchannels=2\n[connected]\noutput=4\nactivation=leaky\n"},
    {"connected_logistic", "[net]\nwidth=2\nheight=2\nchannels=2\n[connected]\noutput=3\nactivation=logistic\n"},
    {"local_same",
     "[net]\nwidth=4\nheight=3\nchannels=2\n[local]\nsize=3\nstride=1\npad=1\nfilters=3\nactivation=leaky\n"},
    {"local_strided",
     "[net]\nwidth=5\nheight=6\nchannels=3\n[local]\nsize=2\nstride=2\nfilters=2\nactivation=logistic\n"},
    {"crop",
     "[net]\nwidth=5\nheight=4\nchannels=2\n[maxpool]\nsize=1\nstride=1\n[crop]\ncrop_height=2\ncrop_width=3\nflip="
     "1\n"},
    {"crop_noadjust",
     "[net]\nwidth=4\nheight=4\nchannels=2\n[maxpool]\nsize=1\nstride=1\n[crop]\ncrop_height=3\ncrop_width=3\nnoadjust="
     "1\n"},
    {"dropout", "[net]\nwidth=4\nheight=3\nchannels=2\n[dropout]\nprobability=0.4\n"},
    {"cost", "[net]\nwidth=3\nheight=2\nchannels=2\n[cost]\n"},
    {"softmax", "[net]\nwidth=1\nheight=1\nchannels=7\n[softmax]\n", -1, false},
    {"region",
     "[net]\nwidth=64\nheight=64\nchannels=3\n[convolutional]\nfilters=30\nsize=1\nactivation=linear\n"
     "[region]\nanchors=1,1,2,2\nclasses=10\nnum=2\ncoords=4\nsoftmax=1\n",
     -1, false},
    {"detection",
     "[net]\nwidth=3\nheight=2\nchannels=2\n[connected]\noutput=52\nactivation=linear\n"
     "[detection]\nside=2\nnum=2\nclasses=3\ncoords=4\nsoftmax=1\n",
     -1, false},
    {"yolo",
     "[net]\nwidth=64\nheight=64\nchannels=3\n[convolutional]\nfilters=24\nsize=1\nactivation=linear\n"
     "[yolo]\nmask=0,1\nanchors=10,14,23,27\nclasses=7\nnum=2\n",
     -1, false},
};

class OpContract : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override {
    net = parse_net(GetParam().cfg, std::string(GetParam().name) + ".cfg");
    const int l = GetParam().layer < 0 ? int(net.layers.size()) - 1 : GetParam().layer;
    spec = &net.layers[size_t(l)];
    ASSERT_TRUE(has_op(*spec->kind));
    op = make_op(net, *spec);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<int> inputs = net.inputs_of(l);
    if (inputs.empty()) inputs = {-1};  // layer 0 reads the net's input
    for (int r : inputs) {
      const int64_t n = batch * (r < 0 ? net.input().size() : net.layers[size_t(r)].out.size());
      in.emplace_back(size_t(n));
      for (float& v : in.back()) v = u(rng);
    }
    out.assign(size_t(batch * spec->out.size()), 0.f);
    saved.assign(size_t(batch * op->saved_floats()), 0.f);
    scratch.assign(size_t(batch * op->scratch_floats()), 0.f);
    if (spec->has_params()) {
      weights.resize(size_t(spec->weight_count()));
      biases.resize(size_t(spec->bias_count()));
      for (float& v : weights) v = u(rng);
      for (float& v : biases) v = u(rng);
    }
    probe.resize(out.size());  // L = Σ probe · out
    for (float& v : probe) v = u(rng);
  }

  OpTensors tensors() {
    OpTensors t;
    for (auto& v : in) t.in.push_back(v.data());
    t.out = out.data();
    t.saved = saved.data();
    t.scratch = scratch.data();
    t.weights = weights.data();
    t.biases = biases.data();
    return t;
  }

  double probe_loss() {
    op->forward(step, tensors());
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += double(probe[i]) * out[i];
    return s;
  }

  // Backward with dL/dout = probe, onto input gradients that start at `start`.
  std::vector<std::vector<float>> backward_from(const std::vector<std::vector<float>>& start,
                                                std::vector<float>* gw = nullptr, std::vector<float>* gb = nullptr) {
    op->forward(step, tensors());
    std::vector<std::vector<float>> din = start;
    std::vector<float> dout = probe;
    OpTensors t = tensors();
    for (auto& d : din) t.din.push_back(d.data());
    t.dout = dout.data();
    std::vector<float> unused_w(weights.size()), unused_b(biases.size());
    t.grad_weights = gw ? gw->data() : unused_w.data();
    t.grad_biases = gb ? gb->data() : unused_b.data();
    op->backward(step, t);
    return din;
  }

  std::vector<std::vector<float>> zeros_like_in() {
    std::vector<std::vector<float>> z;
    for (auto& v : in) z.emplace_back(v.size(), 0.f);
    return z;
  }

  // Central differences of probe_loss over every value of `x` (float forward, step 1e-2:
  // the ops are piecewise smooth; a kink within a step is skipped by comparing both sides).
  void expect_gradient(std::vector<float>& x, const std::vector<float>& analytic, const char* what) {
    ASSERT_EQ(x.size(), analytic.size());
    const float h = 1e-2f;
    int checked = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float keep = x[i];
      x[i] = keep + h;
      const double up = probe_loss();
      x[i] = keep - h;
      const double down = probe_loss();
      x[i] = keep + h / 2;
      const double up_half = probe_loss();
      x[i] = keep;
      const double center = probe_loss();
      if (std::abs((up - center) - 2 * (up_half - center)) > 1e-3) continue;  // a kink (leaky, relu) nearby
      const double numeric = (up - down) / (2. * h);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 * (1 + std::abs(numeric))) << what << " [" << i << "]";
      ++checked;
    }
    EXPECT_GT(checked, int(x.size()) / 2) << what << ": too few values away from a kink";
  }

  NetSpec net;
  const LayerSpec* spec = nullptr;
  std::unique_ptr<Op> op;
  OpStep step{.batch = 2, .training = true, .step = 3, .seed = 11};
  int batch = 2;
  std::vector<std::vector<float>> in;
  std::vector<float> out, saved, scratch, weights, biases, probe;
};

TEST_P(OpContract, ForwardIsDeterministic) {
  probe_loss();
  const std::vector<float> first = out;
  std::fill(out.begin(), out.end(), 0.f);
  probe_loss();
  EXPECT_EQ(first, out);
}

TEST_P(OpContract, BackwardAddsIntoInputGradients) {
  const std::vector<std::vector<float>> fresh = backward_from(zeros_like_in());
  std::vector<std::vector<float>> start = zeros_like_in();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (auto& v : start)
    for (float& x : v) x = u(rng);
  const std::vector<std::vector<float>> added = backward_from(start);
  for (size_t k = 0; k < in.size(); ++k)
    for (size_t i = 0; i < in[k].size(); ++i)
      ASSERT_NEAR(added[k][i], start[k][i] + fresh[k][i], 1e-5 * (std::abs(start[k][i]) + std::abs(fresh[k][i])))
          << "input " << k << " [" << i << "]: backward must add, not overwrite";
  bool any = false;
  for (auto& v : fresh)
    for (float x : v) any |= x != 0;
  EXPECT_TRUE(any) << "backward wrote no input gradient";
}

class OpGradient : public OpContract {};
class OpLoss : public OpContract {};

TEST_P(OpGradient, MatchesCentralDifferences) {
  std::vector<float> gw(weights.size(), 0.f), gb(biases.size(), 0.f);
  const std::vector<std::vector<float>> din = backward_from(zeros_like_in(), &gw, &gb);
  for (size_t k = 0; k < in.size(); ++k) expect_gradient(in[k], din[k], "input");
  if (!weights.empty()) {
    expect_gradient(weights, gw, "weights");
    expect_gradient(biases, gb, "biases");
  }
}

// A loss's delta, passed back through its op, is the gradient of its value with respect to
// the op's input (Darknet's convention: SSE's delta is half the gradient of Σ(out-truth)²).
// The detectors' delta is Darknet's (truth minus prediction, with targets such as the IoU
// held fixed), checked against libdarknet in test_yolo_oracle.cpp; here only that their
// cost is Σ delta² and that backward passes it on.
TEST_P(OpLoss, WritesItsGradient) {
  ASSERT_TRUE(op->is_loss(true));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> truth(size_t(batch * net.truth_size()), 0.f);
  if (spec->box_loss()) {  // one box per sample
    for (int b = 0; b < batch; ++b) {
      float* t = truth.data() + b * net.truth_size();
      t[0] = 0.3f + 0.4f * u(rng), t[1] = 0.3f + 0.4f * u(rng), t[2] = 0.2f, t[3] = 0.3f, t[4] = 1;
    }
  } else {
    for (int b = 0; b < batch; ++b) truth[size_t(b * net.truth_size() + b % net.truth_size())] = 1;  // one-hot
  }
  std::vector<float> dout(out.size(), 0.f);
  auto loss_at = [&](std::vector<float>* delta) {
    op->forward(step, tensors());
    std::vector<float> scratch_delta(out.size());
    OpTensors t = tensors();
    t.dout = delta ? delta->data() : scratch_delta.data();
    return op->loss(step, t, LossArgs{truth.data(), net.width, net.height, 0, true}, nullptr);
  };
  const double l0 = loss_at(&dout);
  EXPECT_TRUE(std::isfinite(l0));
  std::vector<std::vector<float>> din = zeros_like_in();
  {
    OpTensors t = tensors();
    for (auto& d : din) t.din.push_back(d.data());
    t.dout = dout.data();
    op->backward(step, t);
  }
  if (spec->box_loss()) {  // its cost is the sum of its delta's squares, and the delta reaches the input
    double squares = 0;
    for (float d : dout) squares += double(d) * d;
    EXPECT_GT(squares, 0);
    // Darknet sums the squares in float: n terms, each rounding by at most 2^-24 of the sum.
    EXPECT_NEAR(l0, squares, double(dout.size()) * 0x1p-24 * squares);
    double norm = 0;
    for (float g : din[0]) norm += double(g) * g;
    EXPECT_GT(norm, 0);
    return;
  }
  // The loss's gradient, numerically, per input value.
  const double factor = spec->is(kCostKind) ? 2 : 1;
  std::vector<float>& x = in[0];
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i], h = 1e-3f;
    x[i] = keep + h;
    const double up = loss_at(nullptr);
    x[i] = keep - h;
    const double down = loss_at(nullptr);
    x[i] = keep;
    EXPECT_NEAR(factor * din[0][i], (up - down) / (2. * h), 2e-3) << "[" << i << "]";
  }
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& i) { return i.param.name; }
std::vector<OpCase> cases_where(bool (*keep)(const OpCase&)) {
  std::vector<OpCase> v;
  for (const OpCase& c : kCases)
    if (keep(c)) v.push_back(c);
  return v;
}
bool is_loss_case(const OpCase& c) {
  const NetSpec net = parse_net(c.cfg, c.name);
  return make_op(net, net.layers.back())->is_loss(true);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpContract, ::testing::ValuesIn(kCases), case_name);
INSTANTIATE_TEST_SUITE_P(Ops, OpGradient, ::testing::ValuesIn(cases_where([](const OpCase& c) { return c.gradient; })),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Ops, OpLoss, ::testing::ValuesIn(cases_where(is_loss_case)), case_name);

TEST(OpRegistry, TiledLayersHaveNoOp) {
  const NetSpec net = parse_net("[net]\nwidth=4\nheight=4\nchannels=1\n[maxpool]\nsize=2\nstride=2\n", "pool.cfg");
  EXPECT_FALSE(has_op(kConvKind));
  EXPECT_FALSE(has_op(kMaxPoolKind));
  EXPECT_THROW(make_op(net, net.layers[0]), Error);
}

// Why [reorg] runs after the cut: Darknet's reorg (YOLOv2's passthrough, 64x26x26 with
// stride 2) reads its input as if it were 16x52x52, so one output cell gathers cells from
// across the whole map, not from a window a tile's halo could bring (docs/tiling.md).
TEST(OpRegistry, DarknetsReorgReadsAcrossTheMap) {
  const NetSpec net = parse_net("[net]\nwidth=26\nheight=26\nchannels=64\n[reorg]\nstride=2\n", "reorg.cfg");
  const std::unique_ptr<Op> op = make_op(net, net.layers[0]);
  const LayerSpec& l = net.layers[0];
  ASSERT_EQ(l.out.c * l.out.h * l.out.w, l.in.c * l.in.h * l.in.w);
  // Every input cell holds its own position: row * w + column (+1, so that 0 is unset).
  std::vector<float> in(size_t(l.in.size())), out(size_t(l.out.size()), 0.f);
  for (int c = 0; c < l.in.c; ++c)
    for (int y = 0; y < l.in.h; ++y)
      for (int x = 0; x < l.in.w; ++x) in[size_t((c * l.in.h + y) * l.in.w + x)] = float(y * l.in.w + x + 1);
  OpTensors t;
  t.in = {in.data()};
  t.out = out.data();
  op->forward(OpStep{.batch = 1, .training = false}, t);
  // The input rows read by output cell (0, 0) over all its channels.
  int lo = l.in.h, hi = -1;
  for (int c = 0; c < l.out.c; ++c) {
    const int row = (int(out[size_t(c * l.out.h * l.out.w)]) - 1) / l.in.w;
    lo = std::min(lo, row);
    hi = std::max(hi, row);
  }
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, l.in.h - 1);  // a window of stride 2 would read rows 0 and 1
}

}  // namespace
}  // namespace tt
