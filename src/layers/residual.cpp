#include "layers/residual.hpp"

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
}  // namespace

void residual_forward(const TensorView& a, const TensorView& b, const TensorView& z, const Box& r, Act act) {
  same_layout(a, z);
  // b in another layout (a join of a plain map and a blocked one), or channels padded to a
  // block (act(0) of the padding is not always 0: it must stay untouched).
  if (b.cb != a.cb || a.c % a.cb != 0) {
    if (b.c != a.c || b.n != a.n) fail("internal: a residual join of maps of different shapes");
    for (int s = 0; s < a.n; ++s)
      for (int c = 0; c < a.c; ++c)
        for (int y = r.y0; y < r.y1; ++y) {
          const float* pa = a.at(s, c / a.cb, y, r.x0) + c % a.cb;
          const float* pb = b.at(s, c / b.cb, y, r.x0) + c % b.cb;
          float* pz = z.at(s, c / z.cb, y, r.x0) + c % z.cb;
          for (int x = 0; x < r.w(); ++x) pz[x * z.cb] = activate(act, pa[x * a.cb] + pb[x * b.cb]);
        }
    return;
  }
  same_layout(a, b);
  const int64_t k = int64_t(r.w()) * a.cb;
  each_row(a, r, [&](int s, int blk, int y) {
    const float *pa = a.at(s, blk, y, r.x0), *pb = b.at(s, blk, y, r.x0);
    float* pz = z.at(s, blk, y, r.x0);
    for (int64_t i = 0; i < k; ++i) pz[i] = activate(act, pa[i] + pb[i]);
  });
}

void residual_backward(const TensorView& g, const TensorView& z, const Box& r, Act act) {
  if (act == Act::Linear) return;
  same_layout(g, z);
  const int64_t k = int64_t(r.w()) * g.cb;
  each_row(g, r, [&](int s, int blk, int y) {
    float* pg = g.at(s, blk, y, r.x0);
    const float* pz = z.at(s, blk, y, r.x0);
    for (int64_t i = 0; i < k; ++i) pg[i] *= gradient_at_output(act, pz[i]);
  });
}

}  // namespace tt
