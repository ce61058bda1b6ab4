#include "engine/conv_pointwise.hpp"

#include <algorithm>
#include <cmath>

#include "layers/affine_act.hpp"
#include "layers/pointwise.hpp"
#include "util/error.hpp"

namespace tt {

namespace {
constexpr double kBnEps = 1e-5;

// Darknet's running averages, one batch's statistics at a time. Not inlined: forward and
// fold_running_stats run this one copy (a compiler may contract each inlined copy into
// fused multiply-adds differently), so a logged fold gives the same floats as a direct one.
[[gnu::noinline]] void fold_running(float& mean, float& var, double batch_mean, double batch_var) {
  mean = float(0.99 * mean + 0.01 * batch_mean);
  var = float(0.99 * var + 0.01 * batch_var);
}
}  // namespace

void fold_running_stats(const double* log, size_t n, Params& params) {
  for (size_t i = 0; i < n;) {
    if (n - i < 2) fail("internal: a truncated running statistics log");
    const size_t l = size_t(log[i]), C = size_t(log[i + 1]);
    if (l >= params.rolling_mean.size() || params.rolling_mean[l].size() < C || n - i - 2 < 2 * C)
      fail("internal: a running statistics log that does not fit the net");
    const double* m = log + i + 2;
    for (size_t c = 0; c < C; ++c) fold_running(params.rolling_mean[l][c], params.rolling_var[l][c], m[c], m[C + c]);
    i += 2 + 2 * C;
  }
}

ConvPointwise::ConvPointwise(const LayerSpec& s, int out_cb, int tiles, Device& device, RunningStatsLog* log)
    : s_(s), dev_(device), log_(log) {
  const int C = (s.out.c + out_cb - 1) / out_cb * out_cb;  // padded channels
  a_.assign(size_t(C), 1.f);
  b_.assign(size_t(C), 0.f);
  k1_.assign(size_t(C), 0.f);
  k2_.assign(size_t(C), 0.f);
  k3_.assign(size_t(C), 0.f);
  mean_f_.assign(size_t(C), 0.f);
  mean_.assign(size_t(C), 0.);
  rstd_.assign(size_t(C), 1.);
  s1_.assign(4 * size_t(C), 0.);
  s2_.assign(2 * size_t(C), 0.);
  slots_.assign(size_t(tiles) * 4 * size_t(s.out.c), 0.);  // forward: 4 per channel, backward: 2
}

void ConvPointwise::forward(const std::vector<PointwiseTile>& tiles, Params& params, int batch, bool batch_stats,
                            const SumOverTiles& sum) {
  if (!s_.batch_normalize()) return;
  const int C = s_.out.c;
  const ParamSlice& ps = params.slices[size_t(s_.index)];
  const float* gamma = params.data() + ps.scales;
  const float* beta = params.data() + ps.biases;
  std::vector<float>& rm = params.rolling_mean[size_t(s_.index)];
  std::vector<float>& rv = params.rolling_var[size_t(s_.index)];
  if (batch_stats) {
    // Per tile Σ y and Σ y² as double-doubles (hi, lo per channel: 4C), gathered in tile
    // order and added up as double-doubles, so that the statistics do not depend on the grid.
    for (const PointwiseTile& pt : tiles) {
      double* slot = slots_.data() + size_t(pt.tile) * 4 * C;
      std::fill(slot, slot + 4 * C, 0.);
      dev_.channel_sums(pt.y, pt.own, slot, slot + 2 * C);
    }
    sum(slots_, 4 * C, s1_.data());
    const int T = int(slots_.size() / (4 * size_t(C)));
    const double M = double(batch) * s_.out.h * s_.out.w;
    size_t at = 0;
    if (log_) {
      at = log_->size() + 2;
      log_->push_back(double(s_.index));
      log_->push_back(double(C));
      log_->resize(at + 2 * size_t(C));
    }
    for (int c = 0; c < C; ++c) {
      double sh = 0, sl = 0, qh = 0, ql = 0;
      for (int t = 0; t < T; ++t) {
        const double* slot = slots_.data() + size_t(t) * 4 * C;
        two_sum_add(sh, sl, slot[c]);
        sl += slot[C + c];
        two_sum_add(qh, ql, slot[2 * C + c]);
        ql += slot[3 * C + c];
      }
      const double mean = (sh + sl) / M, var = std::max(0., (qh + ql) / M - mean * mean);
      mean_[size_t(c)] = mean;
      rstd_[size_t(c)] = 1. / std::sqrt(var + kBnEps);
      const double unbiased = M > 1 ? var * M / (M - 1) : var;
      if (log_) {
        (*log_)[at + size_t(c)] = mean;
        (*log_)[at + size_t(C + c)] = unbiased;
      } else {
        fold_running(rm[size_t(c)], rv[size_t(c)], mean, unbiased);
      }
    }
  } else {
    for (int c = 0; c < C; ++c) {
      mean_[size_t(c)] = rm[size_t(c)];
      rstd_[size_t(c)] = 1. / std::sqrt(double(rv[size_t(c)]) + kBnEps);
    }
  }
  for (int c = 0; c < C; ++c) {
    mean_f_[size_t(c)] = float(mean_[size_t(c)]);
    a_[size_t(c)] = float(gamma[c] * rstd_[size_t(c)]);
    b_[size_t(c)] = float(beta[c] - gamma[c] * rstd_[size_t(c)] * mean_[size_t(c)]);
  }
}

// dβ[c] = Σ delta and dγ[c] = Σ delta·x̂ over the tile's owned cells (and samples), delta as
// act_backward_bn_sums left it: by Cauchy-Schwarz at most sqrt(cells) ||delta_c|| and
// ||delta_c|| ||x̂_c||; over the layer, the 2-norms of those per-channel bounds.
void ConvPointwise::add_grad_scales(const PointwiseTile& pt) {
  const int C = s_.out.c, cb = pt.delta.cb;
  std::vector<double> dd(size_t(C), 0.), xx(size_t(C), 0.);
  const Box& own = pt.own;
  for (int n = 0; n < pt.delta.n; ++n)
    for (int blk = 0; blk < pt.delta.cblocks(); ++blk)
      for (int y = own.y0; y < own.y1; ++y) {
        const float* d = pt.delta.at(n, blk, y, own.x0);
        const float* v = pt.y.at(n, blk, y, own.x0);
        for (int x = 0; x < own.w(); ++x)
          for (int k = 0; k < cb && blk * cb + k < C; ++k) {
            const size_t c = size_t(blk * cb + k);
            const double g = d[x * cb + k], h = (double(v[x * cb + k]) - mean_[c]) * rstd_[c];
            dd[c] += g * g;
            xx[c] += h * h;
          }
      }
  double b = 0, s = 0;
  for (size_t c = 0; c < size_t(C); ++c) {
    b += dd[c];
    s += dd[c] * xx[c];
  }
  scale_->biases += std::sqrt(double(pt.delta.n) * double(own.area()) * b);
  scale_->scales += std::sqrt(s);
}

void ConvPointwise::backward(const std::vector<PointwiseTile>& tiles,
                             const std::function<Box(const PointwiseTile&)>& region, const Params& params, int batch,
                             bool sync, const SumOverTiles& sum) {
  const int C = s_.out.c;
  for (const PointwiseTile& pt : tiles) {
    if (s_.batch_normalize()) {  // with the tile's share of the batch-norm sums
      double* slot = slots_.data() + size_t(pt.tile) * 2 * C;
      std::fill(slot, slot + 2 * C, 0.);
      dev_.act_backward_bn_sums(pt.delta, pt.y, region(pt), pt.own, a_.data(), b_.data(), s_.conv().act, mean_.data(),
                                rstd_.data(), slot, slot + C);
      if (scale_) add_grad_scales(pt);
    } else {
      dev_.act_backward(pt.delta, pt.y, region(pt), a_.data(), b_.data(), s_.conv().act);
    }
  }
  if (!s_.batch_normalize()) return;
  const ParamSlice& ps = params.slices[size_t(s_.index)];
  const float* gamma = params.data() + ps.scales;
  for (const PointwiseTile& pt : tiles) {
    // A tile's sums are its share of dβ and dγ; the batch reduction adds them up.
    const double* slot = slots_.data() + size_t(pt.tile) * 2 * C;
    for (int c = 0; c < C; ++c) {
      pt.grad[ps.biases + c] += float(slot[c]);
      pt.grad[ps.scales + c] += float(slot[C + c]);
    }
  }
  sum(slots_, 2 * C, s2_.data());
  const double M = double(batch) * s_.out.h * s_.out.w;
  for (int c = 0; c < C; ++c) {
    const double r = rstd_[size_t(c)], g = gamma[c];
    k1_[size_t(c)] = float(g * r);
    k2_[size_t(c)] = sync ? float(-g * r * r * s2_[size_t(C + c)] / M) : 0.f;
    k3_[size_t(c)] = sync ? float(-g * r * s2_[size_t(c)] / M) : 0.f;
  }
  for (const PointwiseTile& pt : tiles)
    dev_.bn_backward_apply(pt.delta, pt.y, region(pt), k1_.data(), k2_.data(), k3_.data(), mean_f_.data());
}

}  // namespace tt
