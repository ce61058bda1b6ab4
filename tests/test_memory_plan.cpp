// The memory plan predicts a Segment's memory exactly: for many nets, grids, groupings,
// layouts, recompute and need_input_delta settings and sets of local tiles,
// plan_segment_memory(...) gives the bytes of feature maps and of delta maps (+ crops)
// that a real Segment, built from the same arguments, reports from its allocated
// buffers (Segment::memory_use). Tiles another process runs are given to rank 1 while
// this process is rank 0 of a LocalComm: the constructor must not communicate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "engine/memory_plan.hpp"
#include "engine/segment.hpp"
#include "layers/dnnl_context.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

struct NetCase {
  std::string path;  // relative to the source tree
  int h = 0, w = 0;  // > 0: resize_net
  std::vector<std::string> groups;
};

std::vector<std::vector<int>> local_sets(int T) {
  std::vector<std::vector<int>> sets;
  std::vector<int> all(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) all[size_t(t)] = t;
  sets.push_back(all);
  if (T > 1) sets.push_back({T - 1});
  if (T > 2) sets.push_back({1, T - 1});
  return sets;
}

std::string describe(const std::string& net, int rows, int cols, int first, int last, const std::string& groups,
                     int in_cb, bool recompute, bool nid, const std::vector<int>& local) {
  std::string s = net + " grid " + std::to_string(rows) + "x" + std::to_string(cols) + " layers [" +
                  std::to_string(first) + "," + std::to_string(last) + ") groups " + groups + " in_cb " +
                  std::to_string(in_cb) + " recompute " + std::to_string(recompute) + " need_input_delta " +
                  std::to_string(nid) + " local {";
  for (int t : local) s.append(" ").append(std::to_string(t));
  return s + " }";
}

TEST(MemoryPlan, MatchesSegmentAllocations) {
  const std::vector<NetCase> nets = {
      {"cfgs/yolov2-16.cfg", 64, 96, {"none", "all", "0,4,8,12"}},
      {"cfgs/fashion-mnist.cfg", 0, 0, {"none", "all", "0,2"}},
      {"tests/fixtures/pool_mix/net.cfg", 0, 0, {"none", "all", "0,2"}},
      {"tests/fixtures/bn_stride/net.cfg", 0, 0, {"none", "all", "0,2"}},
  };
  const int grids[][2] = {{1, 1}, {1, 2}, {2, 2}, {3, 2}, {2, 3}};
  DnnlContext ctx;
  const int block = ctx.config.block;
  LocalComm comm;
  int segments = 0, partial = 0;
  for (const NetCase& nc : nets) {
    NetSpec net = load_net(test::source_dir() + "/" + nc.path);
    if (nc.h > 0) resize_net(net, nc.h, nc.w);
    Params params(net);
    std::vector<float> grad(params.values.size(), 0.f);
    const int cut = resolve_cut(net, -1);
    // The tiled layers from the input (plain layout), and a later run of them on a
    // blocked input (as a segment after a cut sees it).
    const int mid = cut / 2;
    const struct { int first, last, in_cb; } ranges[] = {{0, cut, 1}, {mid, cut, block}};
    for (const auto& range : ranges) {
      if (range.first >= range.last) continue;
      for (const auto& g : grids) {
        for (const std::string& gspec : nc.groups)
          for (BackwardFeatures features : {BackwardFeatures::Recompute, BackwardFeatures::Exchange}) {
            if (features == BackwardFeatures::Exchange && gspec == "none") continue;
            std::vector<int> starts;
            Plan plan;
            try {
              if (gspec == "none" || gspec == "all") {
                starts = parse_groups(gspec, range.first, range.last);
              } else {  // the listed starts inside the range
                starts = {range.first};
                for (int s : parse_groups(gspec, 0, cut))
                  if (s > range.first && s < range.last) starts.push_back(s);
              }
              plan = make_plan(net, g[0], g[1], range.first, range.last, starts, {{}, features});
            } catch (const Error&) {
              continue;  // a grid too fine for this map
            }
            const int T = plan.tiles_count();
            for (const std::vector<int>& local : local_sets(T)) {
              for (int variant = 0; variant < 4; ++variant) {
                const bool recompute = variant & 1, nid = variant & 2;
                std::string what =
                    describe(nc.path, g[0], g[1], range.first, range.last, gspec, range.in_cb, recompute, nid, local);
                what.append(", backward features ").append(backward_features_name(features));
                SCOPED_TRACE(what);
                std::vector<int> tile_rank(size_t(T), 1);
                for (int t : local) tile_rank[size_t(t)] = 0;
                std::vector<bool> far;  // with recompute, overlap the halo from the other rank's tiles too
                if (recompute)
                  for (int r : tile_rank) far.push_back(r != 0);
                const SegmentMemoryPlan mp =
                    plan_segment_memory(net, plan, 2, range.in_cb, block, recompute, nid, local, far);
                Segment seg(ctx, net, params, grad.data(), plan, comm,
                            SegmentOptions{.batch = 2,
                                           .in_cb = range.in_cb,
                                           .bn = BnMode::Sync,
                                           .need_input_delta = nid,
                                           .tile_rank = tile_rank,
                                           .recompute = recompute,
                                           .far = far});
                const Segment::MemoryUse use = seg.memory_use();
                EXPECT_EQ(mp.maps_bytes, use.maps);
                EXPECT_EQ(mp.deltas_bytes, use.deltas);
                ASSERT_EQ(mp.tiles.size(), size_t(T));
                for (int t = 0; t < T; ++t) {
                  const bool is_local = std::find(local.begin(), local.end(), t) != local.end();
                  EXPECT_EQ(mp.tiles[size_t(t)].layers.empty(), !is_local) << "tile " << t;
                }
                ++segments;
                partial += int(local.size()) < T;
              }
            }
          }
      }
    }
  }
  // Every net ran on most grids: no configuration family silently skipped.
  EXPECT_GE(segments, 400);
  EXPECT_GE(partial, 200);
  std::printf("MemoryPlan: %d segments (%d with some tiles on another rank) matched\n", segments, partial);
}

}  // namespace
}  // namespace tt
