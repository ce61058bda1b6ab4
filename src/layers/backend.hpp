// Which convolution kernels run, chosen once per process: oneDNN's JIT kernels where this
// CPU has them, tiletrain's own (Highway, src/layers/own_conv.hpp) where oneDNN would fall
// back to a reference kernel (every NEON-only ARM CPU) and where exactness needs a fixed
// summation order; and the channel block of every blocked map, which is oneDNN's own
// preference on this CPU (8 on AVX2, 16 on AVX-512), never a constant.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace tt {

enum class KernelPath {
  Auto,    // oneDNN where it has a JIT kernel, own kernels elsewhere
  OneDnn,  // oneDNN everywhere (also its reference kernels), except the 1x1 forward (exactness)
  Own,     // own kernels everywhere
};
KernelPath parse_kernel_path(const std::string& s);  // auto | onednn | own; throws otherwise
const char* kernel_path_name(KernelPath p);

struct KernelConfig {
  KernelPath path = KernelPath::Auto;
  int block = 8;  // channel block of blocked maps: 8 or 16
};
// Asks oneDNN which layout it picks for a typical convolution (format_tag::any): its
// channel block if that is a JIT kernel on blocks of 8 or 16, else 8 (own kernels).
// `block` 8 or 16 imposes one instead (tests: the other CPU kind's layout on this one).
KernelConfig make_kernel_config(const dnnl::engine& eng, KernelPath path, int block = 0);

// "avx2", "avx512_core", "sse41", "aarch64 (neon)" ...: what oneDNN runs on this CPU.
std::string cpu_isa_name();
// A oneDNN implementation that is a reference (unoptimised) kernel: ref:any, gemm:ref ...
bool is_reference_impl(const std::string& impl);
// One line for a CPU where no fast kernel path exists (x86 without AVX2), else empty.
std::string slow_cpu_warning();

}  // namespace tt
