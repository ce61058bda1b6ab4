#include "layers/gemm_conv.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "util/error.hpp"

namespace tt {

namespace {
// Output rows (n, oy) per product: the work space stays near 8 MB whatever the map (the
// product sums over the cells, so it runs in slices of rows, added up).
constexpr long kWorkBudget = long(1) << 21;
long rows_per_slice(const OwnConvShape& s) {
  const long per_row = long(s.ow) * (long(s.ic) * s.k * s.k + s.oc);
  return std::clamp(kWorkBudget / per_row, 1L, long(s.n) * s.oh);
}
}  // namespace

size_t gemm_conv_work_floats(const OwnConvShape& s) {
  return size_t(rows_per_slice(s)) * s.ow * (size_t(s.ic) * s.k * s.k + size_t(s.oc));
}

bool gemm_pays(const OwnConvShape& s) { return s.ic * s.k * s.k >= 512 && s.oc >= 32; }

namespace {
// Rows (c, ky, kx) of the input taps of output rows [r0, r0 + nr) (r = n·oh + oy): col[row][cell].
void im2col(const OwnConvShape& s, const float* src, long r0, long nr, float* col) {
  const int k = s.k, kk = k * k, ib = s.ib, icb = (s.ic + ib - 1) / ib;
  const long cells = nr * s.ow;
#pragma omp parallel for collapse(2) schedule(static)
  for (int cblk = 0; cblk < icb; ++cblk)
    for (int t = 0; t < kk; ++t) {
      const int ky = t / k, kx = t % k, lanes = std::min(ib, s.ic - cblk * ib);
      for (long r = 0; r < nr; ++r) {
        const long n = (r0 + r) / s.oh, oy = (r0 + r) % s.oh, y = oy * s.s + ky - s.pt;
        for (int l = 0; l < lanes; ++l) {
          float* out = col + (long(cblk * ib + l) * kk + t) * cells + r * s.ow;
          if (y < 0 || y >= s.ih) {
            std::fill(out, out + s.ow, 0.f);
            continue;
          }
          const float* in = src + ((n * icb + cblk) * s.ih + y) * long(s.iw) * ib + l;
          for (int ox = 0; ox < s.ow; ++ox) {
            const int x = ox * s.s + kx - s.pl;
            out[ox] = x < 0 || x >= s.iw ? 0.f : in[long(x) * ib];
          }
        }
      }
    }
}

// A blocked output-side map's rows [r0, r0 + nr) as one row per channel: rows[o][cell].
void gather_rows(const OwnConvShape& s, const float* map, long r0, long nr, float* rows) {
  const int b = s.b, ocb = (s.oc + b - 1) / b;
#pragma omp parallel for schedule(static)
  for (int o = 0; o < s.oc; ++o)
    for (long r = 0; r < nr; ++r) {
      const long n = (r0 + r) / s.oh, oy = (r0 + r) % s.oh;
      const float* in = map + ((n * ocb + o / b) * s.oh + oy) * long(s.ow) * b + o % b;
      float* out = rows + long(o) * nr * s.ow + r * s.ow;
      for (int ox = 0; ox < s.ow; ++ox) out[ox] = in[long(ox) * b];
    }
}
}  // namespace

void gemm_conv_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst,
                       float* work) {
  const int b = s.b, ocb = (s.oc + b - 1) / b;
  const long rows = long(s.ic) * s.k * s.k, all_rows = long(s.n) * s.oh, slice = rows_per_slice(s);
  openblas_set_num_threads(omp_get_max_threads());
  for (long r0 = 0; r0 < all_rows; r0 += slice) {
    const long nr = std::min(slice, all_rows - r0), cells = nr * s.ow;
    float* col = work;
    float* out = work + rows * cells;  // [oc][cells]
    im2col(s, src, r0, nr, col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.oc, int(cells), int(rows), 1.f, w, int(rows), col,
                int(cells), 0.f, out, int(cells));
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < ocb; ++blk)
      for (long r = 0; r < nr; ++r) {
        const long n = (r0 + r) / s.oh, oy = (r0 + r) % s.oh;
        float* d = dst + ((n * ocb + blk) * s.oh + oy) * long(s.ow) * b;
        for (int l = 0; l < b; ++l) {
          const int o = blk * b + l;
          if (o >= s.oc) {
            for (int ox = 0; ox < s.ow; ++ox) d[long(ox) * b + l] = 0.f;
            continue;
          }
          const float* v = out + long(o) * cells + r * s.ow;
          const float add = bias ? bias[o] : 0.f;
          for (int ox = 0; ox < s.ow; ++ox) d[long(ox) * b + l] = v[ox] + add;
        }
      }
  }
}

void gemm_conv_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src,
                             float* work) {
  const int k = s.k, kk = k * k, ib = s.ib, icb = (s.ic + ib - 1) / ib;
  const long rows = long(s.ic) * kk, all_rows = long(s.n) * s.oh, slice = rows_per_slice(s);
  std::fill(diff_src, diff_src + long(s.n) * icb * ib * s.ih * s.iw, 0.f);
  openblas_set_num_threads(omp_get_max_threads());
  for (long r0 = 0; r0 < all_rows; r0 += slice) {
    const long nr = std::min(slice, all_rows - r0), cells = nr * s.ow;
    float* dcol = work;                // [ic·k·k][cells]
    float* dy = work + rows * cells;   // [oc][cells]
    gather_rows(s, diff_dst, r0, nr, dy);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(rows), int(cells), s.oc, 1.f, w, int(rows), dy,
                int(cells), 0.f, dcol, int(cells));
    // col2im: each tap's delta back onto its input cell (a thread per channel block).
#pragma omp parallel for schedule(static)
    for (int cblk = 0; cblk < icb; ++cblk) {
      const int lanes = std::min(ib, s.ic - cblk * ib);
      for (int t = 0; t < kk; ++t) {
        const int ky = t / k, kx = t % k;
        for (long r = 0; r < nr; ++r) {
          const long n = (r0 + r) / s.oh, oy = (r0 + r) % s.oh, y = oy * s.s + ky - s.pt;
          if (y < 0 || y >= s.ih) continue;
          float* row = diff_src + ((n * icb + cblk) * s.ih + y) * long(s.iw) * ib;
          for (int l = 0; l < lanes; ++l) {
            const float* v = dcol + (long(cblk * ib + l) * kk + t) * cells + r * s.ow;
            for (int ox = 0; ox < s.ow; ++ox) {
              const int x = ox * s.s + kx - s.pl;
              if (x >= 0 && x < s.iw) row[long(x) * ib + l] += v[ox];
            }
          }
        }
      }
    }
  }
}

void gemm_conv_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                                float* diff_b, bool accumulate, float* work) {
  const long rows = long(s.ic) * s.k * s.k, all_rows = long(s.n) * s.oh, slice = rows_per_slice(s);
  if (diff_b) std::fill(diff_b, diff_b + s.oc, 0.f);
  openblas_set_num_threads(omp_get_max_threads());
  for (long r0 = 0; r0 < all_rows; r0 += slice) {
    const long nr = std::min(slice, all_rows - r0), cells = nr * s.ow;
    float* col = work;                // [ic·k·k][cells]
    float* dy = work + rows * cells;  // [oc][cells]
    im2col(s, src, r0, nr, col);
    gather_rows(s, diff_dst, r0, nr, dy);
    if (diff_b)  // the bias gradient: the delta's sums
      for (int o = 0; o < s.oc; ++o) {
        double sum = 0;
        for (long j = 0; j < cells; ++j) sum += dy[long(o) * cells + j];
        diff_b[o] += float(sum);
      }
    const bool add = accumulate || r0 > 0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.oc, int(rows), int(cells), 1.f, dy, int(cells), col,
                int(cells), add ? 1.f : 0.f, diff_w, int(rows));
  }
}

}  // namespace tt
