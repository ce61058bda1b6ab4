#include "layers/residual.hpp"

#include <algorithm>
#include <type_traits>

#include "layers/affine_act.hpp"
#include "layers/pointwise.hpp"

namespace tt {

namespace {
// f(row of each view) over the rows of `region`, one channel block and sample at a time.
template <class F>
void each_row(const TensorView& v, const Box& r, F&& f) {
  for (int s = 0; s < v.n; ++s)
    for (int blk = 0; blk < v.cblocks(); ++blk)
      for (int y = r.y0; y < r.y1; ++y) f(s, blk, y);
}
void same_layout(const TensorView& a, const TensorView& b) {
  if (a.cb != b.cb || a.c != b.c || a.n != b.n) fail("internal: a residual join of maps in different layouts");
}
// The output cells whose sample lies in `cells` of b's map (unclamped).
Box sampled_by(const Box& cells, int stride) {
  return {ceil_div(cells.y0, stride), ceil_div(cells.y1, stride), ceil_div(cells.x0, stride),
          ceil_div(cells.x1, stride)};
}
// f(A) with the activation as a compile-time constant where it has a vector form, so that
// the loops over a row vectorise (the switch in activate() folds away).
template <class F>
void with_act(Act act, F&& f) {
  if (act == Act::Logistic || act == Act::Ramp) return f(act);
  with_vector_act(act, f);
}
}  // namespace

JoinPairing join_pairing(const LayerSpec& s, const Shape& from) {
  return {std::min(s.out.c, from.c), s.params_as<ShortcutParams>().from_window.stride};
}

void residual_forward(const TensorView& a, const TensorView& b, const TensorView& z, const Box& r, Act act,
                      const JoinPairing& p) {
  same_layout(a, z);
  if (b.n != a.n) fail("internal: a residual join of maps of different batches");
  const int st = p.stride;
  // The same layout, whole blocks joined: a block row at a time.
  if (b.cb == a.cb && a.c % a.cb == 0 && p.channels % a.cb == 0) {
    const int joined = p.channels / a.cb;
    const int64_t k = int64_t(r.w()) * a.cb;
    with_act(act, [&](auto A) {
      with_block(a.cb, [&](auto B) {
        each_row(a, r, [&](int s, int blk, int y) {
          const float* pa = a.at(s, blk, y, r.x0);
          float* pz = z.at(s, blk, y, r.x0);
          if (blk >= joined) {
            for (int64_t i = 0; i < k; ++i) pz[i] = activate(A, pa[i]);
            return;
          }
          const float* pb = b.at(s, blk, y * st, r.x0 * st);
          if (st == 1) {
            for (int64_t i = 0; i < k; ++i) pz[i] = activate(A, pa[i] + pb[i]);
            return;
          }
          for (int x = 0; x < r.w(); ++x)
            for (int i = 0; i < B; ++i) pz[x * B + i] = activate(A, pa[x * B + i] + pb[x * st * B + i]);
        });
      });
    });
    return;
  }
  // Any layouts and strides, a channel at a time (channels padded to a block stay
  // untouched: act(0) of the padding is not always 0).
  for (int s = 0; s < a.n; ++s)
    for (int c = 0; c < a.c; ++c)
      for (int y = r.y0; y < r.y1; ++y) {
        const float* pa = a.at(s, c / a.cb, y, r.x0) + c % a.cb;
        float* pz = z.at(s, c / z.cb, y, r.x0) + c % z.cb;
        if (c < p.channels) {
          const float* pb = b.at(s, c / b.cb, y * st, r.x0 * st) + c % b.cb;
          const int64_t step = int64_t(st) * b.cb;
          for (int x = 0; x < r.w(); ++x) pz[x * z.cb] = activate(act, pa[x * a.cb] + pb[x * step]);
        } else {
          for (int x = 0; x < r.w(); ++x) pz[x * z.cb] = activate(act, pa[x * a.cb]);
        }
      }
}

void residual_backward(const TensorView& g, const TensorView& z, const Box& r, Act act) {
  if (act == Act::Linear) return;
  same_layout(g, z);
  const int64_t k = int64_t(r.w()) * g.cb;
  with_act(act, [&](auto A) {
    each_row(g, r, [&](int s, int blk, int y) {
      float* pg = g.at(s, blk, y, r.x0);
      const float* pz = z.at(s, blk, y, r.x0);
      for (int64_t i = 0; i < k; ++i) pg[i] *= gradient_at_output(A, pz[i]);
    });
  });
}

void residual_add_side(const TensorView& g, const TensorView& db, const Box& cells, const JoinPairing& p) {
  const int st = p.stride;
  const Box o = intersect(sampled_by(cells, st), g.box);
  if (o.empty()) return;
  if (g.cb == db.cb && p.channels % g.cb == 0) {
    with_block(g.cb, [&](auto B) {
      for (int s = 0; s < g.n; ++s)
        for (int blk = 0; blk < p.channels / B; ++blk)
          for (int y = o.y0; y < o.y1; ++y) {
            const float* pg = g.at(s, blk, y, o.x0);
            float* pd = db.at(s, blk, y * st, o.x0 * st);
            if (st == 1) {
              for (int64_t i = 0; i < int64_t(o.w()) * B; ++i) pd[i] += pg[i];
              continue;
            }
            for (int x = 0; x < o.w(); ++x)
              for (int i = 0; i < B; ++i) pd[x * st * B + i] += pg[x * B + i];
          }
    });
    return;
  }
  for (int s = 0; s < g.n; ++s)
    for (int c = 0; c < p.channels; ++c)
      for (int y = o.y0; y < o.y1; ++y) {
        const float* pg = g.at(s, c / g.cb, y, o.x0) + c % g.cb;
        float* pd = db.at(s, c / db.cb, y * st, o.x0 * st) + c % db.cb;
        const int64_t step = int64_t(st) * db.cb;
        for (int x = 0; x < o.w(); ++x) pd[x * step] += pg[x * g.cb];
      }
}

}  // namespace tt
