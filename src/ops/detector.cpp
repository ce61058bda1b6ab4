// [region] (YOLOv2) and [yolo] (YOLOv3): the detection losses (layers/detector.hpp).
#include "layers/detector.hpp"

#include "ops/op.hpp"

namespace tt {
namespace {

class DetectorOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override {
    detector_forward(spec, t.in[0], t.out, st.batch);
  }
  bool is_loss(bool) const override { return true; }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss* parts) const override {
    const DetectorLoss d = detector_delta(spec, DetectorArgs{a.net_w, a.net_h, a.seen}, t.out, a.truth, st.batch, t.dout);
    if (parts) *parts += d;
    return d.cost;
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    detector_backward(spec, t.out, t.dout, t.din[0], st.batch);
  }
  // The activations (a logistic or softmax per entry, about 10 FLOPs each); the loss's
  // matching of truths to boxes is not counted.
  OpCost cost() const override { return {10. * spec.out.size(), float_bytes(2. * spec.out.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_detector_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<DetectorOp>(s); }

}  // namespace tt
