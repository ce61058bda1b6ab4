// verify's judgement (engine/verify.hpp): a convolution's weight gradient is judged against
// the size of what was summed into it, so that fp32 rounding of a cancelling sum passes and
// a gradient that misses part of the map fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "engine/trainer.hpp"
#include "engine/grad_scale.hpp"
#include "engine/verify.hpp"
#include "data/synthetic.hpp"
#include "model/net_spec.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"

namespace tt {
namespace {

NetSpec small_classifier(int batch, int h, int w) {
  NetSpec net = load_net(test::source_dir() + "/cfgs/small-classifier.cfg");
  net.batch = batch;
  net.subdivisions = 1;
  resize_net(net, h, w);
  return net;
}

// The example the README once gave, which the plain relative difference judged a mismatch:
// its weight gradients in front of batch-norms cancel (the delta sums to zero per channel),
// and a 2x3 partition's order of summation moved them by 2.6e-5 of their size.
TEST(VerifyJudgement, CancellingGradientsOfAnExactPartitionPass) {
  const NetSpec net = small_classifier(3, 97, 131);
  TrainOptions opt;
  opt.rows = 2;
  opt.cols = 3;
  opt.groups = "none";
  LocalComm comm;
  const VerifyReport r = verify_training(net, opt, comm, 1, 3);
  EXPECT_TRUE(r.ok()) << "gradients " << r.gradients().diff << " (layer " << r.gradients().layer << "), after a step "
                      << r.after_step().diff;
  EXPECT_EQ(r.outputs(), 0) << "forward values must be bit-identical";
  EXPECT_LE(r.gradients().diff, VerifyReport::kTolerance);
}

// The scales the untiled run measures bound every parameter gradient (Cauchy-Schwarz): the
// convolutions' weights, their biases (with and without batch-norm), the batch-norm scales
// and a connected layer's weights and biases after the cut; they are zero for layers
// without parameters and restart from zero after they are taken.
TEST(VerifyJudgement, MeasuredScalesBoundEveryParameterGradient) {
  NetSpec net = parse_net(R"([net]
batch=2
subdivisions=1
width=36
height=40
channels=3
learning_rate=0.01
momentum=0.9
decay=0.0005
policy=constant

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=6
size=3
stride=1
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=5
size=1
stride=1
activation=logistic

[avgpool]

[connected]
output=4
activation=leaky

[softmax]
)",
                          "scales.cfg");
  Params p(net);
  init_params(p, net, 3);
  for (int cut : {-1, 2}) {  // cut 2: the convolutions after it run in the tail
    TrainOptions opt;
    opt.cut = cut;
    opt.record_grad_scales = true;
    LocalComm comm;
    Params q = p;
    Trainer tr(net, q, opt, comm);
    std::vector<float> input, truth;
    synthetic_batch(net, net.micro_batch(), 5, input, truth);
    tr.forward_backward(input.data(), truth.data());
    const std::vector<GradScale> scale = tr.take_grad_scales();
    ASSERT_EQ(scale.size(), net.layers.size());
    auto norm = [&](int64_t at, int64_t n) {
      double g = 0;
      for (int64_t k = 0; k < n; ++k) g += double(tr.grad()[size_t(at + k)]) * tr.grad()[size_t(at + k)];
      return std::sqrt(g);
    };
    int bounded = 0;
    for (const LayerSpec& l : net.layers) {
      const GradScale& g = scale[size_t(l.index)];
      const std::string where = "cut " + std::to_string(cut) + ", layer " + std::to_string(l.index);
      if (!l.has_params()) {
        EXPECT_EQ(g.weights + g.biases + g.scales, 0) << where;
        continue;
      }
      for (const ScaledTensor& part : scaled_tensors(p.slices[size_t(l.index)], g)) {
        if (part.at < 0) {
          EXPECT_EQ(part.scale, 0) << where << " " << part.name;
          continue;
        }
        const double n = norm(part.at, part.n);
        EXPECT_GT(n, 0) << where << " " << part.name;
        EXPECT_LE(n, part.scale * (1 + 1e-6)) << where << " " << part.name << ": not a bound";
        ++bounded;
      }
    }
    EXPECT_EQ(bounded, 3 + 2 + 3 + 2) << "cut " << cut;
    for (const GradScale& g : tr.take_grad_scales()) EXPECT_EQ(g.weights + g.biases + g.scales, 0);
    // The same micro-batch again (no update in between): every scale is measured again, the
    // same (the batch-norms write where the trainer reads, also after a take).
    tr.forward_backward(input.data(), truth.data());
    const std::vector<GradScale> again = tr.take_grad_scales();
    for (size_t l = 0; l < again.size(); ++l) {
      EXPECT_EQ(again[l].weights, scale[l].weights) << "cut " << cut << ", layer " << l;
      EXPECT_EQ(again[l].biases, scale[l].biases) << "cut " << cut << ", layer " << l;
      EXPECT_EQ(again[l].scales, scale[l].scales) << "cut " << cut << ", layer " << l;
    }
  }
}

// The judgement itself on a 3x3 convolution's weight gradient over a 64x64 map whose delta
// sums to zero per channel (as behind a batch-norm): the gradient summed in fp32 tile by tile
// passes against the float64 sum; one that leaves out one row of the map fails.
TEST(VerifyJudgement, RoundingPassesAndAMissingRowFails) {
  const int ci = 8, co = 8, h = 64, w = 64, k = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(ci * h * w)), dz(size_t(co * h * w));
  for (float& v : x) v = nd(rng);
  for (float& v : dz) v = nd(rng);
  for (int o = 0; o < co; ++o) {  // zero mean per channel
    double m = 0;
    for (int i = 0; i < h * w; ++i) m += dz[size_t(o * h * w + i)];
    for (int i = 0; i < h * w; ++i) dz[size_t(o * h * w + i)] -= float(m / (h * w));
  }
  // dW[o][i][ky][kx] = sum over output cells (y, x) in rows [r0, r1) of x[i][y+ky-1][x+kx-1] dz[o][y][x]
  auto grad = [&](int r0, int r1, auto zero) {
    using T = decltype(zero);
    std::vector<T> g(size_t(co * ci * k * k), T(0));
    for (int o = 0; o < co; ++o)
      for (int i = 0; i < ci; ++i)
        for (int ky = 0; ky < k; ++ky)
          for (int kx = 0; kx < k; ++kx) {
            T s = 0;
            for (int y = r0; y < r1; ++y)
              for (int xx = 0; xx < w; ++xx) {
                const int iy = y + ky - 1, ix = xx + kx - 1;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                s += T(x[size_t((i * h + iy) * w + ix)]) * T(dz[size_t((o * h + y) * w + xx)]);
              }
            g[size_t(((o * ci + i) * k + ky) * k + kx)] = s;
          }
    return g;
  };
  const std::vector<double> exact = grad(0, h, 0.0);
  std::vector<float> exact_f(exact.begin(), exact.end());
  // fp32, in two tiles (rows [0, 32) and [32, 64)) added up: another order of summation
  std::vector<float> tiled = grad(0, 32, 0.f);
  const std::vector<float> lower = grad(32, h, 0.f);
  for (size_t j = 0; j < tiled.size(); ++j) tiled[j] += lower[j];
  std::vector<float> missing = grad(0, h - 1, 0.f);  // the last row of cells left out
  double sx = 0, sd = 0;
  for (float v : x) sx += double(v) * v;
  for (float v : dz) sd += double(v) * v;
  const double scale = std::sqrt(double(k * k) * sx * sd);

  const double rounding = gradient_difference(tiled.data(), exact_f.data(), tiled.size(), scale);
  const double bug = gradient_difference(missing.data(), exact_f.data(), missing.size(), scale);
  EXPECT_LE(rounding, VerifyReport::kTolerance) << "fp32 rounding judged a mismatch";
  EXPECT_GT(bug, VerifyReport::kTolerance) << "a missing row judged a match";
  EXPECT_GT(bug, 100 * rounding);
}

// The same for the sums behind a bias gradient (Σ delta per channel) and a batch-norm scale
// gradient (Σ delta·x̂ per channel), judged against sqrt(cells) ||delta|| and
// sqrt(Σ_c ||delta_c||² ||x̂_c||²): with a delta that sums to zero per channel and is
// orthogonal to x̂ (both sums exactly 0, as behind a batch-norm), fp32 rounding of the sums
// tile by tile passes against float64, while one row of cells left out fails.
TEST(VerifyJudgement, CancellingBiasAndScaleSumsPassAndAMissingRowFails) {
  const int C = 8, h = 64, w = 64, n = 2, cells = h * w;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> d(size_t(n * C * cells)), xh(d.size());
  for (float& v : d) v = nd(rng);
  for (float& v : xh) v = nd(rng);
  auto at = [&](int s, int c, int k) { return size_t((s * C + c) * cells + k); };
  for (int c = 0; c < C; ++c) {  // per channel: x̂ zero mean, unit variance; delta zero mean, orthogonal to x̂
    double mx = 0, md = 0, vx = 0, dx = 0;
    for (int s = 0; s < n; ++s)
      for (int k = 0; k < cells; ++k) mx += xh[at(s, c, k)], md += d[at(s, c, k)];
    mx /= n * cells, md /= n * cells;
    for (int s = 0; s < n; ++s)
      for (int k = 0; k < cells; ++k) {
        xh[at(s, c, k)] = float(xh[at(s, c, k)] - mx);
        d[at(s, c, k)] = float(d[at(s, c, k)] - md);
        vx += double(xh[at(s, c, k)]) * xh[at(s, c, k)];
        dx += double(d[at(s, c, k)]) * xh[at(s, c, k)];
      }
    for (int s = 0; s < n; ++s)
      for (int k = 0; k < cells; ++k) d[at(s, c, k)] = float(d[at(s, c, k)] - dx / vx * xh[at(s, c, k)]);
  }
  // Σ over rows [r0, r1) of every sample: the bias (x̂ = false) or scale sums per channel.
  auto sums = [&](int r0, int r1, bool scale, auto zero) {
    using T = decltype(zero);
    std::vector<T> g(size_t(C), T(0));
    for (int c = 0; c < C; ++c)
      for (int s = 0; s < n; ++s)
        for (int k = r0 * w; k < r1 * w; ++k) g[size_t(c)] += T(d[at(s, c, k)]) * (scale ? T(xh[at(s, c, k)]) : T(1));
    return g;
  };
  double dd = 0;
  std::vector<double> ddc(size_t(C), 0.), xxc(size_t(C), 0.);
  for (int s = 0; s < n; ++s)
    for (int c = 0; c < C; ++c)
      for (int k = 0; k < cells; ++k) {
        ddc[size_t(c)] += double(d[at(s, c, k)]) * d[at(s, c, k)];
        xxc[size_t(c)] += double(xh[at(s, c, k)]) * xh[at(s, c, k)];
      }
  double ss = 0;
  for (int c = 0; c < C; ++c) dd += ddc[size_t(c)], ss += ddc[size_t(c)] * xxc[size_t(c)];
  for (bool scale : {false, true}) {
    const double bound = scale ? std::sqrt(ss) : std::sqrt(double(n) * cells * dd);
    const std::vector<double> exact = sums(0, h, scale, 0.0);
    const std::vector<float> exact_f(exact.begin(), exact.end());
    std::vector<float> tiled = sums(0, 21, scale, 0.f);  // three tiles of rows, in fp32, added up
    for (const auto& [r0, r1] : {std::pair{21, 42}, std::pair{42, h}}) {
      const std::vector<float> part = sums(r0, r1, scale, 0.f);
      for (int c = 0; c < C; ++c) tiled[size_t(c)] += part[size_t(c)];
    }
    const std::vector<float> missing = sums(0, h - 1, scale, 0.f);
    const double rounding = gradient_difference(tiled.data(), exact_f.data(), size_t(C), bound);
    const double bug = gradient_difference(missing.data(), exact_f.data(), size_t(C), bound);
    const char* what = scale ? "scale" : "bias";
    EXPECT_LE(rounding, VerifyReport::kTolerance) << what << ": fp32 rounding judged a mismatch";
    EXPECT_GT(bug, VerifyReport::kTolerance) << what << ": a missing row judged a match";
    EXPECT_GT(bug, 100 * rounding) << what;
    // Against ||exact|| alone (the judgement before), the rounding of a sum that cancels
    // is itself of the size of the result: far over the tolerance.
    EXPECT_GT(gradient_difference(tiled.data(), exact_f.data(), size_t(C), 0), 100 * VerifyReport::kTolerance) << what;
  }
}

// Plants an off-by-one halo: at the deepest group start that has one, the piece of `halo`
// (a Plan's fwd_halo or bwd_halo) that comes down from the tile above loses its outermost
// row, so the tile below never receives it (a halo of one row is then gone). Returns a
// description of what it changed ("" if the plan has no such piece).
std::string drop_outer_halo_row(Plan& plan, std::vector<std::vector<Piece>> Plan::*halo) {
  for (size_t i = (plan.*halo).size(); i-- > 0;)
    for (Piece& p : (plan.*halo)[i]) {
      if (p.from / plan.cols >= p.to / plan.cols || p.box.empty()) continue;  // from a tile above
      const std::string was = p.box.str();
      ++p.box.y0;
      return "layer " + std::to_string(plan.first + int(i)) + ", tile " + std::to_string(p.from) + " to " +
             std::to_string(p.to) + ": " + was + " became " + p.box.str();
    }
  return "";
}

// 2 x 1 tiles, in groups from `groups`.
TrainOptions two_tiles(const std::string& groups) {
  TrainOptions opt;
  opt.rows = 2;
  opt.cols = 1;
  opt.groups = groups;
  return opt;
}

std::string describe(const VerifyReport& r) {
  std::string d;
  for (int k = 0; k < VerifyReport::kKinds; ++k) {
    char b[96];
    std::snprintf(b, sizeof b, "%s%s %.3g", k ? ", " : "", VerifyReport::name(k), r.worst[size_t(k)].diff);
    d += b;
    if (r.worst[size_t(k)].layer >= 0) d += " (layer " + std::to_string(r.worst[size_t(k)].layer) + ")";
  }
  return d;
}

// verify of `net` with `opt` passes on the plan as made; then verify again with `plant`
// applied to the plan. `what` is what the plant changed (empty: it found nothing to change).
struct Planted {
  VerifyReport bad;
  std::string what;
};
Planted verify_planted(const NetSpec& net, TrainOptions opt, const std::function<std::string(Plan&)>& plant,
                       const char* label) {
  LocalComm comm;
  const VerifyReport good = verify_training(net, opt, comm, 1, 2);
  EXPECT_TRUE(good.ok()) << describe(good);
  Planted r;
  opt.adjust_plan = [&](Plan& p) { r.what = plant(p); };
  r.bad = verify_training(net, opt, comm, 1, 2);
  std::printf("%s %s: %s\n", label, r.what.c_str(), describe(r.bad).c_str());
  return r;
}

// The plan as made passes; the same plan with a forward halo one row short fails. Groups
// from layers 0 and 2: the halo into layer 2 is seven rows of its input (conv 3x3, max-pool
// 2/2, conv 3x3, conv 1x1 behind it, and the cells backward needs).
TEST(VerifyJudgement, AForwardHaloOneRowShortFails) {
  const auto [bad, planted] = verify_planted(
      small_classifier(2, 40, 36), two_tiles("0,2"), [](Plan& p) { return drop_outer_halo_row(p, &Plan::fwd_halo); },
      "forward halo");
  ASSERT_FALSE(planted.empty()) << "no forward halo piece to shorten";
  EXPECT_FALSE(bad.ok()) << "a forward halo one row short (" << planted << ") judged a match: " << describe(bad);
}

// A backward halo one row short leaves the forward values bit-identical: only the gradient
// judgement (and the input deltas) can see it, and they must. A group per layer; the halo
// shortened is the deepest, layer 4's output delta into layer 5 (one row), which reaches
// the owned cells of layer 2's weight gradient through layer 4's backward-data. (The one
// into layer 1 would reach only the net's input delta: layer 0's gradient counts owned cells.)
TEST(VerifyJudgement, ABackwardHaloOneRowShortFails) {
  const auto [bad, planted] = verify_planted(
      small_classifier(2, 40, 36), two_tiles("none"), [](Plan& p) { return drop_outer_halo_row(p, &Plan::bwd_halo); },
      "backward halo");
  ASSERT_FALSE(planted.empty()) << "no backward halo piece to shorten";
  EXPECT_EQ(bad.outputs(), 0) << "forward must be untouched by a backward halo";
  EXPECT_GT(bad.gradients().diff, VerifyReport::kTolerance)
      << "a backward halo one row short (" << planted << ") judged a match: " << describe(bad);
  EXPECT_FALSE(bad.ok());
}

// Plants a row of owned cells left out of layer l's parameter gradients: the top tile's
// owned box of layer l loses its first row, so neither its weight gradient, nor its bias
// gradient, nor its batch-norm sums count that row, and no other tile does. Forward does not
// read owned boxes of a layer inside the segment without batch-norm statistics (neither
// before its end nor with frozen batch-norm), so its values stay bit-identical.
std::string drop_owned_row(Plan& plan, int l) {
  for (int t = 0; t < plan.tiles_count(); ++t) {
    Box& own = plan.tiles[size_t(t)][size_t(l - plan.first)].own;
    if (own.y0 != 0 || own.h() < 2) continue;
    const std::string was = own.str();
    ++own.y0;
    return "layer " + std::to_string(l) + ", tile " + std::to_string(t) + ": owned " + was + " became " + own.str();
  }
  return "";
}

// Layer 0 a convolution with a bias, layer 1 one with batch-norm; no burn-in, so that the
// update of a step is not negligible.
NetSpec bias_and_bn_net() {
  return parse_net(R"([net]
batch=2
subdivisions=1
width=24
height=32
channels=3
learning_rate=0.01
momentum=0.9
decay=0.0005
policy=constant

[convolutional]
filters=6
size=3
stride=1
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=5
size=3
stride=1
pad=1
activation=leaky

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=linear

[cost]
type=sse
)",
                   "bias_and_bn.cfg");
}

// A row left out of a bias gradient: the bias judgement (against sqrt(cells) ||delta||, far
// larger than ||untiled|| when the sum cancels) must still see it, and so must the biases
// after the step (against lr/B times that).
TEST(VerifyJudgement, AnOwnedRowLeftOutOfABiasGradientFails) {
  const auto [bad, planted] =
      verify_planted(bias_and_bn_net(), two_tiles("all"), [](Plan& p) { return drop_owned_row(p, 0); }, "bias:");
  ASSERT_FALSE(planted.empty());
  EXPECT_EQ(bad.outputs(), 0) << "forward must be untouched";
  EXPECT_GT(bad.worst[VerifyReport::kBiasGradients].diff, VerifyReport::kTolerance) << describe(bad);
  EXPECT_EQ(bad.worst[VerifyReport::kBiasGradients].layer, 0);
  EXPECT_GT(bad.worst[VerifyReport::kBiases].diff, VerifyReport::kTolerance) << describe(bad);
  EXPECT_FALSE(bad.ok());
}

// The same at a batch-norm with frozen statistics (forward then reads no owned box): dβ and
// dγ miss the row, and their judgements must see it.
TEST(VerifyJudgement, AnOwnedRowLeftOutOfBatchNormSumsFails) {
  TrainOptions opt = two_tiles("all");
  opt.bn = BnMode::Frozen;
  const auto [bad, planted] =
      verify_planted(bias_and_bn_net(), opt, [](Plan& p) { return drop_owned_row(p, 1); }, "batch-norm:");
  ASSERT_FALSE(planted.empty());
  EXPECT_EQ(bad.outputs(), 0) << "forward must be untouched";
  for (int k : {VerifyReport::kBiasGradients, VerifyReport::kScaleGradients, VerifyReport::kBiases,
                VerifyReport::kScales}) {
    EXPECT_GT(bad.worst[size_t(k)].diff, VerifyReport::kTolerance) << VerifyReport::name(k) << ": " << describe(bad);
    EXPECT_EQ(bad.worst[size_t(k)].layer, 1) << VerifyReport::name(k);
  }
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace tt
