#include "tiling/plan.hpp"

#include <cmath>
#include <sstream>
#include <tuple>

#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {

bool Plan::group_start(int l) const {
  for (int s : group_starts)
    if (s == l) return true;
  return false;
}

int Plan::group_end(int l) const {
  for (int s : group_starts)
    if (s > l) return s;
  return last;
}

const char* backward_features_name(BackwardFeatures f) {
  return f == BackwardFeatures::Exchange ? "exchange" : "recompute";
}

BackwardFeatures parse_backward_features(const std::string& s) {
  if (s == "recompute") return BackwardFeatures::Recompute;
  if (s == "exchange") return BackwardFeatures::Exchange;
  fail("--backward-features: '", s, "' is neither recompute nor exchange");
}

bool pointwise_before_exchange(const NetSpec& net, const Plan& plan, int l) {
  return l + 1 < plan.last && plan.group_start(l + 1) && has_pointwise(net.layers[size_t(l)]);
}

bool backward_reads_features(const NetSpec& net, const Plan& plan, int l) {
  if (tiled_traits(net.layers[size_t(l)]).backward_reads_winners) return true;
  return has_pointwise(net.layers[size_t(l)]) && !pointwise_before_exchange(net, plan, l);
}

std::vector<int> parse_groups(const std::string& spec, int first, int last) {
  std::vector<int> g;
  if (spec == "none") {
    for (int l = first; l < last; ++l) g.push_back(l);
    return g;
  }
  if (spec == "all") return {first};
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') fail("--groups: '", item, "' is not a layer index (use none, all or e.g. 0,4,8)");
    if (v < first || v >= last)
      fail("--groups: group boundary ", v, " is outside the tiled layers [", first, ", ", last, ")");
    if (!g.empty() && v <= g.back()) fail("--groups: layer indices must be strictly increasing");
    g.push_back(int(v));
  }
  if (g.empty() || g[0] != first) fail("--groups: the first group must start at layer ", first);
  return g;
}

int resolve_cut(const NetSpec& net, int requested) {
  const int limit = net.max_cut();
  if (requested < -1) fail("--cut ", requested, ": a layer count (or -1, the default)");
  if (requested < 0) {
    if (limit == 0) fail(net.path, ": the first layer cannot be tiled ([", layer_type_name(net.layers[0].type), "])");
    return limit;
  }
  if (requested == 0) fail("--cut 0: at least the first layer must be tiled");
  if (requested > limit && limit < net.first_untileable()) {
    fail("--cut ", requested, ": a [route] reads the output of layer ", limit - 1,
         ", which must then be whole on the root: the cut must be at most ", limit);
  }
  if (requested > limit) {
    const LayerSpec& l = net.layers[limit];
    fail("--cut ", requested, ": layer ", limit, " ([", layer_type_name(l.type), "] at ", net.path, ":", l.line,
         ") cannot be tiled; the cut must be at most ", limit);
  }
  return requested;
}

namespace {
// Owned intervals of one axis for every layer's output: balanced at the last layer's
// output, then mapped back through the strides so that tiles stay aligned.
std::vector<std::vector<int>> split_axis(const NetSpec& net, int first, int last, int parts, bool rows,
                                         const std::vector<double>& weights, int& in_len, std::vector<int>& in_bounds) {
  std::vector<std::vector<int>> bounds(last - first);
  auto len_out = [&](int l) { return rows ? net.layers[l].out.h : net.layers[l].out.w; };
  auto len_in = [&](int l) { return rows ? net.layers[l].in.h : net.layers[l].in.w; };
  const int n = len_out(last - 1);
  std::vector<int> b(parts + 1);
  if (weights.empty()) {
    for (int i = 0; i <= parts; ++i) b[i] = int((long(i) * n) / parts);
  } else {
    double total = 0, run = 0;
    for (double w : weights) total += w;
    for (int i = 0; i <= parts; ++i) {
      b[i] = int(std::lround(n * run / total));
      if (i < parts) run += weights[size_t(i)];
    }
    b[parts] = n;
  }
  for (int l = last - 1; l >= first; --l) {
    bounds[l - first] = b;
    const int s = net.layers[l].window().stride, m = len_in(l);
    std::vector<int> prev(parts + 1);
    prev[0] = 0;
    prev[parts] = m;
    for (int i = 1; i < parts; ++i) prev[i] = std::min(b[i] * s, m);
    b = prev;
  }
  in_len = len_in(first);
  in_bounds = b;
  return bounds;
}

void check_nonempty(const NetSpec& net, const std::vector<int>& b, int parts, int len, const char* axis, int layer,
                    int grid_r, int grid_c) {
  for (int i = 0; i < parts; ++i)
    if (b[i + 1] <= b[i])
      fail("grid ", grid_r, "x", grid_c, " leaves tile ", axis, " ", i, " empty at ",
           layer < 0 ? std::string("the input") : "layer " + std::to_string(layer), " (", axis, " length ", len,
           " split ", parts, " ways", layer >= 0 ? ", " + net.path : std::string(""),
           "): use a smaller grid or a larger input");
}
}  // namespace

std::vector<double> parse_weights(const std::string& spec, int n, const char* what) {
  std::vector<double> w;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
      fail(what, ": '", item, "' is not a positive number (give one weight per grid ",
           what[2] == 'r' ? "row" : "column", ", e.g. 2,1)");
    w.push_back(v);
  }
  if (int(w.size()) != n)
    fail(what, " '", spec, "' has ", w.size(), " weight(s) for ", n, " grid ", what[2] == 'r' ? "row(s)" : "column(s)");
  return w;
}

namespace {
// b without the cells of f where what remains is a box (else b itself): a feature piece
// need not carry the cells its receiver computed in forward.
Box trim(Box b, const Box& f) {
  if (f.x0 <= b.x0 && f.x1 >= b.x1) {
    if (f.y0 <= b.y0)
      b.y0 = std::max(b.y0, std::min(b.y1, f.y1));
    else if (f.y1 >= b.y1)
      b.y1 = std::min(b.y1, std::max(b.y0, f.y0));
  } else if (f.y0 <= b.y0 && f.y1 >= b.y1) {
    if (f.x0 <= b.x0)
      b.x0 = std::max(b.x0, std::min(b.x1, f.x1));
    else if (f.x1 >= b.x1)
      b.x1 = std::min(b.x1, std::max(b.x0, f.x0));
  }
  return b;
}
}  // namespace

Plan make_plan(const NetSpec& net, int rows, int cols, int first, int last, const std::vector<int>& group_starts,
               const TilingOptions& opt) {
  const TileSplit& split = opt.split;
  if (rows < 1 || cols < 1) fail("grid ", rows, "x", cols, " must have at least one row and one column");
  if ((!split.rows.empty() && int(split.rows.size()) != rows) ||
      (!split.cols.empty() && int(split.cols.size()) != cols))
    fail("internal: ", split.rows.size(), "x", split.cols.size(), " split weights for a ", rows, "x", cols, " grid");
  if (first < 0 || last > int(net.layers.size()) || first >= last)
    fail("empty tiled layer range [", first, ", ", last, ")");
  for (int l = first; l < last; ++l)
    if (!net.layers[l].spatial()) fail("layer ", l, " ([", layer_type_name(net.layers[l].type), "]) cannot be tiled");
  Plan p;
  p.rows = rows;
  p.cols = cols;
  p.first = first;
  p.last = last;
  p.features = opt.features;
  p.group_starts = group_starts;
  if (p.group_starts.empty() || p.group_starts[0] != first) fail("the first group must start at layer ", first);

  // The split starts at the last tiled layer: more rows (columns) than its map has leave a
  // tile empty. Said before anything is sized by the grid (--grid 2000000000x1 must not
  // allocate first).
  const Shape& end = net.layers[last - 1].out;
  for (const auto& [parts, len, axis] : {std::tuple{rows, end.h, "row"}, std::tuple{cols, end.w, "column"}})
    if (parts > len)
      fail("grid ", rows, "x", cols, " leaves tile ", axis, "s empty at layer ", last - 1, " (", axis, " length ", len,
           " split ", parts, " ways, ", net.path, "): use a smaller grid or a larger input");
  if (int64_t(rows) * cols > kMaxTiles) fail("grid ", rows, "x", cols, " has more than ", kMaxTiles, " tiles");
  int in_h, in_w;
  std::vector<int> in_rb, in_cb;
  auto rb = split_axis(net, first, last, rows, true, split.rows, in_h, in_rb);
  auto cb = split_axis(net, first, last, cols, false, split.cols, in_w, in_cb);
  // The split starts at the last tiled layer and is projected back, so an empty tile
  // appears there first: check from the last layer back to the input to name the cause.
  for (int l = last - 1; l >= first; --l) {
    check_nonempty(net, rb[l - first], rows, net.layers[l].out.h, "row", l, rows, cols);
    check_nonempty(net, cb[l - first], cols, net.layers[l].out.w, "column", l, rows, cols);
  }
  check_nonempty(net, in_rb, rows, in_h, "row", -1, rows, cols);
  check_nonempty(net, in_cb, cols, in_w, "column", -1, rows, cols);

  const int T = rows * cols, L = last - first;
  p.tiles.assign(T, std::vector<TileLayer>(L));
  p.own_input.resize(T);
  for (int t = 0; t < T; ++t) {
    const int r = t / cols, c = t % cols;
    p.own_input[t] = {in_rb[r], in_rb[r + 1], in_cb[c], in_cb[c + 1]};
    for (int l = first; l < last; ++l)
      p.tiles[t][l - first].own = {rb[l - first][r], rb[l - first][r + 1], cb[l - first][c], cb[l - first][c + 1]};
  }

  std::vector<int> starts = p.group_starts;
  starts.push_back(last);
  for (int t = 0; t < T; ++t) {
    auto& tl = p.tiles[t];
    for (size_t g = 0; g + 1 < starts.size(); ++g) {
      const int s = starts[g], e = starts[g + 1];
      // Backward boxes grow from the owned input cells at the group's start.
      Box need_in = s == first ? p.own_input[t] : tl[s - 1 - first].own;
      for (int l = s; l < e; ++l) {
        const LayerSpec& ls = net.layers[l];
        TileLayer& x = tl[l - first];
        x.delta_in = need_in;
        x.delta = hull(touching_out(need_in, ls.window(), ls.out.h, ls.out.w), x.own);
        need_in = x.delta;
      }
      // Forward boxes grow from the group's end towards its start. A layer with a
      // pre-activation output (a convolution) that ends a group (before the segment's last
      // layer) computes only its owned cells: backward exchanges its delta after
      // batch-norm/activation (dL/d pre-activation), so no tile needs its forward values
      // outside the owned box.
      Box need_out{};
      for (int l = e - 1; l >= s; --l) {
        const LayerSpec& ls = net.layers[l];
        TileLayer& x = tl[l - first];
        const bool exchanged_after_pointwise = l == e - 1 && e < last && tiled_traits(ls).pre_activation;
        const bool for_backward = !exchanged_after_pointwise && opt.features == BackwardFeatures::Recompute;
        x.fwd = hull(hull(need_out, for_backward ? x.delta : Box{}), x.own);
        x.in = window_in(x.fwd, ls.window(), ls.in.h, ls.in.w);
        x.held = backward_reads_features(net, p, l) ? hull(x.fwd, x.delta) : x.fwd;
        need_out = x.in;
      }
    }
  }

  p.fwd_halo.assign(L, {});
  p.bwd_halo.assign(L, {});
  p.feature_halo.assign(L, {});
  for (int l = first; l < last; ++l)
    for (int to = 0; to < T; ++to) {
      const TileLayer& x = p.tiles[to][l - first];
      if (x.held == x.fwd) continue;
      for (int from = 0; from < T; ++from) {
        if (from == to) continue;
        const Box b = trim(intersect(p.tiles[from][l - first].own, x.held), x.fwd);
        if (!b.empty() && !contains(x.fwd, b)) p.feature_halo[l - first].push_back({from, to, b});
      }
    }
  for (int s : p.group_starts) {
    if (s == first) continue;
    for (int to = 0; to < T; ++to)
      for (int from = 0; from < T; ++from) {
        Box f = intersect(p.tiles[from][s - 1 - first].own, p.tiles[to][s - first].in);
        if (!f.empty()) p.fwd_halo[s - first].push_back({from, to, f});
        Box b = intersect(p.tiles[from][s - 1 - first].own, p.tiles[to][s - 1 - first].delta);
        if (!b.empty()) p.bwd_halo[s - first].push_back({from, to, b});
      }
  }
  return p;
}

PlanStats plan_stats(const NetSpec& net, const Plan& p) {
  PlanStats st;
  st.tile_bytes.assign(p.tiles_count(), 0);
  for (int l = p.first; l < p.last; ++l) {
    const LayerSpec& ls = net.layers[l];
    const double per_cell = ls.forward_flops() / double(ls.out.h * ls.out.w);
    st.flops_untiled += ls.forward_flops();
    for (int t = 0; t < p.tiles_count(); ++t) {
      const TileLayer& x = p.at(t, l);
      st.flops_tiled += per_cell * x.fwd.area();
      // forward output (+ pre-activation copy for convs, on the held box) and the delta at the output
      const double y = tiled_traits(ls).pre_activation ? x.held.area() : 0;
      st.tile_bytes[t] += 4.0 * ls.out.c * (x.fwd.area() + y + x.delta.area());
    }
    const int i = l - p.first;
    for (const Piece& pc : p.fwd_halo[i])
      if (pc.from != pc.to) st.halo_bytes_fwd += 4.0 * ls.in.c * pc.box.area();
    for (const Piece& pc : p.bwd_halo[i])
      if (pc.from != pc.to) st.halo_bytes_bwd += 4.0 * ls.in.c * pc.box.area();
    for (const Piece& pc : p.feature_halo[i])
      st.halo_bytes_features += tiled_traits(ls).feature_bytes * ls.out.c * pc.box.area();
  }
  return st;
}

}  // namespace tt
