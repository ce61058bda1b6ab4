// Convolutions as matrix products on OpenBLAS: the input box unrolled into rows of
// (input channel, ky, kx) over the output cells (im2col), output-side maps gathered into a
// row per channel, and, with plain oihw weights W:
//   forward           Y = W · col
//   backward-data     dcol = Wᵀ · dY, added back onto the input cells (col2im)
//   backward-weights  dW = dY · colᵀ
// OpenBLAS outruns oneDNN's AVX2 direct kernels on wide layers (bench/RESULTS.md) and needs
// no blocked copy of the weights. Its sums depend on the product's shape, so a tile would
// not get the whole map's last bits: backward-weights runs here everywhere (a weight
// gradient is a sum over tiles anyway, and no forward value depends on it), forward and
// backward-data only after the cut, where nothing is tiled. Maps are sliced by output rows,
// so the work space stays near 8 MB.
//
// Maps as in own_conv.hpp: src [n][C/ib][ih][iw][ib] (ib = 1: plain), diff_dst
// [n][OC/b][oh][ow][b], padded channels zero.
#pragma once
#include <cstddef>

#include "layers/own_conv.hpp"

namespace tt {

// Floats of work space any of the three needs for shape s.
size_t gemm_conv_work_floats(const OwnConvShape& s);
// dst: blocked b, overwritten (padded channels zero); bias may be null.
void gemm_conv_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst,
                       float* work);
// diff_src: layout ib, overwritten (cells no output reads and padded channels zero).
void gemm_conv_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src,
                             float* work);
// diff_w: plain oihw, overwritten or (accumulate) added to; diff_b (may be null):
// oc floats, overwritten. Runs on the caller's OpenMP thread count.
void gemm_conv_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                                float* diff_b, bool accumulate, float* work);

// Whether a pass of this shape goes to OpenBLAS: where the product is wide
// enough for sgemm to beat oneDNN's direct kernels (measured: from 64 input channels of a
// 3x3 window, or 512 of a 1x1; narrower layers run faster on oneDNN).
bool gemm_pays(const OwnConvShape& s);

}  // namespace tt
