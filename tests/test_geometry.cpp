// Brute-force checks of the tiling geometry: box.hpp's window formulas against
// enumeration of which cells a window touches, and every invariant of make_plan (owned
// partition, balanced split, forward/backward boxes, halo pieces) on random layer
// stacks, grids and groupings; plus the clear errors of make_plan, parse_groups and
// resolve_cut.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <vector>

#include "layers/box.hpp"
#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

std::string win_str(const Window& w) {
  return "window size " + std::to_string(w.size) + " stride " + std::to_string(w.stride) + " pad " +
         std::to_string(w.pad);
}

// A random non-empty sub-box of an h x w map.
Box random_box(std::mt19937& rng, int h, int w) {
  auto span = [&](int n, int& a, int& b) {
    a = int(rng() % unsigned(n));
    b = a + 1 + int(rng() % unsigned(n - a));
  };
  Box b;
  span(h, b.y0, b.y1);
  span(w, b.x0, b.x1);
  return b;
}

bool in_box(const Box& b, int y, int x) { return b.y0 <= y && y < b.y1 && b.x0 <= x && x < b.x1; }

// ---------------------------------------------------------------- box.hpp vs brute force

TEST(Geometry, WindowFormulasMatchBruteForce) {
  std::mt19937 rng(20240611);
  int checked = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Window w;
    w.size = 1 + int(rng() % 7);
    w.stride = 1 + int(rng() % 3);
    w.pad = int(rng() % unsigned(w.size));
    // Total padding 2*pad, or 2*pad+1 (Darknet's odd maxpool padding) when that keeps
    // every output window touching the map.
    const int pad_total = 2 * w.pad + ((w.pad <= w.size - 2 && rng() % 2) ? 1 : 0);
    const int ih = 1 + int(rng() % 20), iw = 1 + int(rng() % 20);
    if (ih + pad_total < w.size || iw + pad_total < w.size) continue;
    const int oh = (ih + pad_total - w.size) / w.stride + 1, ow = (iw + pad_total - w.size) / w.stride + 1;
    SCOPED_TRACE(win_str(w) + ", pad_total " + std::to_string(pad_total) + ", input " + std::to_string(ih) + "x" +
                 std::to_string(iw) + ", output " + std::to_string(oh) + "x" + std::to_string(ow));
    ++checked;

    // window_in: the input cells the outputs of box o read.
    const Box o = random_box(rng, oh, ow);
    std::vector<char> read(size_t(ih * iw), 0);
    int y_lo = 1 << 30, y_hi = -(1 << 30), x_lo = 1 << 30, x_hi = -(1 << 30);  // unclamped extent
    for (int oy = o.y0; oy < o.y1; ++oy)
      for (int ox = o.x0; ox < o.x1; ++ox)
        for (int ky = 0; ky < w.size; ++ky)
          for (int kx = 0; kx < w.size; ++kx) {
            const int y = oy * w.stride - w.pad + ky, x = ox * w.stride - w.pad + kx;
            y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y + 1);
            x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x + 1);
            if (y >= 0 && y < ih && x >= 0 && x < iw) read[size_t(y * iw + x)] = 1;
          }
    const Box wi = window_in(o, w, ih, iw);
    Box hull_read{1 << 30, -(1 << 30), 1 << 30, -(1 << 30)};
    long n_read = 0;
    for (int y = 0; y < ih; ++y)
      for (int x = 0; x < iw; ++x)
        if (read[size_t(y * iw + x)]) {
          ++n_read;
          hull_read = {std::min(hull_read.y0, y), std::max(hull_read.y1, y + 1), std::min(hull_read.x0, x),
                       std::max(hull_read.x1, x + 1)};
          ASSERT_TRUE(in_box(wi, y, x)) << "output box " << o.str() << " reads (" << y << "," << x
                                        << ") outside window_in " << wi.str();
        }
    ASSERT_GT(n_read, 0);
    // The read set is a box unless the stride skips cells (stride > size): then
    // window_in is its bounding box.
    EXPECT_EQ(wi, hull_read) << "output box " << o.str();
    if (w.stride <= w.size) {
      EXPECT_EQ(wi.area(), n_read) << "output box " << o.str() << ": window_in " << wi.str();
    }
    const Box wu = window_in_unclamped(o, w);
    EXPECT_EQ(wu, (Box{y_lo, y_hi, x_lo, x_hi})) << "output box " << o.str();

    // border_pad: how far the unclamped window leaves the map, per side.
    const Pad p = border_pad(o, w, ih, iw);
    EXPECT_EQ(p.t, std::max(0, -y_lo)) << o.str();
    EXPECT_EQ(p.b, std::max(0, y_hi - ih)) << o.str();
    EXPECT_EQ(p.l, std::max(0, -x_lo)) << o.str();
    EXPECT_EQ(p.r, std::max(0, x_hi - iw)) << o.str();
    // The clamped box plus the padding is exactly the extent a kernel needs for o.
    EXPECT_EQ(wi.h() + p.t + p.b, (o.h() - 1) * w.stride + w.size) << o.str();
    EXPECT_EQ(wi.w() + p.l + p.r, (o.w() - 1) * w.stride + w.size) << o.str();

    // touching_out: the outputs whose window touches input box i.
    const Box i = random_box(rng, ih, iw);
    const Box to = touching_out(i, w, oh, ow);
    long n_touch = 0;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const Box u = window_in_unclamped({oy, oy + 1, ox, ox + 1}, w);
        bool touches = false;
        for (int y = u.y0; y < u.y1 && !touches; ++y)
          for (int x = u.x0; x < u.x1 && !touches; ++x) touches = in_box(i, y, x);
        EXPECT_EQ(touches, in_box(to, oy, ox))
            << "input box " << i.str() << ", output (" << oy << "," << ox << "), touching_out " << to.str();
        n_touch += touches;
      }
    EXPECT_EQ(to.area(), n_touch) << "input box " << i.str() << ": touching_out " << to.str();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(checked, 3000);
}

// ------------------------------------------------------------------ random layer stacks

struct StackLayer {
  bool conv = true;
  int size = 3, stride = 1;
  bool pad = true;  // conv: pad=1 (padding size/2) or pad=0
};

std::string stack_cfg(const std::vector<StackLayer>& ls, int h, int w, bool head) {
  std::ostringstream s;
  s << "[net]\nbatch=1\nwidth=" << w << "\nheight=" << h << "\nchannels=2\n";
  for (const auto& l : ls) {
    if (l.conv)
      s << "\n[convolutional]\nfilters=3\nsize=" << l.size << "\nstride=" << l.stride << "\npad=" << (l.pad ? 1 : 0)
        << "\nactivation=leaky\n";
    else
      s << "\n[maxpool]\nsize=" << l.size << "\nstride=" << l.stride << "\n";
  }
  if (head) s << "\n[avgpool]\n\n[connected]\noutput=4\nactivation=linear\n\n[softmax]\n";
  return s.str();
}

StackLayer random_layer(std::mt19937& rng) {
  StackLayer l;
  if (rng() % 3 == 0) {
    static const int pools[3][2] = {{2, 2}, {2, 1}, {3, 2}};
    const auto& p = pools[rng() % 3];
    l.conv = false;
    l.size = p[0];
    l.stride = p[1];
  } else {
    static const int ks[4] = {1, 3, 5, 7};
    l.size = ks[rng() % 4];
    l.stride = 1 + int(rng() % 2);
    l.pad = rng() % 4 != 0;
  }
  return l;
}

std::vector<int> random_groups(std::mt19937& rng, int first, int last) {
  std::vector<int> g{first};
  const int mode = int(rng() % 4);
  for (int l = first + 1; l < last; ++l)
    if (mode == 0 || (mode == 2 && rng() % 2) || (mode == 3 && rng() % 4 == 0)) g.push_back(l);
  return g;  // mode 1: one group
}

std::string groups_str(const std::vector<int>& g) {
  std::string s;
  for (int v : g) {
    if (!s.empty()) s += ',';
    s += std::to_string(v);
  }
  return s;
}

Box in_map(const LayerSpec& l) { return full_box(l.in.h, l.in.w); }
Box out_map(const LayerSpec& l) { return full_box(l.out.h, l.out.w); }
bool inside(const Box& b, const Box& map) { return !b.empty() && contains(map, b); }

// `pieces` (boxes) cover `target` exactly: each inside it, pairwise disjoint, areas add up.
void expect_exact_cover(const std::vector<Box>& pieces, const Box& target, const std::string& what) {
  long area = 0;
  for (size_t a = 0; a < pieces.size(); ++a) {
    EXPECT_FALSE(pieces[a].empty()) << what << ": empty piece";
    EXPECT_TRUE(contains(target, pieces[a])) << what << ": piece " << pieces[a].str() << " outside " << target.str();
    for (size_t b = a + 1; b < pieces.size(); ++b)
      EXPECT_TRUE(intersect(pieces[a], pieces[b]).empty())
          << what << ": pieces " << pieces[a].str() << " and " << pieces[b].str() << " overlap";
    area += pieces[a].area();
  }
  EXPECT_EQ(area, target.area()) << what << ": pieces do not cover " << target.str();
}

// Every invariant the engine relies on, for one plan.
void check_plan(const NetSpec& net, const Plan& p) {
  const int T = p.tiles_count();
  ASSERT_EQ(int(p.tiles.size()), T);
  ASSERT_EQ(int(p.own_input.size()), T);
  // Owned boxes partition every map: the input of `first` and every layer's output.
  auto check_partition = [&](const std::vector<Box>& own, const Box& map, const std::string& what) {
    std::vector<int> count(size_t(map.area()), 0);
    for (int t = 0; t < T; ++t) {
      ASSERT_TRUE(inside(own[t], map)) << what << ": tile " << t << " owns " << own[t].str() << " of " << map.str();
      for (int y = own[t].y0; y < own[t].y1; ++y)
        for (int x = own[t].x0; x < own[t].x1; ++x) ++count[size_t(y * map.w() + x)];
    }
    for (int y = 0; y < map.h(); ++y)
      for (int x = 0; x < map.w(); ++x)
        ASSERT_EQ(count[size_t(y * map.w() + x)], 1)
            << what << ": cell (" << y << "," << x << ") owned " << count[size_t(y * map.w() + x)] << " times";
  };
  check_partition(p.own_input, in_map(net.layers[p.first]), "input of layer " + std::to_string(p.first));
  for (int l = p.first; l < p.last; ++l) {
    std::vector<Box> own;
    for (int t = 0; t < T; ++t) own.push_back(p.at(t, l).own);
    check_partition(own, out_map(net.layers[l]), "output of layer " + std::to_string(l));
  }
  // Grid layout: tile t = row * cols + col; all tiles of a row share rows, of a column columns.
  for (int l = p.first; l < p.last; ++l)
    for (int t = 0; t < T; ++t) {
      const Box& a = p.at(t, l).own;
      const Box& row0 = p.at((t / p.cols) * p.cols, l).own;
      const Box& col0 = p.at(t % p.cols, l).own;
      EXPECT_TRUE(a.y0 == row0.y0 && a.y1 == row0.y1 && a.x0 == col0.x0 && a.x1 == col0.x1)
          << "tile " << t << " layer " << l << " is not on the grid";
    }
  // Balanced at the output of the last tiled layer.
  int hmin = 1 << 30, hmax = 0, wmin = 1 << 30, wmax = 0;
  for (int t = 0; t < T; ++t) {
    const Box& b = p.at(t, p.last - 1).own;
    hmin = std::min(hmin, b.h()), hmax = std::max(hmax, b.h());
    wmin = std::min(wmin, b.w()), wmax = std::max(wmax, b.w());
  }
  EXPECT_LE(hmax - hmin, 1) << "owned heights at the last tiled layer";
  EXPECT_LE(wmax - wmin, 1) << "owned widths at the last tiled layer";

  for (int t = 0; t < T; ++t)
    for (int l = p.first; l < p.last; ++l) {
      const LayerSpec& s = net.layers[l];
      const TileLayer& x = p.at(t, l);
      SCOPED_TRACE("tile " + std::to_string(t) + " layer " + std::to_string(l) + ": own " + x.own.str() + " fwd " +
                   x.fwd.str() + " in " + x.in[0].str() + " delta " + x.delta.str() + " delta_in " +
                   x.delta_in[0].str());
      EXPECT_TRUE(inside(x.fwd, out_map(s)));
      EXPECT_TRUE(inside(x.delta, out_map(s)));
      EXPECT_TRUE(inside(x.in[0], in_map(s)));
      EXPECT_TRUE(inside(x.delta_in[0], in_map(s)));
      EXPECT_TRUE(contains(x.fwd, x.own)) << "fwd must hold own";
      // Backward reads forward values on the delta box, except at a convolution that ends
      // a group before the last tiled layer: its delta is exchanged after batch-norm and
      // activation, so forward computes exactly the owned cells there.
      const bool group_end_conv = l + 1 < p.last && p.group_start(l + 1) && s.is(kConvKind);
      const bool reads = s.is(kMaxPoolKind) ||
                         (s.is(kConvKind) && (s.batch_normalize() || s.conv().act != Act::Linear) && !group_end_conv);
      EXPECT_EQ(backward_reads_features(net, p, l), reads);
      if (group_end_conv)
        EXPECT_EQ(x.fwd, x.own) << "a group-ending convolution computes only its owned cells";
      else if (p.features == BackwardFeatures::Recompute)
        EXPECT_TRUE(contains(x.fwd, x.delta)) << "fwd must hold delta (backward reads forward values there)";
      else  // exchange: forward computes what the group's next layer reads, no more
        EXPECT_EQ(x.fwd, l + 1 < p.group_end(l) ? hull(x.own, p.at(t, l + 1).in[0]) : x.own);
      EXPECT_EQ(x.held, reads ? hull(x.fwd, x.delta) : x.fwd);
      EXPECT_TRUE(contains(x.delta, x.own)) << "delta must hold own (weight gradients)";
      EXPECT_EQ(x.in[0], window_in(x.fwd, s.window(), s.in.h, s.in.w)) << "in must be window_in(fwd)";
      EXPECT_TRUE(contains(x.delta, touching_out(x.delta_in[0], s.window(), s.out.h, s.out.w)))
          << "delta must hold every output touching delta_in";
      const Box own_in = l == p.first ? p.own_input[t] : p.at(t, l - 1).own;
      if (p.group_start(l)) {
        EXPECT_EQ(x.delta_in[0], own_in) << "at a group start the input delta is produced on the owned input cells";
      } else {
        const TileLayer& prev = p.at(t, l - 1);
        EXPECT_TRUE(contains(prev.fwd, x.in[0]))
            << "inside a group, in must lie in the previous fwd " << prev.fwd.str();
        EXPECT_EQ(x.delta_in[0], prev.delta) << "inside a group, delta_in is the previous layer's delta";
      }
    }

  // Feature pieces (exchange): cell by cell, every held cell outside fwd comes from its
  // owner, and no piece carries a cell its source does not own or its receiver does not hold.
  ASSERT_EQ(int(p.feature_halo.size()), p.last - p.first);
  for (int l = p.first; l < p.last; ++l) {
    const Box map = out_map(net.layers[l]);
    for (int to = 0; to < T; ++to) {
      const TileLayer& x = p.at(to, l);
      std::vector<int> from_of(size_t(map.area()), -1);
      for (const Piece& pc : p.feature_halo[l - p.first]) {
        ASSERT_NE(pc.from, pc.to);
        if (pc.to != to) continue;
        EXPECT_TRUE(contains(p.at(pc.from, l).own, pc.box)) << "feature piece at layer " << l << " not owned";
        EXPECT_TRUE(contains(x.held, pc.box)) << "feature piece at layer " << l << " outside the held box";
        for (int y = pc.box.y0; y < pc.box.y1; ++y)
          for (int xx = pc.box.x0; xx < pc.box.x1; ++xx) from_of[size_t(y * map.w() + xx)] = pc.from;
      }
      for (int y = x.held.y0; y < x.held.y1; ++y)
        for (int xx = x.held.x0; xx < x.held.x1; ++xx) {
          if (contains(x.fwd, Box{y, y + 1, xx, xx + 1})) continue;
          ASSERT_GE(from_of[size_t(y * map.w() + xx)], 0)
              << "layer " << l << " tile " << to << ": held cell (" << y << "," << xx << ") comes from no one";
        }
    }
    if (p.features == BackwardFeatures::Recompute) {
      EXPECT_TRUE(p.feature_halo[l - p.first].empty());
    }
  }

  // Halo pieces.
  ASSERT_EQ(int(p.fwd_halo.size()), p.last - p.first);
  ASSERT_EQ(int(p.bwd_halo.size()), p.last - p.first);
  for (int l = p.first; l < p.last; ++l) {
    const int i = p.edge(l);  // a chain: the edge into l
    if (l == p.first || !p.group_start(l)) {
      EXPECT_TRUE(p.fwd_halo[i].empty()) << "fwd_halo at layer " << l << ", not a group start after the first";
      EXPECT_TRUE(p.bwd_halo[i].empty()) << "bwd_halo at layer " << l << ", not a group start after the first";
      continue;
    }
    for (int to = 0; to < T; ++to) {
      std::vector<Box> fwd, bwd;
      for (const Piece& pc : p.fwd_halo[i]) {
        ASSERT_TRUE(pc.from >= 0 && pc.from < T && pc.to >= 0 && pc.to < T);
        if (pc.to != to) continue;
        EXPECT_TRUE(contains(p.at(pc.from, l - 1).own, pc.box))
            << "fwd_halo piece " << pc.box.str() << " at layer " << l << " not owned by its source tile " << pc.from;
        fwd.push_back(pc.box);
      }
      for (const Piece& pc : p.bwd_halo[i]) {
        ASSERT_TRUE(pc.from >= 0 && pc.from < T && pc.to >= 0 && pc.to < T);
        if (pc.to != to) continue;
        EXPECT_TRUE(contains(p.at(pc.from, l - 1).own, pc.box))
            << "bwd_halo piece " << pc.box.str() << " at layer " << l << " not owned by its source tile " << pc.from;
        EXPECT_TRUE(contains(p.at(pc.from, l).delta_in[0], pc.box))
            << "bwd_halo piece " << pc.box.str() << " at layer " << l << " not produced by its source tile " << pc.from;
        bwd.push_back(pc.box);
      }
      expect_exact_cover(fwd, p.at(to, l).in[0],
                         "fwd_halo into tile " + std::to_string(to) + " at layer " + std::to_string(l));
      expect_exact_cover(bwd, p.at(to, l - 1).delta,
                         "bwd_halo into tile " + std::to_string(to) + " at layer " + std::to_string(l));
    }
  }
}

TEST(Geometry, RandomPlansKeepEveryInvariant) {
  std::mt19937 rng(77031);
  int plans = 0, rejected = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int n = 1 + int(rng() % 6);
    std::vector<StackLayer> ls;
    for (int k = 0; k < n; ++k) ls.push_back(random_layer(rng));
    const int h = 3 + int(rng() % 50), w = 3 + int(rng() % 50);
    const bool head = rng() % 4 == 0;
    const std::string cfg = stack_cfg(ls, h, w, head);
    NetSpec net;
    try {
      net = parse_net(cfg, "random.cfg");
    } catch (const Error&) {
      continue;  // input too small for the stack
    }
    const int spatial = net.first_untileable();
    ASSERT_EQ(spatial, n);
    const int first = rng() % 4 == 0 ? int(rng() % unsigned(n)) : 0;
    const int last = first + 1 + int(rng() % unsigned(n - first));
    const int rows = 1 + int(rng() % 4), cols = 1 + int(rng() % 4);
    const std::vector<int> groups = random_groups(rng, first, last);
    const BackwardFeatures features = rng() % 2 ? BackwardFeatures::Exchange : BackwardFeatures::Recompute;
    const LayerSpec& tail = net.layers[last - 1];
    SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols) + ", layers [" + std::to_string(first) +
                 ", " + std::to_string(last) + "), groups " + groups_str(groups) + ", backward features " +
                 backward_features_name(features) + ", cfg:\n" + cfg);
    Plan p;
    // With conv (pad 0 or size/2) and Darknet maxpools, the split mapped back through
    // the strides keeps every tile non-empty iff the last tiled output has room.
    const bool fits = tail.out.h >= rows && tail.out.w >= cols;
    try {
      p = make_plan(net, rows, cols, first, last, groups, {{}, features});
    } catch (const Error& e) {
      EXPECT_FALSE(fits) << "make_plan refused a grid that fits: " << e.what();
      EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
      ++rejected;
      continue;
    }
    EXPECT_TRUE(fits) << "make_plan accepted a grid larger than the last output " << tail.out.h << "x" << tail.out.w;
    check_plan(net, p);
    ++plans;
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("checked %d plans, %d grids rejected as too large\n", plans, rejected);
  EXPECT_GT(plans, 800);
  EXPECT_GT(rejected, 10);
}

// A named stack, for the hand-picked cases below.
NetSpec net_of(const std::vector<StackLayer>& ls, int h, int w, bool head = false) {
  return parse_net(stack_cfg(ls, h, w, head), "test.cfg");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Geometry, GridThatEmptiesATileIsRejected) {
  const NetSpec net = net_of({{true, 3, 1, true}}, 9, 13);
  const std::string msg = error_of([&] { make_plan(net, 1, 14, 0, 1, {0}); });
  ASSERT_FALSE(msg.empty()) << "a width-13 map split 14 ways must be rejected";
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("14"), std::string::npos) << msg;
  EXPECT_FALSE(error_of([&] { make_plan(net, 10, 1, 0, 1, {0}); }).empty()) << "height 9 split 10 ways";
  // Through a stride: 13 -> 7 columns after a stride-2 conv, so 8 columns is too many.
  const NetSpec strided = net_of({{true, 3, 1, true}, {true, 3, 2, true}}, 13, 13);
  EXPECT_NO_THROW(make_plan(strided, 7, 7, 0, 2, {0}));
  EXPECT_FALSE(error_of([&] { make_plan(strided, 1, 8, 0, 2, {0}); }).empty());
  EXPECT_FALSE(error_of([&] { make_plan(net, 0, 2, 0, 1, {0}); }).empty()) << "zero rows";
}

// DeepThings splits w = 13 into M = 6 tiles of ceil(13/6) = 3, which leaves the last
// tile at [15, 13): negative width. The balanced split must give widths 2 and 3.
TEST(Geometry, DeepThingsThirteenBySixWorks) {
  for (bool pool : {false, true}) {
    // With a 2/2 maxpool in front, the tiled part ends at width 13 from a 26-wide input.
    std::vector<StackLayer> ls{{true, 3, 1, true}};
    if (pool) ls = {{true, 3, 1, true}, {false, 2, 2, false}, {true, 3, 1, true}};
    const NetSpec net = net_of(ls, 13 * (pool ? 2 : 1), 13 * (pool ? 2 : 1));
    const int L = int(ls.size());
    for (int rows : {1, 6}) {
      Plan p;
      ASSERT_NO_THROW(p = make_plan(net, rows, 6, 0, L, parse_groups("all", 0, L)));
      int total = 0;
      for (int c = 0; c < 6; ++c) {
        const Box& b = p.at(c, L - 1).own;
        EXPECT_TRUE(b.w() == 2 || b.w() == 3) << "column " << c << ": " << b.str();
        total += b.w();
      }
      EXPECT_EQ(total, 13);
      check_plan(net, p);
      ASSERT_NO_THROW(p = make_plan(net, rows, 6, 0, L, parse_groups("none", 0, L)));
      check_plan(net, p);
    }
  }
}

TEST(Geometry, ParseGroups) {
  EXPECT_EQ(parse_groups("none", 0, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_groups("all", 0, 4), (std::vector<int>{0}));
  EXPECT_EQ(parse_groups("0,2", 0, 4), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_groups("2,3", 2, 5), (std::vector<int>{2, 3}));
  EXPECT_EQ(parse_groups("none", 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(parse_groups("all", 2, 4), (std::vector<int>{2}));
  struct Bad {
    std::string spec;
    int first, last;
    std::string must_say;
  };
  const Bad bad[] = {
      {"0,4", 0, 4, "outside"},       // boundary == last
      {"0,7", 0, 4, "outside"},       // beyond
      {"0,-1", 0, 4, "outside"},      // negative
      {"1,3", 2, 5, "outside"},       // before first
      {"0,2,2", 0, 4, "increasing"},  // repeated
      {"0,3,2", 0, 4, "increasing"},  // decreasing
      {"1,2", 0, 4, "first group"},   // does not start at first
      {"3", 2, 5, "first group"},     // does not start at first (first = 2)
      {"0,x", 0, 4, "not a layer index"}, {"0,,2", 0, 4, "not a layer index"}, {"", 0, 4, "first group"},
  };
  for (const Bad& b : bad) {
    const std::string msg = error_of([&] { parse_groups(b.spec, b.first, b.last); });
    EXPECT_FALSE(msg.empty()) << "'" << b.spec << "' over [" << b.first << ", " << b.last << ") must be rejected";
    EXPECT_NE(msg.find(b.must_say), std::string::npos) << "'" << b.spec << "': " << msg;
    EXPECT_NE(msg.find("--groups"), std::string::npos) << msg;
  }
}

TEST(Geometry, ResolveCut) {
  // 0 conv, 1 maxpool, 2 avgpool, 3 connected, 4 softmax
  const NetSpec net = net_of({{true, 3, 1, true}, {false, 2, 2, false}}, 8, 8, true);
  ASSERT_EQ(net.first_untileable(), 2);
  EXPECT_EQ(resolve_cut(net, -1), 2);
  EXPECT_EQ(resolve_cut(net, 1), 1);
  EXPECT_EQ(resolve_cut(net, 2), 2);
  std::string msg = error_of([&] { resolve_cut(net, 0); });
  EXPECT_NE(msg.find("--cut 0"), std::string::npos) << msg;
  const char* after[] = {"avgpool", "avgpool", "avgpool"};  // the first untileable layer is named
  for (int cut = 3; cut <= 5; ++cut) {
    msg = error_of([&] { resolve_cut(net, cut); });
    ASSERT_FALSE(msg.empty()) << "cut " << cut << " is after an untileable layer";
    EXPECT_NE(msg.find("--cut " + std::to_string(cut)), std::string::npos) << msg;
    EXPECT_NE(msg.find(after[cut - 3]), std::string::npos) << msg;
    EXPECT_NE(msg.find("at most 2"), std::string::npos) << msg;
  }
  // A [connected] right after the first conv: a cut past it names it.
  const NetSpec fc = parse_net(
      "[net]\nwidth=6\nheight=6\nchannels=1\n[convolutional]\nfilters=2\nsize=3\npad=1\n"
      "[connected]\noutput=3\n[softmax]\n",
      "fc.cfg");
  msg = error_of([&] { resolve_cut(fc, 2); });
  EXPECT_NE(msg.find("connected"), std::string::npos) << msg;
  msg = error_of([&] { resolve_cut(fc, 3); });
  EXPECT_NE(msg.find("connected"), std::string::npos) << msg;
  EXPECT_EQ(resolve_cut(fc, 1), 1);
  // Nothing to tile at all.
  const NetSpec dense = parse_net("[net]\nwidth=4\nheight=4\nchannels=1\n[connected]\noutput=3\n[softmax]\n", "d.cfg");
  msg = error_of([&] { resolve_cut(dense, -1); });
  EXPECT_NE(msg.find("cannot be tiled"), std::string::npos) << msg;
  // make_plan refuses a non-spatial layer in its range as well.
  msg = error_of([&] { make_plan(net, 1, 1, 0, 3, {0}); });
  EXPECT_NE(msg.find("cannot be tiled"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tt
