// The test binary's own mmap and munmap (tests/mmap_probe.cpp), interposed for every caller
// in the process (the engine, oneDNN, OpenBLAS, OpenMP): tt::Buffer maps its pages itself
// (layers/dnnl_context.cpp), so operator new never sees the engine's large buffers, and a
// test that wants to know what the engine allocated asks here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tt::test {

// mmap calls by any caller since the process started.
long mmap_calls();

// One anonymous mapping made by this executable's own code (tiletrain_core and the tests,
// i.e. tt::Buffer; calls from shared libraries such as oneDNN's JIT are left out).
struct Mapping {
  uintptr_t addr = 0;
  size_t bytes = 0;       // as mapped: a whole number of pages
  bool unmapped = false;  // munmap'ed since
};
// Between start_recording() and stop_recording(), every such mapping is recorded (the list
// restarts empty at start_recording); munmap marks recorded mappings `unmapped` at any time.
void start_recording();
void stop_recording();
std::vector<Mapping> recorded();
// Bytes of the mapping's pages that are in memory, i.e. were touched since mapped (mincore).
size_t resident_bytes(const Mapping& m);
size_t page_bytes();

}  // namespace tt::test
