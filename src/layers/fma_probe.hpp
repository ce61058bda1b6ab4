// What the core's FMA units do with 512-bit vectors, measured once per process. Kernel
// choice depends on it: cores with two full-width units (Intel's server cores) run
// oneDNN's AVX-512 backward-weights faster than the own kernel; cores that split a 512-bit
// FMA in two (AMD Zen 4) run the own kernel faster (bench/kernels/README.md).
#pragma once

namespace tt {

// True when 512-bit FMAs reach about twice the FLOP rate of 256-bit ones on this core
// (false without AVX-512, or off x86), or what set_full_width_avx512_fma said.
bool full_width_avx512_fma();
// Every process of a run must choose the same kernels, so that their tiles' gradients sum
// bit for bit alike: the Trainer sets rank 0's answer on every rank before it builds them.
void set_full_width_avx512_fma(bool full);

}  // namespace tt
