// [cost]: the sum of squared errors against the truth (Darknet's SSE cost layer); its
// output is its input, and as the net's last layer its delta is output - truth.
#include <algorithm>

#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class CostOp final : public PassThroughLoss {
 public:
  using PassThroughLoss::PassThroughLoss;
  void forward(const OpStep& st, const OpTensors& t) const override {
    std::copy_n(t.in[0], size_t(st.batch * spec.in.size()), t.out);
  }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss*) const override {
    return sse(t.out, a.truth, t.dout, st.batch * spec.out.size());
  }
  OpCost cost() const override { return {3. * spec.in.size(), float_bytes(2. * spec.in.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_cost_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<CostOp>(s); }

namespace {
void parse_cost(CfgReader& r, LayerSpec&) {
  const std::string t = r.str("type", "sse");
  if (t != "sse") fail(r.where(r.line_of("type")), ": cost type '", t, "' is not supported (sse)");
  r.reject_unused({"scale", "ratio", "noobject_scale", "thresh"});
}
}  // namespace

extern const OpKind kCostKind{"cost", nullptr, parse_cost, same_shape, flops_per_input};

}  // namespace tt
