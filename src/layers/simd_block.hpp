// One pixel's channel block (B consecutive floats of a blocked map) as a GCC vector: one
// AVX2 register for B = 8, one AVX-512 register for B = 16, two or four NEON registers;
// plain scalars for B = 1 (plain NCHW maps). The elementwise loops (batch-norm,
// activations, max-pool) are written with it because the compiler does not vectorise a
// fully unrolled loop over B channels with a select in it. Lanes
// stay independent: per-channel results and summation orders are the scalar loops'.
#pragma once
#include <cstdint>
#include <cstring>

// Block<16> passes 64-byte vectors by value on an AVX2 build; these helpers are inline and
// never cross a library boundary, so the ABI note GCC gives for that (in every file that
// uses them) does not matter.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tt {

template <int B>
struct Block {
  typedef float V __attribute__((vector_size(B * sizeof(float))));
  typedef int32_t I __attribute__((vector_size(B * sizeof(int32_t))));
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
  static V splat(float x) { return V{} + x; }
  // B bytes (e.g. max-pool winners) widened to / narrowed from one int per lane (GCC
  // compiles these loops to one zero-extend or pack). Templates: GCC 12 types the
  // vector members as scalars inside the class template's own definitions.
  template <class T = I>
  static T load_bytes(const uint8_t* p) {
    T v;
    for (int c = 0; c < B; ++c) v[c] = p[c];
    return v;
  }
  template <class T>
  static void store_bytes(uint8_t* p, T v) {
    for (int c = 0; c < B; ++c) p[c] = uint8_t(v[c]);
  }
};

template <>
struct Block<1> {
  typedef float V;
  typedef int32_t I;
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V splat(float x) { return x; }
  static I load_bytes(const uint8_t* p) { return *p; }
  template <class T>
  static void store_bytes(uint8_t* p, T v) {
    *p = uint8_t(v);
  }
};

// The same B lanes as N vectors of L <= 8 lanes each, widened to double for sums that must
// not depend on how cells are split between tiles. Eight doubles are one AVX-512 or two
// AVX2 registers; one vector of 16 doubles compiled to much slower code (GCC 12).
template <int B>
struct Wide {
  static constexpr int L = B < 8 ? B : 8, N = B / L;
  typedef float F __attribute__((vector_size(L * sizeof(float))));
  typedef double D __attribute__((vector_size(L * sizeof(double))));
  // Templates for the same reason as Block's byte helpers.
  template <class T = D, class U = F>
  static T load(const float* p) {
    U v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, T);
  }
  template <class T = D>
  static T load(const double* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <class T>
  static void store(double* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
};

}  // namespace tt
