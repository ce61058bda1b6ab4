// The names of a net's parts and what a NetSpec answers about itself. Reading a .cfg is
// cfg_parse.cpp, resolving and checking its shapes net_shapes.cpp.
#include "model/net_spec.hpp"

#include <algorithm>
#include <cmath>

#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace tt {

const char* LayerSpec::type_name() const { return kind->name; }
bool LayerSpec::batch_normalize() const { return is(kConvKind) && conv().batch_normalize; }
// A shortcut samples a `from` map at least as large as its output (a smaller one would be
// added to every k-th cell: that runs after the cut). A route's first input is the layer
// before (its chain), the others join it.
bool LayerSpec::spatial() const {
  return is(kConvKind) || is(kMaxPoolKind) || (is(kShortcutKind) && params_as<ShortcutParams>().tileable) ||
         (is(kRouteKind) && !inputs.empty() && inputs[0] == index - 1);
}
bool LayerSpec::has_params() const { return is(kConvKind) || is(kConnectedKind) || is(kLocalKind); }
bool LayerSpec::detector() const { return is(kRegionKind) || is(kYoloKind); }
bool LayerSpec::box_loss() const { return detector() || is(kDetectionKind); }
bool LayerSpec::loss() const { return box_loss() || is(kCostKind) || is(kSoftmaxKind); }

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
    case Act::Ramp:
      return "ramp";
  }
  return "?";
}

void LayerSpec::wrong_params(const char* wanted) const {
  fail("internal: layer ", index, " is [", type_name(), "], asked for ", wanted, " parameters");
}

#define TT_PARAMS(Name, Type)                                       \
  const Type& LayerSpec::Name() const { return params_as<Type>(); } \
  Type& LayerSpec::Name() { return params_as<Type>(); }
TT_PARAMS(conv, ConvParams)
TT_PARAMS(maxpool, MaxPoolParams)
TT_PARAMS(connected, ConnectedParams)
TT_PARAMS(dropout, DropoutParams)
TT_PARAMS(reorg, ReorgParams)
TT_PARAMS(upsample, UpsampleParams)
TT_PARAMS(det, DetectorSpec)
#undef TT_PARAMS

const Window& LayerSpec::window(int slot) const {
  static const Window kCell;  // one cell, stride 1
  if (is(kShortcutKind) && slot == 1) return params_as<ShortcutParams>().from_window;
  if (is(kShortcutKind) || is(kRouteKind)) return kCell;
  return is(kMaxPoolKind) ? maxpool().win : conv().win;
}
int LayerSpec::pad_total() const {
  if (is(kShortcutKind) || is(kRouteKind)) return 0;
  return is(kMaxPoolKind) ? maxpool().pad_total : conv().pad_total;
}

Act LayerSpec::activation() const {
  if (is(kConvKind)) return conv().act;
  if (is(kConnectedKind)) return connected().act;
  if (is(kLocalKind)) return local().act;
  if (is(kShortcutKind)) return params_as<ShortcutParams>().act;
  return Act::Linear;
}

int64_t LayerSpec::weight_count() const {
  if (is(kConvKind)) return int64_t(conv().filters) * (in.c / conv().groups) * window().size * window().size;
  if (is(kConnectedKind)) return int64_t(connected().outputs) * in.size();
  if (is(kLocalKind)) return int64_t(local().filters) * in.c * local().win.size * local().win.size * out.h * out.w;
  return 0;
}

int64_t LayerSpec::bias_count() const { return is(kLocalKind) ? out.size() : out.c; }

int64_t LayerSpec::param_count() const {
  if (!has_params()) return 0;
  return weight_count() + bias_count() * (batch_normalize() ? 2 : 1);
}

double LayerSpec::forward_flops() const { return kind->flops(*this); }

namespace {
// A uniform number in [0, 1) drawn from the batch number.
double uniform_of(int64_t batch_num) { return double(mix(uint64_t(batch_num)) >> 11) * 0x1.0p-53; }
}  // namespace

// As Darknet computes them: powers and exponentials in double, the rate a float.
float NetSpec::rate_at(int64_t batch_num) const {
  const double b = double(batch_num), lr = learning_rate;
  if (batch_num < burn_in) return float(lr * std::pow(float(b) / float(burn_in), double(power)));
  switch (policy) {
    case Policy::Constant:
      return learning_rate;
    case Policy::Step:
      return float(lr * std::pow(double(scale), double(batch_num / step)));
    case Policy::Steps: {
      float rate = learning_rate;
      for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i] > batch_num) break;
        rate *= scales[i];
      }
      return rate;
    }
    case Policy::Exp:
      return float(lr * std::pow(double(gamma), b));
    case Policy::Poly:
      return float(lr * std::pow(std::max(0.f, 1 - float(b) / float(max_batches)), double(power)));
    case Policy::Random:
      return float(lr * std::pow(uniform_of(batch_num), double(power)));
    case Policy::Sigmoid:
      return float(lr * (1. / (1. + std::exp(double(gamma) * (b - step)))));
  }
  return learning_rate;
}

int64_t NetSpec::param_count(int first, int last) const {
  int64_t n = 0;
  for (int l = first; l < (last < 0 ? int(layers.size()) : last); ++l) n += layers[size_t(l)].param_count();
  return n;
}

int NetSpec::first_tiled() const { return !layers.empty() && layers[0].is(kCropKind) ? 1 : 0; }

int NetSpec::first_untileable() const {
  for (int l = first_tiled(); l < int(layers.size()); ++l)
    if (!layers[size_t(l)].spatial()) return l;
  return int(layers.size());
}

int NetSpec::split_reader(int cut) const {
  for (const auto& l : layers)
    if (l.index >= cut)
      for (int r : l.inputs)
        if (r < cut - 1) return l.index;
  return -1;
}

int NetSpec::max_cut() const {
  int cut = first_untileable();
  // Lowering the cut can leave a reader it had tiled untiled: repeat until nothing moves.
  for (int r = split_reader(cut); r >= 0; r = split_reader(cut))
    for (int in : layers[size_t(r)].inputs) cut = std::min(cut, in + 1);
  return cut;
}

int NetSpec::far_reader(int r) const {
  for (const auto& l : layers)
    if (l.index != r + 1 && std::find(l.inputs.begin(), l.inputs.end(), r) != l.inputs.end()) return l.index;
  return -1;
}

bool NetSpec::detector() const {
  for (const auto& l : layers)
    if (l.box_loss()) return true;
  return false;
}

int64_t NetSpec::truth_size() const {
  int64_t n = 0;
  for (const auto& l : layers)
    if (l.detector())
      n = std::max<int64_t>(n, l.det().truth_floats());
    else if (l.is(kDetectionKind))
      n = std::max<int64_t>(n, int64_t(l.detection().max_boxes) * 5);
  return n > 0 ? n : output().size();
}

}  // namespace tt
