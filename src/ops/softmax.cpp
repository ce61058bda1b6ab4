// [softmax] over each sample's values and, as the net's last layer, the cross-entropy
// loss. As in Darknet the delta passes through unchanged: the loss's delta p - truth
// already is the gradient of softmax + cross-entropy with respect to the logits.
#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class SoftmaxOp final : public PassThroughLoss {
 public:
  using PassThroughLoss::PassThroughLoss;
  void forward(const OpStep& st, const OpTensors& t) const override {
    softmax_forward(t.in[0], t.out, st.batch, int(spec.in.size()));
  }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss*) const override {
    return softmax_cross_entropy(t.out, a.truth, t.dout, st.batch * spec.out.size());
  }
  OpCost cost() const override { return {20. * spec.in.size(), float_bytes(2. * spec.in.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_softmax_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<SoftmaxOp>(s); }

namespace {
void parse_softmax(CfgReader& r, LayerSpec&) {
  if (r.integer("groups", 1) != 1)
    fail(r.where(r.line_of("groups")), ": softmax groups other than 1 are not supported");
  r.reject_unused({"temperature", "spatial", "noloss"});
}
}  // namespace

extern const OpKind kSoftmaxKind{"softmax", "soft", parse_softmax, same_shape, flops_per_input};

}  // namespace tt
