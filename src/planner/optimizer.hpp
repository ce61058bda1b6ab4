// The partition search behind `plan --optimize`: grids, tiles per rank, cuts and
// --low-memory enumerated; for each, the grouping of the tiled layers chosen by dynamic
// programming over the cost model's per-layer times (cost_model.hpp); everything
// predicted, what does not fit a device's memory set aside.
#pragma once
#include <string>
#include <vector>

#include "model/net_spec.hpp"
#include "planner/cost_model.hpp"

namespace tt {

// The grouping of layers [0, base.cut) that the model predicts fastest for `base` (its
// group_starts ignored). Up to 2^kExhaustiveGroupingBits groupings: every one of them is
// predicted. Beyond: dynamic programming, best[e] = min over s of best[s] + cost(s, e),
// cost(s, e) being the predicted time of layers [s, e) as one group, then single group
// boundaries toggled while the prediction improves. `replays` counts predictions.
constexpr int kExhaustiveGroupingBits = 12;
std::vector<int> best_grouping(const NetSpec& net, const Partition& base, const ClusterModel& cm, int* replays);

struct SearchOptions {
  int max_tiles = 0;  // 0: every core of the cluster
  int max_side = 8;   // rows and columns of a grid at most
  int top = 5;
  bool low_memory = true;  // also try --low-memory
  int dp_configs = 12;     // the most promising configurations get the grouping search
};

struct Candidate {
  Partition part;
  Prediction pred;
};

struct SearchResult {
  std::vector<Candidate> best;  // fastest first, all fitting
  Candidate least_memory;       // when nothing fits: the one closest to fitting
  int configs = 0, replays = 0;
  double seconds = 0;
};

SearchResult optimize(const NetSpec& net, const ClusterModel& cm, const SearchOptions& o);

// Rows and columns weighted by the convolution throughput of the devices their tiles run
// on (each device's calibrated model, or the reference model scaled by its speed factor).
TileSplit split_by_speed(const Partition& p, const ClusterModel& cm);

// How the searched runs were asked for: the options besides the partition that change
// what is trained (e.g. " --batch 4 --size 96x96"), and the cluster's hosts.
struct RunContext {
  std::string run_args;
  std::vector<std::string> hosts;  // per device; devK for devices of cluster/edge.sh
};
// The command line that runs a candidate on the cluster: cluster/edge.sh run for an emulated
// cluster, mpirun --hostfile for real hosts, plain mpirun on one host.
std::string command_line(const std::string& cfg, const Candidate& c, const RunContext& ctx);

}  // namespace tt
