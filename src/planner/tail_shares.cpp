#include "planner/tail_shares.hpp"

#include "engine/filter_blocks.hpp"
#include "engine/memory_plan.hpp"
#include "engine/tail.hpp"
#include "tiling/plan.hpp"

namespace tt {

double TailShares::share(int r, int l) const {
  return filters ? filter_share(net->layers[size_t(l)], (*local)[size_t(r)], tiles) : r == 0;
}

double TailShares::head_share(int r) const {
  double all = 0, mine = 0;
  for (int l = dense_begin; l < int(net->layers.size()); ++l)
    all += net->layers[size_t(l)].forward_flops(), mine += net->layers[size_t(l)].forward_flops() * share(r, l);
  return all > 0 ? mine / all : filters || r == 0;
}

double TailShares::params(int r) const {
  double n = 0;
  for (int l = cut; l < int(net->layers.size()); ++l) n += net->layers[size_t(l)].param_count() * share(r, l);
  return n;
}

double TailShares::whole_params() const {
  double n = 0;
  for (int l = cut; filters && l < int(net->layers.size()); ++l)
    if (!splits_into_filter_blocks(net->layers[size_t(l)])) n += net->layers[size_t(l)].param_count();
  return n;
}

TailShares::Memory TailShares::memory(int r, int batch, int channel_block, double cut_map_bytes) const {
  Memory m{cut_map_bytes, cut_map_bytes};
  // The tail (engine/tail.hpp): its runs' Segments and its plain buffers.
  const TailLayout t = plan_tail(*net, cut, batch, filters);
  for (int l = cut; filters && l < int(net->layers.size()); ++l)
    if (const LayerSpec& s = net->layers[size_t(l)]; splits_into_filter_blocks(s)) {
      m.deltas += 4. * batch * (s.out.size() + s.in.size() * (1 + 2. * filled_filter_blocks(s, tiles) / ranks));
      // Every block's output gathered (engine/tail.cpp, out_stage), and this rank's
      // blocks' own maps: their share of the layer's as one whole-map segment.
      const SegmentMemoryPlan u = plan_segment_memory(*net, make_plan(*net, 1, 1, l, l + 1, {l}), batch, channel_block,
                                                      channel_block, false, true, {0});
      m.maps += 4. * batch * s.out.size() + share(r, l) * u.maps_bytes;
    }
  for (auto [first, last] : t.runs) {
    const SegmentMemoryPlan u = plan_segment_memory(*net, make_plan(*net, 1, 1, first, last, {first}), batch,
                                                    channel_block, channel_block, false, true, {0});
    m.maps += u.maps_bytes;
    m.deltas += u.deltas_bytes;
  }
  m.maps += t.maps_bytes();
  m.deltas += t.deltas_bytes();
  return m;
}

}  // namespace tt
