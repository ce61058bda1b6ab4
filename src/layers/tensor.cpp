#include "layers/tensor.hpp"

#include <cstring>

namespace tt {

void copy_region(const TensorView& src, const TensorView& dst, const Box& r) {
  if (r.empty()) return;
  if (src.cb == dst.cb) {
    const size_t row = size_t(r.w()) * src.cb * sizeof(float);
    for (int s = 0; s < src.n; ++s)
      for (int b = 0; b < src.cblocks(); ++b)
        for (int y = r.y0; y < r.y1; ++y) std::memcpy(dst.at(s, b, y, r.x0), src.at(s, b, y, r.x0), row);
    return;
  }
  for (int s = 0; s < src.n; ++s)
    for (int c = 0; c < src.c; ++c)
      for (int y = r.y0; y < r.y1; ++y) {
        const float* a = src.at(s, c / src.cb, y, r.x0) + c % src.cb;
        float* d = dst.at(s, c / dst.cb, y, r.x0) + c % dst.cb;
        for (int x = 0; x < r.w(); ++x) d[x * dst.cb] = a[x * src.cb];
      }
}

namespace {
template <bool kAdd>
void move_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels, const Box& r) {
  if (r.empty() || channels <= 0) return;
  if (!contains(src.box, r) || !contains(dst.box, r)) fail("internal: channels moved outside a map's box");
  if (src_c0 < 0 || dst_c0 < 0 || src_c0 + channels > src.c || dst_c0 + channels > dst.c || src.n != dst.n)
    fail("internal: channels [", src_c0, ", ", src_c0 + channels, ") of a ", src.c, "-channel map into [", dst_c0,
         ", ...) of a ", dst.c, "-channel one");
  // Whole channel blocks at the same place in both layouts: rows at a time.
  const bool blocks = src.cb == dst.cb && src_c0 % src.cb == 0 && dst_c0 % dst.cb == 0 &&
                      (channels % src.cb == 0 || (src_c0 + channels == src.c && dst_c0 + channels == dst.c));
  if (blocks) {
    const int64_t k = int64_t(r.w()) * src.cb;
    const int nb = (channels + src.cb - 1) / src.cb;
    for (int s = 0; s < src.n; ++s)
      for (int b = 0; b < nb; ++b)
        for (int y = r.y0; y < r.y1; ++y) {
          const float* a = src.at(s, src_c0 / src.cb + b, y, r.x0);
          float* d = dst.at(s, dst_c0 / dst.cb + b, y, r.x0);
          if (kAdd)
            for (int64_t i = 0; i < k; ++i) d[i] += a[i];
          else
            std::memcpy(d, a, size_t(k) * sizeof(float));
        }
    return;
  }
  for (int s = 0; s < src.n; ++s)
    for (int c = 0; c < channels; ++c)
      for (int y = r.y0; y < r.y1; ++y) {
        const int cs = src_c0 + c, cd = dst_c0 + c;
        const float* a = src.at(s, cs / src.cb, y, r.x0) + cs % src.cb;
        float* d = dst.at(s, cd / dst.cb, y, r.x0) + cd % dst.cb;
        for (int x = 0; x < r.w(); ++x) {
          if (kAdd)
            d[x * dst.cb] += a[x * src.cb];
          else
            d[x * dst.cb] = a[x * src.cb];
        }
      }
}
}  // namespace

void copy_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                   const Box& region) {
  move_channels<false>(src, src_c0, dst, dst_c0, channels, region);
}
void add_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                  const Box& region) {
  move_channels<true>(src, src_c0, dst, dst_c0, channels, region);
}

void add_region(const TensorView& src, const TensorView& dst, const Box& r) {
  if (src.c != dst.c) fail("internal: adding maps of different shapes");
  move_channels<true>(src, 0, dst, 0, src.c, r);
}

void zero(const TensorView& t) { std::memset(t.data, 0, size_t(t.size()) * sizeof(float)); }

// Rows move to lower or equal addresses, in increasing order, and each row's source lies
// at or after its destination: nothing is overwritten before it is read.
void compact_region(TensorView& t, const Box& keep) {
  const TensorView dst{t.data, t.n, t.c, t.cb, keep};
  const size_t row = size_t(keep.w()) * t.cb * sizeof(float);
  for (int s = 0; s < t.n; ++s)
    for (int b = 0; b < t.cblocks(); ++b)
      for (int y = keep.y0; y < keep.y1; ++y) std::memmove(dst.at(s, b, y, keep.x0), t.at(s, b, y, keep.x0), row);
  t = dst;
}

void zero_outside(const TensorView& t, const Box& keep) {
  const Box& b = t.box;
  const Box k = intersect(keep, b);
  const int cb = t.cb;
  for (int s = 0; s < t.n; ++s)
    for (int blk = 0; blk < t.cblocks(); ++blk)
      for (int y = b.y0; y < b.y1; ++y) {
        float* row = t.at(s, blk, y, b.x0);
        if (y < k.y0 || y >= k.y1 || k.empty()) {
          std::memset(row, 0, size_t(b.w()) * cb * sizeof(float));
          continue;
        }
        std::memset(row, 0, size_t(k.x0 - b.x0) * cb * sizeof(float));
        std::memset(t.at(s, blk, y, k.x1), 0, size_t(b.x1 - k.x1) * cb * sizeof(float));
      }
}

}  // namespace tt
