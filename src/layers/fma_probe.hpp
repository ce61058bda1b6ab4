// What the core's FMA units do with 512-bit vectors, measured once per process. Kernel
// choice depends on it: cores with two full-width units (Intel's server cores) run
// oneDNN's AVX-512 backward-weights faster than the own kernel; cores that split a 512-bit
// FMA in two (AMD Zen 4) run the own kernel faster (bench/kernels/README.md).
#pragma once

namespace tt {

// True when 512-bit FMAs reach about twice the FLOP rate of 256-bit ones on this core
// (false without AVX-512, or off x86).
bool full_width_avx512_fma();

}  // namespace tt
