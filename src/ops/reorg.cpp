// [reorg]: space to depth by `stride` (or back, `reverse`), Darknet's reorg_cpu order.
#include "layers/reshape_ops.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class ReorgOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override { reorg_forward(spec, t.in[0], t.out, st.batch); }
  void backward(const OpStep& st, const OpTensors& t) const override {
    reorg_backward(spec, t.dout, t.din[0], st.batch);
  }
  OpCost cost() const override { return {0, float_bytes(2. * spec.out.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_reorg_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<ReorgOp>(s); }

}  // namespace tt
