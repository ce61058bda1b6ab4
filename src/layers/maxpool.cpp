#include "layers/maxpool.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "layers/simd_block.hpp"

namespace tt {

namespace {

template <int cb>
void forward_b(const TensorView& in, const TensorView& out, const Box& ob, uint8_t* argmax, const Box& argmax_box,
               const Window& w) {
  using K = Block<cb>;
  const TensorView arg_view{nullptr, out.n, out.c, cb, argmax_box};
  const Box& ib = in.box;
  const typename K::V lowest = K::splat(-std::numeric_limits<float>::infinity()), zero = K::splat(0.f);
  for (int s = 0; s < out.n; ++s)
    for (int blk = 0; blk < out.cblocks(); ++blk)
      for (int oy = ob.y0; oy < ob.y1; ++oy)
        for (int ox = ob.x0; ox < ob.x1; ++ox) {
          typename K::V best = lowest;
          typename K::I arg = typename K::I{} + kNoWinner;
          const int wy = oy * w.stride - w.pad, wx = ox * w.stride - w.pad;  // window origin
          const int y0 = std::max(wy, ib.y0), y1 = std::min(wy + w.size, ib.y1);
          const int x0 = std::max(wx, ib.x0), x1 = std::min(wx + w.size, ib.x1);
          for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
              const typename K::V p = K::load(in.at(s, blk, iy, ix));
              const typename K::I wins = p > best;  // strictly: the first of equal maxima wins
              best = wins ? p : best;
              arg = wins ? typename K::I{} + ((iy - wy) * w.size + (ix - wx)) : arg;
            }
          float* q = out.at(s, blk, oy, ox);
          K::store(q, arg == kNoWinner ? zero : best);  // NaN-free even for an all-padding window
          uint8_t* a = argmax + arg_view.offset(s, blk, oy, ox);
          for (int c = 0; c < cb; ++c) a[c] = uint8_t(K::get(arg, c));
        }
}

// Adds each output's gradient to its winner, one window position at a time for all
// channels of a block: every input cell still receives its contributions in the order
// of the outputs (row-major), as a scalar scatter would add them.
template <int cb>
void backward_b(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                const TensorView& diff_in, const Window& w) {
  using K = Block<cb>;
  const TensorView arg_view{nullptr, diff_out.n, diff_out.c, cb, out_box};
  const Box& db = diff_in.box;
  const typename K::V zero = K::splat(0.f);
  for (int s = 0; s < diff_out.n; ++s)
    for (int blk = 0; blk < diff_out.cblocks(); ++blk)
      for (int oy = region.y0; oy < region.y1; ++oy)
        for (int ox = region.x0; ox < region.x1; ++ox) {
          const typename K::V g = K::load(diff_out.at(s, blk, oy, ox));
          const uint8_t* a = argmax + arg_view.offset(s, blk, oy, ox);
          typename K::I arg;
          for (int c = 0; c < cb; ++c) K::set(arg, c, a[c]);
          const int wy = oy * w.stride - w.pad, wx = ox * w.stride - w.pad;
          // winners lie inside the map, and diff_in holds every cell these outputs read
          for (int iy = std::max(wy, db.y0); iy < std::min(wy + w.size, db.y1); ++iy)
            for (int ix = std::max(wx, db.x0); ix < std::min(wx + w.size, db.x1); ++ix) {
              const typename K::I wins = arg == (iy - wy) * w.size + (ix - wx);
              bool any = false;
              for (int c = 0; c < cb; ++c) any |= K::get(wins, c) != 0;
              if (!any) continue;
              float* d = diff_in.at(s, blk, iy, ix);
              K::store(d, K::load(d) + (wins ? g : zero));
            }
        }
}

}  // namespace

void maxpool_forward(const TensorView& in, const TensorView& out, const Box& region, uint8_t* argmax,
                     const Box& argmax_box, const Window& w) {
  with_block(in.cb, [&](auto B) { forward_b<B>(in, out, region, argmax, argmax_box, w); });
}

void copy_winners(const uint8_t* src, const Box& src_box, uint8_t* dst, const Box& dst_box, const TensorView& shape,
                  const Box& region) {
  if (region.empty()) return;
  const TensorView a{nullptr, shape.n, shape.c, shape.cb, src_box}, b{nullptr, shape.n, shape.c, shape.cb, dst_box};
  const size_t row = size_t(region.w()) * size_t(shape.cb);
  for (int s = 0; s < shape.n; ++s)
    for (int blk = 0; blk < shape.cblocks(); ++blk)
      for (int y = region.y0; y < region.y1; ++y)
        std::memcpy(dst + b.offset(s, blk, y, region.x0), src + a.offset(s, blk, y, region.x0), row);
}

void maxpool_backward(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                      const TensorView& diff_in, const Window& w) {
  with_block(diff_out.cb, [&](auto B) { backward_b<B>(diff_out, region, out_box, argmax, diff_in, w); });
}

}  // namespace tt
