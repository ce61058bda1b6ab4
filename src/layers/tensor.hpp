// A dense buffer holding one box of an N x C feature map, in either plain NCHW
// (cb = 1) or a channel-blocked layout nChw{cb}c (cb = 8 or 16, channels padded with
// zeros), the block being chosen at run time (see backend.hpp).
#pragma once
#include <cstdint>
#include <type_traits>

#include "layers/box.hpp"
#include "util/error.hpp"

namespace tt {

struct TensorView {
  float* data = nullptr;
  int n = 0, c = 0, cb = 1;
  Box box;

  int cblocks() const { return (c + cb - 1) / cb; }
  int64_t plane() const { return int64_t(box.h()) * box.w() * cb; }  // one channel block
  int64_t size() const { return int64_t(n) * cblocks() * plane(); }
  // First element of (sample, channel block, global row y, global column x).
  int64_t offset(int s, int blk, int y, int x) const {
    return (int64_t(s) * cblocks() + blk) * plane() + (int64_t(y - box.y0) * box.w() + (x - box.x0)) * cb;
  }
  float* at(int s, int blk, int y, int x) const { return data + offset(s, blk, y, x); }
};

// Calls f(std::integral_constant<int, B>{}) for channel block cb (1, 8 or 16), so that
// loops over a block compile with a constant trip count; throws for any other block.
template <class F>
decltype(auto) with_block(int cb, F&& f) {
  switch (cb) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
  }
  fail("internal: no kernel for a channel block of ", cb, " (1, 8 or 16)");
}

inline int64_t tensor_floats(int n, int c, int cb, const Box& b) {
  return int64_t(n) * ((c + cb - 1) / cb) * cb * b.area();
}

// Copies `region` (inside both boxes) from src to dst; layouts may differ.
void copy_region(const TensorView& src, const TensorView& dst, const Box& region);
// Channels [dst_c0, dst_c0 + channels) of dst = (or +=) channels [src_c0, ...) of src on
// `region` (inside both boxes); layouts may differ. A concatenation's parts.
void copy_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                   const Box& region);
void add_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                  const Box& region);
// dst += src on `region` (inside both boxes); layouts may differ.
void add_region(const TensorView& src, const TensorView& dst, const Box& region);
void zero(const TensorView& t);
// Rewrites t in place as a dense buffer of its cells in `keep` (inside t.box), at t.data;
// t then describes box `keep`. The cells outside `keep` are lost.
void compact_region(TensorView& t, const Box& keep);
// Zeroes dst outside `keep` (used where a kernel's output box is smaller than needed).
void zero_outside(const TensorView& dst, const Box& keep);

}  // namespace tt
