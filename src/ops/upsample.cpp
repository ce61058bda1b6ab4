// [upsample]: nearest-neighbour by `stride`, times `scale` (Darknet's upsample_cpu).
#include "layers/reshape_ops.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
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
  OpCost cost() const override {
    return {double(spec.out.size()), float_bytes(double(spec.in.size() + spec.out.size()))};
  }
};

}  // namespace

std::unique_ptr<Op> make_upsample_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<UpsampleOp>(s); }

namespace {
void parse_upsample(CfgReader& r, LayerSpec& l) {
  UpsampleParams& u = l.params.emplace<UpsampleParams>();
  u.stride = r.integer("stride", 2);
  if (u.stride == 0) fail(r.where(r.line_of("stride")), ": upsample stride 0");
  r.at_most("stride", std::abs(int64_t(u.stride)), net_detail::kMaxDim, "the largest map's side");
  u.reverse = u.stride < 0;  // Darknet: a negative stride downsamples (sums)
  u.stride = std::abs(u.stride);
  u.scale = float(r.num("scale", 1));
  r.reject_unused({});
}

void upsample_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const Shape& cur = l.in;
  const UpsampleParams& u = l.upsample();
  if (u.reverse) {
    if (cur.h % u.stride != 0 || cur.w % u.stride != 0)
      fail(check.where(), ": a ", cur.h, "x", cur.w, " map does not downsample by ", u.stride);
    l.out = {cur.c, cur.h / u.stride, cur.w / u.stride};
  } else {
    l.out = check.checked(cur.c, int64_t(cur.h) * u.stride, int64_t(cur.w) * u.stride);
  }
}
}  // namespace

extern const OpKind kUpsampleKind{"upsample", nullptr, parse_upsample, upsample_shape, no_flops};

}  // namespace tt
