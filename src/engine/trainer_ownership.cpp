// Which parameters a process keeps: its filter blocks after the cut (--tail filters), its
// shards (--low-memory); decided from the options alone, before anything is filled, so that
// the caller can leave the others' unwritten (Params::unfilled) and the trainer hand back
// what was written anyway.
#include <algorithm>

#include "engine/trainer.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {

std::vector<int> Trainer::block_ranks(const TrainOptions& opt, const std::vector<int>& tile_rank, int size) {
  if (opt.filter_blocks <= 0 || size_t(opt.filter_blocks) == tile_rank.size()) return tile_rank;
  if (size != 1) fail("internal: filter blocks other than the tiles on several processes");
  return std::vector<int>(size_t(opt.filter_blocks), 0);
}

std::vector<GradientSync::Range> Trainer::weights_not_kept(const NetSpec& net, const Params& params,
                                                           const TrainOptions& opt, int rank, int size) {
  std::vector<GradientSync::Range> out;
  const bool filters = opt.tail == TailMode::Filters;
  if (opt.need_input_delta || opt.replicas || size == 1 || !(filters || opt.low_memory)) return out;
  const int cut = resolve_cut(net, opt.cut, opt.rows, opt.cols), first = net.first_tiled();
  Plan plan =
      make_plan(net, opt.rows, opt.cols, first, cut, parse_groups(opt.groups, first, cut), {opt.split, opt.features});
  if (opt.adjust_plan) opt.adjust_plan(plan);
  const std::vector<int> ranks = tile_ranks(plan.tiles_count(), opt.tiles_per_rank, size);
  if (filters) {  // the other processes' filter blocks
    const auto blocks = tail_block_ranges(net, params, cut, block_ranks(opt, ranks, size), size);
    for (int p = 0; p < size; ++p)
      if (p != rank) out.insert(out.end(), blocks[size_t(p)].begin(), blocks[size_t(p)].end());
  }
  if (opt.low_memory) {  // the other processes' parts of the sharded weights
    const ShardPlan shards =
        make_shard_plan(net, params, first, cut, rank, size, filters ? tail_begin(net, params, cut) : -1);
    for (const ShardPlan::Layer& L : shards.layers) {
      if (L.n == 0) continue;
      const auto [b, e] = shards.mine(L);
      out.insert(out.end(), {{L.offset, b}, {e, L.offset + L.n}});
    }
  }
  std::erase_if(out, [](const GradientSync::Range& r) { return r.first >= r.second; });
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first < out[i - 1].second) fail("internal: parameters from ", out[i].first, " left out twice");
  return out;
}

int64_t Trainer::tail_begin(const NetSpec& net, const Params& params, int cut) {
  for (int l = cut; l < int(net.layers.size()); ++l)
    if (net.layers[size_t(l)].has_params()) return params.slices[size_t(l)].biases;
  return params.size();
}

}  // namespace tt
