#include "planner/cluster_model.hpp"

#include <algorithm>
#include <string>

#include "util/error.hpp"

namespace tt {

ClusterModel resolve_cluster(const ClusterSpec& c, const NetSpec& net, const DeviceModel* reference) {
  ClusterModel cm;
  cm.spec = c;
  const std::string sig = net_signature(net);
  std::vector<int> calibrated;
  for (size_t d = 0; d < c.devices.size(); ++d) {
    const DeviceSpec& dev = c.devices[d];
    if (dev.model.is_null()) continue;
    DeviceModel m = device_model_from_json(
        dev.model, c.path + ": devices[" + std::to_string(d) + "].model (" + dev.model_source + ")");
    if (m.signature != sig)
      fail(c.path, ": devices[", d, "].model was calibrated on ", m.cfg, ", a different net than ", net.path,
           ": run tiletrain calibrate --cfg ", net.path);
    derive_size_correction(m, net);
    cm.models.resize(c.devices.size());
    cm.models[d] = std::move(m);
    calibrated.push_back(int(d));
  }
  if (!reference && calibrated.empty())
    fail(c.path, ": no device has a calibrated model for ", net.path,
         ", and none was given (plan --model FILE): run tiletrain calibrate --cfg ", net.path, " --out FILE");
  DeviceModel ref = reference ? *reference : cm.models[size_t(calibrated[0])];
  if (reference) derive_size_correction(ref, net);  // a calibrated device's was derived above
  cm.models.resize(c.devices.size());
  for (size_t d = 0; d < c.devices.size(); ++d) {
    const DeviceSpec& dev = c.devices[d];
    if (!dev.model.is_null()) {
      cm.slowdown.push_back(1 / dev.speed);
      cm.capacity.push_back(cm.models[d].cpu_capacity);
      continue;
    }
    // Only a profile: the reference model scaled by one core's speed.
    const Profile* pr = c.profile_of(int(d));
    if (!pr) fail(c.path, ": devices[", d, "] has neither a model nor a profile");
    cm.models[d] = ref;
    cm.models[d].paused = 1;  // a profile is a device's own cores, not the reference's quota
    cm.slowdown.push_back(ref.gflops / std::max(1, ref.threads) / (pr->gflops * dev.speed));
    cm.capacity.push_back(dev.cores);
  }
  return cm;
}

ClusterModel local_cluster(const DeviceModel& m, int cores, double memory_mb, const LinkSpec& shm) {
  ClusterModel cm;
  DeviceSpec d;
  d.name = d.host = m.host;
  d.cores = cores;
  d.memory_mb = memory_mb;
  d.model = device_model_to_json(m);
  d.model_source = "(calibrated here)";
  cm.spec.devices.push_back(d);
  cm.spec.shared_memory = shm;
  cm.spec.bandwidth_mbit = shm.bandwidth_mbit;
  cm.spec.latency_us = shm.latency_us;
  cm.models.push_back(m);
  cm.slowdown.push_back(1);
  cm.capacity.push_back(m.cpu_capacity);
  return cm;
}

}  // namespace tt
