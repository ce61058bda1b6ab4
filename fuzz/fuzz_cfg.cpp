// fuzz_cfg: tt::load_net on an arbitrary .cfg, then what its callers (info, plan, the
// engine's setup) ask of the result: the cut, each layer's inputs, FLOPs, parameter
// counts, truth size, the learning-rate schedule and the planner's net signature.
// A tt::Error is the correct answer to a bad cfg; anything else is a finding.
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "model/net_spec.hpp"
#include "planner/device_model.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::scratch().write("net.cfg", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const tt::NetSpec net = tt::load_net(path);
    volatile double sink = 0;
    sink = sink + net.max_cut() + net.first_untileable() + double(net.truth_size()) + net.micro_batch();
    sink = sink + net.rate_at(0) + net.rate_at(int64_t(net.max_batches) + 1) + double(net.detector());
    for (int l = 0; l < int(net.layers.size()); ++l) {
      for (int i : net.inputs_of(l)) sink = sink + double(net.layers.at(size_t(i)).out.size());
      const tt::LayerSpec& s = net.layers[size_t(l)];
      sink = sink + s.forward_flops() + double(s.param_count()) + double(s.weight_count()) + double(s.in.size());
    }
    sink = sink + double(tt::net_signature(net).size());
  } catch (const tt::Error&) {
  }
  return 0;
}
