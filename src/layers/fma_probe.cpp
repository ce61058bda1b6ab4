#include "layers/fma_probe.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tt {

#if defined(__x86_64__)
namespace {

// Independent FMA chains, enough to keep two units busy at four cycles' latency; the
// result is returned so the loop is not optimised away. FLOPs: iters x kChains x lanes x 2.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float chains512(long iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(float(k));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, c);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float chains256(long iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(float(k));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, c);
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float r = 0;
  for (float x : lanes) r += x;
  return r;
}

template <class F>
double seconds(F f, long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = f(iters);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Each width timed 9 times in turns (about 0.2 ms each on a 3 GHz core), the best of each:
// a busy machine (several ranks starting at once on few cores) slows single runs, not the
// best of nine, and every process must come to the same answer (its ranks' gradients are
// summed bit for bit alike only if their tiles run the same kernels).
bool measure() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("fma")) return false;
  constexpr long kIters = 100000;
  double best512 = 1e9, best256 = 1e9;
  chains512(kIters / 10), chains256(kIters / 10);  // wake the 512-bit units up
  for (int r = 0; r < 9; ++r) {
    best512 = std::min(best512, seconds(chains512, kIters));
    best256 = std::min(best256, seconds(chains256, kIters));
  }
  const double ratio = (16. / best512) / (8. / best256);  // FLOP rates, 512-bit over 256-bit
  return ratio > 1.5;  // 1.87 on a Xeon with two units, about 1 where a 512-bit FMA takes two passes
}

}  // namespace
#endif

namespace {

bool measured() {
#if defined(__x86_64__)
  static const bool full = measure();
  return full;
#else
  return false;
#endif
}

std::optional<bool>& agreed() {
  static std::optional<bool> full;
  return full;
}

}  // namespace

bool full_width_avx512_fma() { return agreed() ? *agreed() : measured(); }
void set_full_width_avx512_fma(bool full) { agreed() = full; }

}  // namespace tt
