#include "layers/backend.hpp"

#include "layers/own_conv.hpp"
#include "util/error.hpp"

namespace tt {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

KernelPath parse_kernel_path(const std::string& s) {
  if (s == "auto") return KernelPath::Auto;
  if (s == "onednn") return KernelPath::OneDnn;
  if (s == "own") return KernelPath::Own;
  fail("--kernels '", s, "' must be auto, onednn or own");
}

const char* kernel_path_name(KernelPath p) {
  switch (p) {
    case KernelPath::OneDnn:
      return "onednn";
    case KernelPath::Own:
      return "own";
    case KernelPath::Auto:
      break;
  }
  return "auto";
}

KernelConfig make_kernel_config(const dnnl::engine& eng, KernelPath path, int block) {
  using dnnl::memory;
  if (block != 0 && block != 8 && block != 16) fail("a channel block of ", block, " (8 or 16)");
  if (block != 0) return {path, block};
  const memory::desc src({1, 64, 52, 52}, dt::f32, tag::any), w({64, 64, 3, 3}, dt::f32, tag::any),
      dst({1, 64, 52, 52}, dt::f32, tag::any);
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src, w,
                                      dst, {1, 1}, {1, 1}, {1, 1}),
      eng);
  const auto& blk = pd.dst_desc().data.format_desc.blocking;
  KernelConfig c;
  c.path = path;
  const int b = blk.inner_nblks == 1 ? int(blk.inner_blks[0]) : 0;
  if (!is_reference_impl(pd.impl_info_str()) && (b == 8 || b == 16)) c.block = b;
  return c;
}

std::string cpu_isa_name() {
#if defined(__x86_64__)
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "x86-64 (no AVX2)";
  }
#elif defined(__aarch64__)
  return "aarch64 (" + own_conv_target() + ")";
#else
  return "unknown CPU";
#endif
}

bool is_reference_impl(const std::string& impl) {
  return impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos;
}

std::string slow_cpu_warning() {
#if defined(__x86_64__)
  const auto isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::sse41 || isa == dnnl::cpu_isa::avx)
    return "oneDNN has no AVX2 kernels on this CPU (it runs " + cpu_isa_name() + "; own kernels run " +
           own_conv_target() +
           "): training works, but expect it several times slower than on an AVX2 CPU of the "
           "same clock";
#endif
  return "";
}

}  // namespace tt
