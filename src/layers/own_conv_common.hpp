// What the own convolution kernels' two files share outside Highway's per-target code:
// which targets they compile, index helpers, and the checks every entry point makes.
// own_conv_maps.cpp holds forward and backward-data (one micro-kernel), own_conv_weights.cpp
// backward-weights; own_conv-inl.hpp is what they share per target. Include this first:
// the target macros must come before any Highway header.
#pragma once

// SVE / RVV have no compile-time lane count; the devices (Raspberry Pi 3/4/5) have none.
// On x86 every target from AVX2 up is compiled, whatever -march says, so that a build on
// an AVX-512 machine still has the AVX2 kernels: an ISA cap (ONEDNN_MAX_CPU_ISA=AVX2, see
// cap_to_onednn_isa in own_conv_maps.cpp) then runs and tests them there. Below AVX2
// nothing is fast.
#ifndef HWY_DISABLED_TARGETS
#if defined(__AVX2__)
#define HWY_COMPILE_ALL_ATTAINABLE
#define HWY_DISABLED_TARGETS \
  (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV | HWY_SCALAR | HWY_EMU128 | HWY_SSSE3 | HWY_SSE4)
#else
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#endif
// Highway 1.0.3 (Debian 12) leaves AVX3_DL out of the dispatch targets unless asked, but
// makes it the static target when -march=native has VNNI/VBMI2 (AMD Zen 4, Intel Ice Lake
// and later), and then refuses to compile ("best baseline should be included in dynamic
// targets").
#define HWY_WANT_AVX3_DL

#include <algorithm>

#include "layers/own_conv.hpp"

namespace tt::own_detail {
inline int cdiv(int a, int b) { return (a + b - 1) / b; }
// Smallest t >= lo (lo >= 0) with t ≡ r (mod s), 0 <= r < s.
inline int first_congruent(int lo, int r, int s) { return lo + ((r - lo % s) % s + s) % s; }
// A 1x1 stride-1 convolution without padding on a whole box is the same per-pixel
// computation on one long row: fewer, longer pixel runs.
inline tt::OwnConvShape flat_1x1(tt::OwnConvShape s) {
  if (s.k == 1 && s.s == 1 && s.pt == 0 && s.pl == 0 && s.ih == s.oh && s.iw == s.ow) {
    s.iw = s.ow = s.ih * s.iw;
    s.ih = s.oh = 1;
  }
  return s;
}
// Backward-weights sums a chunk of about this many output pixels in registers, then adds
// the sums into the plain gradient one lane at a time: fewer, larger chunks make fewer of
// those scattered adds. A chunk's zero-padded input rows are copied once, so the chunk
// also bounds that copy.
constexpr int kWeightsChunkPixels = 8192;
// Output rows per chunk: each chunk's sums are added into the gradient once.
inline int weights_chunk_rows(const tt::OwnConvShape& s) { return std::max(1, kWeightsChunkPixels / s.ow); }

// Throws tt::Error for a channel block, input block or shape the kernels do not support.
void check(const OwnConvShape& s);
// Applies ONEDNN_MAX_CPU_ISA to the own kernels (once: every entry point calls it first).
void apply_isa_cap();
}  // namespace tt::own_detail
