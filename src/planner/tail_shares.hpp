// What each rank runs and holds of the layers after the cut, for the cost model
// (cost_model.cpp): all of them on the root, or with filter blocks (--tail filters) its
// blocks' share of each split convolution and the whole of every other layer.
#pragma once
#include <vector>

#include "model/net_spec.hpp"

namespace tt {

struct TailShares {
  const NetSpec* net = nullptr;
  int cut = 0, dense_begin = 0, tiles = 1, ranks = 1;
  bool filters = false;
  const std::vector<std::vector<int>>* local = nullptr;  // per rank: its tiles (block b goes with tile b)

  // Rank r's part of layer l >= cut.
  double share(int r, int l) const;
  // ... of the head (the layers from dense_begin, calibrated as one) by FLOPs.
  double head_share(int r) const;
  // The parameters after the cut that rank r keeps.
  double params(int r) const;
  // Filter blocks: those of the layers every rank runs whole (not split), which the root
  // alone updates and then sends to the others.
  double whole_params() const;
  // ... and what rank r applies SGD to after the cut, apart from the shared update (filter
  // blocks; else the tail is in it).
  double updated(int r) const { return filters ? params(r) - (r == 0 ? 0 : whole_params()) : 0; }
  // Bytes of maps and deltas rank r holds for the layers after the cut when it runs them
  // (the root, or every rank with filter blocks): the whole map at the cut and its delta
  // (`cut_map_bytes` each), the tail's runs and plain buffers, and the blocks' buffers.
  struct Memory {
    double maps = 0, deltas = 0;
  };
  Memory memory(int r, int batch, int channel_block, double cut_map_bytes) const;
};

}  // namespace tt
