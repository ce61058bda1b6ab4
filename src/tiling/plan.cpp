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

int Plan::group_of(int l) const {
  int g = 0;
  while (g + 1 < int(group_starts.size()) && group_starts[size_t(g + 1)] <= l) ++g;
  return g;
}

bool Plan::crosses_groups(int e) const {
  const PlanEdge& pe = edges[size_t(e)];
  return pe.from != kSegmentInput && group_of(pe.from) != group_of(pe.to);
}

bool Plan::side_edge(int e) const {
  const PlanEdge& pe = edges[size_t(e)];
  return pe.slot != 0 || pe.from != pe.to - 1;
}

bool Plan::read_by_side_edge(int l) const {
  for (int e : consumers[size_t(l - first)])
    if (side_edge(e)) return true;
  return false;
}

namespace {
// Whether every consumer of node l inside the segment is in a later group (and there is one).
bool read_only_by_later_groups(const Plan& plan, int l) {
  const auto& readers = plan.consumers[size_t(l - plan.first)];
  for (int e : readers)
    if (!plan.crosses_groups(e)) return false;
  return !readers.empty();
}
}  // namespace

bool pointwise_before_exchange(const NetSpec& net, const Plan& plan, int l) {
  return has_pointwise(net.layers[size_t(l)]) && read_only_by_later_groups(plan, l);
}

bool backward_reads_features(const NetSpec& net, const Plan& plan, int l) {
  const TiledTraits& traits = tiled_traits(net.layers[size_t(l)]);
  if (traits.backward_reads_winners || traits.backward_reads_output) return true;
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

int resolve_cut(const NetSpec& net, int requested, int rows, int cols) {
  const int limit = net.max_cut(), untileable = net.first_untileable(), first = net.first_tiled();
  if (requested < -1) fail("--cut ", requested, ": a layer count (or -1, the default)");
  if (requested < 0) {
    if (limit <= first)
      fail(net.path, ": layer ", first, " cannot be tiled ([", net.layers[size_t(first)].type_name(), "])");
    for (int cut = limit; cut > first; --cut) {
      const Shape& end = net.layers[size_t(cut - 1)].out;
      if (end.h >= rows && end.w >= cols && net.split_reader(cut) < 0) return cut;
    }
    return limit;  // no cut fits the grid: make_plan names the layer where a tile is empty
  }
  if (requested <= first)
    fail("--cut ", requested, ": at least layer ", first, " must be tiled",
         first > 0 ? " (the [crop] before it runs on the whole picture)" : "");
  if (requested > int(net.layers.size())) fail("--cut ", requested, ": the net has ", net.layers.size(), " layers");
  if (requested > untileable) {
    const LayerSpec& l = net.layers[size_t(untileable)];
    fail("--cut ", requested, ": layer ", untileable, " ([", l.type_name(), "] at ", net.path, ":", l.line,
         ") cannot be tiled; the cut must be at most ", limit);
  }
  if (const int r = net.split_reader(requested); r >= 0) {
    const LayerSpec& reader = net.layers[size_t(r)];
    int from = requested;
    for (int in : reader.inputs) from = std::min(from, in);
    fail("--cut ", requested, ": layer ", r, " ([", reader.type_name(), "]) reads the output of layer ", from,
         ", which must then be whole on the root: the cut must be at most ", from + 1,
         r < limit ? " or at least " + std::to_string(r + 1) : std::string());
  }
  return requested;
}

namespace {
// Boundaries of `parts` intervals over a length n, proportional to `weights` (even if none).
std::vector<int> balanced(int n, int parts, const std::vector<double>& weights) {
  std::vector<int> b(size_t(parts) + 1);
  if (weights.empty()) {
    for (int i = 0; i <= parts; ++i) b[size_t(i)] = int((long(i) * n) / parts);
    return b;
  }
  double total = 0, run = 0;
  for (double w : weights) total += w;
  for (int i = 0; i <= parts; ++i) {
    b[size_t(i)] = int(std::lround(n * run / total));
    if (i < parts) run += weights[size_t(i)];
  }
  b[size_t(parts)] = n;
  return b;
}

// The boundaries of a node's output mapped back through its window's stride to the map it
// reads (of length m): boundary b at the output is b·stride at the input.
std::vector<int> project(const std::vector<int>& b, int stride, int m) {
  const size_t parts = b.size() - 1;
  std::vector<int> prev(b.size());
  prev[0] = 0;
  prev[parts] = m;
  for (size_t i = 1; i < parts; ++i) prev[i] = std::min(b[i] * stride, m);
  return prev;
}

int map_len(const Shape& s, bool rows) { return rows ? s.h : s.w; }

// Owned intervals of one axis for every node's output: balanced at the outputs no tiled
// node reads (the last node's), then mapped back through the strides of each node's first
// consumer edge, so that tiles stay aligned; and the segment's input's, from node first.
std::vector<std::vector<int>> split_axis(const NetSpec& net, const Plan& p, int parts, bool rows,
                                         const std::vector<double>& weights, std::vector<int>& in_bounds) {
  std::vector<std::vector<int>> bounds(size_t(p.last - p.first));
  for (int l = p.last - 1; l >= p.first; --l) {
    const auto& readers = p.consumers[size_t(l - p.first)];
    const Shape& out = net.layers[size_t(l)].out;
    if (readers.empty()) {
      bounds[size_t(l - p.first)] = balanced(map_len(out, rows), parts, weights);
    } else {
      const PlanEdge& e = p.edges[size_t(readers[0])];
      bounds[size_t(l - p.first)] =
          project(bounds[size_t(e.to - p.first)], net.layers[size_t(e.to)].window(e.slot).stride, map_len(out, rows));
    }
  }
  const LayerSpec& head = net.layers[size_t(p.first)];
  in_bounds = project(bounds[0], head.window().stride, map_len(head.in, rows));
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

namespace {
// The graph of the tiled nodes: their input edges and who reads each output.
void link_nodes(const NetSpec& net, Plan& p) {
  const int L = p.last - p.first;
  p.node_edges.assign(size_t(L), {});
  p.consumers.assign(size_t(L), {});
  const std::vector<int>& head_inputs = net.inputs_of(p.first);
  const int segment_input = head_inputs.empty() ? -1 : head_inputs[0];
  if (head_inputs.size() > 1) fail("layer ", p.first, " reads ", head_inputs.size(), " maps: a segment starts at one");
  for (int l = p.first; l < p.last; ++l) {
    const std::vector<int>& inputs = net.inputs_of(l);
    for (size_t k = 0; k < std::max<size_t>(inputs.size(), 1); ++k) {
      const int from = inputs.empty() ? -1 : inputs[k];
      PlanEdge e{from, l, int(k)};
      if (from < p.first) {
        if (l != p.first || from != segment_input)
          fail("layer ", l, " reads ", from < 0 ? std::string("the net's input") : "layer " + std::to_string(from),
               ", outside the tiled layers [", p.first, ", ", p.last, ")");
        e.from = kSegmentInput;
      } else if (from >= l) {
        fail("internal: layer ", l, " reads layer ", from, ", not an earlier one");
      }
      const int id = int(p.edges.size());
      p.edges.push_back(e);
      p.node_edges[size_t(l - p.first)].push_back(id);
      if (e.from != kSegmentInput) p.consumers[size_t(e.from - p.first)].push_back(id);
    }
  }
}

// The map edge e reads.
const Shape& edge_map(const NetSpec& net, const Plan& p, const PlanEdge& e) {
  return e.from == kSegmentInput ? net.layers[size_t(p.first)].in : net.layers[size_t(e.from)].out;
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
    if (!net.layers[l].spatial()) fail("layer ", l, " ([", net.layers[l].type_name(), "]) cannot be tiled");
  Plan p;
  p.rows = rows;
  p.cols = cols;
  p.first = first;
  p.last = last;
  p.features = opt.features;
  p.group_starts = group_starts;
  if (p.group_starts.empty() || p.group_starts[0] != first) fail("the first group must start at layer ", first);
  link_nodes(net, p);

  // The split starts at the last tiled layer: more rows (columns) than its map has leave a
  // tile empty. Said before anything is sized by the grid (--grid 2000000000x1 must not
  // allocate first).
  const Shape& end = net.layers[last - 1].out;
  for (const auto& [parts, len, axis] : {std::tuple{rows, end.h, "row"}, std::tuple{cols, end.w, "column"}})
    if (parts > len)
      fail("grid ", rows, "x", cols, " leaves tile ", axis, "s empty at layer ", last - 1, " (", axis, " length ", len,
           " split ", parts, " ways, ", net.path, "): use a smaller grid or a larger input");
  if (int64_t(rows) * cols > kMaxTiles) fail("grid ", rows, "x", cols, " has more than ", kMaxTiles, " tiles");
  std::vector<int> in_rb, in_cb;
  auto rb = split_axis(net, p, rows, true, split.rows, in_rb);
  auto cb = split_axis(net, p, cols, false, split.cols, in_cb);
  // The split starts at the last tiled layer and is projected back, so an empty tile
  // appears there first: check from the last layer back to the input to name the cause.
  for (int l = last - 1; l >= first; --l) {
    check_nonempty(net, rb[l - first], rows, net.layers[l].out.h, "row", l, rows, cols);
    check_nonempty(net, cb[l - first], cols, net.layers[l].out.w, "column", l, rows, cols);
  }
  const Shape& in_map = net.layers[size_t(first)].in;
  check_nonempty(net, in_rb, rows, in_map.h, "row", -1, rows, cols);
  check_nonempty(net, in_cb, cols, in_map.w, "column", -1, rows, cols);

  const int T = rows * cols, L = last - first;
  p.tiles.assign(T, std::vector<TileLayer>(L));
  p.own_input.resize(T);
  for (int t = 0; t < T; ++t) {
    const int r = t / cols, c = t % cols;
    p.own_input[t] = {in_rb[r], in_rb[r + 1], in_cb[c], in_cb[c + 1]};
    for (int l = first; l < last; ++l) {
      TileLayer& x = p.tiles[t][l - first];
      x.own = {rb[l - first][r], rb[l - first][r + 1], cb[l - first][c], cb[l - first][c + 1]};
      x.in.resize(p.node_edges[size_t(l - first)].size());
      x.delta_in.resize(x.in.size());
    }
  }

  std::vector<int> starts = p.group_starts;
  starts.push_back(last);
  for (int t = 0; t < T; ++t) {
    auto& tl = p.tiles[t];
    auto own_of = [&](int from) { return from == kSegmentInput ? p.own_input[t] : tl[from - first].own; };
    for (size_t g = 0; g + 1 < starts.size(); ++g) {
      const int s = starts[g], e = starts[g + 1];
      // Backward boxes grow from the owned cells of what the group reads from before it.
      for (int l = s; l < e; ++l) {
        const LayerSpec& ls = net.layers[l];
        TileLayer& x = tl[l - first];
        x.delta = x.own;
        for (int id : p.node_edges[size_t(l - first)]) {
          const PlanEdge& pe = p.edges[size_t(id)];
          const Box need = pe.from >= s ? tl[pe.from - first].delta : own_of(pe.from);
          x.delta_in[size_t(pe.slot)] = need;
          x.delta = hull(x.delta, touching_out(need, ls.window(pe.slot), ls.out.h, ls.out.w));
        }
      }
      // Forward boxes grow from the group's end towards its start. A layer with a
      // pre-activation output (a convolution) that only later groups read computes only
      // its owned cells: backward exchanges its delta after batch-norm/activation
      // (dL/d pre-activation), so no tile needs its forward values outside the owned box.
      for (int l = e - 1; l >= s; --l) {
        const LayerSpec& ls = net.layers[l];
        TileLayer& x = tl[l - first];
        Box need_out{};
        for (int id : p.consumers[size_t(l - first)]) {
          const PlanEdge& pe = p.edges[size_t(id)];
          if (pe.to < e) need_out = hull(need_out, tl[pe.to - first].in[size_t(pe.slot)]);
        }
        const bool exchanged_after_pointwise = tiled_traits(ls).pre_activation && read_only_by_later_groups(p, l);
        const bool for_backward = !exchanged_after_pointwise && opt.features == BackwardFeatures::Recompute;
        x.fwd = hull(hull(need_out, for_backward ? x.delta : Box{}), x.own);
        for (int id : p.node_edges[size_t(l - first)]) {
          const PlanEdge& pe = p.edges[size_t(id)];
          const Shape& m = edge_map(net, p, pe);
          x.in[size_t(pe.slot)] = window_in(x.fwd, ls.window(pe.slot), m.h, m.w);
        }
        x.held = backward_reads_features(net, p, l) ? hull(x.fwd, x.delta) : x.fwd;
      }
    }
  }

  p.fwd_halo.assign(p.edges.size(), {});
  p.bwd_halo.assign(p.edges.size(), {});
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
  for (size_t id = 0; id < p.edges.size(); ++id) {
    if (!p.crosses_groups(int(id))) continue;
    const PlanEdge& pe = p.edges[id];
    for (int to = 0; to < T; ++to)
      for (int from = 0; from < T; ++from) {
        const Box& owned = p.tiles[from][pe.from - first].own;
        Box f = intersect(owned, p.tiles[to][pe.to - first].in[size_t(pe.slot)]);
        if (!f.empty()) p.fwd_halo[id].push_back({from, to, f});
        Box b = intersect(owned, p.tiles[to][pe.from - first].delta);
        if (!b.empty()) p.bwd_halo[id].push_back({from, to, b});
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
    for (const Piece& pc : p.feature_halo[size_t(l - p.first)])
      st.halo_bytes_features += tiled_traits(ls).feature_bytes * ls.out.c * pc.box.area();
  }
  for (size_t id = 0; id < p.edges.size(); ++id) {
    if (!p.crosses_groups(int(id))) continue;
    const int channels = net.layers[size_t(p.edges[id].from)].out.c;
    for (const Piece& pc : p.fwd_halo[id])
      if (pc.from != pc.to) st.halo_bytes_fwd += 4.0 * channels * pc.box.area();
    for (const Piece& pc : p.bwd_halo[id])
      if (pc.from != pc.to) st.halo_bytes_bwd += 4.0 * channels * pc.box.area();
  }
  return st;
}

}  // namespace tt
