// The compiled schedule (engine/schedule.hpp): its order respects every dependency of the
// tiled step, for many nets, grids, groupings and options. (That the Segment computes the
// right thing by running it is what the tiled-equivalence and verify tests show.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/memory_plan.hpp"
#include "engine/schedule.hpp"
#include "layers/conv.hpp"
#include "model/op_kind.hpp"
#include "test_util.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

struct Case {
  const char* path;  // or a cfg's text, from "[net]"
  int h = 0, w = 0;
};
// Residual blocks: a far shortcut (a fork and a join), one reading a shortcut, one adding
// a map to itself.
const char* const kResidual =
    "[net]\nbatch=2\nwidth=23\nheight=19\nchannels=3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[shortcut]\nfrom=-2\nactivation=leaky\n"
    "[convolutional]\nfilters=8\nsize=1\nstride=1\npad=0\nactivation=linear\n"
    "[shortcut]\nfrom=-2\n"
    "[shortcut]\nfrom=-1\n"
    "[cost]\ntype=sse\n";
const Case kNets[] = {{"cfgs/yolov2-16.cfg", 64, 96},
                      {"cfgs/fashion-mnist.cfg"},
                      {"tests/fixtures/pool_mix/net.cfg"},
                      {"tests/fixtures/bn_stride/net.cfg"},
                      {kResidual}};

NetSpec load_case(const Case& c) {
  NetSpec net = std::string(c.path).rfind("[net]", 0) == 0 ? parse_net(c.path, "residual.cfg")
                                                           : load_net(test::source_dir() + "/" + c.path);
  if (c.h > 0) resize_net(net, c.h, c.w);
  return net;
}

// Position of the one step of `kind` on `layer` (with `pred` true), -1 if none; a second
// one is a failure.
template <class Pred>
int find_step(const std::vector<Step>& v, StepKind kind, int layer, Pred pred) {
  int at = -1;
  for (size_t k = 0; k < v.size(); ++k)
    if (v[k].kind == kind && v[k].layer == layer && pred(v[k])) {
      EXPECT_EQ(at, -1) << step_name(kind) << " of layer " << layer << " twice";
      at = int(k);
    }
  return at;
}
int find_step(const std::vector<Step>& v, StepKind kind, int layer) {
  return find_step(v, kind, layer, [](const Step&) { return true; });
}

void check_forward(const NetSpec& net, const Plan& plan, const ScheduleOptions& opt, const std::vector<Step>& f) {
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.front().kind, StepKind::ScatterInput);
  int prev_end = 0;  // the last step of layer l - 1
  for (int l = plan.first; l < plan.last; ++l) {
    const bool conv = net.layers[size_t(l)].is(kConvKind);
    const int fwd = find_step(f, StepKind::Forward, l);
    ASSERT_GT(fwd, prev_end) << "forward of layer " << l << " before layer " << l - 1 << " is done";
    // Every input edge that crosses groups (the first input at a group start, a far
    // shortcut's) has its halo posted after its producer's last step, before the forward.
    bool halo = false;
    for (int e : plan.node_edges[size_t(l - plan.first)]) {
      const int post = find_step(f, StepKind::PostHalo, l, [e](const Step& st) { return st.edge == e; });
      EXPECT_EQ(post >= 0, plan.crosses_groups(e)) << "layer " << l << " edge " << e;
      if (post >= 0) {
        EXPECT_TRUE(prev_end < post && post < fwd) << "the halo of layer " << l << "'s input posted at " << post;
      }
      halo = halo || post >= 0;
    }
    const bool far_halo = plan.node_edges[size_t(l - plan.first)].size() > 1 && plan.crosses_groups(plan.edge(l, 1));
    EXPECT_EQ(halo, (l > plan.first && plan.group_start(l)) || far_halo) << "layer " << l;
    EXPECT_EQ(f[size_t(fwd)].halo_in_flight, halo) << "layer " << l;
    const int fetch = find_step(f, StepKind::FetchWeights, l);
    EXPECT_EQ(fetch >= 0, opt.sharded && conv) << "layer " << l;
    if (fetch >= 0) {
      EXPECT_TRUE(prev_end < fetch && fetch < fwd) << "layer " << l;
      EXPECT_EQ(f[size_t(fetch)].uses, WeightCache::kForward);
    }
    const int pw = find_step(f, StepKind::Pointwise, l);
    EXPECT_EQ(pw >= 0, has_pointwise(net.layers[size_t(l)])) << "layer " << l;
    prev_end = std::max(fwd, pw);
  }
  EXPECT_EQ(prev_end + 1, int(f.size())) << "steps after the last layer's";
}

void check_backward(const NetSpec& net, const Plan& plan, const ScheduleOptions& opt, const std::vector<Step>& b) {
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front().kind, StepKind::ScatterDelta);
  EXPECT_EQ(b.back().kind == StepKind::GatherInputDelta, opt.need_input_delta);
  int prev_bwd = 0;  // Backward of layer l + 1
  for (int l = plan.last - 1; l >= plan.first; --l) {
    const LayerSpec& s = net.layers[size_t(l)];
    const bool conv = s.is(kConvKind);
    const int bwd = find_step(b, StepKind::Backward, l);
    ASSERT_GT(bwd, prev_bwd) << "backward of layer " << l;
    EXPECT_EQ(b[size_t(bwd)].input_delta, l > plan.first || opt.need_input_delta) << "layer " << l;
    // The layer's delta is complete: its pointwise backward (on its whole delta box, or on
    // its owned cells before the exchange that completes it) and the halo from neighbours.
    const int pw = find_step(b, StepKind::PointwiseBackward, l);
    EXPECT_EQ(pw >= 0, has_pointwise(s)) << "layer " << l;
    if (pw >= 0) {
      EXPECT_LT(pw, bwd) << "layer " << l;
      EXPECT_EQ(b[size_t(pw)].owned_only, pointwise_before_exchange(net, plan, l)) << "layer " << l;
      const int halo_after = find_step(b, StepKind::BackwardHalo, l + 1);
      if (b[size_t(pw)].owned_only) {
        EXPECT_TRUE(prev_bwd < pw && pw < halo_after) << "layer " << l;
      } else {
        EXPECT_GT(pw, std::max(prev_bwd, halo_after)) << "layer " << l;
      }
      const int refetch =
          find_step(b, StepKind::FetchWeights, l, [](const Step& s) { return s.uses == WeightCache::kForward; });
      EXPECT_EQ(refetch >= 0, opt.sharded && opt.recompute && recomputed_on_any_tile(net, plan, l)) << "layer " << l;
      if (refetch >= 0) {
        EXPECT_LT(refetch, pw);
      }
    }
    // A value read by far shortcuts: their part of its delta is added after the next
    // layer's backward, before anything reads the delta (its pointwise backward, the halo).
    const int sum = find_step(b, StepKind::SumDeltas, l);
    EXPECT_EQ(sum >= 0, plan.read_by_side_edge(l)) << "layer " << l;
    if (sum >= 0) {
      EXPECT_GT(sum, std::max(prev_bwd, find_step(b, StepKind::ReduceGrad, l + 1))) << "layer " << l;
      if (pw >= 0) {
        EXPECT_LT(sum, pw) << "layer " << l;
      }
      const int halo_after = find_step(b, StepKind::BackwardHalo, l + 1);
      if (halo_after >= 0) {
        EXPECT_LT(sum, halo_after) << "layer " << l;
      }
      for (int e : plan.consumers[size_t(l - plan.first)]) {
        EXPECT_GT(sum, find_step(b, StepKind::Backward, plan.edges[size_t(e)].to)) << "layer " << l;
      }
    }
    const int halo = find_step(b, StepKind::BackwardHalo, l);
    EXPECT_EQ(halo >= 0, l > plan.first && plan.group_start(l)) << "layer " << l;
    if (halo >= 0) {
      EXPECT_GT(halo, bwd);
    }
    // Forward values exchanged before the group's backward reads them.
    if (l + 1 == plan.group_end(l)) {
      bool features = false;
      for (int k = l;; --k) {
        features = features || !plan.feature_halo[size_t(k - plan.first)].empty();
        if (plan.group_start(k)) break;
      }
      const int ex = find_step(b, StepKind::ExchangeFeatures, l);
      EXPECT_EQ(ex >= 0, features) << "group ending at layer " << l;
      if (ex >= 0) {
        EXPECT_TRUE(prev_bwd < ex && (pw < 0 || ex < pw || b[size_t(pw)].owned_only) && ex < bwd);
      }
    }
    const int fetch =
        find_step(b, StepKind::FetchWeights, l, [](const Step& s) { return s.uses == WeightCache::kBackwardData; });
    EXPECT_EQ(fetch >= 0, opt.sharded && conv && b[size_t(bwd)].input_delta) << "layer " << l;
    if (fetch >= 0) {
      EXPECT_TRUE(std::max(prev_bwd, pw) < fetch && fetch < bwd) << "layer " << l;
    }
    const int reduce = find_step(b, StepKind::ReduceGrad, l);
    EXPECT_EQ(reduce >= 0, opt.sharded && conv) << "layer " << l;
    if (reduce >= 0) {
      EXPECT_GT(reduce, bwd);
    }
    prev_bwd = bwd;
  }
}

TEST(Schedule, OrderRespectsEveryDependency) {
  int schedules = 0;
  for (const Case& c : kNets) {
    const NetSpec net = load_case(c);
    const int cut = resolve_cut(net, -1);
    for (auto [rows, cols] : {std::pair{1, 1}, {1, 2}, {2, 2}, {3, 2}})
      for (const char* groups : {"none", "all", "0,2"})
        for (BackwardFeatures features : {BackwardFeatures::Recompute, BackwardFeatures::Exchange})
          for (int first : {0, cut / 2}) {
            if (first >= cut || (first > 0 && net.split_reader(first) >= 0)) continue;
            Plan plan;
            try {
              std::vector<int> starts = {first};
              for (int s : parse_groups(groups, 0, cut))
                if (s > first) starts.push_back(s);
              plan = make_plan(net, rows, cols, first, cut, starts, {{}, features});
            } catch (const Error&) {
              continue;  // a grid too fine for the map
            }
            for (int variant = 0; variant < 8; ++variant) {
              const ScheduleOptions opt{
                  .sharded = bool(variant & 1), .recompute = bool(variant & 2), .need_input_delta = bool(variant & 4)};
              SCOPED_TRACE(std::string(c.path) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " groups " +
                           groups + " from " + std::to_string(first) + " " + backward_features_name(features) +
                           " variant " + std::to_string(variant));
              const Schedule s = compile_schedule(net, plan, opt);
              check_forward(net, plan, opt, s.forward);
              check_backward(net, plan, opt, s.backward);
              ++schedules;
            }
          }
  }
  EXPECT_GT(schedules, 300);
}

}  // namespace
}  // namespace tt
