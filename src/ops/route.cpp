// [route]: the channel concatenation of earlier layers' outputs (Darknet's route_layer.c).
#include "layers/reshape_ops.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class RouteOp final : public Op {
 public:
  RouteOp(const NetSpec& net, const LayerSpec& s) : Op(s) {
    for (int r : s.inputs) sizes_.push_back(net.layers[size_t(r)].out.size());
  }
  void forward(const OpStep& st, const OpTensors& t) const override {
    std::vector<RoutePart> parts;
    for (size_t i = 0; i < sizes_.size(); ++i) parts.push_back({t.in[i], nullptr, sizes_[i]});
    route_forward(parts, t.out, st.batch);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    std::vector<RoutePart> parts;
    for (size_t i = 0; i < sizes_.size(); ++i) parts.push_back({nullptr, t.din[i], sizes_[i]});
    route_backward(parts, t.dout, st.batch);
  }
  OpCost cost() const override { return {0, float_bytes(2. * spec.out.size())}; }

 private:
  std::vector<int64_t> sizes_;  // floats per sample of each input
};

}  // namespace

std::unique_ptr<Op> make_route_op(const NetSpec& net, const LayerSpec& s) { return std::make_unique<RouteOp>(net, s); }

namespace {
void parse_route(CfgReader& r, LayerSpec& l) {
  if (!r.has("layers")) fail(r.where(r.line()), ": [route] needs 'layers='");
  for (double v : r.list("layers")) {
    // checked as a double first: a value out of int's range has no int to convert to
    if (v != std::floor(v) || v < -l.index || v >= l.index)
      fail(r.where(r.line_of("layers")), ": route input ", net_detail::num_text(v),
           " is not an earlier layer (this is layer ", l.index, "; negative values count back from it)");
    l.inputs.push_back(v < 0 ? l.index + int(v) : int(v));
  }
  r.reject_unused({});
}

// Channels concatenated: every input must have the first's height and width. (l.in stays
// the first input's shape.)
void route_shape(const NetSpec& net, LayerSpec& l, const ShapeCheck& check) {
  const Shape& first = l.in;
  int64_t c = first.c;
  for (size_t i = 1; i < l.inputs.size(); ++i) {
    const LayerSpec& r = net.layers[size_t(l.inputs[i])];
    if (r.out.h != first.h || r.out.w != first.w)
      fail(check.where(), ": layer ", r.index, "'s output is ", r.out.h, "x", r.out.w, " but layer ", l.inputs[0],
           "'s is ", first.h, "x", first.w, ": a route concatenates maps of one size");
    c += r.out.c;
  }
  l.out = check.checked(c, first.h, first.w);
}
}  // namespace

extern const OpKind kRouteKind{"route", nullptr, parse_route, route_shape, no_flops};

}  // namespace tt
