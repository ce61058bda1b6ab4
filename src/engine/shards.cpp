#include "engine/shards.hpp"

#include <algorithm>
#include <climits>

#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {

namespace {
// Only tiled layers' weights are sharded (the rest are whole on every process).
bool shards_weights(const LayerSpec& s) { return s.spatial() && tiled_traits(s).weights; }
}  // namespace

ShardPlan make_shard_plan(const NetSpec& net, const Params& p, int first, int last, int rank, int size, int64_t end) {
  if (end < 0) end = p.size();
  ShardPlan sp;
  sp.rank = rank;
  sp.layers.resize(net.layers.size());
  int64_t total = 0;
  for (int l = first; l < last; ++l)
    if (shards_weights(net.layers[l])) total += p.slices[l].n_weights;
  // Process r owns [r·total/size, (r+1)·total/size) of the concatenation.
  auto bound = [&](int r) { return total * r / size; };
  int64_t v = 0;  // the layer's start in the concatenation
  std::vector<ShardPlan::Range> sharded;
  for (int l = first; l < last; ++l) {
    if (!shards_weights(net.layers[l])) continue;
    const ParamSlice& ps = p.slices[l];
    if (ps.n_weights > INT_MAX) fail("layer ", l, " has more weights than one MPI message can carry");
    ShardPlan::Layer& L = sp.layers[l];
    L.offset = ps.weights;
    L.n = ps.n_weights;
    for (int r = 0; r < size; ++r) {
      const int64_t lo = std::clamp(bound(r), v, v + L.n), hi = std::clamp(bound(r + 1), v, v + L.n);
      L.counts.push_back(int(hi - lo));
      L.displs.push_back(int(lo - v));
    }
    sp.owned.push_back(sp.mine(L));
    sharded.push_back({L.offset, L.offset + L.n});
    sp.max_layer = std::max(sp.max_layer, L.n);
    v += L.n;
  }
  std::sort(sharded.begin(), sharded.end());
  int64_t at = 0;
  for (const auto& [b, e] : sharded) {
    if (b > at) sp.replicated.push_back({at, b});
    at = e;
  }
  if (end > at) sp.replicated.push_back({at, end});
  return sp;
}

}  // namespace tt
