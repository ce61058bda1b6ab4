// Per Highway target, what both own convolution kernels use: the register budget that
// sizes their micro-kernels, and two small helpers. Included by own_conv_maps.cpp and
// own_conv_weights.cpp after <hwy/highway.h>, once per target (Highway's -inl toggle:
// no include guard of the usual kind).
#if defined(TT_LAYERS_OWN_CONV_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef TT_LAYERS_OWN_CONV_INL_HPP_
#undef TT_LAYERS_OWN_CONV_INL_HPP_
#else
#define TT_LAYERS_OWN_CONV_INL_HPP_
#endif

#include <hwy/highway.h>

#include <algorithm>

#include "layers/own_conv_common.hpp"

HWY_BEFORE_NAMESPACE();
namespace tt::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using own_detail::cdiv;
using own_detail::first_congruent;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
constexpr int kRegs = 32;
#else
constexpr int kRegs = 16;
#endif

template <int B>
struct Cfg {
  using D = hn::CappedTag<float, B>;
  static constexpr int L = int(hn::MaxLanes(D()));
  static_assert(B % L == 0, "block must be whole vectors");
  static constexpr int NV = B / L;  // vectors per channel block
  // forward / backward-data: output blocks and pixels per micro-kernel call
  static constexpr int OBN = (NV == 1 || kRegs == 32) ? 2 : 1;
  static constexpr int PMAX = std::min(12, (kRegs - 1 - OBN * NV) / (OBN * NV));
  // backward-weights: weight rows (lanes i, or kx taps for plain input) x output blocks
  static constexpr int WT = (kRegs == 32 && NV == 1) ? 8 : 4;
  static constexpr int WOBN = std::clamp((kRegs - 1) / ((WT + 1) * NV), 1, 3);
};

// Calls f.template operator()<N>() with N = n in [1, NMAX].
template <int NMAX, class F>
HWY_INLINE void WithN(int n, F&& f) {
  if constexpr (NMAX >= 3)
    if (n == 3) return f.template operator()<3>();
  if constexpr (NMAX >= 2)
    if (n == 2) return f.template operator()<2>();
  if (n == 1) return f.template operator()<1>();
  HWY_ASSERT(false);
}

// Threads only for calls big enough to pay for waking them (many small tiles run faster
// on one thread, and a loaded machine makes idle OpenMP threads expensive).
inline bool Parallel(const OwnConvShape& s, long pixels) {
  return double(s.n) * pixels * s.ic * s.oc * s.k * s.k > 4e6;
}

}  // namespace tt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TT_LAYERS_OWN_CONV_INL_HPP_
