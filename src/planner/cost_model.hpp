// The planner's cost model: for a partition of a net over a cluster, the predicted step
// time and peak memory of every rank. It prices, rank by rank on the calibrated kernel
// models (device_model.hpp), the steps the engine's Segment runs (engine/schedule.hpp:
// the input scatter over rank 0's link, each layer's compute on every tile of the rank,
// redundant cells included, the batch-norm sums and halo exchanges that make ranks wait
// for each other, the sharded weights' traffic), then the gather at the cut, the untiled
// tail on rank 0, and the gradient exchange and the update.
// Memory: the Segment's own memory plan (memory_plan.hpp) for maps and deltas, the
// weights, gradients and momentum each rank keeps, and the device's calibrated base.
#pragma once
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "model/net_spec.hpp"
#include "planner/cluster_model.hpp"
#include "planner/collective_cost.hpp"
#include "planner/device_model.hpp"
#include "planner/partition.hpp"
#include "tiling/plan.hpp"

namespace tt {

struct RankPrediction {
  int device = 0;
  double step_s = 0, fwd_s = 0, bwd_s = 0, halo_s = 0, weights_s = 0, io_s = 0, update_s = 0;
  double peak_rss_mb = 0, maps_mb = 0, deltas_mb = 0, filters_mb = 0;
};
struct Prediction {
  // The names bench --json uses: step_s is the step's wall time, the parts are the
  // largest over ranks (as bench reports them).
  double step_s = 0, fwd_s = 0, bwd_s = 0, halo_s = 0, weights_s = 0, io_s = 0, update_s = 0;
  double peak_rss_mb_max = 0;
  std::vector<RankPrediction> ranks;
  std::vector<double> memory_short_mb;  // per device: how much its ranks exceed 90 % of its memory (<= 0: fits)
  bool fits() const;
  // From `ranks`: the parts as the largest over them, and each device's shortfall (its
  // ranks' peak memory over 90 % of the device's memory; devices without ranks: -inf).
  void summarize(const ClusterSpec& spec);
  // Counts behind the prediction (tested against brute force): per sample and step.
  double cells_computed = 0;  // forward cells of every tile and layer (redundant included)
  double halo_bytes = 0;      // forward and backward halo bytes between different ranks (and backward features)
  int halo_messages = 0;
  // Per layer before the cut: how much later the last rank finishes because of the layer
  // over the step's micro-batches (a tiled layer's forward with the halo before it, its
  // backward with the halo after it; the input scatter counts to the first tiled layer, a
  // [crop] before it to itself). With the cut, the tail and the update they add up to
  // step_s. The grouping search adds these up per group (optimizer.hpp).
  std::vector<double> layer_s;
};

// Throws when the partition does not fit the net or the cluster (too few devices).
Prediction predict(const NetSpec& net, const Partition& p, const ClusterModel& cm);
// The same for a data-parallel partition (replicas_cost.cpp); predict() hands those to it.
Prediction predict_replicas(const NetSpec& net, const Partition& p, const ClusterModel& cm);

nlohmann::json prediction_to_json(const Prediction& p);

// A device under a CPU quota computes at its unpaused speed in bursts between waits, but no
// step is shorter than its compute with the quota's pauses (DeviceModel::paused, which the
// kernels' fits leave out; the update and the formatting were timed as long phases, pauses
// included): alone, MobileNetV2 at 0.45 of a core took 2.4 times its unpaused kernels. When
// that bound is longer than the ranks' `clock`s, they all end at it: the bound device's
// ranks' compute stretches, the others wait (priced as halo waits, as at a synchronisation).
struct AloneCompute {
  std::vector<double> cpu;      // per rank: its forward, backward and update work, at its device's speed alone
  std::vector<double> kernels;  // the part of it from the layer fits
};
void stretch_to_quota_pauses(const ClusterModel& cm, const std::vector<int>& rank_dev, const AloneCompute& alone,
                             std::vector<double>& clock, std::vector<RankPrediction>& ranks);

}  // namespace tt
