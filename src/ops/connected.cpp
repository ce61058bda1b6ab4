// [connected]: y = x·Wᵀ + b, z = act(y) (Darknet's connected_layer.c, without batch-norm).
#include <cmath>

#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class ConnectedOp final : public Op {
 public:
  using Op::Op;
  // y, before the activation, for backward.
  int64_t saved_floats() const override { return spec.connected().outputs; }
  // dL/dx before it is added (the product overwrites).
  int64_t scratch_floats() const override { return spec.in.size(); }
  void forward(const OpStep& st, const OpTensors& t) const override {
    connected_forward(t.in[0], t.weights, t.biases, t.saved, t.out, st.batch, inputs(), spec.connected().outputs,
                      spec.connected().act);
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    connected_backward(t.dout, t.in[0], t.weights, t.saved, t.grad_weights, t.grad_biases, t.scratch, st.batch,
                       inputs(), spec.connected().outputs, spec.connected().act);
    add_delta(t.din[0], t.scratch, int64_t(st.batch) * inputs());
  }
  // After backward, dout holds dL/dy (connected_backward's contract). dW[o][i] = Σ_n dy[n][o]
  // x[n][i] is at most ||dy[.][o]|| ||x[.][i]|| (Cauchy-Schwarz over the samples): over the
  // matrix, ||dy|| ||x||; db[o] = Σ_n dy[n][o] is at most sqrt(batch) ||dy[.][o]||.
  void add_grad_scales(const OpStep& st, const OpTensors& t, double& weights, double& biases) const override {
    auto sum_sq = [](const float* v, int64_t n) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += double(v[i]) * v[i];
      return s;
    };
    const double dd = sum_sq(t.dout, int64_t(st.batch) * spec.connected().outputs);
    weights += std::sqrt(dd * sum_sq(t.in[0], int64_t(st.batch) * inputs()));
    biases += std::sqrt(double(st.batch) * dd);
  }
  OpCost cost() const override {
    const double w = double(spec.weight_count());
    return {2 * w, float_bytes(w + double(spec.in.size()) + 2. * spec.connected().outputs)};
  }

 private:
  int inputs() const { return int(spec.in.size()); }
};

}  // namespace

std::unique_ptr<Op> make_connected_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<ConnectedOp>(s); }

namespace {
void parse_connected(CfgReader& r, LayerSpec& l) {
  ConnectedParams& fc = l.params.emplace<ConnectedParams>();
  fc.outputs = r.count("output", 1, net_detail::kMaxChannels, "channels a device can hold");
  fc.act = r.act("activation");
  if (r.integer("batch_normalize", 0))
    fail(r.where(r.line_of("batch_normalize")), ": batch_normalize on [connected] is not supported");
  r.reject_unused({});
}

void connected_shape(const NetSpec&, LayerSpec& l, const ShapeCheck&) { l.out = {l.connected().outputs, 1, 1}; }

double connected_flops(const LayerSpec& l) { return 2.0 * double(l.connected().outputs) * double(l.in.size()); }
}  // namespace

extern const OpKind kConnectedKind{"connected", "conn", parse_connected, connected_shape, connected_flops};

}  // namespace tt
