// act(a·x + b) on one pixel's channel block: the forward batch-norm and activation, shared
// by affine_act_forward and the max-pool that applies it to its input on the fly, so that
// both give the same bits (the same expression, contracted the same way).
#pragma once
#include <type_traits>

#include "layers/simd_block.hpp"
#include "model/net_spec.hpp"
#include "util/error.hpp"

namespace tt {

// Acts with a vector form (Logistic and Ramp have none).
inline bool vector_act(Act act) { return act == Act::Leaky || act == Act::Relu || act == Act::Linear; }

template <int B, Act A>
struct AffineAct {
  using K = Block<B>;
  typename K::V a, b;
  typename K::V operator()(typename K::V x) const {
    static_assert(A == Act::Leaky || A == Act::Relu || A == Act::Linear, "no vector form");
    const typename K::V v = a * x + b, zero = K::splat(0.f);
    if constexpr (A == Act::Leaky) return v > zero ? v : v * 0.1f;
    if constexpr (A == Act::Relu) return v > zero ? v : zero;
    return v;
  }
};

// The factors of channel block blk of a[] and b[] (padded lanes 0).
template <int B, Act A>
AffineAct<B, A> affine_act_of(const float* a, const float* b, int blk, int C) {
  float aa[B], bb[B];
  for (int c = 0; c < B; ++c) {
    const bool real = blk * B + c < C;
    aa[c] = real ? a[blk * B + c] : 0.f;
    bb[c] = real ? b[blk * B + c] : 0.f;
  }
  return {Block<B>::load(aa), Block<B>::load(bb)};
}

// Calls f(std::integral_constant<Act, A>{}) for an act with a vector form.
template <class F>
decltype(auto) with_vector_act(Act act, F&& f) {
  switch (act) {
    case Act::Leaky:
      return f(std::integral_constant<Act, Act::Leaky>{});
    case Act::Relu:
      return f(std::integral_constant<Act, Act::Relu>{});
    case Act::Linear:
      return f(std::integral_constant<Act, Act::Linear>{});
    case Act::Logistic:
    case Act::Ramp:
      break;
  }
  fail("internal: ", act_name(act), " has no vector form");
}

}  // namespace tt
