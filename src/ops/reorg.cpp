// [reorg]: space to depth by `stride` (or back, `reverse`), Darknet's reorg_cpu order.
#include "layers/reshape_ops.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
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

namespace {
void parse_reorg(CfgReader& r, LayerSpec& l) {
  ReorgParams& g = l.params.emplace<ReorgParams>();
  g.stride = r.count("stride", 1, net_detail::kMaxDim, "the largest map's side");
  g.reverse = r.integer("reverse", 0) != 0;
  if (r.integer("flatten", 0) || r.integer("extra", 0))
    fail(r.where(r.line()), ": [reorg] with flatten= or extra= is not supported");
  r.reject_unused({});
}

void reorg_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const Shape& cur = l.in;
  const int s = l.reorg().stride;
  // Darknet's index order (reorg_cpu) splits the channels into stride^2 parts in both
  // directions: with fewer or a remainder it would divide by zero or leave cells unset.
  if (!l.reorg().reverse && (cur.h % s != 0 || cur.w % s != 0))
    fail(check.where(), ": a ", cur.h, "x", cur.w, " map does not reorganise by stride ", s,
         " (height and width must be multiples of it)");
  if (int64_t(s) * s > cur.c || cur.c % (s * s) != 0)
    fail(check.where(), ": [reorg] needs channels divisible by stride^2 = ", int64_t(s) * s, ", got ", cur.c);
  l.out = l.reorg().reverse ? check.checked(cur.c / (s * s), int64_t(cur.h) * s, int64_t(cur.w) * s)
                            : check.checked(int64_t(cur.c) * s * s, cur.h / s, cur.w / s);
}
}  // namespace

extern const OpKind kReorgKind{"reorg", nullptr, parse_reorg, reorg_shape, no_flops};

}  // namespace tt
