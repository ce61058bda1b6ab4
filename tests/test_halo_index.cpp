// The global-index halo test: every owned cell of a map holds its own global index;
// after the halo fill done exactly as the engine does it (copy_region of every plan
// piece from the source tile's buffer into the destination's box), every cell of every
// tile's forward `in` box and backward `delta` box must hold its own index.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "layers/tensor.hpp"
#include "model/net_spec.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

constexpr float kUnset = std::numeric_limits<float>::quiet_NaN();

// Global index of (sample s, channel c, y, x) in an N x C x H x W map; exact in float
// for the sizes used here (< 2^24).
float global_index(int s, int c, int y, int x, int C, int H, int W) {
  return float(((int64_t(s) * C + c) * H + y) * W + x);
}

struct Buf {
  std::vector<float> data;
  TensorView view;
  Buf(int n, int c, int cb, const Box& b) : data(size_t(tensor_floats(n, c, cb, b)), kUnset) {
    view = TensorView{data.data(), n, c, cb, b};
  }
  float& at(int s, int c, int y, int x) { return view.at(s, c / view.cb, y, x)[c % view.cb]; }
};

// Writes every cell's global index into `region` of `b` (the owned cells).
void fill_index(Buf& b, const Box& region, int H, int W) {
  for (int s = 0; s < b.view.n; ++s)
    for (int c = 0; c < b.view.c; ++c)
      for (int y = region.y0; y < region.y1; ++y)
        for (int x = region.x0; x < region.x1; ++x) b.at(s, c, y, x) = global_index(s, c, y, x, b.view.c, H, W);
}

// Every cell of b's box holds its global index; returns the number of wrong cells and
// describes the first one.
long count_wrong(Buf& b, int H, int W, std::string& first) {
  long wrong = 0;
  const Box& r = b.view.box;
  for (int s = 0; s < b.view.n; ++s)
    for (int c = 0; c < b.view.c; ++c)
      for (int y = r.y0; y < r.y1; ++y)
        for (int x = r.x0; x < r.x1; ++x) {
          const float got = b.at(s, c, y, x), want = global_index(s, c, y, x, b.view.c, H, W);
          if (got == want) continue;
          if (wrong++ == 0) {
            std::ostringstream o;
            o << "cell (sample " << s << ", channel " << c << ", y " << y << ", x " << x << ") holds " << got
              << ", expected " << want;
            first = o.str();
          }
        }
  return wrong;
}

std::string random_cfg(std::mt19937& rng, int& n_layers) {
  std::ostringstream s;
  const int h = 6 + int(rng() % 40), w = 6 + int(rng() % 40);
  s << "[net]\nbatch=1\nwidth=" << w << "\nheight=" << h << "\nchannels=3\n";
  n_layers = 2 + int(rng() % 5);
  for (int l = 0; l < n_layers; ++l) {
    if (rng() % 3 == 0) {
      static const int pools[3][2] = {{2, 2}, {2, 1}, {3, 2}};
      const auto& p = pools[rng() % 3];
      s << "\n[maxpool]\nsize=" << p[0] << "\nstride=" << p[1] << "\n";
    } else {
      static const int ks[4] = {1, 3, 5, 7};
      s << "\n[convolutional]\nfilters=" << (1 + rng() % 20) << "\nsize=" << ks[rng() % 4]
        << "\nstride=" << (1 + rng() % 2) << "\npad=" << (rng() % 4 ? 1 : 0) << "\nactivation=linear\n";
    }
  }
  return s.str();
}

TEST(HaloIndex, EveryHaloCellHoldsItsGlobalIndex) {
  std::mt19937 rng(4242);
  int plans = 0, exchanges = 0;
  for (int iter = 0; iter < 400 && plans < 120; ++iter) {
    int L = 0;
    const std::string cfg = random_cfg(rng, L);
    NetSpec net;
    try {
      net = parse_net(cfg, "halo.cfg");
    } catch (const Error&) {
      continue;  // input too small
    }
    const int rows = 1 + int(rng() % 4), cols = 1 + int(rng() % 4);
    std::vector<int> groups{0};
    for (int l = 1; l < L; ++l)
      if (rng() % 2) groups.push_back(l);
    if (groups.size() == 1) groups.push_back(1 + int(rng() % unsigned(L - 1)));  // at least one exchange
    Plan p;
    try {
      p = make_plan(net, rows, cols, 0, L, groups);
    } catch (const Error&) {
      continue;  // a tile would be empty
    }
    ++plans;
    // Layouts as in the engine (16 = nChw16c, every conv output), and plain NCHW too;
    // source and destination layouts may differ, as copy_region allows.
    const int cbs[2][2] = {{16, 16}, {1, 1}};
    const int mixed[2][2] = {{16, 1}, {1, 16}};
    const int n = 1 + int(rng() % 2);
    std::string groups_text;
    for (int g : groups) groups_text += std::to_string(g) + " ";
    for (int variant = 0; variant < 3; ++variant) {
      const int src_cb = variant < 2 ? cbs[variant][0] : mixed[rng() % 2][0];
      const int dst_cb = variant < 2 ? cbs[variant][1] : (src_cb == 16 ? 1 : 16);
      SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols) + ", groups " + groups_text +
                   ", batch " + std::to_string(n) + ", layouts " + std::to_string(src_cb) + "->" +
                   std::to_string(dst_cb) + ", cfg:\n" + cfg);
      for (int s : p.group_starts) {
        if (s == 0) continue;
        ++exchanges;
        const LayerSpec& prev = net.layers[s - 1];
        const int C = prev.out.c, H = prev.out.h, W = prev.out.w;
        const int T = p.tiles_count();
        // Forward: each tile's buffer of layer s-1's output is its forward box, with
        // only the owned cells valid (the rest stays NaN, so copying it would show).
        std::vector<Buf> fsrc, fdst, bsrc, bdst;
        for (int t = 0; t < T; ++t) {
          fsrc.emplace_back(n, C, src_cb, p.at(t, s - 1).fwd);
          fill_index(fsrc.back(), p.at(t, s - 1).own, H, W);
          fdst.emplace_back(n, C, dst_cb, p.at(t, s).in[0]);
          // Backward: a tile's input delta of layer s lives on delta_in (its owned
          // cells of layer s-1); it fills the neighbours' delta boxes of layer s-1.
          bsrc.emplace_back(n, C, src_cb, p.at(t, s).delta_in[0]);
          fill_index(bsrc.back(), p.at(t, s - 1).own, H, W);
          bdst.emplace_back(n, C, dst_cb, p.at(t, s - 1).delta);
        }
        for (const Piece& pc : p.fwd_halo[size_t(p.edge(s))]) copy_region(fsrc[pc.from].view, fdst[pc.to].view, pc.box);
        for (const Piece& pc : p.bwd_halo[size_t(p.edge(s))]) copy_region(bsrc[pc.from].view, bdst[pc.to].view, pc.box);
        for (int t = 0; t < T; ++t) {
          std::string what;
          long wrong = count_wrong(fdst[t], H, W, what);
          ASSERT_EQ(wrong, 0) << "forward halo at layer " << s << ", tile " << t << ", in box "
                              << p.at(t, s).in[0].str() << ": " << what;
          wrong = count_wrong(bdst[t], H, W, what);
          ASSERT_EQ(wrong, 0) << "backward halo at layer " << s << ", tile " << t << ", delta box "
                              << p.at(t, s - 1).delta.str() << ": " << what;
        }
      }
    }
  }
  std::printf("%d plans, %d halo exchanges checked\n", plans, exchanges);
  EXPECT_GE(plans, 100);
}

// The scatter at the segment's start and the gather at its end: copying the whole
// input map into every tile's `in` box of the first layer, and every tile's owned
// output cells back into a whole map, reproduce the global indices.
TEST(HaloIndex, ScatterAndGatherRoundTrip) {
  const NetSpec net = parse_net(
      "[net]\nwidth=29\nheight=23\nchannels=3\n[convolutional]\nfilters=18\nsize=5\nstride=2\npad=1\n"
      "[maxpool]\nsize=3\nstride=2\n[convolutional]\nfilters=5\nsize=3\npad=1\n",
      "scatter.cfg");
  for (auto [rows, cols] : {std::pair{1, 1}, {2, 3}, {3, 2}, {4, 4}}) {
    SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols));
    const Plan p = make_plan(net, rows, cols, 0, 3, {0, 2});
    const Shape in = net.input(), out = net.output();
    Buf whole_in(2, in.c, 1, full_box(in.h, in.w));
    fill_index(whole_in, whole_in.view.box, in.h, in.w);
    Buf whole_out(2, out.c, 1, full_box(out.h, out.w));
    for (int t = 0; t < p.tiles_count(); ++t) {
      Buf tile_in(2, in.c, 16, p.at(t, 0).in[0]);
      copy_region(whole_in.view, tile_in.view, tile_in.view.box);
      std::string what;
      EXPECT_EQ(count_wrong(tile_in, in.h, in.w, what), 0) << "tile " << t << ": " << what;
      Buf tile_out(2, out.c, 16, p.at(t, 2).fwd);
      fill_index(tile_out, p.at(t, 2).own, out.h, out.w);
      copy_region(tile_out.view, whole_out.view, p.at(t, 2).own);
    }
    std::string what;
    EXPECT_EQ(count_wrong(whole_out, out.h, out.w, what), 0) << what;
  }
}

}  // namespace
}  // namespace tt
