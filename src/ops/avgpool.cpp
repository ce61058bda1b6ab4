// [avgpool]: the mean of each channel over the whole map.
#include "layers/dense.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class AvgPoolOp final : public Op {
 public:
  using Op::Op;
  int64_t scratch_floats() const override { return spec.in.size(); }
  void forward(const OpStep& st, const OpTensors& t) const override {
    avgpool_forward(t.in[0], t.out, st.batch, spec.in.c, spec.in.h * spec.in.w);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    avgpool_backward(t.dout, t.scratch, st.batch, spec.in.c, spec.in.h * spec.in.w);
    add_delta(t.din[0], t.scratch, st.batch * spec.in.size());
  }
  OpCost cost() const override {
    return {double(spec.in.size()), float_bytes(double(spec.in.size() + spec.out.size()))};
  }
};

}  // namespace

std::unique_ptr<Op> make_avgpool_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<AvgPoolOp>(s); }

namespace {
void avgpool_shape(const NetSpec&, LayerSpec& l, const ShapeCheck&) { l.out = {l.in.c, 1, 1}; }
}  // namespace

extern const OpKind kAvgPoolKind{"avgpool", "avg", parse_no_options, avgpool_shape, flops_per_input};

}  // namespace tt
