// SplitMix64's finaliser: a well-mixed 64-bit hash, for the engine's random draws that must
// be the same on every rank and partition (dropout masks, augmentation, crops), drawn from
// the run's seed, the step and an index instead of a generator's state.
#pragma once
#include <cstdint>

namespace tt {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace tt
