// The names of a net's parts and what a NetSpec answers about itself. Reading a .cfg is
// cfg_parse.cpp, resolving and checking its shapes net_shapes.cpp.
#include "model/net_spec.hpp"

#include <algorithm>
#include <cmath>

namespace tt {

const char* layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::Conv:
      return "convolutional";
    case LayerType::MaxPool:
      return "maxpool";
    case LayerType::AvgPool:
      return "avgpool";
    case LayerType::Connected:
      return "connected";
    case LayerType::Softmax:
      return "softmax";
    case LayerType::Dropout:
      return "dropout";
    case LayerType::Cost:
      return "cost";
    case LayerType::Route:
      return "route";
    case LayerType::Reorg:
      return "reorg";
    case LayerType::Upsample:
      return "upsample";
    case LayerType::Region:
      return "region";
    case LayerType::Yolo:
      return "yolo";
  }
  return "?";
}

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

int64_t LayerSpec::weight_count() const {
  if (type == LayerType::Conv) return int64_t(filters) * in.c * win.size * win.size;
  if (type == LayerType::Connected) return int64_t(outputs) * in.size();
  return 0;
}

int64_t LayerSpec::param_count() const {
  if (!has_params()) return 0;
  return weight_count() + out.c * (batch_normalize ? 2 : 1);
}

double LayerSpec::forward_flops() const {
  switch (type) {
    case LayerType::Conv:
      return 2.0 * out.size() * in.c * win.size * win.size;
    case LayerType::Connected:
      return 2.0 * double(outputs) * in.size();
    case LayerType::MaxPool:
      return double(out.size()) * win.size * win.size;
    case LayerType::Route:
    case LayerType::Reorg:
    case LayerType::Upsample:
      return 0;
    default:
      return double(in.size());
  }
}

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
      for (int r : l.route) cut = std::min(cut, r + 1);
  return cut;
}

std::vector<int> NetSpec::inputs_of(int l) const {
  if (layers[size_t(l)].type == LayerType::Route) return layers[size_t(l)].route;
  if (l == 0) return {};
  return {l - 1};
}

bool NetSpec::detector() const {
  for (const auto& l : layers)
    if (l.detector()) return true;
  return false;
}

int64_t NetSpec::truth_size() const {
  int64_t n = 0;
  for (const auto& l : layers)
    if (l.detector()) n = std::max<int64_t>(n, l.det.truth_floats());
  return n > 0 ? n : output().size();
}

}  // namespace tt
