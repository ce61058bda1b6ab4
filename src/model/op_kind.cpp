#include "model/op_kind.hpp"

#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"

namespace tt {

using namespace net_detail;

std::string ShapeCheck::where() const {
  return net_.path + ":" + std::to_string(l_.line) + ": [" + l_.type_name() + "] (layer " + std::to_string(l_.index) +
         ")";
}

Shape ShapeCheck::checked(int64_t c, int64_t h, int64_t w) const {
  if (h > kMaxDim || w > kMaxDim || c > kMaxChannels || c * h * w > kMaxElements)
    fail(where(), ": its output would be ", c, "x", h, "x", w, ", larger than a device can hold (at most ", kMaxDim,
         " rows and columns, ", kMaxChannels, " channels, ", kMaxElements, " values per picture)");
  return Shape{int(c), int(h), int(w)};
}

void parse_no_options(CfgReader& r, LayerSpec&) { r.reject_unused({}); }
void same_shape(const NetSpec&, LayerSpec& l, const ShapeCheck&) { l.out = l.in; }
double flops_per_input(const LayerSpec& l) { return double(l.in.size()); }
double no_flops(const LayerSpec&) { return 0; }

}  // namespace tt
