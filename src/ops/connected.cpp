// [connected]: y = x·Wᵀ + b, z = act(y) (Darknet's connected_layer.c, without batch-norm).
#include "layers/dense.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class ConnectedOp final : public Op {
 public:
  using Op::Op;
  // y, before the activation, for backward.
  int64_t saved_floats() const override { return spec.outputs; }
  // dL/dx before it is added (the product overwrites).
  int64_t scratch_floats() const override { return spec.in.size(); }
  void forward(const OpStep& st, const OpTensors& t) const override {
    connected_forward(t.in[0], t.weights, t.biases, t.saved, t.out, st.batch, inputs(),
                      spec.outputs, spec.act);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    connected_backward(t.dout, t.in[0], t.weights, t.saved, t.grad_weights, t.grad_biases, t.scratch, st.batch,
                       inputs(), spec.outputs, spec.act);
    add_delta(t.din[0], t.scratch, int64_t(st.batch) * inputs());
  }
  OpCost cost() const override {
    const double w = double(spec.weight_count());
    return {2 * w, float_bytes(w + double(spec.in.size()) + 2. * spec.outputs)};
  }

 private:
  int inputs() const { return int(spec.in.size()); }
};

}  // namespace

std::unique_ptr<Op> make_connected_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<ConnectedOp>(s); }

}  // namespace tt
