// [cost]: the sum of squared errors against the truth (Darknet's SSE cost layer); its
// output is its input, and as the net's last layer its delta is output - truth.
#include <algorithm>

#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

// Darknet's SECRET_NUM: a truth value that a masked cost leaves out (a class tree's groups
// that hold none of the picture's classes).
constexpr float kMaskedTruth = -1234;

struct CostParams {
  bool masked = false;  // type=masked: truths equal to kMaskedTruth add nothing
};

class CostOp final : public PassThroughLoss {
 public:
  using PassThroughLoss::PassThroughLoss;
  void forward(const OpStep& st, const OpTensors& t) const override {
    std::copy_n(t.in[0], size_t(st.batch * spec.in.size()), t.out);
  }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss*) const override {
    const int64_t n = st.batch * spec.out.size();
    if (!spec.params_as<CostParams>().masked) return sse(t.out, a.truth, t.dout, n);
    double loss = 0;  // masked: Darknet sets the input to the truth there, so its error is 0
    for (int64_t i = 0; i < n; ++i) {
      const float d = a.truth[i] == kMaskedTruth ? 0.f : t.out[i] - a.truth[i];
      t.dout[i] = d;
      loss += double(d) * d;
    }
    return loss;
  }
  OpCost cost() const override { return {3. * spec.in.size(), float_bytes(2. * spec.in.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_cost_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<CostOp>(s); }

namespace {
void parse_cost(CfgReader& r, LayerSpec& l) {
  const std::string t = r.str("type", "sse");
  if (t != "sse" && t != "masked")
    fail(r.where(r.line_of("type")), ": cost type '", t, "' is not supported (sse, masked)");
  l.params.emplace<CostParams>().masked = t == "masked";
  r.reject_unused({"scale", "ratio", "noobject_scale", "thresh"});
}
}  // namespace

extern const OpKind kCostKind{"cost", nullptr, parse_cost, same_shape, flops_per_input};

}  // namespace tt
