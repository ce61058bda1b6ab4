#include "layers/maxpool.hpp"

#include <limits>

namespace tt {

void maxpool_forward(const TensorView& in, const TensorView& out, int32_t* argmax, const Window& w, int in_w) {
  const int cb = in.cb;
  const Box& ob = out.box;
  const Box& ib = in.box;
  for (int s = 0; s < out.n; ++s)
    for (int blk = 0; blk < out.cblocks(); ++blk)
      for (int oy = ob.y0; oy < ob.y1; ++oy)
        for (int ox = ob.x0; ox < ob.x1; ++ox) {
          float best[16];
          int32_t arg[16];
          for (int c = 0; c < cb; ++c) {
            best[c] = -std::numeric_limits<float>::infinity();
            arg[c] = -1;
          }
          const int y0 = std::max(oy * w.stride - w.pad, ib.y0), y1 = std::min(oy * w.stride - w.pad + w.size, ib.y1);
          const int x0 = std::max(ox * w.stride - w.pad, ib.x0), x1 = std::min(ox * w.stride - w.pad + w.size, ib.x1);
          for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
              const float* p = in.at(s, blk, iy, ix);
              const int32_t idx = iy * in_w + ix;
              for (int c = 0; c < cb; ++c)
                if (p[c] > best[c]) {
                  best[c] = p[c];
                  arg[c] = idx;
                }
            }
          float* q = out.at(s, blk, oy, ox);
          int32_t* a = argmax + (q - out.data);
          for (int c = 0; c < cb; ++c) {
            q[c] = arg[c] < 0 ? 0.f : best[c];  // NaN-free even for an all-padding window
            a[c] = arg[c];
          }
        }
}

void maxpool_backward(const TensorView& diff_out, const Box& region, const Box& out_box, const int32_t* argmax,
                      const TensorView& diff_in, int in_w) {
  const int cb = diff_out.cb;
  const TensorView arg_view{nullptr, diff_out.n, diff_out.c, cb, out_box};
  for (int s = 0; s < diff_out.n; ++s)
    for (int blk = 0; blk < diff_out.cblocks(); ++blk)
      for (int oy = region.y0; oy < region.y1; ++oy)
        for (int ox = region.x0; ox < region.x1; ++ox) {
          const float* g = diff_out.at(s, blk, oy, ox);
          const int32_t* a = argmax + arg_view.offset(s, blk, oy, ox);
          for (int c = 0; c < cb; ++c) {
            if (a[c] < 0) continue;
            const int iy = a[c] / in_w, ix = a[c] % in_w;
            diff_in.at(s, blk, iy, ix)[c] += g[c];
          }
        }
}

}  // namespace tt
