// [reorg]: space to depth by `stride` (or back, `reverse`), Darknet's reorg_cpu order; or,
// with flatten= or extra=, Darknet's transposition or zero padding (reorg_layer.c).
#include <algorithm>

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
  void forward(const OpStep& st, const OpTensors& t) const override {
    const ReorgParams& p = spec.reorg();
    const int64_t in = spec.in.size(), out = spec.out.size();
    if (p.flatten) {
      for (int b = 0; b < st.batch; ++b) transpose(t.in[0] + b * in, t.out + b * out, !p.reverse, false);
    } else if (p.extra > 0) {
      for (int b = 0; b < st.batch; ++b) {
        std::copy_n(t.in[0] + b * in, in, t.out + b * out);
        std::fill_n(t.out + b * out + in, p.extra, 0.f);
      }
    } else {
      reorg_forward(spec, t.in[0], t.out, st.batch);
    }
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    const ReorgParams& p = spec.reorg();
    const int64_t in = spec.in.size(), out = spec.out.size();
    if (p.flatten) {
      for (int b = 0; b < st.batch; ++b) transpose(t.dout + b * out, t.din[0] + b * in, p.reverse, true);
    } else if (p.extra > 0) {
      for (int b = 0; b < st.batch; ++b) add_delta(t.din[0] + b * in, t.dout + b * out, in);
    } else {
      reorg_backward(spec, t.dout, t.din[0], st.batch);
    }
  }
  OpCost cost() const override { return {0, float_bytes(2. * spec.out.size())}; }

 private:
  // Darknet's flatten() on one picture of the input's c channels x h·w cells: with
  // `to_cells`, [channel][cell] -> [cell][channel], else back. Adds into `y` if `add`.
  void transpose(const float* x, float* y, bool to_cells, bool add) const {
    const int64_t c = spec.in.c, cells = int64_t(spec.in.h) * spec.in.w;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < cells; ++i) {
        const int64_t plane = ch * cells + i, packed = i * c + ch;
        float& dst = y[to_cells ? packed : plane];
        const float v = x[to_cells ? plane : packed];
        dst = add ? dst + v : v;
      }
  }
};

}  // namespace

std::unique_ptr<Op> make_reorg_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<ReorgOp>(s); }

namespace {
void parse_reorg(CfgReader& r, LayerSpec& l) {
  ReorgParams& g = l.params.emplace<ReorgParams>();
  g.stride = r.count("stride", 1, net_detail::kMaxDim, "the largest map's side");
  g.reverse = r.integer("reverse", 0) != 0;
  g.flatten = r.integer("flatten", 0) != 0;
  g.extra = r.integer("extra", 0);
  if (g.extra < 0) fail(r.where(r.line_of("extra")), ": extra must be >= 0, got ", g.extra);
  r.at_most("extra", g.extra, net_detail::kMaxChannels, "values a device can append");
  // Darknet would copy `extra` values past the input it flattens.
  if (g.flatten && g.extra > 0) fail(r.where(r.line_of("extra")), ": [reorg] takes flatten= or extra=, not both");
  r.reject_unused({});
}

void reorg_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const Shape& cur = l.in;
  const int s = l.reorg().stride;
  // extra ignores the stride (a flat vector); flatten keeps the shape the stride gives.
  if (!l.reorg().flatten && l.reorg().extra > 0) {
    l.out = check.checked(cur.size() + l.reorg().extra, 1, 1);
    return;
  }
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
