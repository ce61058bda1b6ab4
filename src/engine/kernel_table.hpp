// Which kernel runs each convolution pass: the table `tiletrain info` prints, `bench
// --json` reports, and the source of the warning every subcommand prints when a
// reference (unoptimised) kernel would run.
#pragma once
#include <string>
#include <vector>

#include "layers/conv.hpp"
#include "model/net_spec.hpp"

namespace tt {

struct KernelUse {
  int layer = 0;
  ConvPass pass = ConvPass::Forward;
  std::string impl;  // "jit:avx2", "own:neon", "ref:any", ...
  bool operator==(const KernelUse&) const = default;
};

// The kernels an untiled run of `net` (its batch, subdivisions applied) would use on
// this CPU: forward, backward-data (not for the first layer unless `input_delta`) and
// backward-weights of every convolution; layers from `cut` on (-1: the default cut)
// as the tail runs them.
std::vector<KernelUse> planned_kernels(const NetSpec& net, const DnnlContext& ctx, int cut = -1,
                                       bool input_delta = false);

// One line naming every layer and pass that runs a reference kernel, and what that
// costs; empty when none does.
std::string reference_kernel_warning(const std::vector<KernelUse>& uses);

}  // namespace tt
