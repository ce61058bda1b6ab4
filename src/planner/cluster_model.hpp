// A cluster as the cost model sees it: every device with a calibrated kernel model (its
// own, or another device's scaled by its profile's speed).
#pragma once
#include <vector>

#include "model/net_spec.hpp"
#include "planner/cluster.hpp"
#include "planner/device_model.hpp"

namespace tt {

// A cluster with every device's speed resolved: its own calibrated model, or another
// device's (or a reference) model scaled by profile GFLOP/s.
struct ClusterModel {
  ClusterSpec spec;
  std::vector<DeviceModel> models;  // per device
  std::vector<double> slowdown;     // per device: its times are the model's x this (1: its own)
  std::vector<double> capacity;     // per device: cores the model's process could use
};
// `reference`: model for devices with only a profile (null: a calibrated device's).
// Throws when a model was calibrated on another net, or no device has any model.
ClusterModel resolve_cluster(const ClusterSpec& c, const NetSpec& net, const DeviceModel* reference);
// A cluster of this one machine, for a model calibrated here: `cores` cores, ranks talk
// over shared memory (`shm`).
ClusterModel local_cluster(const DeviceModel& m, int cores, double memory_mb, const LinkSpec& shm);

}  // namespace tt
