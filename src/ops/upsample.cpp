// [upsample]: nearest-neighbour by `stride`, times `scale` (Darknet's upsample_cpu).
#include "layers/reshape_ops.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class UpsampleOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override {
    upsample_forward(spec, t.in[0], t.out, st.batch);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    upsample_backward(spec, t.dout, t.din[0], st.batch);
  }
  OpCost cost() const override { return {double(spec.out.size()), float_bytes(double(spec.in.size() + spec.out.size()))}; }
};

}  // namespace

std::unique_ptr<Op> make_upsample_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<UpsampleOp>(s); }

}  // namespace tt
