#include "layers/conv1x1.hpp"

#include <algorithm>
#include <cmath>

namespace tt {

namespace {
constexpr int B = 16;
int blocks(int c) { return (c + B - 1) / B; }

// acc[p][j] = Σ_icb Σ_i in[icb][p][i] · w[icb][i][j] for P consecutive pixels.
template <int P>
inline void tile(const float* src, const float* w, int icbs, int64_t pixels, const float* bias, float* out) {
  float acc[P][B];
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < B; ++j) acc[p][j] = 0.f;
  for (int icb = 0; icb < icbs; ++icb) {
    const float* in = src + icb * pixels * B;
    const float* wb = w + icb * B * B;
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const float a = in[p * B + i];
#pragma GCC unroll 16
        for (int j = 0; j < B; ++j) acc[p][j] = std::fma(a, wb[i * B + j], acc[p][j]);
      }
  }
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < B; ++j) out[p * B + j] = acc[p][j] + bias[j];
}
}  // namespace

int64_t conv1x1_packed_size(int oc, int ic) { return int64_t(blocks(oc)) * blocks(ic) * B * B; }

void pack_conv1x1_rows(const float* rows_oihw, int o0, int rows, int oc, int ic, float* packed) {
  const int icbs = blocks(ic);
  const int64_t block = int64_t(icbs) * B * B;  // one block of 16 output channels
  std::fill(packed + (o0 / B) * block, packed + blocks(std::min(oc, o0 + rows)) * block, 0.f);
  for (int o = o0; o < o0 + rows; ++o)
    for (int i = 0; i < ic; ++i)
      packed[((int64_t(o / B) * icbs + i / B) * B + i % B) * B + o % B] = rows_oihw[int64_t(o - o0) * ic + i];
}

void pack_conv1x1_weights(const float* oihw, int oc, int ic, float* packed) {
  pack_conv1x1_rows(oihw, 0, oc, oc, ic, packed);
}

void conv1x1_forward(const float* src, const float* packed, const float* bias, float* dst, int n, int ic, int oc,
                     int64_t pixels) {
  const int icbs = blocks(ic), ocbs = blocks(oc);
  constexpr int P = 8;
  for (int s = 0; s < n; ++s)
    for (int ocb = 0; ocb < ocbs; ++ocb) {
      float b[B] = {};
      if (bias)
        for (int j = 0; j < B && ocb * B + j < oc; ++j) b[j] = bias[ocb * B + j];
      const float* in = src + int64_t(s) * icbs * pixels * B;
      const float* w = packed + int64_t(ocb) * icbs * B * B;
      float* out = dst + (int64_t(s) * ocbs + ocb) * pixels * B;
      int64_t p = 0;
      for (; p + P <= pixels; p += P) tile<P>(in + p * B, w, icbs, pixels, b, out + p * B);
      for (; p < pixels; ++p) tile<1>(in + p * B, w, icbs, pixels, b, out + p * B);
    }
}

}  // namespace tt
