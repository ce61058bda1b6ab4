// The names of a net's parts and what a NetSpec answers about itself. Reading a .cfg is
// cfg_parse.cpp, resolving and checking its shapes net_shapes.cpp.
#include "model/net_spec.hpp"
#include "model/op_kind.hpp"

#include <algorithm>
#include <cmath>

#include "util/error.hpp"

namespace tt {

const char* layer_type_name(LayerType t) { return op_kind(t).name; }

const char* act_name(Act a) {
  switch (a) {
    case Act::Linear:
      return "linear";
    case Act::Leaky:
      return "leaky";
    case Act::Relu:
      return "relu";
    case Act::Logistic:
      return "logistic";
  }
  return "?";
}

namespace {
template <class P, class Params>
auto& params_of(Params& params, const LayerSpec& l, const char* wanted) {
  if (auto* p = std::get_if<P>(&params)) return *p;
  fail("layer ", l.index, " is [", layer_type_name(l.type), "], asked for ", wanted, " parameters");
}
}  // namespace

#define TT_PARAMS(Name, Type, wanted)                                                    \
  const Type& LayerSpec::Name() const { return params_of<Type>(params, *this, wanted); } \
  Type& LayerSpec::Name() { return params_of<Type>(params, *this, wanted); }
TT_PARAMS(conv, ConvParams, "convolution")
TT_PARAMS(maxpool, MaxPoolParams, "max-pool")
TT_PARAMS(connected, ConnectedParams, "connected")
TT_PARAMS(dropout, DropoutParams, "dropout")
TT_PARAMS(reorg, ReorgParams, "reorg")
TT_PARAMS(upsample, UpsampleParams, "upsample")
TT_PARAMS(det, DetectorSpec, "detector")
#undef TT_PARAMS

const Window& LayerSpec::window() const { return type == LayerType::MaxPool ? maxpool().win : conv().win; }
int LayerSpec::pad_total() const { return type == LayerType::MaxPool ? maxpool().pad_total : conv().pad_total; }

Act LayerSpec::activation() const {
  if (type == LayerType::Conv) return conv().act;
  if (type == LayerType::Connected) return connected().act;
  return Act::Linear;
}

int64_t LayerSpec::weight_count() const {
  if (type == LayerType::Conv) return int64_t(conv().filters) * in.c * window().size * window().size;
  if (type == LayerType::Connected) return int64_t(connected().outputs) * in.size();
  return 0;
}

int64_t LayerSpec::param_count() const {
  if (!has_params()) return 0;
  return weight_count() + out.c * (batch_normalize() ? 2 : 1);
}

double LayerSpec::forward_flops() const { return op_kind(type).flops(*this); }

float NetSpec::rate_at(int64_t batch_num) const {
  if (batch_num < burn_in) return learning_rate * std::pow(float(batch_num) / burn_in, power);
  if (policy == Policy::Constant) return learning_rate;
  float rate = learning_rate;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] > batch_num) break;
    rate *= scales[i];
  }
  return rate;
}

int NetSpec::first_untileable() const {
  for (const auto& l : layers)
    if (!l.spatial()) return l.index;
  return int(layers.size());
}

int NetSpec::max_cut() const {
  int cut = first_untileable();
  for (const auto& l : layers)
    if (l.type == LayerType::Route)
      for (int r : l.inputs) cut = std::min(cut, r + 1);
  return cut;
}

bool NetSpec::detector() const {
  for (const auto& l : layers)
    if (l.detector()) return true;
  return false;
}

int64_t NetSpec::truth_size() const {
  int64_t n = 0;
  for (const auto& l : layers)
    if (l.detector()) n = std::max<int64_t>(n, l.det().truth_floats());
  return n > 0 ? n : output().size();
}

}  // namespace tt
