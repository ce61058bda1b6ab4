// A partition of a net over a cluster, as the command line gives it: what the cost model
// prices and the optimizer searches over.
#pragma once
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "tiling/plan.hpp"

namespace tt {

// One partition, as the command line gives it (plus how ranks are placed on devices).
struct Partition {
  int rows = 1, cols = 1;
  std::vector<int> group_starts;  // empty: a group per layer (--groups none)
  int cut = -1;                   // -1: the default cut
  int tiles_per_rank = 1;
  int ranks_per_device = 1;  // ranks [k*R, (k+1)*R) run on device k (edge.sh run --ranks-per-device)
  bool low_memory = false;
  TileSplit split;  // uneven rows / columns (empty: even)
  BackwardFeatures features = BackwardFeatures::Recompute;
  Overlap overlap = Overlap::Auto;  // as the engine does it (trainer.hpp): across devices
  // Data parallel (trainer.hpp, TrainOptions::replicas): this many whole copies, one process
  // each, the grid tiling each copy inside its process; 0: the processes share the tiles.
  int replicas = 0;
  // --tail filters (trainer.hpp, TailMode::Filters): every rank runs the layers after the
  // cut, each convolution's filters split into a block per tile.
  bool tail_filters = false;
  int ranks() const { return replicas > 0 ? replicas : rows * cols / tiles_per_rank; }
  std::string groups_str() const;   // "none", or "0,4,8"
  std::string str() const;          // "grid 2x2, groups 0,4,8, cut 16, 1 tile/rank, ..."
  std::string split_flags() const;  // " --row-weights 1,1 --col-weights 2,1", or empty
  std::string flags() const;        // what --cut etc. do not say: " --low-memory --backward-features exchange" ...
};

}  // namespace tt
