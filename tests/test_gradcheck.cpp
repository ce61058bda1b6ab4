// Numerical gradient check of every layer type through tt::Trainer on tiny nets, after
// Caffe's test_gradient_check_util.hpp: differences of the loss in double on a capped
// random subset of every parameter tensor and of the input, threshold scaled by
// max(|a|,|b|,1). The engine is fp32, so steps are 1e-2 (smooth nets) or 3e-3 (nets with
// kinks) and the threshold is 1e-2. Kinks are found exactly by "probe" nets: the prefix
// of the net up to an activation made linear (or up to the layer before a max-pool), run
// with the same perturbation. When a kink lies on one side of a point, the one-sided
// second-order difference from the other side is used; on both sides, it is skipped.
// TILETRAIN_GRADCHECK_VERBOSE=1 prints per-tensor counts and worst errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"

namespace tt {
namespace {

using Rng = std::mt19937_64;

// A net as [net] fields plus layer sections, so prefixes (probes) can be cut from it.
struct NetText {
  int batch = 2, c = 3, h = 6, w = 5;
  std::vector<std::string> layers;  // "[convolutional]\nsize=3\n..."

  // The first `n` layers, the activation of layer `linear_at` made linear, then [cost]
  // when asked (probes end in a cost so the Trainer accepts them).
  std::string cfg(size_t n, bool add_cost, int linear_at = -1) const {
    char head[256];
    std::snprintf(head, sizeof head,
                  "[net]\nbatch=%d\nsubdivisions=1\nwidth=%d\nheight=%d\nchannels=%d\nlearning_rate=0.01\n"
                  "momentum=0.9\ndecay=0.0005\n\n",
                  batch, w, h, c);
    std::string s = head;
    for (size_t i = 0; i < n; ++i) {
      std::string l = layers[i];
      if (int(i) == linear_at) l = std::regex_replace(l, std::regex("activation=\\w+"), "activation=linear");
      s += l + "\n";
    }
    if (add_cost) s += "[cost]\ntype=sse\n";
    return s;
  }
  std::string cfg() const { return cfg(layers.size(), false); }
};

std::string conv(int filters, int size, int stride, int padding, bool bn, const char* act) {
  char b[256];
  std::snprintf(b, sizeof b,
                "[convolutional]\nbatch_normalize=%d\nfilters=%d\nsize=%d\nstride=%d\npadding=%d\nactivation=%s\n",
                bn ? 1 : 0, filters, size, stride, padding, act);
  return b;
}
std::string grouped(int filters, int size, int stride, int groups, bool bn, const char* act) {
  return conv(filters, size, stride, size / 2, bn, act) + "groups=" + std::to_string(groups) + "\n";
}
std::string maxpool(int size, int stride, int padding = -1) {
  char b[128];
  if (padding < 0)
    std::snprintf(b, sizeof b, "[maxpool]\nsize=%d\nstride=%d\n", size, stride);
  else
    std::snprintf(b, sizeof b, "[maxpool]\nsize=%d\nstride=%d\npadding=%d\n", size, stride, padding);
  return b;
}
std::string connected(int outputs, const char* act) {
  return "[connected]\noutput=" + std::to_string(outputs) + "\nactivation=" + act + "\n";
}
std::string dropout(float p) { return "[dropout]\nprobability=" + std::to_string(p) + "\n"; }
const std::string kAvgpool = "[avgpool]\n", kSoftmax = "[softmax]\ngroups=1\n", kCost = "[cost]\ntype=sse\n";

// A net with its parameters, one input and truth, and a Trainer on them.
struct Problem {
  NetSpec net;
  Params params;
  std::vector<float> input, truth;
  LocalComm comm;
  std::unique_ptr<Trainer> tr;
  bool cross_entropy = false;

  Problem(const std::string& cfg, const TrainOptions& opt) : net(parse_net(cfg, "gradcheck.cfg")), params(net) {
    cross_entropy = net.layers.back().is(kSoftmaxKind);
    input.assign(size_t(net.micro_batch() * net.input().size()), 0.f);
    truth.assign(size_t(net.micro_batch() * net.output().size()), 0.f);
    tr = std::make_unique<Trainer>(net, params, opt, comm);
  }
  // L = ½Σ(out − truth)² for [cost] (forward_backward returns Σ(out − truth)²), the
  // cross-entropy for [softmax]: the loss whose gradient grad() holds.
  double loss() {
    const double l = tr->forward_backward(input.data(), truth.data());
    return cross_entropy ? l : 0.5 * l;
  }
  std::vector<float> output() const { return {tr->output(), tr->output() + net.micro_batch() * net.output().size()}; }
};

// Watches one kink source while a point is perturbed.
struct Probe {
  enum Kind { Sign, PoolWinner } kind;
  int layer;
  std::unique_ptr<Problem> prefix;  // null: the max-pool reads the net's input itself
  Window win;                       // PoolWinner: the pooling window and shapes
  Shape in, out;
  std::vector<float> base;  // values at the unperturbed point
};

// Winner (first max, in-map cells only) of every pooling window, on plain [n][c][h][w]
// maps of shape `in` pooled to `out`.
std::vector<int> pool_winners(const std::vector<float>& v, int n, const Shape& in, const Shape& out, const Window& w) {
  std::vector<int> win;
  for (int s = 0; s < n; ++s)
    for (int c = 0; c < in.c; ++c)
      for (int oy = 0; oy < out.h; ++oy)
        for (int ox = 0; ox < out.w; ++ox) {
          int best = -1;
          float bv = 0;
          for (int y = std::max(0, oy * w.stride - w.pad); y < std::min(in.h, oy * w.stride - w.pad + w.size); ++y)
            for (int x = std::max(0, ox * w.stride - w.pad); x < std::min(in.w, ox * w.stride - w.pad + w.size); ++x) {
              const float val = v[((size_t(s) * in.c + c) * in.h + y) * in.w + x];
              if (best < 0 || val > bv) {
                bv = val;
                best = y * in.w + x;
              }
            }
          win.push_back(best);
        }
  return win;
}

// True when the probe's kink lies between its base values and `v` (values at one
// perturbed point): an activation input changes sign or touches zero, or a max-pool
// window changes its winner.
bool crosses(const Probe& p, int n, const std::vector<float>& v) {
  if (p.kind == Probe::Sign) {
    for (size_t j = 0; j < p.base.size(); ++j)
      if ((p.base[j] > 0.f) != (v[j] > 0.f) || p.base[j] == 0.f || v[j] == 0.f) return true;
    return false;
  }
  return pool_winners(v, n, p.in, p.out, p.win) != pool_winners(p.base, n, p.in, p.out, p.win);
}

struct GradCase {
  std::string name;
  NetText net;
  int rows = 1, cols = 1;
  std::string groups = "none";
  float truth_scale = 1.f;  // [cost] truth ~ U(±scale): larger residuals, larger gradients
};

struct Stats {
  int checked = 0, one_sided = 0, skipped = 0;
  double worst = 0;  // max |a − b| / max(|a|,|b|,1)
};

constexpr double kThreshold = 1e-2;
constexpr int kMaxPoints = 20;

// One OpenMP thread while it lives. A gradient check is thousands of steps of a tiny
// net, bound by the fork/join of every primitive; on a shared machine two spinning
// threads made these tests 10x slower. Gradients do not depend on the thread count.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

class GradCheck : public ::testing::TestWithParam<GradCase> {
 protected:
  void SetUp() override {
    const GradCase& gc = GetParam();
    rng_.seed(std::hash<std::string>{}(gc.name));
    TrainOptions opt;
    opt.rows = gc.rows;
    opt.cols = gc.cols;
    opt.groups = gc.groups;
    opt.need_input_delta = true;
    main_ = std::make_unique<Problem>(gc.net.cfg(), opt);
    Problem& p = *main_;
    init_params(p.params, p.net, 7);
    // Generic biases and batch-norm scales (the init makes them 0 and 1).
    std::uniform_real_distribution<float> ub(-0.3f, 0.3f), us(0.6f, 1.4f), ux(-1.f, 1.f);
    for (const auto& l : p.net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& s = p.params.slices[l.index];
      for (int64_t i = 0; i < s.n_out; ++i) p.params.values[size_t(s.biases + i)] = ub(rng_);
      if (s.scales >= 0)
        for (int64_t i = 0; i < s.n_out; ++i) p.params.values[size_t(s.scales + i)] = us(rng_);
    }
    p.tr->reload_weights();
    if (p.net.layers[0].is(kMaxPoolKind)) {
      // distinct values 0.02 apart: no ±step can change a max-pool winner of the input
      std::vector<int> perm(p.input.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      for (size_t i = 0; i < perm.size(); ++i) p.input[i] = 0.02f * (float(perm[i]) - 0.5f * float(perm.size()));
    } else {
      for (auto& v : p.input) v = ux(rng_);
    }
    if (p.cross_entropy) {  // a distribution per sample
      const int64_t k = p.net.output().size();
      for (int s = 0; s < p.net.micro_batch(); ++s) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i)
          sum += p.truth[size_t(s * k + i)] = 0.05f + std::uniform_real_distribution<float>(0, 1)(rng_);
        for (int64_t i = 0; i < k; ++i) p.truth[size_t(s * k + i)] = float(p.truth[size_t(s * k + i)] / sum);
      }
    } else {
      for (auto& v : p.truth) v = gc.truth_scale * ux(rng_);
    }

    // Probes: every relu/leaky activation, every max-pool.
    TrainOptions popt;  // untiled, no input delta: only values matter
    for (const auto& l : p.net.layers) {
      const bool kink_act =
          (l.is(kConvKind) || l.is(kConnectedKind)) && (l.activation() == Act::Relu || l.activation() == Act::Leaky);
      if (!kink_act && !l.is(kMaxPoolKind)) continue;
      auto pr = std::make_unique<Probe>();
      pr->layer = l.index;
      if (kink_act) {
        pr->kind = Probe::Sign;
        pr->prefix = std::make_unique<Problem>(gc.net.cfg(size_t(l.index) + 1, true, l.index), popt);
      } else {
        pr->kind = Probe::PoolWinner;
        pr->win = l.window();
        pr->in = l.in;
        pr->out = l.out;
        if (l.index > 0) pr->prefix = std::make_unique<Problem>(gc.net.cfg(size_t(l.index), true), popt);
      }
      if (pr->prefix) {
        Problem& q = *pr->prefix;
        std::copy_n(p.params.values.begin(), q.params.values.size(), q.params.values.begin());
        q.input = p.input;
        q.tr->reload_weights();
      }
      pr->base = probe_values(*pr);
      probes_.push_back(std::move(pr));
    }
    step_ = probes_.empty() ? 1e-2 : 3e-3;
  }

  std::vector<float> probe_values(Probe& pr) {
    if (!pr.prefix) return main_->input;
    pr.prefix->tr->forward_backward(pr.prefix->input.data(), pr.prefix->truth.data());
    return pr.prefix->output();
  }

  // Element i of a tensor in the main problem and in a probe's (null: not in its prefix).
  struct Tensor {
    std::string name;
    bool is_input;
    int64_t offset, count;
    std::vector<float> analytic;
    float* at(Problem& p, int64_t i) const {
      if (is_input) return p.input.data() + i;
      return offset + i < p.params.size() ? p.params.values.data() + offset + i : nullptr;
    }
  };

  // The loss and every probe's values with element i of t moved by about `dt`.
  struct Eval {
    double t = 0, f = 0;  // the step actually taken, the loss there
    bool kink = false;    // some probe crossed its kink between 0 and t
  };
  Eval eval(const Tensor& t, int64_t i, double dt) {
    Problem& p = *main_;
    float* x = t.at(p, i);
    const float x0 = *x, v = float(double(x0) + dt);
    Eval e;
    e.t = double(v) - double(x0);
    *x = v;
    p.tr->reload_weights();
    e.f = p.loss();
    for (auto& pr : probes_) {
      if (!pr->prefix) {  // the max-pool reads the input: moved only by the input itself
        if (t.is_input) e.kink |= crosses(*pr, p.net.micro_batch(), p.input);
        continue;
      }
      float* y = t.at(*pr->prefix, i);
      if (!y) continue;  // a parameter after this probe's layer cannot move its kink
      *y = v;
      pr->prefix->tr->reload_weights();
      e.kink |= crosses(*pr, p.net.micro_batch(), probe_values(*pr));
      *y = x0;
      pr->prefix->tr->reload_weights();
    }
    *x = x0;
    p.tr->reload_weights();
    return e;
  }

  // Central difference where no kink lies within ±step; where one lies on one side
  // only, the one-sided second-order difference from f(0), f(σh), f(2σh) on the other.
  Stats check(const Tensor& t, double f0) {
    std::vector<int64_t> idx(size_t(t.count));
    std::iota(idx.begin(), idx.end(), 0);
    if (t.count > kMaxPoints) {
      std::shuffle(idx.begin(), idx.end(), rng_);
      idx.resize(kMaxPoints);
    }
    Stats st;
    int reported = 0;
    for (int64_t i : idx) {
      const Eval plus = eval(t, i, step_), minus = eval(t, i, -step_);
      double b;
      if (!plus.kink && !minus.kink) {
        b = (plus.f - minus.f) / (plus.t - minus.t);
      } else if (plus.kink && minus.kink) {
        ++st.skipped;
        continue;
      } else {
        const Eval& e1 = plus.kink ? minus : plus;
        const Eval e2 = eval(t, i, 2 * e1.t);
        if (e2.kink) {
          ++st.skipped;
          continue;
        }
        // derivative at 0 of the parabola through (0, f0), (t1, f1), (t2, f2)
        const double t1 = e1.t, t2 = e2.t;
        b = ((e1.f - f0) * t2 * t2 - (e2.f - f0) * t1 * t1) / (t1 * t2 * (t2 - t1));
        ++st.one_sided;
      }
      const double a = t.analytic[size_t(i)];
      const double scale = std::max({std::fabs(a), std::fabs(b), 1.});
      const double err = std::fabs(a - b) / scale;
      st.worst = std::max(st.worst, err);
      ++st.checked;
      if (err > kThreshold && reported++ < 5)
        ADD_FAILURE() << t.name << "[" << i << "]: analytic " << a << " vs numeric " << b << " (relative error " << err
                      << ", step " << step_ << ")";
    }
    return st;
  }

  void run() {
    Problem& p = *main_;
    const double f0 = p.tr->forward_backward(p.input.data(), p.truth.data());
    std::vector<Tensor> tensors;
    const std::vector<float> grad(p.tr->grad().begin(), p.tr->grad().end());  // a single forward_backward: dL/dθ
    const int64_t in_count = p.net.micro_batch() * p.net.input().size();
    tensors.push_back({"input", true, 0, in_count, {p.tr->input_delta(), p.tr->input_delta() + in_count}});
    for (const auto& l : p.net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& s = p.params.slices[l.index];
      const std::string n = "layer" + std::to_string(l.index) + ".";
      auto add = [&](const std::string& what, int64_t off, int64_t count) {
        tensors.push_back({n + what, false, off, count, {grad.begin() + off, grad.begin() + off + count}});
      };
      add("weights", s.weights, s.n_weights);
      add("biases", s.biases, s.n_out);
      if (s.scales >= 0) add("scales", s.scales, s.n_out);
    }
    // The loss is a deterministic function of the parameters (also through dropout).
    const std::vector<float> out0 = p.output();
    EXPECT_EQ(p.tr->forward_backward(p.input.data(), p.truth.data()), f0);
    EXPECT_EQ(p.output(), out0);
    for (const Tensor& t : tensors) {
      SCOPED_TRACE(t.name);
      const Stats st = check(t, p.cross_entropy ? f0 : 0.5 * f0);
      // Kinks may hide a few points, never most of a tensor.
      EXPECT_GE(st.checked, 1) << "every point was skipped";
      EXPECT_LE(st.skipped, std::max(2, (st.checked + st.skipped) / 2)) << "too many points near kinks";
      RecordProperty(t.name + ".checked", st.checked);
      RecordProperty(t.name + ".skipped", st.skipped);
      if (std::getenv("TILETRAIN_GRADCHECK_VERBOSE"))
        std::printf("  %-16s checked %2d (one-sided %2d) skipped %2d worst %.2e\n", t.name.c_str(), st.checked,
                    st.one_sided, st.skipped, st.worst);
    }
  }

  OneThread one_thread_;  // first member: set before the Trainers are built, restored after
  Rng rng_;
  std::unique_ptr<Problem> main_;
  std::vector<std::unique_ptr<Probe>> probes_;
  double step_ = 1e-2;
};

TEST_P(GradCheck, LossGradient) { run(); }

std::vector<GradCase> conv_cases() {
  std::vector<GradCase> v;
  for (int k : {1, 3, 5})
    for (int s : {1, 2})
      for (bool bn : {false, true})
        for (const char* act : {"leaky", "relu", "linear", "logistic"}) {
          GradCase gc;
          gc.name = "conv_k" + std::to_string(k) + "_s" + std::to_string(s) + (bn ? "_bn_" : "_") + act;
          gc.net.layers = {conv(4, k, s, k / 2, bn, act), kCost};
          v.push_back(gc);
        }
  // Darknet `padding` other than size/2, odd input sizes
  GradCase a{"conv_k3_pad0", {}, 1, 1, "none"};
  a.net.h = 7;
  a.net.layers = {conv(3, 3, 1, 0, false, "logistic"), kCost};
  GradCase b{"conv_k5_s2_pad1_bn", {}, 1, 1, "none"};
  b.net.h = 9;
  b.net.w = 7;
  b.net.layers = {conv(3, 5, 2, 1, true, "leaky"), kCost};
  v.push_back(a);
  v.push_back(b);
  // Grouped: depthwise (on the plain input and on blocked maps, strides 1 and 2), groups of
  // two channels into three, a grouped 1x1, with and without batch-norm.
  GradCase dw{"depthwise_on_input", {}, 1, 1, "none"};
  dw.net.layers = {grouped(3, 3, 1, 3, false, "leaky"), kCost};
  GradCase dw2{"depthwise_k3_s1_s2_bn", {}, 1, 1, "none"};
  dw2.net.h = 9;
  dw2.net.w = 7;
  dw2.net.layers = {conv(8, 1, 1, 0, false, "linear"), grouped(8, 3, 1, 8, true, "relu"),
                    grouped(8, 3, 2, 8, false, "logistic"), kCost};
  GradCase gr{"grouped_2_into_3_and_1x1", {}, 1, 1, "none"};
  gr.net.h = 7;
  gr.net.layers = {conv(6, 1, 1, 0, false, "linear"), grouped(9, 3, 1, 3, false, "leaky"),
                   grouped(6, 1, 1, 3, true, "linear"), kCost};
  GradCase tiled = dw2;
  tiled.name = "depthwise_2x2_tiled";
  tiled.rows = tiled.cols = 2;
  for (GradCase* c : {&dw, &dw2, &gr, &tiled}) v.push_back(*c);
  return v;
}

std::vector<GradCase> pool_cases() {
  std::vector<GradCase> v;
  struct P {
    int size, stride;
  };
  for (P w : {P{2, 2}, P{3, 2}, P{2, 1}, P{3, 1}}) {
    const std::string tag = std::to_string(w.size) + "_" + std::to_string(w.stride);
    GradCase in{"maxpool" + tag + "_on_input", {}, 1, 1, "none"};  // nchw input, ties impossible
    in.net.h = 7;
    in.net.layers = {maxpool(w.size, w.stride), kCost};
    GradCase cv{"maxpool" + tag + "_after_conv", {}, 1, 1, "none"};  // blocked output, winners probed
    cv.net.h = 7;
    cv.net.layers = {conv(5, 3, 1, 1, false, "linear"), maxpool(w.size, w.stride), kCost};
    v.push_back(in);
    v.push_back(cv);
  }
  GradCase p0{"maxpool2_2_padding0_after_conv_bn", {}, 1, 1, "none"};
  p0.net.h = 7;
  p0.net.layers = {conv(5, 3, 1, 1, true, "logistic"), maxpool(2, 2, 0), kCost};
  v.push_back(p0);
  return v;
}

std::vector<GradCase> head_cases() {
  std::vector<GradCase> v;
  auto add = [&](const std::string& name, std::vector<std::string> layers) {
    GradCase gc;
    gc.name = name;
    gc.net.layers = std::move(layers);
    v.push_back(gc);
  };
  add("avgpool", {conv(4, 3, 1, 1, false, "linear"), kAvgpool, kCost});
  add("avgpool_after_bn_leaky", {conv(4, 3, 1, 1, true, "leaky"), kAvgpool, kCost});
  for (const char* act : {"leaky", "relu", "linear", "logistic"})
    add(std::string("connected_") + act, {conv(3, 1, 1, 0, false, "linear"), connected(5, act), kCost});
  add("softmax_after_avgpool", {conv(6, 3, 1, 1, false, "linear"), kAvgpool, kSoftmax});
  add("softmax_after_connected", {conv(3, 3, 2, 1, true, "logistic"), connected(7, "linear"), kSoftmax});
  add("dropout_on_map", {conv(4, 3, 1, 1, false, "logistic"), dropout(0.4f), connected(3, "linear"), kCost});
  add("dropout_after_connected",
      {conv(3, 1, 1, 0, false, "linear"), connected(8, "logistic"), dropout(0.3f), connected(4, "linear"), kSoftmax});
  return v;
}

// Every layer type in one net, untiled and on grids (the tiled engine's gradients).
std::vector<GradCase> composite_cases() {
  NetText n;
  n.h = 11;
  n.w = 9;
  n.layers = {conv(4, 3, 1, 1, true, "leaky"),
              maxpool(2, 2),
              conv(6, 3, 2, 1, false, "relu"),
              conv(5, 1, 1, 0, true, "logistic"),
              kAvgpool,
              connected(7, "leaky"),
              dropout(0.25f),
              connected(4, "linear"),
              kCost};
  NetText soft = n;
  soft.layers.back() = kSoftmax;
  NetText m;  // maxpool 3/2 and 2/1 between convs, ending in a cost on the map
  m.h = 9;
  m.w = 10;
  m.layers = {conv(3, 3, 1, 1, false, "linear"), maxpool(3, 2), conv(4, 3, 1, 1, true, "logistic"), maxpool(2, 1),
              kCost};
  return {{"composite_1x1", n, 1, 1, "none", 3.f},
          {"composite_2x2", n, 2, 2, "none", 3.f},
          {"composite_3x2_grouped", n, 3, 2, "0,2", 3.f},
          {"composite_softmax_2x2", soft, 2, 2, "none"},
          {"pools_1x1", m, 1, 1, "none"},
          {"pools_2x3_all", m, 2, 3, "all"}};
}

std::string case_name(const ::testing::TestParamInfo<GradCase>& i) { return i.param.name; }

INSTANTIATE_TEST_SUITE_P(Conv, GradCheck, ::testing::ValuesIn(conv_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(MaxPool, GradCheck, ::testing::ValuesIn(pool_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Head, GradCheck, ::testing::ValuesIn(head_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Composite, GradCheck, ::testing::ValuesIn(composite_cases()), case_name);

// forward_backward returns Σ(out − truth)² (twice the loss whose gradient grad() holds).
TEST(GradCheckLoss, SseIsSumOfSquares) {
  OneThread one_thread;
  NetText n;
  n.layers = {conv(2, 3, 1, 1, false, "linear"), kCost};
  Problem p(n.cfg(), TrainOptions{});
  init_params(p.params, p.net, 3);
  p.tr->reload_weights();
  Rng rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& v : p.input) v = u(rng);
  for (auto& v : p.truth) v = u(rng);
  const double got = p.tr->forward_backward(p.input.data(), p.truth.data());
  const std::vector<float> out = p.output();
  double want = 0;
  for (size_t i = 0; i < out.size(); ++i) want += double(out[i] - p.truth[i]) * (out[i] - p.truth[i]);
  EXPECT_NEAR(got, want, 1e-9 * want);
}

// The dropout mask is a function of (seed, step): the same without an update, a new one
// after it (learning rate 0 keeps the weights, so only the mask can change the output).
TEST(GradCheckDropout, MaskFixedUntilUpdate) {
  OneThread one_thread;
  NetText n;
  n.layers = {conv(4, 3, 1, 1, false, "logistic"), dropout(0.5f), kCost};
  std::string cfg = std::regex_replace(n.cfg(), std::regex("learning_rate=0.01"), "learning_rate=0");
  cfg = std::regex_replace(cfg, std::regex("decay=0.0005"), "decay=0");
  for (int grid : {1, 2}) {
    TrainOptions opt;
    opt.rows = opt.cols = grid;
    Problem p(cfg, opt);
    init_params(p.params, p.net, 5);
    p.tr->reload_weights();
    for (size_t i = 0; i < p.input.size(); ++i) p.input[i] = std::sin(0.37f * float(i));
    const double l1 = p.tr->forward_backward(p.input.data(), p.truth.data());
    const std::vector<float> o1 = p.output();
    const double l2 = p.tr->forward_backward(p.input.data(), p.truth.data());
    EXPECT_EQ(l1, l2);
    EXPECT_EQ(p.output(), o1) << "two forward_backward calls without an update drop different cells";
    int zeros = 0;
    for (float v : o1) zeros += v == 0.f;
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, int(o1.size()));
    const ZeroPageFloats w0 = p.params.values;
    p.tr->update();
    EXPECT_EQ(p.params.values, w0) << "learning rate 0 must keep the weights";
    p.tr->forward_backward(p.input.data(), p.truth.data());
    EXPECT_NE(p.output(), o1) << "the mask did not change with the step";
  }
}

}  // namespace
}  // namespace tt
