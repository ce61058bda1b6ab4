// [local]: a locally connected layer, a convolution whose filters differ at every output
// cell (Darknet's local_layer.c): out[f][j] = act(b[f][j] + Σ_q W[j][f][q] col[q][j]) with
// col the im2col of the input, one bias per output value. Weights are [cell][filter][c][ky][kx].
// Each output cell is one product over the micro-batch: [batch][k] by the cell's [filters][k].
#include <cmath>

#include "layers/dense.hpp"
#include "layers/pointwise.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class LocalOp final : public Op {
 public:
  using Op::Op;
  // The input as columns per output cell, [cell][c·ky·kx], for backward's weight gradient.
  int64_t saved_floats() const override { return cells() * k(); }
  // [cell][sample][filter] products, then (backward) the columns' delta per sample.
  int64_t scratch_floats() const override { return cells() * filters() + cells() * k(); }

  void forward(const OpStep& st, const OpTensors& t) const override {
    const int n = st.batch;
    const int64_t L = cells(), K = k(), F = filters(), outs = spec.out.size();
    for (int s = 0; s < n; ++s) im2col(t.in[0] + s * spec.in.size(), t.saved + s * L * K);
    float* y = t.scratch;  // [cell][sample][filter]
    for (int64_t j = 0; j < L; ++j)
      gemm('N', 'T', n, int(F), int(K), t.saved + j * K, L * K, t.weights + j * F * K, K, 0.f, y + j * n * F, F);
    const Act act = spec.local().act;
    for (int s = 0; s < n; ++s)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t j = 0; j < L; ++j)
          t.out[s * outs + f * L + j] = activate(act, y[(j * n + s) * F + f] + t.biases[f * L + j]);
  }

  void backward(const OpStep& st, const OpTensors& t) const override {
    const int n = st.batch;
    const int64_t L = cells(), K = k(), F = filters(), outs = spec.out.size();
    float* g = t.scratch;  // dL/d(pre-activation), [cell][sample][filter]
    const Act act = spec.local().act;
    for (int s = 0; s < n; ++s)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t j = 0; j < L; ++j) {
          const int64_t at = s * outs + f * L + j;
          const float d = t.dout[at] * gradient_at_output(act, t.out[at]);
          g[(j * n + s) * F + f] = d;
          t.grad_biases[f * L + j] += d;
        }
    float* dcol = t.scratch + L * F * n;  // per sample [cell][k]
    for (int64_t j = 0; j < L; ++j) {
      const float* gj = g + j * n * F;
      gemm('T', 'N', int(F), int(K), n, gj, F, t.saved + j * K, L * K, 1.f, t.grad_weights + j * F * K, K);
      gemm('N', 'N', n, int(K), int(F), gj, F, t.weights + j * F * K, K, 0.f, dcol + j * K, L * K);
    }
    for (int s = 0; s < n; ++s) col2im_add(dcol + s * L * K, t.din[0] + s * spec.in.size());
  }

  // After backward the scratch holds g; the saved columns are the input (engine/grad_scale.hpp):
  // per cell ||g_j|| ||col_j||, and sqrt(samples) ||g|| for the biases.
  void add_grad_scales(const OpStep& st, const OpTensors& t, double& weights, double& biases) const override {
    const int n = st.batch;
    const int64_t L = cells(), K = k(), F = filters();
    double w2 = 0, g2_all = 0;
    for (int64_t j = 0; j < L; ++j) {
      double g2 = 0, c2 = 0;
      for (int64_t i = 0; i < n * F; ++i) g2 += double(t.scratch[j * n * F + i]) * t.scratch[j * n * F + i];
      for (int s = 0; s < n; ++s)
        for (int64_t q = 0; q < K; ++q) {
          const double v = t.saved[(s * L + j) * K + q];
          c2 += v * v;
        }
      w2 += g2 * c2;
      g2_all += g2;
    }
    weights += std::sqrt(w2);
    biases += std::sqrt(double(n) * g2_all);
  }

  OpCost cost() const override {
    const double w = double(spec.weight_count());
    return {2 * w, float_bytes(w + double(spec.in.size()) + 2. * spec.out.size())};
  }

 private:
  int64_t cells() const { return int64_t(spec.out.h) * spec.out.w; }
  int64_t filters() const { return spec.local().filters; }
  int64_t k() const { return int64_t(spec.in.c) * spec.local().win.size * spec.local().win.size; }

  // Visits (column entry, input cell) pairs of one sample: cell j, q = (c, ky, kx); `in` < 0
  // for a padding cell.
  template <class F>
  void each_tap(F&& f) const {
    const Window& w = spec.local().win;
    const Shape& in = spec.in;
    const int64_t K = k();
    for (int oy = 0; oy < spec.out.h; ++oy)
      for (int ox = 0; ox < spec.out.w; ++ox) {
        const int64_t j = int64_t(oy) * spec.out.w + ox;
        int64_t q = 0;
        for (int c = 0; c < in.c; ++c)
          for (int ky = 0; ky < w.size; ++ky)
            for (int kx = 0; kx < w.size; ++kx, ++q) {
              const int y = oy * w.stride - w.pad + ky, x = ox * w.stride - w.pad + kx;
              const bool inside = y >= 0 && y < in.h && x >= 0 && x < in.w;
              f(j * K + q, inside ? (int64_t(c) * in.h + y) * in.w + x : -1);
            }
      }
  }
  void im2col(const float* in, float* col) const {
    each_tap([&](int64_t at, int64_t src) { col[at] = src >= 0 ? in[src] : 0.f; });
  }
  void col2im_add(const float* col, float* din) const {
    each_tap([&](int64_t at, int64_t dst) {
      if (dst >= 0) din[dst] += col[at];
    });
  }
};

}  // namespace

std::unique_ptr<Op> make_local_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<LocalOp>(s); }

namespace {
void parse_local(CfgReader& r, LayerSpec& l) {
  LocalParams& p = l.params.emplace<LocalParams>();
  p.filters = r.count("filters", 1, net_detail::kMaxChannels, "channels a device can hold");
  p.win.size = r.count("size", 1, net_detail::kMaxDim, "the largest map's side");
  p.win.stride = r.count("stride", 1, net_detail::kMaxDim, "the largest map's side");
  p.win.pad = r.integer("pad", 0);
  if (p.win.pad < 0) fail(r.where(r.line_of("pad")), ": pad must be >= 0, got ", p.win.pad);
  // Darknet sizes the output as if `pad` meant "same" ((h - 1)/stride + 1) but pads `pad`
  // cells: the two agree only for size = 2*pad + 1, else it reads past its columns.
  if (p.win.pad > 0 && p.win.size != 2 * p.win.pad + 1)
    fail(r.where(r.line_of("pad")), ": [local] with pad=", p.win.pad, " needs size=", 2 * p.win.pad + 1,
         " (Darknet pads pad cells but sizes the output as if the padding kept the map), got size=", p.win.size);
  p.act = r.act("activation");
  r.reject_unused({});
}

void local_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const Window& w = l.local().win;
  const int64_t span_h = int64_t(l.in.h) + 2 * w.pad - w.size, span_w = int64_t(l.in.w) + 2 * w.pad - w.size;
  if (span_h < 0 || span_w < 0)
    fail(check.where(), ": a ", w.size, "x", w.size, " window does not fit its ", l.in.h, "x", l.in.w, " input");
  l.out = check.checked(l.local().filters, span_h / w.stride + 1, span_w / w.stride + 1);
}

double local_flops(const LayerSpec& l) { return 2.0 * double(l.weight_count()); }
}  // namespace

extern const OpKind kLocalKind{"local", nullptr, parse_local, local_shape, local_flops};

}  // namespace tt
