// fuzz_cluster: the planner's readers. The first byte picks:
//   even  tt::load_cluster of the rest as a cluster file, with the tree's
//         cluster/profiles.conf, then what `plan --cluster` does with it: every link,
//         every profile, the cost model's resolve_cluster for cfgs/yolov2-16.cfg (the net
//         the tree's calibrated models are for), and the file written back out and read
//         again (cluster_to_json documents that this gives the same cluster)
//   odd   nlohmann::json::parse of the rest (a syntax error is no finding: the project
//         parses through its own checked reader), tt::device_model_from_json, and, when
//         the model is for that net, derive_size_correction and correction() as the cost
//         model uses them
// A tt::Error is the correct answer to a bad file; anything else is a finding.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz_util.hpp"
#include "model/net_spec.hpp"
#include "planner/cluster.hpp"
#include "planner/cost_model.hpp"
#include "planner/device_model.hpp"
#include "util/error.hpp"

namespace {
const tt::NetSpec& net() {
  static const tt::NetSpec n = tt::load_net(TILETRAIN_SOURCE_DIR "/cfgs/yolov2-16.cfg");
  return n;
}
const std::string& signature() {
  static const std::string s = tt::net_signature(net());
  return s;
}
const std::string kProfiles = TILETRAIN_SOURCE_DIR "/cluster/profiles.conf";

void use_cluster(const tt::ClusterSpec& c) {
  volatile double sink = 0;
  for (int a = 0; a < int(c.devices.size()); ++a) {
    if (const tt::Profile* p = c.profile_of(a)) sink = sink + p->gflops;
    for (int b = 0; b < int(c.devices.size()); ++b) sink = sink + c.link(a, b).bytes_per_s();
    sink = sink + c.device_index(c.devices[size_t(a)].name) + c.device_of_host(c.devices[size_t(a)].host);
  }
  const tt::ClusterModel m = tt::resolve_cluster(c, net(), nullptr);
  sink = sink + double(m.models.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    // A cluster file may name model files anywhere: not devices and kernel files that never end.
    for (std::string_view dev : {"/dev", "/proc", "/sys"})
      if (in.find(dev) != std::string_view::npos) return 0;
    tt::ClusterSpec c;
    try {
      c = tt::load_cluster(fuzz::scratch().write("cluster.json", in), kProfiles);
    } catch (const tt::Error&) {
      return 0;
    }
    try {
      const tt::ClusterSpec again = tt::parse_cluster(tt::cluster_to_json(c), c.path, {});
      if (again.devices.size() != c.devices.size()) {
        std::fprintf(stderr, "fuzz_cluster: cluster_to_json lost devices\n");
        std::abort();
      }
    } catch (const tt::Error& e) {
      std::fprintf(stderr, "fuzz_cluster: cluster_to_json of a cluster it read does not read back: %s\n", e.what());
      std::abort();
    }
    try {
      use_cluster(c);
    } catch (const tt::Error&) {
    }
  } else {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      return 0;
    }
    try {
      tt::DeviceModel m = tt::device_model_from_json(j, "fuzz.model.json");
      if (m.signature == signature()) {
        tt::derive_size_correction(m, net());
        volatile double sink = 0;
        for (int l = 0; l < int(m.layers.size()); ++l)
          for (double cells : {1.0, 100.0, 1e4, 1e6}) sink = sink + m.correction(l, cells);
      }
    } catch (const tt::Error&) {
    }
  }
  return 0;
}
