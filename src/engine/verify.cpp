#include "engine/verify.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "data/synthetic.hpp"
#include "model/params.hpp"

namespace tt {
namespace {

double norm_of_difference(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i] - b[i]) * double(a[i] - b[i]);
  return std::sqrt(s);
}

double norm(const float* a, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
  return std::sqrt(s);
}

double relative(const float* a, const float* b, size_t n, double scale = 0) {
  return gradient_difference(a, b, n, scale);
}

void keep_worst(VerifyReport& r, int kind, double d, int layer) {
  if (std::isnan(d)) d = HUGE_VAL;  // a NaN on one side only (or both): never a match
  VerifyReport::Worst& w = r.worst[size_t(kind)];
  if (d > w.diff) w = {d, layer};
}

}  // namespace

const char* VerifyReport::name(int kind) {
  static const char* names[kKinds] = {"outputs",
                                      "input deltas",
                                      "weight gradients",
                                      "bias gradients",
                                      "bn scale gradients",
                                      "weights after a step",
                                      "biases after a step",
                                      "bn scales after a step",
                                      "bn running statistics"};
  return names[kind];
}

const char* VerifyReport::scale(int kind) {
  static const char* scales[kKinds] = {"bit for bit",
                                       "||untiled||",
                                       "sqrt(window) ||input|| ||delta||",
                                       "sqrt(cells) ||delta||",
                                       "||delta_c|| ||x_hat_c||",
                                       "lr/B (G + m ||v|| + decay B ||w||)",
                                       "lr/B (G + m ||v||)",
                                       "lr/B (G + m ||v||)",
                                       "||untiled||"};
  return scales[kind];
}

bool VerifyReport::ok() const {
  for (int k = 0; k < kKinds; ++k)
    if (!ok(k)) return false;
  return true;
}

VerifyReport::Worst VerifyReport::worst_of(int first, int last) const {
  Worst w;
  for (int k = first; k < last; ++k)
    if (worst[size_t(k)].diff > w.diff) w = worst[size_t(k)];
  return w;
}

double gradient_difference(const float* tiled, const float* untiled, size_t n, double scale) {
  const double num = norm_of_difference(tiled, untiled, n), den = std::max(norm(untiled, n), scale);
  return den == 0 ? num : num / den;
}

VerifyReport verify_training(const NetSpec& net, const TrainOptions& opt, Comm& comm, uint64_t seed, int steps,
                             const std::function<void(const Trainer&)>& started) {
  Params p_tiled(net);
  init_params(p_tiled, net, seed);
  Params p_ref = p_tiled;
  TrainOptions topt = opt;
  topt.need_input_delta = true;
  LocalComm local;
  Trainer tiled(net, p_tiled, topt, comm);
  if (started) started(tiled);
  TrainOptions ropt = topt;
  ropt.rows = ropt.cols = 1;
  ropt.split = {};
  ropt.groups = "all";
  // The same cut: the layers after it run alike in both runs (whole on the root, or in the same filter blocks), on the
  // same kernels, so forward values can be compared bit for bit. With the default cut instead, a layer the tiled run
  // puts after an explicit --cut would run on a kernel that may sum by the map's size (conv.hpp, `tiled`) in one run
  // and not in the other.
  ropt.cut = tiled.cut();
  ropt.low_memory = false;  // the reference is the plain single-process run
  // Data parallel too: against the plain run (its micro-batches' gradients accumulate in the
  // kernels, so they may differ in the last bits); that copies give the same bits whatever
  // their number, tests/mpi/replicas.sh checks.
  ropt.replicas = 0;
  // Filter blocks: the same blocks, on the one process. Their kernels follow the whole
  // layer's (ConvGeom::choose_oc), but where that is OpenBLAS (the tail on small maps on
  // AVX2 and ARM) a block's product rounds by its own shape, so the root's tail would not be
  // the same bits; where the kernels sum by filter (AVX-512 here) it is.
  ropt.filter_blocks = opt.tail == TailMode::Filters ? opt.rows * opt.cols : 0;
  ropt.record_grad_scales = true;
  ropt.adjust_plan = {};  // a test's change to the tiled plan is not the reference's
  std::unique_ptr<Trainer> ref_holder;
  if (tiled.root()) ref_holder = std::make_unique<Trainer>(net, p_ref, ropt, local);
  const int n = net.micro_batch();
  const size_t out_n = size_t(n * net.output().size()), in_n = size_t(n * net.input().size());
  VerifyReport r;
  r.cut = tiled.cut();
  std::vector<float> input, truth;
  // Per parameter tensor: its kind, where it is, and (filled per step) G + momentum ||v|| +
  // decay B ||w||, the size of what the update adds to it, over lr/B.
  struct Tensor {
    int layer, grad_kind, after_kind;
    int64_t at, n;
    float decay;
    double update_scale = 0;
  };
  std::vector<Tensor> tensors;
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = p_ref.slices[size_t(l.index)];
    tensors.push_back(
        {l.index, VerifyReport::kWeightGradients, VerifyReport::kWeights, s.weights, s.n_weights, net.decay});
    tensors.push_back({l.index, VerifyReport::kBiasGradients, VerifyReport::kBiases, s.biases, s.n_out, 0.f});
    if (s.scales >= 0)
      tensors.push_back({l.index, VerifyReport::kScaleGradients, VerifyReport::kScales, s.scales, s.n_out, 0.f});
  }
  for (int k = 0; k < steps; ++k) {
    for (int sub = 0; sub < net.subdivisions; ++sub) {
      synthetic_batch(net, n, seed * 7919 + uint64_t(k * 131 + sub), input, truth);
      tiled.forward_backward(input.data(), truth.data());
      if (!tiled.root()) continue;
      Trainer& ref = *ref_holder;
      ref.forward_backward(input.data(), truth.data());
      keep_worst(r, VerifyReport::kOutputs, relative(tiled.output(), ref.output(), out_n), -1);
      keep_worst(r, VerifyReport::kInputDeltas, relative(tiled.input_delta(), ref.input_delta(), in_n), -1);
    }
    // The tiled gradient is whole only once update() has summed it across processes:
    // compare that sum (last_grad) with the reference's before its own update.
    tiled.update();
    if (!tiled.root()) continue;
    Trainer& ref = *ref_holder;
    const std::vector<GradScale> scale = ref.take_grad_scales();
    const float *g_tiled = tiled.last_grad().data(), *g_ref = ref.grad().data();
    const float *v = ref.momentum().data(), *w = p_ref.values.data();  // as both runs start this step
    const double m = net.momentum, B = net.batch;
    for (Tensor& t : tensors) {
      const GradScale& gs = scale[size_t(t.layer)];
      const double sc = t.grad_kind == VerifyReport::kWeightGradients ? gs.weights
                        : t.grad_kind == VerifyReport::kBiasGradients ? gs.biases
                                                                      : gs.scales;
      keep_worst(r, t.grad_kind, relative(g_tiled + t.at, g_ref + t.at, size_t(t.n), sc), t.layer);
      const double G = std::max(norm(g_ref + t.at, size_t(t.n)), sc);
      t.update_scale = G + m * norm(v + t.at, size_t(t.n)) + double(t.decay) * B * norm(w + t.at, size_t(t.n));
    }
    ref.update();
    // The rate the update just used (it counted this batch in `seen` first).
    const double lr = net.rate_at(p_ref.seen / net.batch);
    const float *a = p_tiled.values.data(), *b = p_ref.values.data();
    for (const Tensor& t : tensors)
      keep_worst(r, t.after_kind, relative(a + t.at, b + t.at, size_t(t.n), lr / B * t.update_scale), t.layer);
    for (const auto& l : net.layers) {
      if (!l.has_params() || p_ref.slices[size_t(l.index)].scales < 0) continue;
      const size_t c = size_t(p_ref.slices[size_t(l.index)].n_out);
      keep_worst(r, VerifyReport::kRunningStats,
                 relative(p_tiled.rolling_mean[l.index].data(), p_ref.rolling_mean[l.index].data(), c), l.index);
      keep_worst(r, VerifyReport::kRunningStats,
                 relative(p_tiled.rolling_var[l.index].data(), p_ref.rolling_var[l.index].data(), c), l.index);
    }
    p_ref.values = p_tiled.values;
    p_ref.rolling_mean = p_tiled.rolling_mean;
    p_ref.rolling_var = p_tiled.rolling_var;
    ref.set_momentum(tiled.momentum());
    ref.reload_weights();
  }
  return r;
}

}  // namespace tt
