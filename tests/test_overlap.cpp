// Overlap of the forward halo with compute (--overlap): the split of a group start's
// forward box into an interior and border strips, checked cell by cell; and training with
// the split bit-identical to training without it (every output, input delta, gradient and
// updated weight compared with memcmp), on both kernel paths.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "data/synthetic.hpp"
#include "engine/memory_plan.hpp"
#include "engine/trainer.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"

namespace tt {
namespace {

// Every tile's parts at every group start: disjoint, together exactly its forward box, and
// the interior reads only the tile's own cells of the previous output.
TEST(Overlap, PartsCoverTheForwardBoxAndTheInteriorNeedsNoHalo) {
  int split = 0;
  for (const char* cfg : {"cfgs/yolov2-16.cfg", "tests/fixtures/pool_mix/net.cfg"})
    for (auto [rows, cols] : {std::pair{2, 2}, {3, 3}, {1, 4}, {3, 1}})
      for (const char* groups : {"none", "0,4,8,12", "all"}) {
        NetSpec net = load_net(test::source_dir() + "/" + cfg);
        if (net.width > 100) resize_net(net, 96, 112);
        const int cut = resolve_cut(net, -1);
        std::vector<int> starts{0};
        if (std::string(groups) == "none") starts = parse_groups("none", 0, cut);
        if (std::string(groups) == "0,4,8,12")
          for (int s : {4, 8, 12})
            if (s < cut) starts.push_back(s);
        Plan plan;
        try {
          plan = make_plan(net, rows, cols, 0, cut, starts);
        } catch (const Error&) {
          continue;  // too fine a grid for the map
        }
        const std::vector<bool> far(size_t(plan.tiles_count()), true);
        for (int t = 0; t < plan.tiles_count(); ++t)
          for (int l = 0; l < cut; ++l) {
            SCOPED_TRACE(std::string(cfg) + " grid " + std::to_string(rows) + "x" + std::to_string(cols) + " groups " +
                         groups + " tile " + std::to_string(t) + " layer " + std::to_string(l));
            const std::vector<Box> parts = overlap_parts(net, plan, t, l, far);
            if (!plan.group_start(l) || l == 0) {
              EXPECT_TRUE(parts.empty());
              continue;
            }
            EXPECT_TRUE(overlap_parts(net, plan, t, l, std::vector<bool>(far.size(), false)).empty())
                << "nothing from a far tile, nothing to overlap";
            if (parts.empty()) continue;
            ++split;
            const TileLayer& x = plan.at(t, l);
            const LayerSpec& s = net.layers[size_t(l)];
            std::vector<int> count(size_t(s.out.h * s.out.w), 0);
            for (const Box& p : parts) {
              EXPECT_FALSE(p.empty());
              for (int y = p.y0; y < p.y1; ++y)
                for (int xx = p.x0; xx < p.x1; ++xx) ++count[size_t(y * s.out.w + xx)];
            }
            for (int y = 0; y < s.out.h; ++y)
              for (int xx = 0; xx < s.out.w; ++xx)
                ASSERT_EQ(count[size_t(y * s.out.w + xx)], contains(x.fwd, Box{y, y + 1, xx, xx + 1}) ? 1 : 0)
                    << "cell (" << y << "," << xx << ")";
            EXPECT_TRUE(
                contains(intersect(plan.at(t, l - 1).own, x.in[0]), window_in(parts[0], s.window(), s.in.h, s.in.w)))
                << "the interior " << parts[0].str() << " reads beyond the tile's own cells";
            // The interior is as large as it can be: one more row or column would need a halo.
            const Box mine = intersect(plan.at(t, l - 1).own, x.in[0]);
            for (const Box& grown : {Box{parts[0].y0 - 1, parts[0].y1, parts[0].x0, parts[0].x1},
                                     Box{parts[0].y0, parts[0].y1 + 1, parts[0].x0, parts[0].x1},
                                     Box{parts[0].y0, parts[0].y1, parts[0].x0 - 1, parts[0].x1},
                                     Box{parts[0].y0, parts[0].y1, parts[0].x0, parts[0].x1 + 1}})
              if (contains(x.fwd, grown)) {
                EXPECT_FALSE(contains(mine, window_in(grown, s.window(), s.in.h, s.in.w))) << grown.str();
              }
          }
      }
  EXPECT_GT(split, 50);
}

struct StepResult {
  std::vector<float> output, input_delta, grad, weights;
};

StepResult train(const NetSpec& net, const Params& p0, TrainOptions o, int steps) {
  Params p = p0;
  o.need_input_delta = true;
  LocalComm comm;
  Trainer tr(net, p, o, comm);
  StepResult r;
  std::vector<float> input, truth;
  for (int step = 0; step < steps; ++step) {
    synthetic_batch(net, net.micro_batch(), 7 + uint64_t(step), input, truth);
    tr.forward_backward(input.data(), truth.data());
    r.output.insert(r.output.end(), tr.output(), tr.output() + net.micro_batch() * net.output().size());
    r.input_delta.insert(r.input_delta.end(), tr.input_delta(),
                         tr.input_delta() + net.micro_batch() * net.input().size());
    r.grad.insert(r.grad.end(), tr.grad().begin(), tr.grad().end());
    tr.update();
  }
  r.weights.assign(p.values.begin(), p.values.end());
  return r;
}

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differ in some bit";
}

TEST(Overlap, TrainingIsBitIdenticalWithAndWithoutIt) {
  struct Case {
    const char* cfg;
    int h, w, rows, cols;
    const char* groups;
    BackwardFeatures features;
    KernelPath kernels;
  };
  const auto R = BackwardFeatures::Recompute, X = BackwardFeatures::Exchange;
  for (const Case& c : {Case{"cfgs/yolov2-16.cfg", 96, 96, 2, 2, "0,4,8,12", R, KernelPath::Auto},
                        Case{"cfgs/yolov2-16.cfg", 80, 112, 3, 2, "none", X, KernelPath::Own},
                        Case{"tests/fixtures/pool_mix/net.cfg", 0, 0, 3, 3, "none", R, KernelPath::Auto},
                        Case{"tests/fixtures/pool_mix/net.cfg", 0, 0, 2, 3, "0,2", X, KernelPath::Own}}) {
    SCOPED_TRACE(std::string(c.cfg) + " grid " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " groups " +
                 c.groups + ", kernels " + kernel_path_name(c.kernels));
    NetSpec net = load_net(test::source_dir() + "/" + c.cfg);
    if (c.h > 0) resize_net(net, c.h, c.w);
    net.burn_in = 0;
    Params p0(net);
    test::random_params(p0, net, 11);
    TrainOptions o;
    o.rows = c.rows;
    o.cols = c.cols;
    o.groups = c.groups;
    o.features = c.features;
    o.kernels = c.kernels;
    o.overlap = Overlap::Off;
    const StepResult off = train(net, p0, o, 2);
    o.overlap = Overlap::On;
    const StepResult on = train(net, p0, o, 2);
    expect_bitwise(on.output, off.output, "outputs");
    expect_bitwise(on.input_delta, off.input_delta, "input deltas");
    expect_bitwise(on.grad, off.grad, "gradients");
    expect_bitwise(on.weights, off.weights, "weights after two steps");
  }
}

}  // namespace
}  // namespace tt
