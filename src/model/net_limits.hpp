// Internal to src/model: the limits both the .cfg parser (cfg_parse.cpp) and the shape
// resolution (net_shapes.cpp) enforce, and the resolution's entry point.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "model/net_spec.hpp"

namespace tt::net_detail {

// What a device can hold, checked before anything is allocated: a map's height or width, a
// window, a stride; a map's channels (and a layer's filters or outputs); the elements of one
// layer's output map per picture, of its weights, and of the whole net's parameters.
constexpr int kMaxDim = 65536;
constexpr int kMaxChannels = 1 << 20;
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;
constexpr int kMaxBatch = 65536;

// A number for a message: 5, 2.5, 1e+12 (not std::to_string's 5.000000).
inline std::string num_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

// Every layer's input and output shape from the [net] input size, refused where a shape
// does not fit its layer or is more than a device can hold (net_shapes.cpp).
void resolve_shapes(NetSpec& net);

}  // namespace tt::net_detail
