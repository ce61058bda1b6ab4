// The tiling plan of a graph, checked cell by cell. Random DAGs of windows (forks: a value
// read by several nodes, some in its group and some in later ones; joins: a node reading
// several maps; edges that skip groups) are planned on random grids and groupings, and
// every box and halo piece is checked against what each cell needs, enumerated by brute
// force from the window arithmetic (not from box.hpp's formulas):
//   forward  every input cell of every cell a tile computes is local: computed in the
//            producer's forward box (same group), or in the input box, which the halo
//            pieces fill exactly from the cells' owners (an edge from an earlier group);
//   backward every output cell whose window holds a cell a tile produces an input delta
//            on is in the tile's delta box; each producer's delta box gets every
//            consumer's contribution: from same-group consumers on their delta-input
//            boxes, from later groups' consumers through backward pieces that cover it.
// Node l's own, fwd, delta boxes are of its output map; in[k] and delta_in[k] of the map
// its input edge k reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "layers/box.hpp"
#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "tiling/plan.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

// Output cells along one axis whose window [o*stride - pad, o*stride - pad + size) holds
// input cell u: by enumeration over the whole output axis.
bool reads(const Window& w, int o, int u) { return o * w.stride - w.pad <= u && u < o * w.stride - w.pad + w.size; }

bool holds(const Box& b, int y, int x) { return b.y0 <= y && y < b.y1 && b.x0 <= x && x < b.x1; }

// A random DAG of convolutions and max-pools on an h x w input. Node l reads the node
// before it (or another earlier node) and, sometimes, a second earlier node whose map has
// the same size: a fork at each node read twice, a join at each node reading two.
NetSpec random_dag(std::mt19937& rng, int n, int h, int w) {
  NetSpec net;
  net.path = "random_dag";
  net.height = h;
  net.width = w;
  net.channels = 3;
  for (int l = 0; l < n; ++l) {
    LayerSpec s;
    s.index = l;
    s.line = l + 1;
    Shape in = net.input();
    if (l > 0) {
      const int primary = rng() % 10 < 7 ? l - 1 : int(rng() % unsigned(l));
      s.inputs = {primary};
      in = net.layers[size_t(primary)].out;
      std::vector<int> same;
      for (int q = 0; q < l; ++q)
        if (q != primary && net.layers[size_t(q)].out.h == in.h && net.layers[size_t(q)].out.w == in.w)
          same.push_back(q);
      if (!same.empty() && rng() % 2) {
        s.inputs.push_back(same[rng() % same.size()]);
        in.c += net.layers[size_t(s.inputs.back())].out.c;
      }
    }
    s.in = in;
    Window win;
    int out_h, out_w;
    if (rng() % 3 == 0) {
      static const int pools[3][2] = {{2, 2}, {2, 1}, {3, 2}};
      const auto& p = pools[rng() % 3];
      win = {p[0], p[1], (p[0] - 1) / 2};
      s.kind = &kMaxPoolKind;
      s.params = MaxPoolParams{win, p[0] - 1};
      out_h = (in.h + p[0] - 1 - p[0]) / p[1] + 1;
      out_w = (in.w + p[0] - 1 - p[0]) / p[1] + 1;
      s.out = {in.c, out_h, out_w};
    } else {
      static const int ks[4] = {1, 3, 5, 7};
      const int k = ks[rng() % 4], stride = 1 + int(rng() % 2), pad = rng() % 4 != 0 ? k / 2 : 0;
      win = {k, stride, pad};
      ConvParams c;
      c.filters = 2 + int(rng() % 3);
      c.batch_normalize = rng() % 2;
      c.act = rng() % 2 ? Act::Leaky : Act::Linear;
      c.win = win;
      c.pad_total = 2 * pad;
      s.kind = &kConvKind;
      s.params = c;
      out_h = (in.h + 2 * pad - k) / stride + 1;
      out_w = (in.w + 2 * pad - k) / stride + 1;
      s.out = {c.filters, out_h, out_w};
    }
    if (out_h < 1 || out_w < 1) break;  // the input is too small for more layers
    net.layers.push_back(s);
  }
  return net;
}

std::string describe(const NetSpec& net) {
  std::ostringstream d;
  for (const LayerSpec& s : net.layers) {
    d << s.index << ": " << (s.is(kConvKind) ? "conv " : "maxpool ") << s.window().size << "/" << s.window().stride
      << " pad " << s.window().pad << " " << s.out.h << "x" << s.out.w << " reads";
    if (s.inputs.empty()) d << " input";
    for (int i : s.inputs) d << " " << i;
    d << "\n";
  }
  return d.str();
}

void check_graph_plan(const NetSpec& net, const Plan& p) {
  const int T = p.tiles_count(), first = p.first;
  auto map_of = [&](const PlanEdge& e) -> const Shape& {
    return e.from == kSegmentInput ? net.layers[size_t(first)].in : net.layers[size_t(e.from)].out;
  };
  auto own_of = [&](int t, int from) { return from == kSegmentInput ? p.own_input[size_t(t)] : p.at(t, from).own; };

  // The edges are the nodes' inputs, in order; consumers list exactly the edges reading a node.
  size_t edges = 0;
  for (int l = first; l < p.last; ++l) {
    const std::vector<int>& ins = net.inputs_of(l);
    const auto& ne = p.node_edges[size_t(l - first)];
    ASSERT_EQ(ne.size(), std::max<size_t>(ins.size(), 1));
    for (size_t k = 0; k < ne.size(); ++k) {
      const PlanEdge& e = p.edges[size_t(ne[k])];
      EXPECT_EQ(e.to, l);
      EXPECT_EQ(e.slot, int(k));
      EXPECT_EQ(e.from, l == first ? kSegmentInput : ins[k]);
      if (e.from != kSegmentInput) {
        const auto& cs = p.consumers[size_t(e.from - first)];
        EXPECT_NE(std::find(cs.begin(), cs.end(), ne[k]), cs.end()) << "edge " << ne[k] << " not among its consumers";
      }
    }
    edges += ne.size();
  }
  ASSERT_EQ(p.edges.size(), edges);

  // Owned boxes partition every map.
  auto check_partition = [&](auto own, int h, int w, const std::string& what) {
    std::vector<int> count(size_t(h) * size_t(w), 0);
    for (int t = 0; t < T; ++t) {
      const Box b = own(t);
      ASSERT_TRUE(!b.empty() && contains(full_box(h, w), b)) << what << ": tile " << t << " owns " << b.str();
      for (int y = b.y0; y < b.y1; ++y)
        for (int x = b.x0; x < b.x1; ++x) ++count[size_t(y * w + x)];
    }
    for (int c : count) ASSERT_EQ(c, 1) << what << ": a cell owned " << c << " times";
  };
  check_partition([&](int t) { return p.own_input[size_t(t)]; }, net.layers[size_t(first)].in.h,
                  net.layers[size_t(first)].in.w, "segment input");
  for (int l = first; l < p.last; ++l)
    check_partition([&](int t) { return p.at(t, l).own; }, net.layers[size_t(l)].out.h, net.layers[size_t(l)].out.w,
                    "output of node " + std::to_string(l));

  for (int t = 0; t < T; ++t)
    for (int l = first; l < p.last; ++l) {
      const LayerSpec& s = net.layers[size_t(l)];
      const Window& win = s.window();
      const TileLayer& x = p.at(t, l);
      SCOPED_TRACE("tile " + std::to_string(t) + " node " + std::to_string(l) + ": own " + x.own.str() + " fwd " +
                   x.fwd.str() + " delta " + x.delta.str() + " held " + x.held.str());
      EXPECT_TRUE(contains(x.fwd, x.own));
      EXPECT_TRUE(contains(x.delta, x.own)) << "weight gradients need the delta on the owned cells";
      EXPECT_TRUE(contains(x.held, x.fwd));
      const bool reads_features = backward_reads_features(net, p, l);
      if (reads_features) {
        EXPECT_TRUE(contains(x.held, x.delta)) << "backward reads forward values on delta";
      }
      if (p.features == BackwardFeatures::Recompute) {
        EXPECT_EQ(x.held, x.fwd) << "nothing is exchanged";
      }

      const auto& ne = p.node_edges[size_t(l - first)];
      ASSERT_EQ(x.in.size(), ne.size());
      ASSERT_EQ(x.delta_in.size(), ne.size());
      for (size_t k = 0; k < ne.size(); ++k) {
        const PlanEdge& e = p.edges[size_t(ne[k])];
        const Shape& m = map_of(e);
        const bool same_group = e.from != kSegmentInput && p.group_of(e.from) == p.group_of(l);
        EXPECT_EQ(p.crosses_groups(ne[k]), e.from != kSegmentInput && !same_group);
        const Box& in = x.in[k];
        const Box& din = x.delta_in[k];
        EXPECT_TRUE(contains(full_box(m.h, m.w), in));
        // Forward: every input cell of every computed cell is in the input box, and is
        // local: computed by the producer in this group, or received (checked below).
        for (int oy = x.fwd.y0; oy < x.fwd.y1; ++oy)
          for (int u = 0; u < m.h; ++u) {
            if (reads(win, oy, u)) {
              ASSERT_TRUE(in.y0 <= u && u < in.y1) << "edge " << k << ": output row " << oy << " reads row " << u;
            }
          }
        for (int ox = x.fwd.x0; ox < x.fwd.x1; ++ox)
          for (int u = 0; u < m.w; ++u) {
            if (reads(win, ox, u)) {
              ASSERT_TRUE(in.x0 <= u && u < in.x1) << "edge " << k << ": output column " << ox << " reads column " << u;
            }
          }
        if (same_group) {
          EXPECT_TRUE(contains(p.at(t, e.from).fwd, in)) << "edge " << k << " reads outside its producer";
        }
        // Backward: the delta-input box is what the producer needs from this consumer.
        EXPECT_EQ(din, same_group ? p.at(t, e.from).delta : own_of(t, e.from)) << "edge " << k;
        // Every output whose window holds a cell of it has its delta here (cell by cell).
        for (int y = din.y0; y < din.y1; ++y)
          for (int xx = din.x0; xx < din.x1; ++xx)
            for (int oy = 0; oy < s.out.h; ++oy)
              for (int ox = 0; ox < s.out.w; ++ox) {
                if (reads(win, oy, y) && reads(win, ox, xx)) {
                  ASSERT_TRUE(holds(x.delta, oy, ox)) << "edge " << k << ": input delta at (" << y << "," << xx
                                                      << ") needs output (" << oy << "," << ox << ")";
                }
              }
      }
      // Forward computes what its consumers in the group read, the delta box when
      // recomputing (except at a convolution only later groups read: its delta is exchanged
      // after batch-norm/activation), and no more.
      Box need = x.own;
      bool read_here = false;
      for (int id : p.consumers[size_t(l - first)]) {
        const PlanEdge& e = p.edges[size_t(id)];
        if (!p.crosses_groups(id)) need = hull(need, p.at(t, e.to).in[size_t(e.slot)]);
        read_here |= !p.crosses_groups(id);
      }
      const bool exchanged_after_pointwise = s.is(kConvKind) && !read_here && !p.consumers[size_t(l - first)].empty();
      if (p.features == BackwardFeatures::Recompute && !exchanged_after_pointwise) need = hull(need, x.delta);
      EXPECT_EQ(x.fwd, need) << "forward computes more or less than is read";
    }

  // Halo pieces: only on edges between groups; forward pieces fill the input box exactly
  // from the owners, backward pieces fill the producer's delta box exactly from the owners'
  // delta-input cells.
  ASSERT_EQ(p.fwd_halo.size(), p.edges.size());
  ASSERT_EQ(p.bwd_halo.size(), p.edges.size());
  for (size_t id = 0; id < p.edges.size(); ++id) {
    const PlanEdge& e = p.edges[id];
    if (!p.crosses_groups(int(id))) {
      EXPECT_TRUE(p.fwd_halo[id].empty() && p.bwd_halo[id].empty()) << "halo on edge " << id << " inside a group";
      continue;
    }
    const Shape& m = map_of(e);
    for (int to = 0; to < T; ++to) {
      std::vector<int> fwd_count(size_t(m.h) * size_t(m.w), 0), bwd_count(fwd_count.size(), 0);
      for (const auto& [pieces, count, bwd] :
           {std::tuple{&p.fwd_halo[id], &fwd_count, false}, std::tuple{&p.bwd_halo[id], &bwd_count, true}})
        for (const Piece& pc : *pieces) {
          if (pc.to != to) continue;
          EXPECT_TRUE(contains(p.at(pc.from, e.from).own, pc.box)) << "piece not owned by its sender";
          if (bwd) {
            EXPECT_TRUE(contains(p.at(pc.from, e.to).delta_in[size_t(e.slot)], pc.box))
                << "backward piece not produced by its sender";
          }
          for (int y = pc.box.y0; y < pc.box.y1; ++y)
            for (int xx = pc.box.x0; xx < pc.box.x1; ++xx) ++(*count)[size_t(y * m.w + xx)];
        }
      const Box& in = p.at(to, e.to).in[size_t(e.slot)];
      const Box& delta = p.at(to, e.from).delta;
      for (int y = 0; y < m.h; ++y)
        for (int xx = 0; xx < m.w; ++xx) {
          ASSERT_EQ(fwd_count[size_t(y * m.w + xx)], holds(in, y, xx) ? 1 : 0)
              << "edge " << id << " into tile " << to << ": cell (" << y << "," << xx << ") of input box " << in.str();
          ASSERT_EQ(bwd_count[size_t(y * m.w + xx)], holds(delta, y, xx) ? 1 : 0)
              << "edge " << id << " into tile " << to << ": cell (" << y << "," << xx << ") of delta box "
              << delta.str();
        }
    }
  }
}

TEST(PlanGraph, RandomDagsHaveEveryCellTheyNeed) {
  std::mt19937 rng(4242);
  int plans = 0, forks = 0, joins = 0, cross_edges = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int n = 2 + int(rng() % 6);
    NetSpec net = random_dag(rng, n, 6 + int(rng() % 30), 6 + int(rng() % 30));
    const int L = int(net.layers.size());
    if (L < 2) continue;
    const int rows = 1 + int(rng() % 3), cols = 1 + int(rng() % 3);
    std::vector<int> groups{0};
    const int mode = int(rng() % 3);
    for (int l = 1; l < L; ++l)
      if (mode == 0 || (mode == 2 && rng() % 2)) groups.push_back(l);
    const BackwardFeatures features = rng() % 2 ? BackwardFeatures::Exchange : BackwardFeatures::Recompute;
    std::string g;
    for (int v : groups) g += std::to_string(v) + " ";
    SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols) + ", groups at " + g + ", " +
                 backward_features_name(features) + ", graph:\n" + describe(net));
    Plan p;
    try {
      p = make_plan(net, rows, cols, 0, L, groups, {{}, features});
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
      continue;
    }
    check_graph_plan(net, p);
    if (::testing::Test::HasFailure()) return;
    ++plans;
    for (int l = 0; l < L; ++l) {
      forks += p.consumers[size_t(l)].size() > 1;
      joins += p.node_edges[size_t(l)].size() > 1;
    }
    for (size_t id = 0; id < p.edges.size(); ++id) cross_edges += p.crosses_groups(int(id));
  }
  std::printf("checked %d plans: %d forks, %d joins, %d edges between groups\n", plans, forks, joins, cross_edges);
  EXPECT_GT(plans, 300);
  EXPECT_GT(forks, 200);
  EXPECT_GT(joins, 200);
  EXPECT_GT(cross_edges, 300);
}

// A residual block: 0 conv, 1 conv, 2 conv reading 1, 3 conv reading 2 and 0 (the skip).
// Node 0 is read by 1 in its group and by 3 in a later one: its forward box covers what 1
// reads, its delta box gets 3's contribution from the owners.
TEST(PlanGraph, ResidualBlockAcrossGroups) {
  NetSpec net;
  net.path = "residual";
  net.height = net.width = 16;
  net.channels = 3;
  for (int l = 0; l < 4; ++l) {
    LayerSpec s;
    s.index = l;
    s.kind = &kConvKind;
    ConvParams c;
    c.filters = 4;
    c.batch_normalize = true;
    c.act = Act::Leaky;
    c.win = {3, 1, 1};
    c.pad_total = 2;
    s.params = c;
    s.in = {l == 0 ? 3 : 4, 16, 16};
    if (l > 0) s.inputs = {l - 1};
    if (l == 3) s.inputs = {2, 0};
    s.out = {4, 16, 16};
    net.layers.push_back(s);
  }
  const Plan p = make_plan(net, 2, 1, 0, 4, {0, 2}, {{}, BackwardFeatures::Exchange});
  check_graph_plan(net, p);
  ASSERT_EQ(p.consumers[0].size(), 2u);
  const int skip = p.edge(3, 1);
  EXPECT_TRUE(p.crosses_groups(skip));
  EXPECT_FALSE(p.crosses_groups(p.edge(1)));
  // Tile 0 owns rows [0, 8) everywhere. Node 3 (the last, computing its owned rows when
  // backward's forward values are exchanged) reads rows [0, 9) of node 0 through the skip:
  // one row from tile 1, the rest its own.
  EXPECT_EQ(p.at(0, 3).in[1], (Box{0, 9, 0, 16}));
  ASSERT_FALSE(p.fwd_halo[size_t(skip)].empty());
  bool from_below = false;
  for (const Piece& pc : p.fwd_halo[size_t(skip)])
    from_below |= pc.from == 1 && pc.to == 0 && pc.box == Box{8, 9, 0, 16};
  EXPECT_TRUE(from_below);
  // Node 0 is read by node 1 in its own group, so its delta is not exchanged after its
  // batch-norm/activation; node 1 is read only by node 2, in the next group: it is.
  EXPECT_FALSE(pointwise_before_exchange(net, p, 0));
  EXPECT_TRUE(pointwise_before_exchange(net, p, 1));
  EXPECT_FALSE(pointwise_before_exchange(net, p, 2));
}

}  // namespace
}  // namespace tt
