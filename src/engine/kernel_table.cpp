#include "engine/kernel_table.hpp"

#include "tiling/plan.hpp"

namespace tt {

std::vector<KernelUse> planned_kernels(const NetSpec& net, const DnnlContext& ctx, int cut, bool input_delta) {
  std::vector<KernelUse> uses;
  cut = resolve_cut(net, cut);
  int cb = 1;  // the input map is plain; every convolution writes the blocked layout
  const int n = net.micro_batch();
  for (const LayerSpec& s : net.layers) {
    if (!s.is(kConvKind)) continue;
    const ConvGeom g = conv_geom(n, s.in.c, s.out.c, s.window(), full_box(s.out.h, s.out.w), s.in.h, s.in.w,
                                 ctx.config.block, cb, !s.batch_normalize(), s.conv().groups);
    for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
      if (p == ConvPass::BackwardData && s.index == 0 && !input_delta) continue;
      uses.push_back({s.index, p, choose_conv(ctx, g, p, s.index < cut).name});
    }
    cb = ctx.config.block;
  }
  return uses;
}

std::string reference_kernel_warning(const std::vector<KernelUse>& uses) {
  std::string where;
  for (const KernelUse& u : uses)
    if (is_reference_impl(u.impl))
      where += (where.empty() ? "" : ", ") + std::string("layer ") + std::to_string(u.layer) + " " +
               conv_pass_name(u.pass) + " (" + u.impl + ")";
  if (where.empty()) return "";
  return "warning: oneDNN's reference convolution runs for " + where +
         ": expect those passes about 1000x slower than a JIT or own kernel (measured: a Fashion-MNIST step 19.4 s "
         "instead of 7 ms); --kernels auto runs own kernels there";
}

}  // namespace tt
