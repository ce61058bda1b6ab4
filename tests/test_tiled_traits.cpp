// The tiled ops' traits (tiling/tiled_traits.hpp) are what the memory plan, the schedule
// and the plan's statistics read instead of a layer's type: these tests check that each
// of them follows the traits, so a new tiled op gets its buffers and steps from its entry.
#include <gtest/gtest.h>

#include <string>

#include "engine/memory_plan.hpp"
#include "engine/schedule.hpp"
#include "model/net_spec.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

NetSpec small_net() {
  return parse_net(
      "[net]\nbatch=2\nwidth=20\nheight=16\nchannels=3\n"
      "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
      "[maxpool]\nsize=2\nstride=2\n"
      "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=linear\n"
      "[convolutional]\nfilters=16\nsize=1\nactivation=relu\n"
      "[maxpool]\nsize=3\nstride=1\n"
      "[avgpool]\n[softmax]\n",
      "traits.cfg");
}

TEST(TiledTraits, EveryTiledTypeHasTraitsAndOtherTypesAreRefusedByName) {
  const NetSpec net = small_net();
  for (const LayerSpec& s : net.layers) {
    if (s.spatial()) {
      EXPECT_NO_THROW(tiled_traits(s)) << "layer " << s.index;
      continue;
    }
    try {
      tiled_traits(s);
      ADD_FAILURE() << "layer " << s.index << " has tiled traits";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer " + std::to_string(s.index)), std::string::npos) << e.what();
    }
  }
  // has_pointwise: batch-norm or a non-linear activation after a pre-activation output.
  EXPECT_TRUE(has_pointwise(net.layers[0]));
  EXPECT_FALSE(has_pointwise(net.layers[1]));
  EXPECT_FALSE(has_pointwise(net.layers[2]));
  EXPECT_TRUE(has_pointwise(net.layers[3]));
}

// On every grid, grouping and recompute setting: layouts, pre-activation maps, winners
// and weight steps are where the traits say, and nowhere else.
TEST(TiledTraits, MemoryPlanAndScheduleFollowTheTraits) {
  const NetSpec net = small_net();
  const int cut = net.first_untileable(), block = 8;
  for (const char* groups : {"none", "all", "0,2"})
    for (auto [rows, cols] : {std::pair{1, 1}, std::pair{2, 2}, std::pair{3, 1}})
      for (bool recompute : {false, true}) {
        SCOPED_TRACE(std::string(groups) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                     (recompute ? " recompute" : ""));
        const Plan plan = make_plan(net, rows, cols, 0, cut, parse_groups(groups, 0, cut));
        std::vector<int> local;
        for (int t = 0; t < plan.tiles_count(); ++t) local.push_back(t);
        const SegmentMemoryPlan mem = plan_segment_memory(net, plan, 2, 1, block, recompute, true, local);
        int cb = 1;
        for (int l = 0; l < cut; ++l) {
          const TiledTraits& tr = tiled_traits(net.layers[size_t(l)]);
          const size_t i = size_t(l);
          EXPECT_EQ(mem.in_cb[i], cb) << "layer " << l;
          if (tr.blocked_output) cb = block;
          EXPECT_EQ(mem.out_cb[i], cb) << "layer " << l;
          for (int t : local) {
            const LayerMemory& m = mem.tiles[size_t(t)].layers[i];
            EXPECT_EQ(m.y != MapStore::None, tr.pre_activation || tr.backward_reads_output)
                << "layer " << l << " tile " << t;
            EXPECT_EQ(m.argmax_bytes > 0, tr.backward_reads_winners) << "layer " << l << " tile " << t;
            if (!tr.pre_activation) {
              EXPECT_FALSE(m.recompute) << "layer " << l << " tile " << t;
            }
          }
        }
        const Schedule sched =
            compile_schedule(net, plan, {.sharded = true, .recompute = recompute, .need_input_delta = true});
        for (const auto* steps : {&sched.forward, &sched.backward})
          for (const Step& st : *steps) {
            if (st.kind == StepKind::FetchWeights || st.kind == StepKind::ReduceGrad) {
              EXPECT_TRUE(tiled_traits(net.layers[size_t(st.layer)]).weights) << describe(st, net, plan);
            }
            if (st.kind == StepKind::Pointwise || st.kind == StepKind::PointwiseBackward) {
              EXPECT_TRUE(has_pointwise(net.layers[size_t(st.layer)])) << describe(st, net, plan);
            }
          }
        for (int l = 0; l < cut; ++l) {
          int reduces = 0;
          for (const Step& st : sched.backward) reduces += st.kind == StepKind::ReduceGrad && st.layer == l;
          EXPECT_EQ(reduces, tiled_traits(net.layers[size_t(l)]).weights ? 1 : 0) << "layer " << l;
        }
      }
}

}  // namespace
}  // namespace tt
