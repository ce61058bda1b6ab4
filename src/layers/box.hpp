// Geometry shared by kernels and the tiler. A Box is the half-open region
// [y0,y1) x [x0,x1) of a feature map, always in global map coordinates.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "model/net_spec.hpp"

namespace tt {

struct Box {
  int y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  int h() const { return std::max(0, y1 - y0); }
  int w() const { return std::max(0, x1 - x0); }
  bool empty() const { return h() == 0 || w() == 0; }
  long area() const { return long(h()) * w(); }
  bool operator==(const Box&) const = default;
  std::string str() const {  // snprintf: GCC 12 warns falsely (-Wrestrict) on chained string +
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%d,%d)x[%d,%d)", y0, y1, x0, x1);
    return buf;
  }
};

inline Box full_box(int h, int w) { return {0, h, 0, w}; }
inline Box intersect(const Box& a, const Box& b) {
  return {std::max(a.y0, b.y0), std::min(a.y1, b.y1), std::max(a.x0, b.x0), std::min(a.x1, b.x1)};
}
// Smallest box holding both; an empty operand is ignored.
inline Box hull(const Box& a, const Box& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {std::min(a.y0, b.y0), std::max(a.y1, b.y1), std::min(a.x0, b.x0), std::max(a.x1, b.x1)};
}
inline bool contains(const Box& outer, const Box& inner) {
  return inner.empty() ||
         (outer.y0 <= inner.y0 && inner.y1 <= outer.y1 && outer.x0 <= inner.x0 && inner.x1 <= outer.x1);
}

// Input cells read by the outputs in `o` through window `w`, before clamping to the map.
inline Box window_in_unclamped(const Box& o, const Window& w) {
  return {o.y0 * w.stride - w.pad, (o.y1 - 1) * w.stride - w.pad + w.size, o.x0 * w.stride - w.pad,
          (o.x1 - 1) * w.stride - w.pad + w.size};
}
// The same clamped to an ih x iw map: what a tile must hold to compute `o`.
inline Box window_in(const Box& o, const Window& w, int ih, int iw) {
  return intersect(window_in_unclamped(o, w), full_box(ih, iw));
}

inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int ceil_div(int a, int b) { return -floor_div(-a, b); }

// Outputs (of an oh x ow map) whose windows touch any input cell of `i`: the delta a
// tile needs at a layer's output to compute the input delta on `i` (paper eq. 2).
inline Box touching_out(const Box& i, const Window& w, int oh, int ow) {
  Box o{ceil_div(i.y0 + w.pad - w.size + 1, w.stride), floor_div(i.y1 - 1 + w.pad, w.stride) + 1,
        ceil_div(i.x0 + w.pad - w.size + 1, w.stride), floor_div(i.x1 - 1 + w.pad, w.stride) + 1};
  return intersect(o, full_box(oh, ow));
}

// Outputs (of an oh x ow map) whose windows, clamped to the ih x iw input map, lie inside
// `i`: what can be computed from `i` alone (the interior while a halo is in flight).
inline Box outputs_within(const Box& i, const Window& w, int ih, int iw, int oh, int ow) {
  if (i.empty()) return {};
  Box o{i.y0 == 0 ? 0 : ceil_div(i.y0 + w.pad, w.stride),
        i.y1 == ih ? oh : floor_div(i.y1 + w.pad - w.size, w.stride) + 1,
        i.x0 == 0 ? 0 : ceil_div(i.x0 + w.pad, w.stride),
        i.x1 == iw ? ow : floor_div(i.x1 + w.pad - w.size, w.stride) + 1};
  o = intersect(o, full_box(oh, ow));
  return o.empty() ? Box{} : o;
}

// Per-side zero padding a kernel needs to compute outputs `o` from the clamped input
// box: only where the unclamped window leaves the map.
struct Pad {
  int t = 0, b = 0, l = 0, r = 0;
  bool operator==(const Pad&) const = default;
};
inline Pad border_pad(const Box& o, const Window& w, int ih, int iw) {
  Box u = window_in_unclamped(o, w);
  return {std::max(0, -u.y0), std::max(0, u.y1 - ih), std::max(0, -u.x0), std::max(0, u.x1 - iw)};
}

}  // namespace tt
