#include "layers/maxpool.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "layers/affine_act.hpp"
#include "layers/simd_block.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

// One output pixel's window (rows y0..y1, columns x0..x1 of the input, window origin
// wy, wx), all channels of a block at once. KS > 0: a window of KS x KS inside the input,
// with constant trip counts.
// `pre` maps an input block to the value pooled (identity, or AffineAct).
template <int cb, int KS, class Pre>
inline void pool_pixel(const float* in0, int64_t in_row, const Box& ib, int wy, int wx, int y0, int y1, int x0, int x1,
                       int size, float* q, uint8_t* a, const Pre& pre) {
  using K = Block<cb>;
  typename K::V best = K::splat(-std::numeric_limits<float>::infinity());
  typename K::I arg = typename K::I{} + kNoWinner;
  auto visit = [&](int iy, int ix) {
    const typename K::V p = pre(K::load(in0 + (iy - ib.y0) * in_row + int64_t(ix - ib.x0) * cb));
    const typename K::I wins = p > best;  // strictly: the first of equal maxima wins
    best = wins ? p : best;
    arg = wins ? typename K::I{} + ((iy - wy) * size + (ix - wx)) : arg;
  };
  if constexpr (KS > 0) {
    for (int dy = 0; dy < KS; ++dy)
      for (int dx = 0; dx < KS; ++dx) visit(wy + dy, wx + dx);
    K::store(q, best);
  } else {
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) visit(iy, ix);
    K::store(q, arg == kNoWinner ? K::splat(0.f) : best);  // NaN-free even for an all-padding window
  }
  K::store_bytes(a, arg);
}

// KS: the window size as a constant (0: any), for the pixels whose window lies inside
// the input; the others clamp theirs. Same cells in the same order either way.
template <int cb, int KS, class PreOf>
void forward_b(const TensorView& in, const TensorView& out, const Box& ob, uint8_t* argmax, const Box& argmax_box,
               const Window& w, const PreOf& pre_of) {
  const TensorView arg_view{nullptr, out.n, out.c, cb, argmax_box};
  const Box& ib = in.box;
  const int64_t in_row = int64_t(ib.w()) * cb;
  for (int s = 0; s < out.n; ++s)
    for (int blk = 0; blk < out.cblocks(); ++blk) {
      const float* in0 = in.at(s, blk, ib.y0, ib.x0);
      const auto pre = pre_of(blk);
      for (int oy = ob.y0; oy < ob.y1; ++oy) {
        float* q = out.at(s, blk, oy, ob.x0);
        uint8_t* a = argmax + arg_view.offset(s, blk, oy, ob.x0);
        const int wy = oy * w.stride - w.pad;  // window origin
        const int y0 = std::max(wy, ib.y0), y1 = std::min(wy + w.size, ib.y1);
        const bool rows_inside = y0 == wy && y1 == wy + w.size;
        for (int ox = ob.x0; ox < ob.x1; ++ox, q += cb, a += cb) {
          const int wx = ox * w.stride - w.pad;
          const int x0 = std::max(wx, ib.x0), x1 = std::min(wx + w.size, ib.x1);
          if (KS > 0 && rows_inside && x0 == wx && x1 == wx + w.size)
            pool_pixel<cb, KS>(in0, in_row, ib, wy, wx, y0, y1, x0, x1, w.size, q, a, pre);
          else
            pool_pixel<cb, 0>(in0, in_row, ib, wy, wx, y0, y1, x0, x1, w.size, q, a, pre);
        }
      }
    }
}

int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// For each input row (or column) i of [i0, i1): the outputs of [o0, o1) whose windows hold
// it, as a half-open range.
std::vector<std::pair<int, int>> outputs_reading(int i0, int i1, int o0, int o1, const Window& w) {
  std::vector<std::pair<int, int>> r;
  r.reserve(size_t(std::max(0, i1 - i0)));
  for (int i = i0; i < i1; ++i)
    r.emplace_back(std::max(o0, floor_div(i + w.pad - w.size, w.stride) + 1),
                   std::min(o1, floor_div(i + w.pad, w.stride) + 1));
  return r;
}

// Windows that do not overlap (stride = size, as YOLO's 2x2 pools): each input cell has
// one output at most, so each output writes its window (its gradient at the winner, zero
// elsewhere) with the winner loaded once. Same bits as the gather below (0 + g). Returns
// false, doing nothing, if the windows do not cover the cells `db` of diff_in. KS as in forward_b.
template <int cb, int KS>
bool backward_disjoint(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                       const TensorView& diff_in, const Window& w, const Box& db) {
  using K = Block<cb>;
  const Box reach = intersect(window_in_unclamped(region, w), db);
  if (!(reach == db)) return false;
  const TensorView arg_view{nullptr, diff_out.n, diff_out.c, cb, out_box};
  const typename K::V zero = K::splat(0.f);
  const int64_t d_row = int64_t(diff_in.box.w()) * cb;
  for (int s = 0; s < diff_out.n; ++s)
    for (int blk = 0; blk < diff_out.cblocks(); ++blk) {
      float* const d0 = diff_in.at(s, blk, db.y0, db.x0);
      for (int oy = region.y0; oy < region.y1; ++oy) {
        const int wy = oy * w.stride - w.pad, y0 = std::max(wy, db.y0), y1 = std::min(wy + w.size, db.y1);
        const float* g = diff_out.at(s, blk, oy, region.x0);
        const uint8_t* a = argmax + arg_view.offset(s, blk, oy, region.x0);
        const bool rows_inside = y0 == wy && y1 == wy + w.size;
        for (int ox = region.x0; ox < region.x1; ++ox, g += cb, a += cb) {
          const int wx = ox * w.stride - w.pad, x0 = std::max(wx, db.x0), x1 = std::min(wx + w.size, db.x1);
          const typename K::I arg = K::load_bytes(a);
          const typename K::V gz = zero + K::load(g);
          if (KS > 0 && rows_inside && x0 == wx && x1 == wx + w.size) {  // constant trip counts
            for (int dy = 0; dy < KS; ++dy) {
              float* d = d0 + (wy + dy - db.y0) * d_row + int64_t(wx - db.x0) * cb;
              for (int dx = 0; dx < KS; ++dx) K::store(d + dx * cb, arg == dy * KS + dx ? gz : zero);
            }
            continue;
          }
          for (int iy = y0; iy < y1; ++iy) {
            float* d = d0 + (iy - db.y0) * d_row + int64_t(x0 - db.x0) * cb;
            for (int ix = x0; ix < x1; ++ix, d += cb)
              K::store(d, arg == (iy - wy) * w.size + (ix - wx) ? gz : zero);
          }
        }
      }
    }
  return true;
}

// Each input cell gathers the gradients of the outputs it won, all channels of a block at
// once, adding them up from zero in the outputs' row-major order: the order a scatter
// into a zeroed map would add them in, so the bits are the same for any box.
template <int cb>
void backward_b(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                const TensorView& diff_in, const Window& w, const Box& db) {
  if (w.stride == w.size) {
    const bool done = w.size == 2 ? backward_disjoint<cb, 2>(diff_out, region, out_box, argmax, diff_in, w, db)
                                  : backward_disjoint<cb, 0>(diff_out, region, out_box, argmax, diff_in, w, db);
    if (done) return;
  }
  using K = Block<cb>;
  const TensorView arg_view{nullptr, diff_out.n, diff_out.c, cb, out_box};
  const auto rows = outputs_reading(db.y0, db.y1, region.y0, region.y1, w);
  const auto cols = outputs_reading(db.x0, db.x1, region.x0, region.x1, w);
  const typename K::V zero = K::splat(0.f);
  const Box& gb = diff_out.box;
  const int64_t g_row = int64_t(gb.w()) * cb, a_row = int64_t(out_box.w()) * cb;
  for (int s = 0; s < diff_out.n; ++s)
    for (int blk = 0; blk < diff_out.cblocks(); ++blk) {
      const float* g0 = diff_out.at(s, blk, gb.y0, gb.x0);
      const uint8_t* a0 = argmax + arg_view.offset(s, blk, out_box.y0, out_box.x0);
      for (int iy = db.y0; iy < db.y1; ++iy) {
        const auto [oy0, oy1] = rows[size_t(iy - db.y0)];
        float* d = diff_in.at(s, blk, iy, db.x0);
        for (int ix = db.x0; ix < db.x1; ++ix, d += cb) {
          const auto [ox0, ox1] = cols[size_t(ix - db.x0)];
          typename K::V sum = zero;
          for (int oy = oy0; oy < oy1; ++oy)
            for (int ox = ox0; ox < ox1; ++ox) {
              const int pos = (iy - (oy * w.stride - w.pad)) * w.size + (ix - (ox * w.stride - w.pad));
              const uint8_t* a = a0 + (oy - out_box.y0) * a_row + int64_t(ox - out_box.x0) * cb;
              const float* g = g0 + (oy - gb.y0) * g_row + int64_t(ox - gb.x0) * cb;
              sum = K::load_bytes(a) == pos ? sum + K::load(g) : sum;
            }
          K::store(d, sum);
        }
      }
    }
}

}  // namespace

void maxpool_forward(const TensorView& in, const TensorView& out, const Box& region, uint8_t* argmax,
                     const Box& argmax_box, const Window& w, const PoolInputAct* pre) {
  auto run = [&]<int B>(const auto& pre_of) {
    if (w.size == 2)
      forward_b<B, 2>(in, out, region, argmax, argmax_box, w, pre_of);
    else if (w.size == 3)
      forward_b<B, 3>(in, out, region, argmax, argmax_box, w, pre_of);
    else
      forward_b<B, 0>(in, out, region, argmax, argmax_box, w, pre_of);
  };
  with_block(in.cb, [&](auto B) {
    if (!pre) return run.template operator()<B>([](int) { return [](auto v) { return v; }; });
    with_vector_act(pre->act, [&](auto A) {
      run.template operator()<B>([&](int blk) { return affine_act_of<B, A>(pre->a, pre->b, blk, in.c); });
    });
  });
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
                      const TensorView& diff_in, const Window& w, const Box& cells) {
  const Box db = cells.empty() ? diff_in.box : cells;
  if (!contains(diff_in.box, db)) fail("internal: max-pool backward writes cells outside its delta map");
  with_block(diff_out.cb, [&](auto B) { backward_b<B>(diff_out, region, out_box, argmax, diff_in, w, db); });
}

}  // namespace tt
