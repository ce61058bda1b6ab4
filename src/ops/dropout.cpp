// [dropout]: in training, each value is zeroed with probability p and the rest scaled by
// 1/(1-p), with a mask drawn from (seed, layer, step, sample, index); outside training
// the identity.
#include <algorithm>

#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class DropoutOp final : public Op {
 public:
  using Op::Op;
  int64_t scratch_floats() const override { return spec.in.size(); }
  void forward(const OpStep& st, const OpTensors& t) const override {
    if (st.training)
      dropout_apply(t.in[0], t.out, spec.in.size(), st.batch, spec.dropout().probability, mask_seed(st), st.step);
    else
      std::copy_n(t.in[0], size_t(st.batch * spec.in.size()), t.out);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    dropout_apply(t.dout, t.scratch, spec.in.size(), st.batch, spec.dropout().probability, mask_seed(st), st.step);
    add_delta(t.din[0], t.scratch, st.batch * spec.in.size());
  }
  OpCost cost() const override { return {double(spec.in.size()), float_bytes(2. * spec.in.size())}; }

 private:
  uint64_t mask_seed(const OpStep& st) const { return st.seed + uint64_t(spec.index); }
};

}  // namespace

std::unique_ptr<Op> make_dropout_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<DropoutOp>(s); }

namespace {
void parse_dropout(CfgReader& r, LayerSpec& l) {
  DropoutParams& d = l.params.emplace<DropoutParams>();
  d.probability = float(r.num("probability", 0.5));
  if (!(d.probability >= 0 && d.probability < 1))
    fail(r.where(r.line_of("probability")), ": dropout probability must be in [0, 1)");
  r.reject_unused({});
}
}  // namespace

extern const OpKind kDropoutKind{"dropout", nullptr, parse_dropout, same_shape, flops_per_input};

}  // namespace tt
