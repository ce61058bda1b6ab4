#include "layers/maxpool.hpp"

#include <limits>

namespace tt {

namespace {

template <int cb>
void forward_b(const TensorView& in, const TensorView& out, uint8_t* argmax, const Window& w) {
  const Box& ob = out.box;
  const Box& ib = in.box;
  for (int s = 0; s < out.n; ++s)
    for (int blk = 0; blk < out.cblocks(); ++blk)
      for (int oy = ob.y0; oy < ob.y1; ++oy)
        for (int ox = ob.x0; ox < ob.x1; ++ox) {
          float best[cb];
          uint8_t arg[cb];
          for (int c = 0; c < cb; ++c) {
            best[c] = -std::numeric_limits<float>::infinity();
            arg[c] = kNoWinner;
          }
          const int wy = oy * w.stride - w.pad, wx = ox * w.stride - w.pad;  // window origin
          const int y0 = std::max(wy, ib.y0), y1 = std::min(wy + w.size, ib.y1);
          const int x0 = std::max(wx, ib.x0), x1 = std::min(wx + w.size, ib.x1);
          for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
              const float* p = in.at(s, blk, iy, ix);
              const auto idx = uint8_t((iy - wy) * w.size + (ix - wx));
              for (int c = 0; c < cb; ++c)
                if (p[c] > best[c]) {
                  best[c] = p[c];
                  arg[c] = idx;
                }
            }
          float* q = out.at(s, blk, oy, ox);
          uint8_t* a = argmax + (q - out.data);
          for (int c = 0; c < cb; ++c) {
            q[c] = arg[c] == kNoWinner ? 0.f : best[c];  // NaN-free even for an all-padding window
            a[c] = arg[c];
          }
        }
}

template <int cb>
void backward_b(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                const TensorView& diff_in, const Window& w) {
  const TensorView arg_view{nullptr, diff_out.n, diff_out.c, cb, out_box};
  int8_t ky[256], kx[256];  // window position → row and column offsets (no division per cell)
  for (int k = 0; k < w.size * w.size; ++k) {
    ky[k] = int8_t(k / w.size);
    kx[k] = int8_t(k % w.size);
  }
  for (int s = 0; s < diff_out.n; ++s)
    for (int blk = 0; blk < diff_out.cblocks(); ++blk)
      for (int oy = region.y0; oy < region.y1; ++oy)
        for (int ox = region.x0; ox < region.x1; ++ox) {
          const float* g = diff_out.at(s, blk, oy, ox);
          const uint8_t* a = argmax + arg_view.offset(s, blk, oy, ox);
          for (int c = 0; c < cb; ++c) {
            if (a[c] == kNoWinner) continue;
            const int iy = oy * w.stride - w.pad + ky[a[c]], ix = ox * w.stride - w.pad + kx[a[c]];
            diff_in.at(s, blk, iy, ix)[c] += g[c];
          }
        }
}

}  // namespace

void maxpool_forward(const TensorView& in, const TensorView& out, uint8_t* argmax, const Window& w) {
  with_block(in.cb, [&](auto B) { forward_b<B>(in, out, argmax, w); });
}

void maxpool_backward(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                      const TensorView& diff_in, const Window& w) {
  with_block(diff_out.cb, [&](auto B) { backward_b<B>(diff_out, region, out_box, argmax, diff_in, w); });
}

}  // namespace tt
