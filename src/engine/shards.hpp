// Sharded weights (--low-memory), after ZeRO-3: the convolution weights of the tiled
// layers, concatenated, are split into one contiguous part per process. A process keeps
// only its part of those weights, of their gradient and of their momentum between uses
// (the pages of the other parts are handed back); a layer's weights are all-gathered
// just before its forward and again before its backward, and its weight gradient is
// reduce-scattered right after its backward. Everything else (biases, batch-norm scales,
// the untiled layers and the dense head: small) stays replicated and is all-reduced once
// per batch. The SGD update is elementwise, so every process updates its part exactly as
// a replicated run would.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "model/params.hpp"

namespace tt {

struct ShardPlan {
  struct Layer {
    int64_t offset = 0, n = 0;        // the layer's weights in Params::values; n == 0: not sharded
    std::vector<int> counts, displs;  // each process's part, relative to offset
  };
  using Range = std::pair<int64_t, int64_t>;  // [begin, end) in Params::values
  int rank = 0;
  std::vector<Layer> layers;      // per net layer
  std::vector<Range> replicated;  // what every process keeps: all but the sharded weights
  std::vector<Range> owned;       // this process's parts of the sharded weights
  int64_t max_layer = 0;          // largest sharded layer, floats

  Range mine(const Layer& l) const {
    return {l.offset + l.displs[size_t(rank)], l.offset + l.displs[size_t(rank)] + l.counts[size_t(rank)]};
  }
  static int64_t total(const std::vector<Range>& rs) {
    int64_t n = 0;
    for (const Range& r : rs) n += r.second - r.first;
    return n;
  }
};

// Shards the weights of the tiled layers in [first, last) that have weights over `size`
// processes; `replicated` covers the rest of [0, end) (end < 0: the whole vector).
ShardPlan make_shard_plan(const NetSpec& net, const Params& p, int first, int last, int rank, int size,
                          int64_t end = -1);

}  // namespace tt
