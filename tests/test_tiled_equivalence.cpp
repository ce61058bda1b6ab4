// The exactness contract on random configurations: a Trainer on an R x C grid and one
// on 1x1, from the same initial parameters, agree per tensor (||a-b||/||b|| <= 1e-5) on
// the loss, outputs, input deltas and weight gradients of every step, and on weights and
// batch-norm running statistics after each of two SGD steps. Random stacks of
// conv/maxpool layers, odd map sizes, grids up to 4x4, random groupings and cuts, batch
// 1 and 3, batch-norm sync and frozen, SSE and softmax heads; a 97x131 map; hand-picked
// corners; W1 (yolov2 layers 0-15) at 416x416.
//
// fp32 itself cannot meet 1e-5 on every tensor: some are sums that cancel (a bias
// gradient is exactly 0 when a batch-norm follows through a valid convolution; a
// single-weight conv before batch-norm has a gradient of order eps), and there the
// untiled engine is as far from exact arithmetic as the tiled one is from it. So a step
// tensor over 1e-5 is judged against a naive float64 step (F64Step) and passes only if
// fp32 rounding demonstrably moves it by >= 1e-6 (kIllConditioned) and the tiled result
// is within 4x (kSlack) of that rounding of the exact value. Well-conditioned tensors
// never reach this path. Each step starts both runs from the same weights, so weights
// after a step must match to 1e-5 plus what the gradient differences already judged
// explain through the SGD update.
//
// Runs on the default kernel path and on own kernels only (TiledEquivalenceRandom/auto,
// /own). Environment: TILETRAIN_EQ_SEED (first configuration's seed, default 20261123,
// the one CI runs; "random" draws one and prints it), TILETRAIN_EQ_COUNT (configurations
// per kernel path, default 200), TILETRAIN_EQ_VERBOSE (print every
// tensor's difference), TILETRAIN_EQ_KEEP_GOING (do not stop at the first failing
// configuration), TILETRAIN_EQ_LOG_F64 (print every float64 judgement),
// TILETRAIN_EQ_ALWAYS_F64 (judge every tensor against float64). Every failure prints the
// configuration's own seed: rerun it alone with TILETRAIN_EQ_SEED=<seed> TILETRAIN_EQ_COUNT=1.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include "data/synthetic.hpp"
#include "engine/trainer.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "random_net.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

constexpr double kTol = 1e-5;
// A step tensor over kTol passes only if fp32 rounding moves it by at least this much
// relative to its float64 value (the tensor is ill-conditioned in fp32) ...
constexpr double kIllConditioned = 1e-6;
// ... and the tiled run is at most this many times that rounding away from float64.
constexpr double kSlack = 4;
constexpr uint64_t kJitterRuns = 3;  // float64 runs with fp32-sized rounding noise

struct EqConfig {
  uint64_t seed = 0;
  std::string cfg;  // the generated .cfg text
  int rows = 1, cols = 1;
  std::string groups = "none";
  int cut = -1;
  int ref_cut = -1;  // the untiled reference's cut (-1: the default)
  BnMode bn = BnMode::Sync;
  int steps = 2;
  KernelPath kernels = KernelPath::Auto;
  int block = 0;  // 0: this CPU's
  BackwardFeatures features = BackwardFeatures::Recompute;
  TileSplit split;  // rows' and columns' weights (empty: an even split)

  std::string describe() const {
    std::ostringstream o;
    o << "config seed " << seed << " (rerun: TILETRAIN_EQ_SEED=" << seed << " TILETRAIN_EQ_COUNT=1), kernels "
      << kernel_path_name(kernels) << (block ? ", block " + std::to_string(block) : std::string()) << ": grid " << rows
      << "x" << cols << ", groups " << groups << ", cut " << cut << ", bn " << (bn == BnMode::Sync ? "sync" : "frozen")
      << ", " << steps << " step(s), backward features " << backward_features_name(features) << ", cfg:\n"
      << cfg;
    return o.str();
  }
};

// Random configuration from `seed`; `h`/`w` > 0 force the input size (and keep the net
// light: batch 1, at most 8 filters). The result may still be unusable (input too
// small, grid empties a tile): see usable().
EqConfig generate(uint64_t seed, int h = 0, int w = 0) {
  const bool light = h > 0;
  random_net::Draws d(seed);
  auto pick = [&](int n) { return d.pick(n); };
  EqConfig c;
  c.seed = seed;
  if (h <= 0) h = 13 + pick(29);
  if (w <= 0) w = 13 + pick(29);
  const int batch = pick(2) && !light ? 3 : 1;
  std::ostringstream s;
  // (the learning rate is replaced by one chosen from the first gradients: run_equivalence)
  s << "[net]\nbatch=" << batch << "\nsubdivisions=1\nwidth=" << w << "\nheight=" << h << "\nchannels=" << 1 + pick(3)
    << "\nlearning_rate=0.001\nmomentum=0.9\ndecay=0.0005\npolicy=constant\n";
  const int n = 2 + pick(5);
  for (int l = 0; l < n; ++l) {
    if (pick(3) == 0) {
      static const int pools[3][2] = {{2, 2}, {2, 1}, {3, 2}};
      const auto& p = pools[pick(3)];
      s << "\n[maxpool]\nsize=" << p[0] << "\nstride=" << p[1] << "\n";
    } else {
      static const int ks[4] = {1, 3, 5, 7};
      // mostly a few filters; sometimes more than one channel block (8 or 16)
      const int filters = pick(6) == 0 && !light ? 16 + pick(6) : 1 + pick(8);
      s << "\n[convolutional]\n";
      if (pick(2)) s << "batch_normalize=1\n";
      s << "filters=" << filters << "\nsize=" << ks[pick(4)] << "\nstride=" << (pick(3) == 0 ? 2 : 1)
        << "\npad=" << (pick(4) ? 1 : 0) << "\nactivation=" << random_net::activation(d) << "\n";
    }
  }
  random_net::head(d, s);
  c.cfg = s.str();
  c.rows = 1 + pick(4);
  c.cols = 1 + pick(4);
  c.bn = pick(2) ? BnMode::Sync : BnMode::Frozen;
  const random_net::Partition part = random_net::partition(d, n);
  c.cut = part.cut;
  c.groups = part.groups;
  // drawn last, so that the draws above give the configurations they gave before the option
  c.features = pick(2) ? BackwardFeatures::Exchange : BackwardFeatures::Recompute;
  return c;
}

// Parses the configuration; false when it cannot run (random_net::usable): those are
// skipped, not counted.
// The layer types the float64 reference computes.
enum class RefKind { Conv, MaxPool, AvgPool, Connected, Softmax, Cost, Shortcut, Route, Other };
RefKind ref_kind(const LayerSpec& l) {
  const std::string n = l.type_name();
  if (n == "convolutional") return RefKind::Conv;
  if (n == "maxpool") return RefKind::MaxPool;
  if (n == "avgpool") return RefKind::AvgPool;
  if (n == "connected") return RefKind::Connected;
  if (n == "softmax") return RefKind::Softmax;
  if (n == "cost") return RefKind::Cost;
  if (n == "shortcut") return RefKind::Shortcut;           // Darknet's pairing of any two sizes
  if (n == "route" && l.spatial()) return RefKind::Route;  // the layer before first
  return RefKind::Other;
}

// Darknet's shortcut_cpu pairing of output map o with the map f it adds (ops/shortcut.cpp),
// written again: fn(output index, f index) for each pair of sample n.
template <class F>
void each_shortcut_pair(const Shape& o, const Shape& f, int n, F&& fn) {
  const int stride = std::max(1, f.w / o.w), sample = std::max(1, o.w / f.w);
  for (int k = 0; k < std::min(o.c, f.c); ++k)
    for (int j = 0; j < std::min(o.h, f.h); ++j)
      for (int i = 0; i < std::min(o.w, f.w); ++i)
        fn(size_t(((int64_t(n) * o.c + k) * o.h + j * sample) * o.w + i * sample),
           size_t(((int64_t(n) * f.c + k) * f.h + j * stride) * f.w + i * stride));
}

bool usable(const EqConfig& c, NetSpec& net) {
  return random_net::usable(c.cfg, "random.cfg", c.rows, c.cols, c.cut, c.groups, {{}, c.features}, net);
}

// ------------------------------------------------------------- float64 reference
// A naive float64 implementation of one training step (the semantics of
// tests/reference/README.md), used only to judge a tensor whose tiled and untiled fp32
// values differ by more than the tolerance (see the top of the file). The fp32 rounding
// of a tensor is taken as the largest of: the untiled engine's own distance from it, the
// distance of float64 runs whose stored intermediates are jittered by 2^-24, and (for a
// gradient) one rounding of the sum of its terms' magnitudes.
struct F64Step {
  std::vector<double> output, input_delta, grad;  // grad: Params layout
  std::vector<double> grad_abs;                   // sum of |terms| of each gradient element (its summation scale)
};

// `jitter` != 0: every stored intermediate (layer outputs, pre-activations, deltas) is
// multiplied by 1 + u, |u| <= 2^-24 -- the rounding an fp32 engine does -- so the spread
// between jittered runs and the exact one measures how much fp32 rounding alone moves
// each result.
F64Step f64_step(const NetSpec& net, const Params& p, BnMode bn, const float* input, const float* truth,
                 uint64_t jitter = 0) {
  std::mt19937_64 jrng(jitter);
  std::uniform_real_distribution<double> ju(-0x1p-24, 0x1p-24);
  auto jig = [&](std::vector<double>& v) {
    if (jitter)
      for (double& e : v) e *= 1 + ju(jrng);
  };
  const int N = net.micro_batch();
  const size_t L = net.layers.size();
  std::vector<std::vector<double>> x(L + 1), pre(L), xhat(L), rstd(L);
  std::vector<std::vector<int64_t>> arg(L);
  x[0].assign(input, input + N * net.input().size());
  auto W = [&](const LayerSpec& l, int64_t i) { return double(p.values[size_t(p.slices[l.index].weights + i)]); };
  auto Bi = [&](const LayerSpec& l, int64_t i) { return double(p.values[size_t(p.slices[l.index].biases + i)]); };
  auto Sc = [&](const LayerSpec& l, int64_t i) { return double(p.values[size_t(p.slices[l.index].scales + i)]); };
  for (size_t li = 0; li < L; ++li) {
    const LayerSpec& l = net.layers[li];
    const std::vector<double>& in = x[li];
    std::vector<double>& out = x[li + 1];
    const int C = l.in.c, H = l.in.h, Wd = l.in.w, O = l.out.c, OH = l.out.h, OW = l.out.w;
    const Window win = l.spatial() ? l.window() : Window{};
    const int K = win.size, S = win.stride, P = win.pad;
    switch (ref_kind(l)) {
      case RefKind::Conv: {
        std::vector<double> z(size_t(N) * O * OH * OW, 0.);
        for (int n = 0; n < N; ++n)
          for (int o = 0; o < O; ++o)
            for (int oy = 0; oy < OH; ++oy)
              for (int ox = 0; ox < OW; ++ox) {
                double s = l.batch_normalize() ? 0. : Bi(l, o);
                const int G = l.conv().groups, Cg = C / G, q = o / (O / G);  // group q's input channels
                for (int c = q * Cg; c < (q + 1) * Cg; ++c)
                  for (int ky = 0; ky < K; ++ky) {
                    const int iy = oy * S - P + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < K; ++kx) {
                      const int ix = ox * S - P + kx;
                      if (ix < 0 || ix >= Wd) continue;
                      s += W(l, ((int64_t(o) * Cg + c - q * Cg) * K + ky) * K + kx) *
                           in[size_t(((n * C + c) * H + iy) * Wd + ix)];
                    }
                  }
                z[size_t(((n * O + o) * OH + oy) * OW + ox)] = s;
              }
        if (l.batch_normalize()) {
          const int M = N * OH * OW;
          xhat[li].assign(z.size(), 0.);
          rstd[li].assign(size_t(O), 0.);
          for (int o = 0; o < O; ++o) {
            double mean, var;
            if (bn == BnMode::Sync) {
              double s = 0, q = 0;
              for (int n = 0; n < N; ++n)
                for (int i = 0; i < OH * OW; ++i) s += z[size_t((n * O + o) * OH * OW + i)];
              mean = s / M;
              for (int n = 0; n < N; ++n)
                for (int i = 0; i < OH * OW; ++i) {
                  const double d = z[size_t((n * O + o) * OH * OW + i)] - mean;
                  q += d * d;
                }
              var = q / M;
            } else {
              mean = p.rolling_mean[l.index][size_t(o)];
              var = p.rolling_var[l.index][size_t(o)];
            }
            const double r = 1. / std::sqrt(var + 1e-5);
            rstd[li][size_t(o)] = r;
            for (int n = 0; n < N; ++n)
              for (int i = 0; i < OH * OW; ++i) {
                const size_t k = size_t((n * O + o) * OH * OW + i);
                xhat[li][k] = (z[k] - mean) * r;
                z[k] = Sc(l, o) * xhat[li][k] + Bi(l, o);
              }
          }
        }
        pre[li] = z;
        out.resize(z.size());
        for (size_t k = 0; k < z.size(); ++k) out[k] = test::act_ref(l.conv().act, z[k]);
        break;
      }
      case RefKind::MaxPool: {
        out.assign(size_t(N) * C * OH * OW, 0.);
        arg[li].assign(out.size(), -1);
        for (int n = 0; n < N; ++n)
          for (int c = 0; c < C; ++c)
            for (int oy = 0; oy < OH; ++oy)
              for (int ox = 0; ox < OW; ++ox) {
                double best = -INFINITY;
                int64_t a = -1;
                for (int ky = 0; ky < K; ++ky)
                  for (int kx = 0; kx < K; ++kx) {
                    const int iy = oy * S - P + ky, ix = ox * S - P + kx;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= Wd) continue;
                    const int64_t k = ((int64_t(n) * C + c) * H + iy) * Wd + ix;
                    if (in[size_t(k)] > best) best = in[size_t(k)], a = k;
                  }
                const size_t o = size_t(((n * C + c) * OH + oy) * OW + ox);
                out[o] = best;
                arg[li][o] = a;
              }
        break;
      }
      case RefKind::AvgPool:
        out.assign(size_t(N) * C, 0.);
        for (int n = 0; n < N; ++n)
          for (int c = 0; c < C; ++c) {
            double s = 0;
            for (int i = 0; i < H * Wd; ++i) s += in[size_t((n * C + c) * H * Wd + i)];
            out[size_t(n * C + c)] = s / (H * Wd);
          }
        break;
      case RefKind::Connected: {
        const int64_t I = l.in.size();
        pre[li].assign(size_t(N) * l.connected().outputs, 0.);
        out.resize(pre[li].size());
        for (int n = 0; n < N; ++n)
          for (int o = 0; o < l.connected().outputs; ++o) {
            double s = Bi(l, o);
            for (int64_t i = 0; i < I; ++i) s += W(l, o * I + i) * in[size_t(n * I + i)];
            pre[li][size_t(n * l.connected().outputs + o)] = s;
            out[size_t(n * l.connected().outputs + o)] = test::act_ref(l.connected().act, s);
          }
        break;
      }
      case RefKind::Softmax: {
        const int64_t I = l.in.size();
        out.resize(in.size());
        for (int n = 0; n < N; ++n) {
          double m = -INFINITY, s = 0;
          for (int64_t i = 0; i < I; ++i) m = std::max(m, in[size_t(n * I + i)]);
          for (int64_t i = 0; i < I; ++i) s += std::exp(in[size_t(n * I + i)] - m);
          for (int64_t i = 0; i < I; ++i) out[size_t(n * I + i)] = std::exp(in[size_t(n * I + i)] - m) / s;
        }
        break;
      }
      case RefKind::Cost:
        out = in;
        break;
      case RefKind::Shortcut: {
        const std::vector<double>& from = x[size_t(l.inputs[1] + 1)];
        pre[li] = in;
        for (int n = 0; n < N; ++n)
          each_shortcut_pair(l.out, net.layers[size_t(l.inputs[1])].out, n,
                             [&](size_t o, size_t f) { pre[li][o] += from[f]; });
        out.resize(in.size());
        for (size_t k = 0; k < in.size(); ++k) out[k] = test::act_ref(l.activation(), pre[li][k]);
        break;
      }
      case RefKind::Route:  // per sample, each input's channels in turn
        out.clear();
        for (int n = 0; n < N; ++n)
          for (int r : l.inputs) {
            const std::vector<double>& src = x[size_t(r + 1)];
            const size_t per = src.size() / size_t(N);
            out.insert(out.end(), src.begin() + long(n * per), src.begin() + long((n + 1) * per));
          }
        break;
      case RefKind::Other:
        ADD_FAILURE() << l.type_name() << " in the float64 reference";
        out = in;
    }
    jig(pre[li]);
    jig(out);
  }
  F64Step r;
  r.output = x[L];
  r.grad.assign(p.values.size(), 0.);
  r.grad_abs.assign(p.values.size(), 0.);
  auto acc = [&](int64_t i, double v) {
    r.grad[size_t(i)] += v;
    r.grad_abs[size_t(i)] += std::fabs(v);
  };
  std::vector<double> g(x[L].size());
  for (size_t k = 0; k < g.size(); ++k) g[k] = x[L][k] - double(truth[k]);  // sse, and softmax + cross-entropy
  std::vector<std::vector<double>> far_delta(L);  // per layer: the delta a shortcut's second input adds
  for (size_t li = L; li-- > 0;) {
    const LayerSpec& l = net.layers[li];
    for (size_t k = 0; k < far_delta[li].size(); ++k) g[k] += far_delta[li][k];
    const ParamSlice& ps = p.slices[l.index];
    const std::vector<double>& in = x[li];
    std::vector<double> gin(in.size(), 0.);
    const int C = l.in.c, H = l.in.h, Wd = l.in.w, O = l.out.c, OH = l.out.h, OW = l.out.w;
    const Window win = l.spatial() ? l.window() : Window{};
    const int K = win.size, S = win.stride, P = win.pad;
    switch (ref_kind(l)) {
      case RefKind::Conv: {
        for (size_t k = 0; k < g.size(); ++k) g[k] *= test::act_grad_ref(l.conv().act, pre[li][k]);
        if (l.batch_normalize()) {
          const int M = N * OH * OW;
          for (int o = 0; o < O; ++o) {
            double sg = 0, sgx = 0;
            for (int n = 0; n < N; ++n)
              for (int i = 0; i < OH * OW; ++i) {
                const size_t k = size_t((n * O + o) * OH * OW + i);
                sg += g[k];
                sgx += g[k] * xhat[li][k];
                r.grad_abs[size_t(ps.biases + o)] += std::fabs(g[k]);
                r.grad_abs[size_t(ps.scales + o)] += std::fabs(g[k] * xhat[li][k]);
              }
            r.grad[size_t(ps.biases + o)] += sg;
            r.grad[size_t(ps.scales + o)] += sgx;
            const double gr = Sc(l, o) * rstd[li][size_t(o)];
            for (int n = 0; n < N; ++n)
              for (int i = 0; i < OH * OW; ++i) {
                const size_t k = size_t((n * O + o) * OH * OW + i);
                g[k] = bn == BnMode::Sync ? gr * (g[k] - sg / M - xhat[li][k] * sgx / M) : gr * g[k];
              }
          }
        }
        jig(g);
        for (int n = 0; n < N; ++n)
          for (int o = 0; o < O; ++o)
            for (int oy = 0; oy < OH; ++oy)
              for (int ox = 0; ox < OW; ++ox) {
                const double d = g[size_t(((n * O + o) * OH + oy) * OW + ox)];
                if (!l.batch_normalize()) acc(ps.biases + o, d);
                const int G = l.conv().groups, Cg = C / G, q = o / (O / G);
                for (int c = q * Cg; c < (q + 1) * Cg; ++c)
                  for (int ky = 0; ky < K; ++ky) {
                    const int iy = oy * S - P + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < K; ++kx) {
                      const int ix = ox * S - P + kx;
                      if (ix < 0 || ix >= Wd) continue;
                      const int64_t wi = ((int64_t(o) * Cg + c - q * Cg) * K + ky) * K + kx;
                      const size_t ii = size_t(((n * C + c) * H + iy) * Wd + ix);
                      acc(ps.weights + wi, d * in[ii]);
                      gin[ii] += d * W(l, wi);
                    }
                  }
              }
        break;
      }
      case RefKind::MaxPool:
        for (size_t k = 0; k < g.size(); ++k)
          if (arg[li][k] >= 0) gin[size_t(arg[li][k])] += g[k];
        break;
      case RefKind::AvgPool:
        for (int n = 0; n < N; ++n)
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < H * Wd; ++i) gin[size_t((n * C + c) * H * Wd + i)] = g[size_t(n * C + c)] / (H * Wd);
        break;
      case RefKind::Connected: {
        const int64_t I = l.in.size();
        for (int n = 0; n < N; ++n)
          for (int o = 0; o < l.connected().outputs; ++o) {
            const double d = g[size_t(n * l.connected().outputs + o)] *
                             test::act_grad_ref(l.connected().act, pre[li][size_t(n * l.connected().outputs + o)]);
            acc(ps.biases + o, d);
            for (int64_t i = 0; i < I; ++i) {
              acc(ps.weights + o * I + i, d * in[size_t(n * I + i)]);
              gin[size_t(n * I + i)] += d * W(l, o * I + i);
            }
          }
        break;
      }
      case RefKind::Shortcut: {
        for (size_t k = 0; k < g.size(); ++k) g[k] *= test::act_grad_ref(l.activation(), pre[li][k]);
        const Shape& from = net.layers[size_t(l.inputs[1])].out;
        std::vector<double>& f = far_delta[size_t(l.inputs[1])];
        f.resize(size_t(N * from.size()), 0.);
        for (int n = 0; n < N; ++n) each_shortcut_pair(l.out, from, n, [&](size_t o, size_t k) { f[k] += g[o]; });
        gin = g;
        break;
      }
      case RefKind::Route: {  // each input its slice: the first through gin, the others as far deltas
        size_t at = 0;
        for (int n = 0; n < N; ++n)
          for (size_t k = 0; k < l.inputs.size(); ++k) {
            const int r = l.inputs[k];
            const size_t per = size_t(net.layers[size_t(r)].out.size());
            std::vector<double>& dst = k == 0 ? gin : far_delta[size_t(r)];
            dst.resize(size_t(N) * per, 0.);
            for (size_t i = 0; i < per; ++i) dst[size_t(n) * per + i] += g[at++];
          }
        break;
      }
      default:
        gin = g;  // softmax (with cross-entropy), cost, dropout
    }
    jig(gin);
    g = std::move(gin);
  }
  r.input_delta = std::move(g);
  return r;
}

double rel_diff_d(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// ||a - b|| (b == nullptr: ||a||).
double norm_diff(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - (b ? double(b[i]) : 0.);
    s += d * d;
  }
  return std::sqrt(s);
}

// Per-tensor comparison; every tensor over the tolerance is named in the failure.
// Tensors of a step (outputs, input deltas, gradients) that differ by more than kTol
// are judged against the float64 reference (see F64Step) before failing.
struct Checker {
  enum Kind { kOutput, kInputDelta, kGrad };
  struct Pending {
    std::string name;
    const float *tiled, *ref;
    size_t n;
    Kind kind;
    int64_t offset;
    double d;
  };
  double worst = 0;
  std::string worst_name;
  int failures = 0;
  int ill_conditioned = 0;  // tensors accepted on the float64 evidence
  int explained = 0;        // weights whose difference the (ill-conditioned) gradients explain
  bool verbose = std::getenv("TILETRAIN_EQ_VERBOSE") != nullptr;
  bool always_f64 = std::getenv("TILETRAIN_EQ_ALWAYS_F64") != nullptr;  // log every tensor against float64
  std::vector<Pending> pending;
  static inline double f64_seconds = 0;  // time spent in float64 checks, all configurations

  void note(const std::string& name, double d) {
    if (verbose) std::printf("  %-48s %.3g\n", name.c_str(), d);
    if (d > worst || std::isnan(d)) worst = std::isnan(d) ? INFINITY : d, worst_name = name;
  }
  // ||got - want|| <= kTol ||want|| + allowance (absolute).
  void operator()(const std::string& name, const float* got, const float* want, size_t n, double allowance = 0) {
    const double d = test::rel_diff(got, want, n);
    if (d <= kTol) return note(name, d);
    const double diff = norm_diff(got, want, n), scale = norm_diff(want, nullptr, n);
    if (verbose)
      std::printf("  %-48s %.3g, explained by the gradients: %s\n", name.c_str(), d,
                  diff <= kTol * scale + allowance ? "yes" : "no");
    if (diff <= kTol * scale + allowance) {
      ++explained;
      return;
    }
    note(name, d);
    ++failures;
    ADD_FAILURE() << name << " (" << n << " values): relative difference " << d << " > " << kTol
                  << (allowance > 0 ? " (beyond what the gradient differences of the steps explain: " +
                                          std::to_string(diff) + " > " + std::to_string(kTol * scale + allowance) + ")"
                                    : std::string());
  }
  void step_tensor(const std::string& name, const float* got, const float* want, size_t n, Kind kind,
                   int64_t offset = 0) {
    const double d = test::rel_diff(got, want, n);
    if (d <= kTol && !always_f64)
      note(name, d);
    else
      pending.push_back({name, got, want, n, kind, offset, d});
  }
  // Judges the pending tensors of this step with the float64 reference.
  // `f64(jitter)`: the float64 step, exact (0) or with fp32-sized rounding (1, 2, 3).
  void resolve(const std::function<F64Step(uint64_t)>& f64) {
    if (pending.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<F64Step> f;
    for (uint64_t j = 0; j <= kJitterRuns; ++j) f.push_back(f64(j));
    f64_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto of = [&](const F64Step& s, const Pending& p) {
      return p.kind == kOutput       ? s.output.data()
             : p.kind == kInputDelta ? s.input_delta.data()
                                     : s.grad.data() + p.offset;
    };
    for (const Pending& p : pending) {
      const double* exact = of(f[0], p);
      const double et = rel_diff_d(p.tiled, exact, p.n), er = rel_diff_d(p.ref, exact, p.n);
      // fp32 noise of this tensor: the untiled engine's own error, the jittered runs', and
      // for a gradient one rounding of its summands' scale (the tiles' partial sums are
      // added in fp32: a sum that cancels to ~0 keeps their rounding)
      double noise = er;
      if (p.kind == kGrad) {
        double a = 0, e = 0;
        for (size_t i = 0; i < p.n; ++i) {
          a += f[0].grad_abs[size_t(p.offset) + i] * f[0].grad_abs[size_t(p.offset) + i];
          e += exact[i] * exact[i];
        }
        noise = std::max(noise, 0x1p-24 * std::sqrt(a) / std::sqrt(e));
      }
      for (uint64_t j = 1; j <= kJitterRuns; ++j) {
        std::vector<float> jf(of(f[j], p), of(f[j], p) + p.n);
        noise = std::max(noise, rel_diff_d(jf.data(), exact, p.n));
      }
      const bool ill =
          std::isfinite(noise) && std::isfinite(et) && noise >= kIllConditioned && et <= std::max(kTol, kSlack * noise);
      if (verbose || always_f64 || std::getenv("TILETRAIN_EQ_LOG_F64"))
        std::printf("  %-48s %.3g  vs float64: tiled %.3g untiled %.3g fp32 noise %.3g%s\n", p.name.c_str(), p.d, et,
                    er, noise,
                    p.d <= kTol ? ""
                    : ill       ? " (ill-conditioned, accepted)"
                                : " FAIL");
      if (p.d <= kTol) {
        note(p.name, p.d);
        continue;
      }
      if (ill) {
        ++ill_conditioned;
        continue;
      }
      note(p.name, p.d);
      ++failures;
      ADD_FAILURE() << p.name << " (" << p.n << " values): tiled vs untiled " << p.d << " > " << kTol
                    << "; against float64 the tiled run is off by " << et << ", the untiled run by " << er
                    << ", fp32 rounding alone moves it by up to " << noise;
    }
    pending.clear();
  }
};

void compare_params(Checker& check, const std::string& what, const NetSpec& net, const Params& ps, const float* got,
                    const float* want) {
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = ps.slices[l.index];
    const std::string p = what + " layer " + std::to_string(l.index) + " ";
    check(p + "weights", got + s.weights, want + s.weights, size_t(s.n_weights));
    check(p + "biases", got + s.biases, want + s.biases, size_t(s.n_out));
    if (s.scales >= 0) check(p + "scales", got + s.scales, want + s.scales, size_t(s.n_out));
  }
}

// Runs `c` tiled and untiled and compares everything; returns the worst difference.
struct EqResult {
  double worst = 0;
  std::string worst_name;
  int failures = 0, ill_conditioned = 0, explained = 0;
};

EqResult run_equivalence(const EqConfig& c, const NetSpec& cfg_net) {
  // Both trainers read the learning rate of this copy at each update (see below).
  NetSpec net = cfg_net;
  Params p_tiled(net);
  test::random_params(p_tiled, net, c.seed);
  Params p_ref = p_tiled;
  TrainOptions topt;
  topt.rows = c.rows;
  topt.cols = c.cols;
  topt.groups = c.groups;
  topt.cut = c.cut;
  topt.bn = c.bn;
  topt.need_input_delta = true;
  topt.seed = c.seed;
  topt.kernels = c.kernels;
  topt.channel_block = c.block;
  topt.features = c.features;
  topt.split = c.split;
  TrainOptions ropt = topt;
  ropt.features = BackwardFeatures::Recompute;
  ropt.split = {};
  ropt.rows = ropt.cols = 1;
  ropt.groups = "all";
  ropt.cut = c.ref_cut;
  LocalComm comm;
  Trainer tiled(net, p_tiled, topt, comm), ref(net, p_ref, ropt, comm);
  Checker check;
  std::map<int64_t, double> velocity_bound;  // per parameter tensor: bound on ||v_tiled - v_ref||
  const int n = net.micro_batch();
  const size_t out_n = size_t(n * net.output().size()), in_n = size_t(n * net.input().size());
  std::vector<float> input, truth;
  for (int step = 0; step < c.steps; ++step) {
    synthetic_batch(net, net.micro_batch(), c.seed * 31 + uint64_t(step), input, truth);
    const double lt = tiled.forward_backward(input.data(), truth.data());
    const double lr = ref.forward_backward(input.data(), truth.data());
    const std::string st = "step " + std::to_string(step) + " ";
    if (check.verbose) std::printf("  %sloss: tiled %.9g untiled %.9g\n", st.c_str(), lt, lr);
    if (!(std::fabs(lt - lr) <= kTol * std::fabs(lr))) {
      ++check.failures;
      ADD_FAILURE() << st << "loss " << lt << " vs " << lr;
    }
    check.step_tensor(st + "output", tiled.output(), ref.output(), out_n, Checker::kOutput);
    check.step_tensor(st + "input delta", tiled.input_delta(), ref.input_delta(), in_n, Checker::kInputDelta);
    for (const auto& l : net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& s = p_ref.slices[l.index];
      const std::string p = st + "gradient layer " + std::to_string(l.index) + " ";
      const float *gt = tiled.grad().data(), *gr = ref.grad().data();
      check.step_tensor(p + "weights", gt + s.weights, gr + s.weights, size_t(s.n_weights), Checker::kGrad, s.weights);
      check.step_tensor(p + "biases", gt + s.biases, gr + s.biases, size_t(s.n_out), Checker::kGrad, s.biases);
      if (s.scales >= 0)
        check.step_tensor(p + "scales", gt + s.scales, gr + s.scales, size_t(s.n_out), Checker::kGrad, s.scales);
    }
    check.resolve([&](uint64_t j) { return f64_step(net, p_ref, c.bn, input.data(), truth.data(), j); });
    if (step == 0) {
      // Darknet sums gradients over pixels and samples, so their size varies by orders of
      // magnitude between random nets: the rate is chosen so that this first update moves
      // the fastest layer's weights by 1% -- well above the tolerance, far from diverging.
      double fastest = 0;
      for (const auto& l : net.layers) {
        if (!l.has_params()) continue;
        const ParamSlice& ps = p_ref.slices[l.index];
        const double g = norm_diff(ref.grad().data() + ps.weights, nullptr, size_t(ps.n_weights));
        const double w = norm_diff(p_ref.values.data() + ps.weights, nullptr, size_t(ps.n_weights));
        if (w > 0 && std::isfinite(g / w)) fastest = std::max(fastest, g / w);
      }
      if (fastest > 0) net.learning_rate = float(0.01 * net.batch / fastest);
    }
    const std::vector<float> g_tiled(tiled.grad().begin(), tiled.grad().end()),
        g_ref(ref.grad().begin(), ref.grad().end());  // update() zeroes them
    const ZeroPageFloats before = check.verbose ? p_tiled.values : ZeroPageFloats();
    tiled.update();
    ref.update();
    if (check.verbose) {
      double lo = INFINITY, hi = 0;  // relative change of each layer's weights
      for (const auto& l : net.layers) {
        if (!l.has_params()) continue;
        const ParamSlice& ps = p_ref.slices[l.index];
        const double d =
            test::rel_diff(p_tiled.values.data() + ps.weights, before.data() + ps.weights, size_t(ps.n_weights));
        lo = std::min(lo, d), hi = std::max(hi, d);
      }
      std::printf("  step %d (learning rate %g) moved the weights by %.3g .. %.3g (relative, per layer)\n", step,
                  net.learning_rate, lo, hi);
    }
    // Both runs start the step from the same weights (see below), so the weights after it
    // differ by (lr/B)(v_tiled - v_ref), with |dv_k| <= m |dv_k-1| + |g_tiled - g_ref|:
    // the update path is exact when the weights differ by no more than the gradient
    // differences already judged above (ill-conditioned ones included) explain.
    const std::string after = "after step " + std::to_string(step) + ":";
    for (const auto& l : net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& ps = p_ref.slices[l.index];
      const std::string pre = after + " layer " + std::to_string(l.index) + " ";
      auto one = [&](const char* what, int64_t off, int64_t k) {
        double& dv = velocity_bound[off];
        dv = net.momentum * dv + norm_diff(g_tiled.data() + off, g_ref.data() + off, size_t(k));
        check(pre + what, p_tiled.values.data() + off, p_ref.values.data() + off, size_t(k),
              1.01 * net.learning_rate / net.batch * dv);
      };
      one("weights", ps.weights, ps.n_weights);
      one("biases", ps.biases, ps.n_out);
      if (ps.scales >= 0) one("scales", ps.scales, ps.n_out);
    }
    for (const auto& l : net.layers) {
      if (!l.batch_normalize()) continue;
      const size_t k = p_ref.rolling_mean[l.index].size();
      const std::string p = after + " layer " + std::to_string(l.index) + " ";
      check(p + "rolling mean", p_tiled.rolling_mean[l.index].data(), p_ref.rolling_mean[l.index].data(), k);
      check(p + "rolling variance", p_tiled.rolling_var[l.index].data(), p_ref.rolling_var[l.index].data(), k);
    }
    // The next step starts the reference from the tiled run's state, so each step is
    // compared from identical weights: fp32 differences of one step are not amplified
    // through the next one (the tiled trainer's own update path stays untouched).
    p_ref.values = p_tiled.values;
    p_ref.rolling_mean = p_tiled.rolling_mean;
    p_ref.rolling_var = p_tiled.rolling_var;
    ref.reload_weights();
  }
  return {check.worst, check.worst_name, check.failures, check.ill_conditioned, check.explained};
}

uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

// A random residual network from `seed`: a stack of convolutions that mostly keep the map's
// shape (so that shortcuts can join them), max-pools and stride-2 convolutions that change
// it, shortcuts from random earlier layers of the same shape (the one before included) or
// of a larger map with other channels (sampled at a stride, Darknet's rules),
// each with a random activation, and routes concatenating the layer before with one or two
// earlier maps of its size; a random grid, grouping, cut (never inside a block), batch-norm
// mode and feature mode. The reference runs every join after its cut (ref_cut), as the ops
// checked against libdarknet. `shortcuts` counts the tiled joins.
EqConfig generate_residual(uint64_t seed, int& shortcuts) {
  random_net::Draws d(seed);
  auto pick = [&](int n) { return d.pick(n); };
  EqConfig c;
  c.seed = seed;
  std::ostringstream s;
  s << "[net]\nbatch=" << 1 + pick(2) << "\nsubdivisions=1\nwidth=" << 9 + pick(24) << "\nheight=" << 9 + pick(24)
    << "\nchannels=" << 1 + pick(3) << "\nlearning_rate=0.001\nmomentum=0.9\ndecay=0.0005\npolicy=constant\n";
  const int channels = pick(5) == 0 ? 17 : 2 + pick(7);
  auto conv = [&](int size, int stride, int groups = 1) {
    s << "\n[convolutional]\n"
      << (pick(2) ? "batch_normalize=1\n" : "") << "filters=" << channels << "\nsize=" << size << "\nstride=" << stride
      << "\npad=1\ngroups=" << groups << "\nactivation=" << random_net::activation(d) << "\n";
  };
  // Depthwise (groups = channels) or groups of a divisor of the channels.
  auto groups = [&] {
    std::vector<int> divisors;
    for (int g = 2; g < channels; ++g)
      if (channels % g == 0) divisors.push_back(g);
    return divisors.empty() || pick(2) ? channels : divisors[size_t(pick(int(divisors.size())))];
  };
  conv(3, 1);
  const int n = 4 + pick(7);
  NetSpec net = parse_net(s.str() + "[cost]\n", "residual.cfg");
  for (int l = 1; l < n; ++l) {
    const std::string before = s.str();
    const Shape& out = net.layers.back().out;
    // Earlier layers whose output has this shape, this map size, or a map a shortcut can
    // sample (as large or larger by the same factor along both axes, any channels).
    std::vector<int> same, sized, sampled;
    for (const LayerSpec& x : net.layers) {
      if (x.out.h == out.h && x.out.w == out.w) sized.push_back(x.index);
      if (x.out.c == out.c && x.out.h == out.h && x.out.w == out.w) same.push_back(x.index);
      if (x.out.h >= out.h && x.out.w >= out.w && x.out.w / out.w == x.out.h / out.h) sampled.push_back(x.index);
    }
    const int r = pick(10);
    if (r < 3) {
      const std::vector<int>& of = pick(2) ? same : sampled;
      const int from = of[size_t(pick(int(of.size())))];
      s << "\n[shortcut]\nfrom=" << from - l << "\nactivation=" << random_net::activation(d) << "\n";
    } else if (r == 3) {  // a concatenation onto the layer before
      s << "\n[route]\nlayers=-1";
      for (int k = pick(3) ? 1 : 2; k > 0; --k) s << "," << sized[size_t(pick(int(sized.size())))] - l;
      s << "\n";
    } else if (r == 4) {
      s << "\n[maxpool]\nsize=2\nstride=" << 1 + pick(2) << "\n";
    } else if (r == 5) {
      conv(3, 2, pick(3) ? 1 : groups());
    } else {
      conv(pick(3) ? 3 : 1, 1, pick(3) ? 1 : groups());
    }
    try {
      net = parse_net(s.str() + "[cost]\n", "residual.cfg");
    } catch (const Error&) {  // the map became too small: the stack ends here
      s.str(before);
      s.seekp(0, std::ios_base::end);
      break;
    }
  }
  random_net::head(d, s);
  c.cfg = s.str();
  net = parse_net(c.cfg, "residual.cfg");
  const int layers = int(net.layers.size());
  c.rows = 1 + pick(3);
  c.cols = 1 + pick(3);
  c.bn = pick(2) ? BnMode::Sync : BnMode::Frozen;
  const int tiled_max = net.max_cut();
  const random_net::Partition part = tiled_max >= 2 ? random_net::partition(d, tiled_max) : random_net::Partition{};
  c.cut = part.cut > 0 && net.split_reader(part.cut) < 0 ? part.cut : -1;
  c.groups = part.groups;
  if (c.groups != "none" && c.groups != "all" && c.cut > 0) {  // keep the starts inside the cut
    std::string g = "0";
    for (int start : parse_groups(part.groups, 0, tiled_max))
      if (start > 0 && start < c.cut) g += "," + std::to_string(start);
    c.groups = g;
  }
  c.features = pick(2) ? BackwardFeatures::Exchange : BackwardFeatures::Recompute;
  c.ref_cut = -1;
  shortcuts = 0;
  const int cut = resolve_cut(net, c.cut);
  for (int l = 0; l < layers; ++l) {
    const std::vector<int>& in = net.layers[size_t(l)].inputs;
    for (size_t k = 1; k < in.size(); ++k) c.ref_cut = c.ref_cut < 0 ? in[k] + 1 : std::min(c.ref_cut, in[k] + 1);
    shortcuts += in.size() > 1 && l < cut;
  }
  if (c.ref_cut == 0) c.ref_cut = -1;
  return c;
}

// 200 random residual, dense and grouped networks on the default kernels (TILETRAIN_EQ_RESIDUAL_COUNT,
// TILETRAIN_EQ_RESIDUAL_SEED), each against its reference as run_equivalence judges.
TEST(TiledEquivalence, RandomResidualNets) {
  const uint64_t seed0 = env_u64("TILETRAIN_EQ_RESIDUAL_SEED", 20261128);
  const int count = int(env_u64("TILETRAIN_EQ_RESIDUAL_COUNT", 200));
  int ran = 0, skipped = 0, joins = 0, crossing = 0, grids = 0, exchanged = 0, grouped = 0, sampled = 0;
  double worst = 0;
  for (uint64_t seed = seed0; ran < count; ++seed) {
    int shortcuts = 0;
    EqConfig c = generate_residual(seed, shortcuts);
    SCOPED_TRACE(c.describe() + "reference cut " + std::to_string(c.ref_cut) + "\n");
    NetSpec net;
    if (!usable(c, net)) {
      ++skipped;
      ASSERT_LT(skipped, 20 * count) << "the generator hardly finds usable configurations";
      continue;
    }
    ++ran;
    joins += shortcuts;
    grids += c.rows * c.cols > 1 && shortcuts > 0;
    exchanged += c.rows * c.cols > 1 && shortcuts > 0 && c.features == BackwardFeatures::Exchange;
    const int cut = resolve_cut(net, c.cut);
    for (const LayerSpec& l : net.layers) {
      grouped += c.rows * c.cols > 1 && l.index < cut && l.is(kConvKind) && l.conv().groups > 1;
      // shortcuts tiled on a grid that sample a larger map or join other channel counts
      sampled += c.rows * c.cols > 1 && l.index < cut && l.is(kShortcutKind) &&
                 !(net.layers[size_t(l.inputs[1])].out == l.out);
    }
    const Plan plan = make_plan(net, 1, 1, 0, cut, parse_groups(c.groups, 0, cut));
    for (size_t e = 0; e < plan.edges.size(); ++e) crossing += plan.side_edge(int(e)) && plan.crosses_groups(int(e));
    const EqResult r = run_equivalence(c, net);
    worst = std::max(worst, r.worst);
    if (r.failures > 0) {
      std::printf("FAILED configuration: %d tensor(s) over the tolerance, worst %.3g (%s); %s\n", r.failures, r.worst,
                  r.worst_name.c_str(), c.describe().c_str());
      break;
    }
  }
  std::printf(
      "ran %d random residual nets (%d skipped as unusable): %d tiled joins, %d of them across groups, %d "
      "nets with joins on a grid (%d exchanging features), %d grouped convolutions and %d shortcuts of maps of "
      "other shapes tiled on a grid; worst relative difference %.3g\n",
      ran, skipped, joins, crossing, grids, exchanged, grouped, sampled, worst);
  if (count >= 100 && !::testing::Test::HasFailure()) {  // joins tiled on grids, inside and across groups
    EXPECT_GT(joins, count);
    EXPECT_GT(crossing, count / 4);
    EXPECT_GT(grids, count / 2);
    EXPECT_GT(exchanged, count / 5);
    EXPECT_GT(grouped, count / 4);
    EXPECT_GT(sampled, count / 10);
  }
}

// (kernel path, channel block: 0 = this CPU's, or the other CPU kind's, on own kernels)
class TiledEquivalenceRandom : public ::testing::TestWithParam<std::tuple<KernelPath, int>> {};

// The block an AVX2 machine does not use natively, and vice versa.
int other_block() { return DnnlContext().config.block == 8 ? 16 : 8; }

TEST_P(TiledEquivalenceRandom, RandomConfigurations) {
  const char* seed_env = std::getenv("TILETRAIN_EQ_SEED");
  const uint64_t seed0 = seed_env && std::string(seed_env) == "random" ? std::random_device{}() % 1000000000ull
                                                                       : env_u64("TILETRAIN_EQ_SEED", 20261123);
  const int count = int(env_u64("TILETRAIN_EQ_COUNT", 200));
  const auto [path, block_kind] = GetParam();
  const int block = block_kind ? other_block() : 0;
  std::printf("TiledEquivalence seed %llu (TILETRAIN_EQ_SEED), %d configurations, kernels %s, block %d\n",
              (unsigned long long)seed0, count, kernel_path_name(path), block ? block : DnnlContext().config.block);
  const auto t0 = std::chrono::steady_clock::now();
  const bool keep_going = std::getenv("TILETRAIN_EQ_KEEP_GOING") != nullptr;
  int ran = 0, skipped = 0, failed = 0, ill = 0, explained = 0, grids = 0, cuts = 0, softmax = 0, frozen = 0,
      batch3 = 0, exchanged = 0;
  double worst = 0;
  for (uint64_t seed = seed0; ran < count; ++seed) {
    EqConfig c = generate(seed);
    c.kernels = path;
    c.block = block;
    SCOPED_TRACE(c.describe());
    NetSpec net;
    if (!usable(c, net)) {
      ++skipped;
      ASSERT_LT(skipped, 20 * count) << "the generator hardly finds usable configurations";
      continue;
    }
    ++ran;
    grids += c.rows * c.cols > 1;
    cuts += c.cut > 0 && c.cut < net.first_untileable();
    softmax += net.layers.back().is(kSoftmaxKind);
    frozen += c.bn == BnMode::Frozen;
    batch3 += net.batch == 3;
    exchanged += c.rows * c.cols > 1 && c.features == BackwardFeatures::Exchange;
    const EqResult r = run_equivalence(c, net);
    worst = std::max(worst, r.worst);
    ill += r.ill_conditioned;
    explained += r.explained;
    if (r.failures > 0) {
      ++failed;
      std::printf("FAILED configuration: %d tensor(s) over the tolerance, worst %.3g (%s); %s\n", r.failures, r.worst,
                  r.worst_name.c_str(), c.describe().c_str());
      if (!keep_going) break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "ran %d configurations (%d skipped as unusable), %d failed, in %.1f s: %d tiled grids, %d cuts in the "
      "middle, %d softmax heads, %d frozen bn, %d with batch 3, %d grids exchanging backward features; worst "
      "relative difference %.3g; %d tensor(s) over %g accepted as ill-conditioned in fp32 (float64 check), %d "
      "updated tensor(s) within what their gradients explain; float64 checks took %.1f s\n",
      ran, skipped, failed, secs, grids, cuts, softmax, frozen, batch3, exchanged, worst, ill, kTol, explained,
      Checker::f64_seconds);
  if (count >= 200 && !::testing::Test::HasFailure()) {
    // the mix the contract promises, not one corner of it
    EXPECT_GT(grids, count / 2);
    EXPECT_GT(cuts, count / 10);
    EXPECT_GT(softmax, count / 10);
    EXPECT_GT(frozen, count / 5);
    EXPECT_GT(batch3, count / 5);
    EXPECT_GT(exchanged, count / 5);
  }
}

INSTANTIATE_TEST_SUITE_P(, TiledEquivalenceRandom,
                         ::testing::Values(std::tuple{KernelPath::Auto, 0}, std::tuple{KernelPath::Own, 0},
                                           std::tuple{KernelPath::Own, 1}),
                         [](const auto& info) {
                           return std::string(kernel_path_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_other_block" : "");
                         });

// One configuration from elsewhere, judged like the random ones (float64 for a tensor over
// the tolerance): e.g. bench/verify_sweep's failures, to tell a partition defect from fp32
// rounding. Skipped unless TILETRAIN_EQ_CFG names a .cfg; TILETRAIN_EQ_GRID (RxC, default
// 1x1), TILETRAIN_EQ_GROUPS (default none), TILETRAIN_EQ_CUT, TILETRAIN_EQ_BN (sync|frozen),
// TILETRAIN_EQ_FEATURES (recompute|exchange), TILETRAIN_EQ_ROW_WEIGHTS and
// TILETRAIN_EQ_COL_WEIGHTS (as the CLI's), TILETRAIN_EQ_STEPS (default 2), TILETRAIN_EQ_KERNELS.
// The weights are this file's random ones and the learning rate its own (run_equivalence).
TEST(TiledEquivalence, GivenConfiguration) {
  const char* path = std::getenv("TILETRAIN_EQ_CFG");
  if (!path || !*path) GTEST_SKIP() << "no TILETRAIN_EQ_CFG";
  auto env = [](const char* name, const char* def) {
    const char* v = std::getenv(name);
    return std::string(v && *v ? v : def);
  };
  EqConfig c;
  c.seed = env_u64("TILETRAIN_EQ_SEED", 1);
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  c.cfg.assign(std::istreambuf_iterator<char>(in), {});
  const std::string grid = env("TILETRAIN_EQ_GRID", "1x1");
  ASSERT_EQ(std::sscanf(grid.c_str(), "%dx%d", &c.rows, &c.cols), 2) << grid;
  c.groups = env("TILETRAIN_EQ_GROUPS", "none");
  c.cut = std::stoi(env("TILETRAIN_EQ_CUT", "-1"));
  c.bn = env("TILETRAIN_EQ_BN", "sync") == "frozen" ? BnMode::Frozen : BnMode::Sync;
  c.features = parse_backward_features(env("TILETRAIN_EQ_FEATURES", "recompute"));
  c.steps = std::stoi(env("TILETRAIN_EQ_STEPS", "2"));
  c.kernels = parse_kernel_path(env("TILETRAIN_EQ_KERNELS", "auto"));
  if (const std::string r = env("TILETRAIN_EQ_ROW_WEIGHTS", ""); !r.empty())
    c.split.rows = parse_weights(r, c.rows, "TILETRAIN_EQ_ROW_WEIGHTS");
  if (const std::string w = env("TILETRAIN_EQ_COL_WEIGHTS", ""); !w.empty())
    c.split.cols = parse_weights(w, c.cols, "TILETRAIN_EQ_COL_WEIGHTS");
  SCOPED_TRACE(c.describe());
  const NetSpec net = parse_net(c.cfg, path);
  const EqResult r = run_equivalence(c, net);
  std::printf(
      "%s: %d tensor(s) failed; worst relative difference %.3g (%s); %d accepted as ill-conditioned in fp32 "
      "(float64 check), %d updated tensor(s) within what their gradients explain\n",
      path, r.failures, r.worst, r.worst_name.c_str(), r.ill_conditioned, r.explained);
}

// A large odd map (97 x 131: primes, divisible by no grid or stride) on two random
// stacks and grids.
TEST(TiledEquivalence, Map97x131) {
  int ran = 0;
  for (uint64_t seed = 9713100; ran < 2; ++seed) {
    EqConfig c = generate(seed, 97, 131);
    SCOPED_TRACE(c.describe() + "(map forced to 97x131)");
    NetSpec net;
    if (c.rows * c.cols == 1 || !usable(c, net)) continue;
    ++ran;
    const EqResult r = run_equivalence(c, net);
    std::printf("97x131 %dx%d: worst relative difference %.3g (%s), %d ill-conditioned\n", c.rows, c.cols, r.worst,
                r.worst_name.c_str(), r.ill_conditioned);
    if (r.failures) break;
  }
}

// bench/verify_sweep's seed 17: a 3x3 stride-2 convolution padded by 2 (Darknet's
// `padding=`, more than size / 2) on a 2x4 grid over 20x9, whose 1-column edge boxes
// oneDNN would run on ref:any and the others on its JIT kernel. The layer runs the own
// kernel instead, on every box.
TEST(TiledEquivalence, PaddingWiderThanHalfTheWindow) {
  EqConfig c;
  c.seed = 17;
  c.cfg =
      "[net]\nbatch=1\nsubdivisions=1\nwidth=9\nheight=20\nchannels=2\nlearning_rate=0.001\nmomentum=0.9\n"
      "decay=0.0005\npolicy=constant\n"
      "[convolutional]\nfilters=19\nsize=7\nstride=1\npad=1\nactivation=leaky\n"
      "[convolutional]\nfilters=11\nsize=3\nstride=2\npadding=2\nactivation=relu\n"
      "[maxpool]\nsize=2\nstride=1\n"
      "[convolutional]\nfilters=7\nsize=3\nstride=1\npad=1\nactivation=linear\n"
      "[cost]\ntype=sse\n";
  c.rows = 2;
  c.cols = 4;
  c.cut = 3;
  c.bn = BnMode::Frozen;
  c.features = BackwardFeatures::Exchange;
  SCOPED_TRACE(c.describe());
  NetSpec net;
  ASSERT_TRUE(usable(c, net));
  EqResult r;
  ASSERT_NO_THROW(r = run_equivalence(c, net));
  EXPECT_EQ(r.failures, 0);
}

// A hand-written configuration of the tests below.
struct HandRun {
  const char* groups;
  BnMode bn;
  int rows, cols;
  BackwardFeatures features = BackwardFeatures::Recompute;
  int ref_cut = -1;  // the reference's cut (-1: the default)
};
EqConfig hand_config(const std::string& cfg, uint64_t seed, const HandRun& run) {
  EqConfig c;
  c.seed = seed;
  c.cfg = cfg;
  c.ref_cut = run.ref_cut;
  c.rows = run.rows;
  c.cols = run.cols;
  c.groups = run.groups;
  c.bn = run.bn;
  c.features = run.features;
  return c;
}

// Hand-picked corners: every layer type at once on awkward sizes (7x7 stride 2 over 17
// channels, maxpool 3/2 and 2/1, valid convolutions), 4x4, 1x4, 3x1 and 2x3 grids, each
// grouping, both batch-norm modes.
TEST(TiledEquivalence, HandPicked) {
  const std::string cfg =
      "[net]\nbatch=3\nwidth=37\nheight=29\nchannels=3\nlearning_rate=0.002\nmomentum=0.9\ndecay=0.0005\n"
      "[convolutional]\nbatch_normalize=1\nfilters=17\nsize=7\nstride=2\npad=1\nactivation=leaky\n"
      "[maxpool]\nsize=3\nstride=2\n"
      "[convolutional]\nfilters=5\nsize=5\nstride=1\npad=1\nactivation=logistic\n"
      "[maxpool]\nsize=2\nstride=1\n"
      "[convolutional]\nbatch_normalize=1\nfilters=6\nsize=1\nstride=1\npad=0\nactivation=relu\n"
      "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=0\nactivation=linear\n"
      "[cost]\ntype=sse\n";
  using Run = HandRun;
  constexpr auto X = BackwardFeatures::Exchange;
  for (const Run& run :
       {Run{"none", BnMode::Sync, 4, 4}, Run{"all", BnMode::Frozen, 4, 4}, Run{"0,2,5", BnMode::Sync, 1, 4},
        Run{"none", BnMode::Frozen, 3, 1}, Run{"all", BnMode::Sync, 3, 1}, Run{"0,2,5", BnMode::Frozen, 2, 3},
        Run{"all", BnMode::Sync, 4, 4, X}, Run{"none", BnMode::Sync, 3, 1, X}, Run{"0,2,5", BnMode::Frozen, 2, 3, X}}) {
    const EqConfig c = hand_config(cfg, 1234, run);
    SCOPED_TRACE(c.describe());
    NetSpec net;
    ASSERT_TRUE(usable(c, net));
    const EqResult r = run_equivalence(c, net);
    std::printf(
        "hand-picked %dx%d groups %s, backward features %s: worst relative difference %.3g (%s), %d "
        "ill-conditioned\n",
        c.rows, c.cols, c.groups.c_str(), backward_features_name(c.features), r.worst, r.worst_name.c_str(),
        r.ill_conditioned);
  }
}

// Residual, dense and inverted residual (depthwise) blocks inside the tiled part ([shortcut]
// and [route] joins, grouped convolutions): a value
// read by the next layer and by a join further on (forks), joins of different depths, a
// shortcut reading a shortcut, one adding a map to itself (from=-1), a route listing a
// layer twice, every activation, and a join of a plain map (the net's input pooled) with a
// channel-blocked one. Each against a reference that
// runs every shortcut after its cut (the op checked against libdarknet), on grids 1x1 to
// 3x3, every kind of grouping (blocks inside a group, across groups, split by one), both
// batch-norm modes and both ways to find backward's forward values.
TEST(TiledEquivalence, ResidualBlocks) {
  const std::string head = "[net]\nbatch=2\nwidth=23\nheight=19\nchannels=3\nlearning_rate=0.002\nmomentum=0.9\n";
  const std::string bn_conv = "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=";
  const std::string resnet = head + bn_conv + "leaky\n[maxpool]\nsize=2\nstride=2\n" + bn_conv + "leaky\n" + bn_conv +
                             "linear\n[shortcut]\nfrom=-3\nactivation=leaky\n"
                             "[convolutional]\nfilters=8\nsize=1\nstride=1\npad=0\nactivation=relu\n"
                             "[shortcut]\nfrom=-2\nactivation=linear\n"
                             "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=2\npad=1\nactivation="
                             "logistic\n[shortcut]\nfrom=-1\nactivation=relu\n[cost]\ntype=sse\n";
  // dense blocks: concatenations onto the layer before, at channel offsets off the blocks
  const std::string dense = head + bn_conv +
                            "leaky\n"
                            "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
                            "[route]\nlayers=-1,-2\n"
                            "[convolutional]\nbatch_normalize=1\nfilters=3\nsize=1\nstride=1\npad=1\nactivation=relu\n"
                            "[route]\nlayers=-1,-2,-4\n[maxpool]\nsize=2\nstride=2\n"
                            "[convolutional]\nfilters=5\nsize=3\nstride=1\npad=1\nactivation=linear\n"
                            "[route]\nlayers=-1,-1,-2\n"
                            "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=logistic\n"
                            "[cost]\ntype=sse\n";
  const std::string mixed = head +
                            "[maxpool]\nsize=2\nstride=1\n"
                            "[convolutional]\nfilters=3\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
                            "[shortcut]\nfrom=-2\nactivation=logistic\n" +
                            bn_conv + "leaky\n[cost]\ntype=sse\n";
  // MobileNetV2's inverted residual: 1x1 expansion, depthwise 3x3, linear projection and
  // shortcut, then a strided depthwise and a grouped 3x3 (groups of two channels into three).
  const std::string mobile =
      head + bn_conv +
      "relu\n"
      "[convolutional]\nbatch_normalize=1\nfilters=24\nsize=1\nstride=1\npad=1\nactivation=relu\n"
      "[convolutional]\nbatch_normalize=1\nfilters=24\nsize=3\nstride=1\npad=1\ngroups=24\n"
      "activation=relu\n"
      "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=1\nstride=1\npad=1\nactivation=linear\n"
      "[shortcut]\nfrom=-4\nactivation=linear\n"
      "[convolutional]\nfilters=8\nsize=3\nstride=2\npad=1\ngroups=8\nactivation=leaky\n"
      "[convolutional]\nfilters=12\nsize=3\nstride=1\npad=1\ngroups=4\nactivation=logistic\n"
      "[cost]\ntype=sse\n";
  // ResNet's joins of maps of other shapes (Darknet's rules): a strided block adding the
  // larger map before it sampled at stride 2 (8 channels into 16), a bottleneck's 1x1
  // widening to 32 channels onto a 16-channel map, and 4 channels taking the first 4 of a
  // larger 32-channel map.
  const std::string stages =
      "[net]\nbatch=2\nwidth=24\nheight=20\nchannels=3\nlearning_rate=0.002\nmomentum=0.9\n" + bn_conv +
      "leaky\n"
      "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
      "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=linear\n"
      "[shortcut]\nfrom=-3\nactivation=leaky\n"
      "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=1\nstride=1\npad=1\nactivation=linear\n"
      "[shortcut]\nfrom=-2\nactivation=relu\n"
      "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=logistic\n"
      "[shortcut]\nfrom=-3\nactivation=linear\n"
      "[cost]\ntype=sse\n";
  struct Case {
    const std::string* cfg;
    HandRun run;  // ref_cut: before the first join's far input is read
  };
  constexpr auto S = BnMode::Sync, F = BnMode::Frozen;
  constexpr auto R = BackwardFeatures::Recompute, X = BackwardFeatures::Exchange;
  for (const Case& k : {Case{&resnet, {"all", S, 1, 1, R, 2}},     Case{&resnet, {"none", S, 2, 2, R, 2}},
                        Case{&resnet, {"all", F, 3, 2, R, 2}},     Case{&resnet, {"0,3,6", S, 1, 3, X, 2}},
                        Case{&resnet, {"0,2,5,7", F, 2, 3, X, 2}}, Case{&resnet, {"0,4", S, 3, 3, R, 2}},
                        Case{&resnet, {"all", S, 2, 2, X, 2}},     Case{&mixed, {"none", S, 2, 2, R, 1}},
                        Case{&mixed, {"all", F, 3, 1, X, 1}},      Case{&dense, {"all", S, 1, 1, R, 1}},
                        Case{&dense, {"none", S, 2, 2, R, 1}},     Case{&dense, {"0,3,6", F, 3, 2, R, 1}},
                        Case{&dense, {"0,2,5,8", S, 2, 3, X, 1}},  Case{&dense, {"all", F, 3, 3, X, 1}},
                        Case{&mobile, {"all", S, 2, 2, R, 1}},     Case{&mobile, {"none", S, 3, 3, X, 1}},
                        Case{&mobile, {"0,2,5", F, 2, 3, R, 1}},   Case{&mobile, {"0,4,6", S, 1, 2, X, 1}},
                        Case{&stages, {"all", S, 2, 2, R, 1}},     Case{&stages, {"none", F, 3, 2, X, 1}},
                        Case{&stages, {"0,3,6", S, 2, 3, R, 1}},   Case{&stages, {"0,2,5", S, 3, 3, X, 1}}}) {
    const EqConfig c = hand_config(*k.cfg, 4242, k.run);
    SCOPED_TRACE(c.describe());
    NetSpec net;
    ASSERT_TRUE(usable(c, net));
    int shortcuts = 0;
    for (const LayerSpec& l : net.layers) shortcuts += l.inputs.size() > 1 && l.index < resolve_cut(net, c.cut);
    ASSERT_GT(shortcuts, 0) << "the joins must run tiled";
    const EqResult r = run_equivalence(c, net);
    EXPECT_EQ(r.failures, 0);
    std::printf(
        "residual %dx%d groups %s, backward features %s: worst relative difference %.3g (%s), %d "
        "ill-conditioned\n",
        c.rows, c.cols, c.groups.c_str(), backward_features_name(c.features), r.worst, r.worst_name.c_str(),
        r.ill_conditioned);
  }
}

// W1 (yolov2 layers 0-15, 416x416, batch 1): one step per grid and grouping against
// one untiled step, every tensor within the plain 1e-5 (no float64 fallback: the naive
// reference would take minutes here). Burn-in is switched off so the update really
// moves the weights. About 12 s on 2 cores.
TEST(TiledEquivalence, W1) {
  NetSpec net = load_net(test::source_dir() + "/cfgs/yolov2-16.cfg");
  net.burn_in = 0;
  Params p0(net);
  test::random_params(p0, net, 416);
  std::vector<float> input, truth;
  synthetic_batch(net, net.micro_batch(), 4160, input, truth);
  const size_t out_n = size_t(net.micro_batch() * net.output().size());
  const size_t in_n = size_t(net.micro_batch() * net.input().size());
  LocalComm comm;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> ref_out, ref_delta, ref_grad;
  double ref_loss = 0;
  Params p_ref = p0;
  {
    TrainOptions o;
    o.groups = "all";
    o.need_input_delta = true;
    Trainer ref(net, p_ref, o, comm);
    ref_loss = ref.forward_backward(input.data(), truth.data());
    ref_out.assign(ref.output(), ref.output() + out_n);
    ref_delta.assign(ref.input_delta(), ref.input_delta() + in_n);
    ref_grad.assign(ref.grad().begin(), ref.grad().end());
    ref.update();
  }
  std::printf("W1 untiled step: %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  struct Run {
    int rows, cols;
    const char* groups;
    BackwardFeatures features = BackwardFeatures::Recompute;
  };
  for (auto [rows, cols, groups, features] :
       {Run{2, 2, "0,4,8,12"}, Run{2, 2, "none"}, Run{3, 3, "0,4,8,12"}, Run{3, 3, "none"},
        Run{2, 2, "all", BackwardFeatures::Exchange}, Run{3, 3, "0,4,8,12", BackwardFeatures::Exchange}}) {
    const auto t1 = std::chrono::steady_clock::now();
    SCOPED_TRACE("W1 grid " + std::to_string(rows) + "x" + std::to_string(cols) + ", groups " + groups +
                 ", backward features " + backward_features_name(features));
    Params p = p0;
    TrainOptions o;
    o.rows = rows;
    o.cols = cols;
    o.groups = groups;
    o.features = features;
    o.need_input_delta = true;
    Trainer tr(net, p, o, comm);
    const double loss = tr.forward_backward(input.data(), truth.data());
    EXPECT_LE(std::fabs(loss - ref_loss), kTol * std::fabs(ref_loss)) << "loss " << loss << " vs " << ref_loss;
    Checker check;
    check("output", tr.output(), ref_out.data(), out_n);
    check("input delta", tr.input_delta(), ref_delta.data(), in_n);
    compare_params(check, "gradient", net, p0, tr.grad().data(), ref_grad.data());
    tr.update();
    compare_params(check, "after the step:", net, p0, p.values.data(), p_ref.values.data());
    for (const auto& l : net.layers) {
      if (!l.batch_normalize()) continue;
      const size_t k = p_ref.rolling_mean[l.index].size();
      const std::string pre = "layer " + std::to_string(l.index) + " ";
      check(pre + "rolling mean", p.rolling_mean[l.index].data(), p_ref.rolling_mean[l.index].data(), k);
      check(pre + "rolling variance", p.rolling_var[l.index].data(), p_ref.rolling_var[l.index].data(), k);
    }
    std::printf("W1 %dx%d groups %s, backward features %s: worst relative difference %.3g (%s), %.2f s\n", rows, cols,
                groups, backward_features_name(features), check.worst, check.worst_name.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  }
}

}  // namespace
}  // namespace tt
