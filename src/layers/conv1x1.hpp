// Forward of a 1x1, stride-1, unpadded convolution on nChw16c data, summing every
// output in one fixed order (input channels ascending) whatever the box size.
// oneDNN's 1x1 kernels pick their reduction blocking from the spatial size, so a tile
// and the whole map would round differently, and a max-pool near-tie later would send
// the gradient to another cell; this kernel keeps tiled forward values bit-identical.
#pragma once
#include <cstdint>

namespace tt {

// Packs plain oihw weights [oc][ic] into [oc/16][ic/16][16 ic][16 oc], zero-padded.
void pack_conv1x1_weights(const float* oihw, int oc, int ic, float* packed);
// The same for output channels [o0, o0 + rows) given as plain rows (o0 a multiple of 16);
// the rows' blocks are zeroed first.
void pack_conv1x1_rows(const float* rows_oihw, int o0, int rows, int oc, int ic, float* packed);
int64_t conv1x1_packed_size(int oc, int ic);

// src [n][ic/16][pixels][16], dst [n][oc/16][pixels][16]; bias may be null.
void conv1x1_forward(const float* src, const float* packed, const float* bias, float* dst, int n, int ic, int oc,
                     int64_t pixels);

}  // namespace tt
