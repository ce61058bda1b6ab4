// fuzz_weights: the readers of trained state, for a small fixed net (tests/fixtures/fc:
// a batch-normalized convolution and two connected layers, so every array kind and
// Darknet's transposed connected weights are reachable). The first byte picks:
//   even  tt::load_weights: the rest is the .weights file
//   odd   tt::load_checkpoint: the rest is meta.json, weights and momentum, separated by
//         fuzz::kSeparator, laid out as DIR/step-00000007/{meta.json,weights,momentum}
// A tt::Error is the correct answer to a bad file; anything else is a finding.
#include <cstdint>
#include <string_view>

#include "engine/checkpoint.hpp"
#include "fuzz_util.hpp"
#include "model/net_spec.hpp"
#include "model/params.hpp"
#include "util/error.hpp"

namespace {
const tt::NetSpec& net() {
  static const tt::NetSpec n = tt::load_net(TILETRAIN_SOURCE_DIR "/tests/fixtures/fc/net.cfg");
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const fuzz::Scratch& s = fuzz::scratch();
  tt::Params p(net());
  try {
    if (data[0] % 2 == 0) {
      tt::load_weights(p, net(), s.write("net.weights", in));
    } else {
      s.clear();
      const auto parts = fuzz::split(in, 3);
      s.write("ckpt/step-00000007/meta.json", parts[0]);
      s.write("ckpt/step-00000007/weights", parts[1]);
      s.write("ckpt/step-00000007/momentum", parts[2]);
      const tt::Checkpoint c = tt::load_checkpoint(s.dir() + "/ckpt", net(), p);
      volatile float sink = c.momentum.empty() ? 0.f : c.momentum[0];
      (void)sink;
    }
    volatile float sink = p.values[0] + float(p.seen);
    (void)sink;
  } catch (const tt::Error&) {
  }
  return 0;
}
