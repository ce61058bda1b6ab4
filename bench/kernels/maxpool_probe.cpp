// Max-pool forward and backward alone on a 2x2/2 pool, blocks 8 and 16, best of 30 (the
// ninth session's figures in bench/archive/RESULTS-until-2026-11-26.md). Build and run against the library:
//   g++ -O2 -march=native -std=c++20 -Isrc bench/kernels/maxpool_probe.cpp build/libtiletrain_core.a -o /tmp/mpb && /tmp/mpb
#include "layers/maxpool.hpp"
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
using namespace tt;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  for (int cb : {8, 16}) for (int c : {16, 128}) {
    int hw = c == 16 ? 416 : 104;
    Box ib{0, hw, 0, hw}, ob{0, hw / 2, 0, hw / 2};
    Window w{2, 2, 0};
    size_t n = size_t(tensor_floats(1, c, cb, ib)), no = size_t(tensor_floats(1, c, cb, ob));
    std::vector<float> x(n), dx(n), y(no), dy(no);
    std::vector<uint8_t> arg(no);
    for (size_t i = 0; i < n; ++i) x[i] = float((i * 7919) % 1000);
    for (size_t i = 0; i < no; ++i) dy[i] = float(i % 13);
    TensorView tx{x.data(), 1, c, cb, ib}, tdx{dx.data(), 1, c, cb, ib}, ty{y.data(), 1, c, cb, ob}, tdy{dy.data(), 1, c, cb, ob};
    double best[2] = {1e9, 1e9};
    for (int rep = 0; rep < 30; ++rep) {
      double t0 = now(); maxpool_forward(tx, ty, ob, arg.data(), ob, w);
      double t1 = now(); maxpool_backward(tdy, ob, ob, arg.data(), tdx, w);
      double t2 = now();
      best[0] = std::min(best[0], t1 - t0); best[1] = std::min(best[1], t2 - t1);
    }
    double cs = 0; for (float v : dx) cs += v; for (float v : y) cs += v;
    std::printf("cb %2d c %3d %3dx%3d  fwd %.3f  bwd %.3f ms  (check %.0f)\n", cb, c, hw, hw, best[0]*1e3, best[1]*1e3, cs);
  }
}
