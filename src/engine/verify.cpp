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

void keep_worst(double& worst, int& where, double d, int layer) {
  if (d > worst) {
    worst = d;
    where = layer;
  }
}

}  // namespace

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
  TrainOptions ropt = topt;
  ropt.rows = ropt.cols = 1;
  ropt.split = {};
  ropt.groups = "all";
  ropt.cut = -1;
  ropt.low_memory = false;  // the reference is the plain single-process run
  ropt.record_grad_scales = true;
  ropt.adjust_plan = {};  // a test's change to the tiled plan is not the reference's
  LocalComm local;
  Trainer tiled(net, p_tiled, topt, comm);
  if (started) started(tiled);
  std::unique_ptr<Trainer> ref_holder;
  if (tiled.root()) ref_holder = std::make_unique<Trainer>(net, p_ref, ropt, local);
  const int n = net.micro_batch();
  const size_t out_n = size_t(n * net.output().size()), in_n = size_t(n * net.input().size());
  VerifyReport r;
  r.cut = tiled.cut();
  std::vector<float> input, truth;
  for (int k = 0; k < steps; ++k) {
    for (int sub = 0; sub < net.subdivisions; ++sub) {
      synthetic_batch(net, n, seed * 7919 + uint64_t(k * 131 + sub), input, truth);
      tiled.forward_backward(input.data(), truth.data());
      if (!tiled.root()) continue;
      Trainer& ref = *ref_holder;
      ref.forward_backward(input.data(), truth.data());
      r.outputs = std::max(r.outputs, relative(tiled.output(), ref.output(), out_n));
      r.input_deltas = std::max(r.input_deltas, relative(tiled.input_delta(), ref.input_delta(), in_n));
    }
    // The tiled gradient is whole only once update() has summed it across processes:
    // compare that sum (last_grad) with the reference's before its own update.
    tiled.update();
    if (!tiled.root()) continue;
    Trainer& ref = *ref_holder;
    const std::vector<double> scale = ref.take_grad_scales();
    for (const auto& l : net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& s = p_ref.slices[l.index];
      const float *a = tiled.last_grad().data(), *b = ref.grad().data();
      keep_worst(r.gradients, r.gradient_layer,
                 relative(a + s.weights, b + s.weights, s.n_weights, scale[size_t(l.index)]), l.index);
      keep_worst(r.gradients, r.gradient_layer, relative(a + s.biases, b + s.biases, s.n_out), l.index);
      if (s.scales >= 0)
        keep_worst(r.gradients, r.gradient_layer, relative(a + s.scales, b + s.scales, s.n_out), l.index);
    }
    ref.update();
    for (const auto& l : net.layers) {
      if (!l.has_params()) continue;
      const ParamSlice& s = p_ref.slices[l.index];
      const float *a = p_tiled.values.data(), *b = p_ref.values.data();
      const size_t c = size_t(s.n_out);
      keep_worst(r.weights, r.weight_layer, relative(a + s.biases, b + s.biases, c), l.index);
      keep_worst(r.weights, r.weight_layer, relative(a + s.weights, b + s.weights, s.n_weights), l.index);
      if (s.scales >= 0) {
        keep_worst(r.weights, r.weight_layer, relative(a + s.scales, b + s.scales, c), l.index);
        keep_worst(r.weights, r.weight_layer,
                   relative(p_tiled.rolling_mean[l.index].data(), p_ref.rolling_mean[l.index].data(), c), l.index);
        keep_worst(r.weights, r.weight_layer,
                   relative(p_tiled.rolling_var[l.index].data(), p_ref.rolling_var[l.index].data(), c), l.index);
      }
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
