// [route]: the channel concatenation of earlier layers' outputs (Darknet's route_layer.c).
#include "layers/reshape_ops.hpp"
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

}  // namespace tt
