#include "engine/memory_plan.hpp"

#include <algorithm>

#include "layers/tensor.hpp"
#include "tiling/tiled_traits.hpp"

namespace tt {

size_t TileMemoryPlan::map_bytes() const {
  size_t n = 0;
  for (const LayerMemory& m : layers) {
    if (m.in == MapStore::Own) n += m.in_floats * sizeof(float);
    if (m.y == MapStore::Own) n += m.y_floats * sizeof(float);
    if (m.z == MapStore::Own) n += m.out_floats * sizeof(float);
    for (size_t k : m.side_in_floats) n += k * sizeof(float);
    n += m.argmax_bytes;
  }
  return n;
}

size_t TileMemoryPlan::delta_bytes() const {
  size_t n = buf[0] + buf[1];
  for (const LayerMemory& m : layers) n += m.side_delta_floats;
  return n * sizeof(float);
}

bool input_aliases(const NetSpec& net, const Plan& plan, int t, int l) {
  if (l == plan.first) return false;
  const TileLayer& x = plan.at(t, l);
  const TileLayer& prev = plan.at(t, l - 1);
  // A layer that keeps its output for its own backward keeps it on `held`.
  const Box& out = tiled_traits(net.layers[size_t(l - 1)]).backward_reads_output ? prev.held : prev.fwd;
  return out == x.in[0] && (!plan.group_start(l) || contains(prev.own, x.in[0]));
}

// When the layer's input buffer is exactly what the delta box reads, no crops are needed.
bool weights_on_delta_box(const NetSpec& net, const Plan& plan, int t, int l) {
  const TileLayer& x = plan.at(t, l);
  const LayerSpec& s = net.layers[l];
  return x.in[0] == window_in(x.delta, s.window(), s.in.h, s.in.w);  // the input buffer always holds box `in`
}

bool bwd_exchange_local(const Plan& plan, int l, const std::vector<int>& local_tiles) {
  for (const Piece& pc : plan.bwd_halo[size_t(plan.edge(l))])
    if (pc.from != pc.to) return false;
  for (int t : local_tiles)
    if (!(plan.at(t, l).delta_in[0] == plan.at(t, l - 1).delta)) return false;
  return true;
}

Box bwd_data_box(const NetSpec& net, const Plan& plan, int t, int l) {
  const TileLayer& x = plan.at(t, l);
  const LayerSpec& s = net.layers[l];
  const Box reach = window_in(x.delta, s.window(), s.in.h, s.in.w);
  if (tiled_traits(s).backward_scatters) return reach;
  const Box need = intersect(reach, x.delta_in[0]);
  // Each delta row and column must still reach into the box, or the kernel would see a
  // window made of padding only (a geometry oneDNN rejects).
  const Box u = window_in_unclamped(x.delta, s.window());
  const bool every_window_meets = !need.empty() && need.y0 - u.y0 < s.window().size &&
                                  u.y1 - need.y1 < s.window().size && need.x0 - u.x0 < s.window().size &&
                                  u.x1 - need.x1 < s.window().size;
  return every_window_meets ? need : reach;
}

// After backward-data the input delta sits on bwd_data_box. It is used as it is (no copy
// to the delta_in box) when it is exactly that box, or when only its delta_in cells are
// read next: by the halo exchange at a group start or the gather at the segment's input.
bool keep_in_box(const Plan& plan, int t, int l, const Box& in, const std::vector<int>& local_tiles) {
  const TileLayer& x = plan.at(t, l);
  if (in == x.delta_in[0]) return true;
  if (!contains(in, x.delta_in[0])) return false;
  return l == plan.first || (plan.group_start(l) && !bwd_exchange_local(plan, l, local_tiles));
}

std::vector<Box> overlap_parts(const NetSpec& net, const Plan& plan, int t, int l, const std::vector<bool>& far) {
  if (l == plan.first || !plan.group_start(l) || far.empty() || plan.node_edges[size_t(l - plan.first)].size() > 1)
    return {};
  bool awaited = false;
  for (const Piece& pc : plan.fwd_halo[size_t(plan.edge(l))])
    awaited |= pc.to == t && pc.from != t && far[size_t(pc.from)];
  if (!awaited) return {};
  const LayerSpec& s = net.layers[size_t(l)];
  const TileLayer& x = plan.at(t, l);
  const Box mine = intersect(plan.at(t, l - 1).own, x.in[0]);
  const Box in = intersect(x.fwd, outputs_within(mine, s.window(), s.in.h, s.in.w, s.out.h, s.out.w));
  if (in.empty()) return {};
  std::vector<Box> parts{in};
  const Box& f = x.fwd;
  for (const Box& b : {Box{f.y0, in.y0, f.x0, f.x1}, Box{in.y1, f.y1, f.x0, f.x1}, Box{in.y0, in.y1, f.x0, in.x0},
                       Box{in.y0, in.y1, in.x1, f.x1}})
    if (!b.empty()) parts.push_back(b);
  return parts;
}

bool output_into_next_input(const NetSpec& net, const Plan& plan, int t, int l) {
  return l + 1 < plan.last && !plan.read_by_side_edge(l) && !input_aliases(net, plan, t, l + 1) &&
         plan.group_start(l + 1) && contains(plan.at(t, l + 1).in[0], plan.at(t, l).fwd);
}

bool next_reads_in_place(const NetSpec& net, const Plan& plan, int t, int l) {
  return l + 1 < plan.last && tiled_traits(net.layers[size_t(l + 1)]).backward_reads_input &&
         input_aliases(net, plan, t, l + 1);
}

bool recomputed(const NetSpec& net, const Plan& plan, int t, int l) {
  if (!tiled_traits(net.layers[size_t(l)]).pre_activation) return false;
  const bool z_transient = has_pointwise(net.layers[size_t(l)]) && !output_into_next_input(net, plan, t, l) &&
                           !next_reads_in_place(net, plan, t, l) && !plan.read_by_side_edge(l);
  const TileLayer& x = plan.at(t, l);
  return z_transient && x.held == x.fwd;
}

bool recomputed_on_any_tile(const NetSpec& net, const Plan& plan, int l) {
  for (int t = 0; t < plan.tiles_count(); ++t)
    if (recomputed(net, plan, t, l)) return true;
  return false;
}

namespace {

// Tile t's backward pass: for every layer, which of the two delta buffers holds its
// output delta, its recomputed convolution output, its input delta and the delta
// exchanged at a group start; and how large each buffer must be (tp.buf).
void plan_backward(const NetSpec& net, const Plan& plan, const SegmentMemoryPlan& sp, TileMemoryPlan& tp, int t,
                   int batch, bool need_input_delta, const std::vector<int>& local_tiles) {
  const int first = plan.first, last = plan.last;
  tp.bwd.assign(size_t(last - first), BackwardStep{});
  auto floats = [&](int l, bool input, const Box& b) {
    const LayerSpec& s = net.layers[l];
    const size_t i = size_t(l - first);
    return size_t(input ? tensor_floats(batch, s.in.c, sp.in_cb[i], b)
                        : tensor_floats(batch, s.out.c, sp.out_cb[i], b));
  };
  auto use = [&](int b, size_t n) {
    tp.buf[b] = std::max(tp.buf[b], n);
    return b;
  };
  auto recomputed_y = [&](int l, int b) {  // layer l's y, if backward recomputes it, goes to buffer b
    if (tp.layers[size_t(l - first)].recompute)
      tp.bwd[size_t(l - first)].y = use(b, floats(l, false, plan.at(t, l).fwd));
  };
  int at = use(0, floats(last - 1, false, plan.at(t, last - 1).delta));  // the delta now
  for (int l = last - 1; l >= first; --l) {
    BackwardStep& st = tp.bwd[size_t(l - first)];
    const TileLayer& x = plan.at(t, l);
    st.out = at;
    if (!pointwise_before_exchange(net, plan, l)) recomputed_y(l, 1 - at);
    if (l == first && !need_input_delta) break;
    const bool exchanged = l > first && plan.group_start(l) && !bwd_exchange_local(plan, l, local_tiles);
    if (exchanged && tiled_traits(net.layers[size_t(l)]).backward_scatters) {
      st.into_halo = true;
      st.in_box = x.delta_in[0];
      at = st.in = st.halo = use(1 - at, floats(l - 1, false, plan.at(t, l - 1).delta));
      if (pointwise_before_exchange(net, plan, l - 1)) recomputed_y(l - 1, 1 - at);
      continue;
    }
    st.in_box = bwd_data_box(net, plan, t, l);
    st.in = use(1 - at, floats(l, true, st.in_box));
    st.keep_in_box = keep_in_box(plan, t, l, st.in_box, local_tiles);
    if (st.keep_in_box)
      at = st.in;
    else
      use(at, floats(l, true, x.delta_in[0]));
    if (l > first && pointwise_before_exchange(net, plan, l - 1)) recomputed_y(l - 1, 1 - at);
    if (exchanged) at = st.halo = use(1 - at, floats(l - 1, false, plan.at(t, l - 1).delta));
  }
}

}  // namespace

SegmentMemoryPlan plan_segment_memory(const NetSpec& net, const Plan& plan, int batch, int in_cb, int block,
                                      bool recompute, bool need_input_delta, const std::vector<int>& local_tiles,
                                      const std::vector<bool>& far) {
  const int first = plan.first, last = plan.last;
  SegmentMemoryPlan sp;
  int cb = in_cb;
  for (int l = first; l < last; ++l) {
    sp.in_cb.push_back(cb);
    if (tiled_traits(net.layers[l]).blocked_output) cb = block;
    sp.out_cb.push_back(cb);
  }
  sp.tiles.resize(size_t(plan.tiles_count()));
  for (int t : local_tiles) {
    TileMemoryPlan& tp = sp.tiles[size_t(t)];
    tp.layers.resize(size_t(last - first));
    for (int l = first; l < last; ++l) {
      const LayerSpec& s = net.layers[l];
      const TileLayer& x = plan.at(t, l);
      const size_t i = size_t(l - first);
      LayerMemory& m = tp.layers[i];
      m.in_floats = size_t(tensor_floats(batch, s.in.c, sp.in_cb[i], x.in[0]));
      m.out_floats = size_t(tensor_floats(batch, s.out.c, sp.out_cb[i], x.fwd));
      m.y_floats = size_t(tensor_floats(batch, s.out.c, sp.out_cb[i], x.held));
      m.in = input_aliases(net, plan, t, l) ? MapStore::PrevOutput : MapStore::Own;
      // The output persists when the next layer reads it in place and needs it in backward,
      // or a side edge reads it later on.
      const bool kept_for_next = next_reads_in_place(net, plan, t, l) || plan.read_by_side_edge(l);
      const TiledTraits& traits = tiled_traits(s);
      const std::vector<int>& edges = plan.node_edges[i];
      for (size_t k = 1; k < edges.size(); ++k) {
        const PlanEdge& e = plan.edges[size_t(edges[k])];
        const int from = e.from - first;
        m.side_in_floats.push_back(
            plan.crosses_groups(edges[k])
                ? size_t(tensor_floats(batch, net.layers[size_t(e.from)].out.c, sp.out_cb[size_t(from)], x.in[k]))
                : 0);
      }
      if (plan.read_by_side_edge(l)) m.side_delta_floats = size_t(tensor_floats(batch, s.out.c, sp.out_cb[i], x.delta));
      if (traits.backward_reads_output) {  // the output kept as y on `held`
        m.y = MapStore::Own;
        m.z = MapStore::Y;
      } else if (traits.pre_activation) {
        const bool pointwise = has_pointwise(s);
        m.recompute = recompute && recomputed(net, plan, t, l);
        m.y = m.recompute ? MapStore::Transient : MapStore::Own;
        m.z = !pointwise                                ? MapStore::Y
              : output_into_next_input(net, plan, t, l) ? MapStore::NextInput
              : kept_for_next                           ? MapStore::Own
                                                        : MapStore::Transient;
      } else {
        m.z = kept_for_next ? MapStore::Own : MapStore::Transient;
      }
      if (traits.backward_reads_winners) m.argmax_bytes = m.y_floats;  // one byte per cell
      if (traits.weights) {
        m.weights_on_delta = weights_on_delta_box(net, plan, t, l);
        // backward-weights on the owned box reads it and its window: crops when the input buffer is larger
        const Box src_box = window_in(x.own, s.window(), s.in.h, s.in.w);
        if (!m.weights_on_delta && !(x.in[0] == src_box))
          sp.crop_floats = std::max(sp.crop_floats, size_t(tensor_floats(batch, s.in.c, sp.in_cb[i], src_box)));
      }
      m.parts = overlap_parts(net, plan, t, l, far);
      // Unless the op works in place on a part, a part runs on its own input crop into its
      // own output, then moves into y.
      if (!traits.parts_in_place)
        for (const Box& part : m.parts)
          sp.stage_floats =
              std::max(sp.stage_floats,
                       size_t(tensor_floats(batch, s.in.c, sp.in_cb[i], window_in(part, s.window(), s.in.h, s.in.w)) +
                              tensor_floats(batch, s.out.c, sp.out_cb[i], part)));
    }
    plan_backward(net, plan, sp, tp, t, batch, need_input_delta, local_tiles);
    // Transient forward outputs live in the larger delta buffer, or in the other one
    // when the layer's input is itself transient there (never overwrite what is read).
    const int big = tp.buf[1] > tp.buf[0] ? 1 : 0;
    for (size_t i = 0; i < tp.layers.size(); ++i) {
      LayerMemory& m = tp.layers[i];
      if (m.z != MapStore::Transient) continue;
      m.home = i > 0 && tp.layers[i - 1].home == big ? 1 - big : big;
      tp.buf[m.home] = std::max(tp.buf[m.home], m.out_floats);
    }
    sp.maps_bytes += tp.map_bytes();
    sp.deltas_bytes += tp.delta_bytes();
  }
  sp.deltas_bytes += (sp.crop_floats + sp.stage_floats) * sizeof(float);
  return sp;
}

}  // namespace tt
