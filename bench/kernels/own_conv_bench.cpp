// Times the own Highway convolution kernels against oneDNN (format_tag::any: whatever
// oneDNN picks on this CPU) on the convolutions of W1 (cfgs/yolov2-16.cfg), batch 1,
// forward, backward-data and backward-weights, one thread unless --threads says otherwise.
//
//   own_conv_bench [--size 416] [--reps 5] [--threads 1] [--b 8|16] [--only I]
//
// --size S: input map S x S (W1 is 416; the map halves at each max-pool); GFLOP/s are
// 2·n·ic·oc·k²·oh·ow / time, best of --reps runs after one warm-up.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/own_conv.hpp"

using namespace tt;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

struct Layer {
  int ic, oc, k, div;  // div: input map = size / div
};
// W1: the convolutions of cfgs/yolov2-16.cfg (3x3 pad 1, 1x1 pad 0, stride 1).
const Layer kW1[] = {{3, 32, 3, 1},    {32, 64, 3, 2},   {64, 128, 3, 4},  {128, 64, 1, 4},  {64, 128, 3, 4},
                     {128, 256, 3, 8}, {256, 128, 1, 8}, {128, 256, 3, 8}, {256, 512, 3, 16}, {512, 256, 1, 16},
                     {256, 512, 3, 16}, {512, 256, 1, 16}};

template <class F>
double best_time(int reps, F&& f) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void fill(std::vector<float>& v, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  v.resize(n);
  for (float& x : v) x = u(rng);
}

dnnl::memory random_mem(const dnnl::memory::desc& d, const dnnl::engine& eng, std::mt19937& rng) {
  dnnl::memory m(d, eng);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  float* p = static_cast<float*>(m.get_data_handle());
  for (size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = u(rng);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int size = 416, reps = 5, threads = 1, b = 0, only = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--size") size = next();
    else if (a == "--reps") reps = next();
    else if (a == "--threads") threads = next();
    else if (a == "--b") b = next();
    else if (a == "--only") only = next();
    else {
      std::fprintf(stderr, "usage: %s [--size 416] [--reps 5] [--threads 1] [--b 8|16] [--only LAYER]\n", argv[0]);
      return 2;
    }
  }
  omp_set_num_threads(threads);
  const std::string target = own_conv_target();
  if (b == 0) b = target.rfind("avx3", 0) == 0 ? 16 : 8;
  std::printf("own target %s, block %d, map %dx%d, batch 1, %d thread(s), best of %d\n", target.c_str(), b, size,
              size, threads, reps);
  std::printf("%-2s %-18s %-5s %8s %8s %6s  %s\n", "#", "conv", "pass", "own", "oneDNN", "ratio", "oneDNN kernel");

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::mt19937 rng(1);
  double tot_own[3] = {}, tot_dnnl[3] = {}, tot_flop = 0;
  int idx = -1;
  for (const Layer& l : kW1) {
    ++idx;
    if (only >= 0 && idx != only) continue;
    const int h = size / l.div, pad = l.k / 2;
    OwnConvShape s;
    s.n = 1;
    s.ic = l.ic;
    s.oc = l.oc;
    s.k = l.k;
    s.s = 1;
    s.ih = s.iw = s.oh = s.ow = h;
    s.pt = s.pl = pad;
    s.b = b;
    s.ib = l.ic < b ? 1 : b;
    const double flop = 2.0 * l.ic * l.oc * l.k * l.k * double(h) * h;
    tot_flop += flop;

    // own
    std::vector<float> src, dst, dd, dsrc, wf, wb, dw, db;
    auto blocked = [&](int c, int cb) { return size_t((c + cb - 1) / cb) * cb * h * h; };
    fill(src, blocked(l.ic, s.ib), rng);
    fill(dsrc, blocked(l.ic, s.ib), rng);
    fill(dst, blocked(l.oc, b), rng);
    fill(dd, blocked(l.oc, b), rng);
    fill(wf, size_t(own_weights_floats(s, OwnPass::Forward)), rng);
    fill(wb, size_t(own_weights_floats(s, OwnPass::BackwardData)), rng);
    fill(dw, wf.size(), rng);
    fill(db, size_t(l.oc), rng);
    const double own_t[3] = {
        best_time(reps, [&] { own_conv_forward(s, src.data(), wf.data(), db.data(), dst.data()); }),
        best_time(reps, [&] { own_conv_backward_data(s, dd.data(), wb.data(), dsrc.data()); }),
        best_time(reps, [&] { own_conv_backward_weights(s, src.data(), dd.data(), dw.data(), db.data()); })};

    // oneDNN, formats it picks itself
    const dnnl::memory::dims sd{1, l.ic, h, h}, wd{l.oc, l.ic, l.k, l.k}, od{1, l.oc, h, h}, st{1, 1}, pp{pad, pad};
    const dnnl::memory::desc src_any(sd, dt::f32, tag::any), w_any(wd, dt::f32, tag::any),
        dst_any(od, dt::f32, tag::any), b_d({l.oc}, dt::f32, tag::x);
    const auto alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, src_any, w_any, b_d, dst_any, st, pp, pp}, eng);
    dnnl::convolution_backward_data::primitive_desc bdpd({alg, src_any, w_any, dst_any, st, pp, pp}, eng, fpd);
    dnnl::convolution_backward_weights::primitive_desc bwpd({alg, src_any, w_any, b_d, dst_any, st, pp, pp}, eng,
                                                            fpd);
    auto m = [&](const dnnl::memory::desc& d) { return random_mem(d, eng, rng); };
    dnnl::convolution_forward fwd(fpd);
    dnnl::convolution_backward_data bwd_d(bdpd);
    dnnl::convolution_backward_weights bwd_w(bwpd);
    std::unordered_map<int, dnnl::memory> fa{{DNNL_ARG_SRC, m(fpd.src_desc())},
                                             {DNNL_ARG_WEIGHTS, m(fpd.weights_desc())},
                                             {DNNL_ARG_BIAS, m(b_d)},
                                             {DNNL_ARG_DST, m(fpd.dst_desc())},
                                             {DNNL_ARG_SCRATCHPAD, m(fpd.scratchpad_desc())}};
    std::unordered_map<int, dnnl::memory> da{{DNNL_ARG_DIFF_DST, m(bdpd.diff_dst_desc())},
                                             {DNNL_ARG_WEIGHTS, m(bdpd.weights_desc())},
                                             {DNNL_ARG_DIFF_SRC, m(bdpd.diff_src_desc())},
                                             {DNNL_ARG_SCRATCHPAD, m(bdpd.scratchpad_desc())}};
    std::unordered_map<int, dnnl::memory> wa{{DNNL_ARG_SRC, m(bwpd.src_desc())},
                                             {DNNL_ARG_DIFF_DST, m(bwpd.diff_dst_desc())},
                                             {DNNL_ARG_DIFF_WEIGHTS, m(bwpd.diff_weights_desc())},
                                             {DNNL_ARG_DIFF_BIAS, m(b_d)},
                                             {DNNL_ARG_SCRATCHPAD, m(bwpd.scratchpad_desc())}};
    const double dnnl_t[3] = {best_time(reps,
                                        [&] {
                                          fwd.execute(strm, fa);
                                          strm.wait();
                                        }),
                              best_time(reps,
                                        [&] {
                                          bwd_d.execute(strm, da);
                                          strm.wait();
                                        }),
                              best_time(reps, [&] {
                                bwd_w.execute(strm, wa);
                                strm.wait();
                              })};
    const char* names[3] = {"fwd", "bwd_d", "bwd_w"};
    const char* impls[3] = {fpd.impl_info_str(), bdpd.impl_info_str(), bwpd.impl_info_str()};
    char conv[64];
    std::snprintf(conv, sizeof conv, "%d->%d k%d %d^2", l.ic, l.oc, l.k, h);
    for (int p = 0; p < 3; ++p) {
      tot_own[p] += own_t[p];
      tot_dnnl[p] += dnnl_t[p];
      std::printf("%-2d %-18s %-5s %8.1f %8.1f %6.2f  %s\n", idx, conv, names[p], flop / own_t[p] * 1e-9,
                  flop / dnnl_t[p] * 1e-9, dnnl_t[p] / own_t[p], impls[p]);
    }
    std::fflush(stdout);
  }
  const char* names[3] = {"fwd", "bwd_d", "bwd_w"};
  for (int p = 0; p < 3; ++p)
    std::printf("total %-5s own %7.1f ms (%5.1f GFLOP/s)  oneDNN %7.1f ms (%5.1f GFLOP/s)  speed ratio %.2f\n",
                names[p], tot_own[p] * 1e3, tot_flop / tot_own[p] * 1e-9, tot_dnnl[p] * 1e3,
                tot_flop / tot_dnnl[p] * 1e-9, tot_dnnl[p] / tot_own[p]);
  return 0;
}
