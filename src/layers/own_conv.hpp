// The project's own direct convolution kernels (Google Highway, run-time dispatch to
// AVX2 / AVX-512 / NEON / SSE4 / scalar). Used where oneDNN would run a reference kernel
// and wherever values must not depend on how a map is split into tiles.
//
// Maps are [n][C/cb][h][w][cb]: blocked with cb = b (8 or 16, channels zero-padded up to
// a multiple of b) or plain NCHW (cb = 1, only for a layer's input / diff_src). Output
// maps (dst, diff_dst) are always blocked with b. Weights are in the oneDNN format that
// own_weights_tag() names (padded channels zero, as oneDNN reorders leave them).
//
// Fixed summation order: a forward output is Σ over (input channel block, ky, kx, i), a
// backward-data diff_src cell Σ over (output block, ky, kx, j), each one hn::MulAdd
// after the other in that order, starting from +0, skipping only taps outside the
// input (resp. diff_dst) box; bias is added last. Nothing depends on the box size, the
// cell's place in it, register blocking or threads, so a tile computes bit-identical
// values to the whole map for every cell whose taps all lie inside the tile's box.
// Backward-weights sums over pixels in chunks of rows (accurate, not tile-invariant).
//
// Padded channels of the outputs (dst, diff_src, diff_b) are written as zero;
// padded channels of the inputs (src, diff_dst) and padded weight entries must be zero.
// The kernels use the OpenMP threads of the caller's team size (omp_get_max_threads());
// the result does not depend on the thread count.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace tt {

struct OwnConvShape {
  int n = 1, ic = 1, oc = 1, k = 1, s = 1;  // batch, channels, square kernel size, stride
  int ih = 1, iw = 1, oh = 1, ow = 1;       // the input box and the output box this call works on
  int pt = 0, pl = 0;  // top/left zero padding: output (oy,ox) reads input (oy*s+ky-pt, ox*s+kx-pl)
  int ib = 8, b = 8;   // input-side block (1 or b) and output block (8 or 16)
};

enum class OwnPass { Forward, BackwardData, BackwardWeights };

// Weight layout of a pass: forward OIhw{b}i{b}o (ib == b) or Oihw{b}o (ib == 1, oneDNN's
// Abcd8a / Abcd16a); backward-data OIhw{b}o{b}i (either ib; input channels padded to a
// multiple of b); backward-weights plain oihw. Throws tt::Error for b or ib not supported.
dnnl::memory::format_tag own_weights_tag(int b, int ib, OwnPass pass);
// Floats of a weight (or weight-gradient) buffer in that layout.
long own_weights_floats(const OwnConvShape& s, OwnPass pass);

// Taps outside [0,ih) x [0,iw) are zero padding (bottom/right padding is implied by oh/ow).
// All three throw tt::Error on an unsupported b / ib or an inconsistent shape.
void own_conv_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias /*may be null*/,
                      float* dst);
// Overwrites all of diff_src (ih x iw, padded channels zero); cells no output reads get 0.
void own_conv_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src);
// diff_w is plain oihw (the parameter vector's layout): overwritten, or added to with
// `accumulate`. diff_b (oc floats) is overwritten.
void own_conv_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                               float* diff_b /*may be null*/, bool accumulate = false);
// Whether own_conv_backward_weights adds to each element of diff_w once (one image, one
// chunk of output rows), so that accumulating gives exactly diff_w + (what it overwrites with).
bool own_conv_weights_add_once(const OwnConvShape& s);

// Highway target that runs, lower case: "avx2", "avx3" (AVX-512), "neon", "sse4", "emu128"...
std::string own_conv_target();

}  // namespace tt
