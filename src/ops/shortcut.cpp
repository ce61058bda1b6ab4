// [shortcut]: a residual connection. The previous layer's output plus an earlier layer's
// (`from=`), then an activation: Darknet's shortcut_layer.c and shortcut_cpu. Maps of
// different sizes are added as Darknet adds them: over the first min(C) channels, a larger
// `from` map sampled with a stride (every k-th cell), a smaller one added to every k-th
// cell; the other cells keep the previous layer's value.
#include <algorithm>
#include <cmath>

#include "layers/pointwise.hpp"
#include "model/cfg_reader.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

// Cell (k, j, i) of the min(C) x min(H) x min(W) region pairs output cell
// (k, j·sample, i·sample) with `from` cell (k, j·stride, i·stride); the stride is the
// one shortcut_shape set (ShortcutParams::from_window, which the tiled join reads too).
struct Pairing {
  int c, h, w;  // the region
  int stride = 1, sample = 1;
  Shape out, from;

  Pairing(const Shape& o, const Shape& f, int from_stride) : stride(from_stride), out(o), from(f) {
    c = std::min(o.c, f.c);
    h = std::min(o.h, f.h);
    w = std::min(o.w, f.w);
    sample = std::max(1, o.w / f.w);
  }
  // f(output index, from index) over one sample's region.
  template <class F>
  void each(F&& f) const {
    for (int k = 0; k < c; ++k)
      for (int j = 0; j < h; ++j)
        for (int i = 0; i < w; ++i)
          f((int64_t(k) * out.h + int64_t(j) * sample) * out.w + int64_t(i) * sample,
            (int64_t(k) * from.h + int64_t(j) * stride) * from.w + int64_t(i) * stride);
  }
};

class ShortcutOp final : public Op {
 public:
  ShortcutOp(const NetSpec& net, const LayerSpec& s)
      : Op(s),
        act_(s.params_as<ShortcutParams>().act),
        pair_(s.out, net.layers[size_t(s.inputs[1])].out, s.params_as<ShortcutParams>().from_window.stride) {}
  void forward(const OpStep& st, const OpTensors& t) const override {
    const int64_t n = spec.out.size(), m = pair_.from.size();
    for (int b = 0; b < st.batch; ++b) {
      float* out = t.out + b * n;
      const float* from = t.in[1] + b * m;
      std::copy(t.in[0] + b * n, t.in[0] + (b + 1) * n, out);
      pair_.each([&](int64_t o, int64_t f) { out[o] = out[o] + from[f]; });
      for (int64_t i = 0; i < n; ++i) out[i] = activate(act_, out[i]);
    }
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    const int64_t n = spec.out.size(), m = pair_.from.size();
    for (int64_t i = 0; i < st.batch * n; ++i) t.dout[i] *= gradient_at_output(act_, t.out[i]);
    add_delta(t.din[0], t.dout, st.batch * n);
    for (int b = 0; b < st.batch; ++b) {
      const float* g = t.dout + b * n;
      float* din = t.din[1] + b * m;
      pair_.each([&](int64_t o, int64_t f) { din[f] += g[o]; });
    }
  }
  OpCost cost() const override {
    return {double(spec.out.size()), float_bytes(2. * spec.out.size() + double(pair_.c) * pair_.h * pair_.w)};
  }

 private:
  Act act_;
  Pairing pair_;
};

}  // namespace

std::unique_ptr<Op> make_shortcut_op(const NetSpec& net, const LayerSpec& s) {
  return std::make_unique<ShortcutOp>(net, s);
}

namespace {
void parse_shortcut(CfgReader& r, LayerSpec& l) {
  if (!r.has("from")) fail(r.where(r.line()), ": [shortcut] needs 'from=' (the layer whose output it adds)");
  const double v = r.num("from", 0);
  if (v != std::floor(v) || v < -l.index || v >= l.index)
    fail(r.where(r.line_of("from")), ": shortcut input ", r.text_of("from"), " is not an earlier layer (this is layer ",
         l.index, "; negative values count back from it)");
  l.inputs = {l.index - 1, v < 0 ? l.index + int(v) : int(v)};
  l.params.emplace<ShortcutParams>().act = r.act("activation", "linear");
  r.reject_unused({});
}

// The previous layer's shape. Darknet asserts that the maps' sizes are the same or
// integer multiples, alike along both axes.
void shortcut_shape(const NetSpec& net, LayerSpec& l, const ShapeCheck& check) {
  const Shape& f = net.layers[size_t(l.inputs[1])].out;
  if (f.w / l.in.w != f.h / l.in.h || l.in.w / f.w != l.in.h / f.h)
    fail(check.where(), ": layer ", l.inputs[1], "'s ", f.w, "x", f.h, " map cannot be added to layer ", l.inputs[0],
         "'s ", l.in.w, "x", l.in.h, " (the sizes must be equal or integer multiples alike in width and height)");
  l.out = l.in;
  ShortcutParams& p = l.params_as<ShortcutParams>();
  p.tileable = f.w >= l.in.w && f.h >= l.in.h;
  p.from_window.stride = std::max(1, f.w / l.in.w);
}
}  // namespace

extern const OpKind kShortcutKind{"shortcut", nullptr, parse_shortcut, shortcut_shape, flops_per_input};

}  // namespace tt
