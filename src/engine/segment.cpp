// Running a Segment's schedule: each step on the tiles of this process (the halo
// messages, scatters and gathers between processes, the layers' compute on tile boxes).
#include "engine/segment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/segment_state.hpp"
#include "layers/affine_act.hpp"
#include "layers/pointwise.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

// With BackwardFeatures::Exchange: the forward values the backward of the group ending
// at layer `end` reads outside its tiles' forward boxes, from their owners, in one exchange.
void Segment::exchange_features(int end) {
  int tag = 0;
  for (int l = end;; --l) {
    const int i = l - plan_.first;
    const std::vector<Piece>& pieces = plan_.feature_halo[size_t(i)];
    layers_[size_t(i)]->op->post_features(pieces, tag, links_, [&](int t) { return tiles_[size_t(t)]->y[size_t(i)]; });
    tag += int(pieces.size());
    if (plan_.group_start(l)) break;
  }
  comm_.wait_all();
}

// Root's whole map → every tile's `box_of(t)` (written into dst_of(t)).
template <class Box_, class Dst>
void Segment::scatter(const TensorView& full, Box_ box_of, Dst dst_of) {
  const int me = comm_.rank();
  for (int t = 0; t < plan_.tiles_count(); ++t) {
    const int r = tile_rank_[t];
    if (me == kRoot && r == kRoot)
      ctx_.device.copy_region(full, dst_of(t), box_of(t));
    else if (me == kRoot)
      comm_.isend(full, box_of(t), r, t);
    else if (r == me)
      comm_.irecv(dst_of(t), box_of(t), kRoot, t);
  }
  comm_.wait_all();
}

// Every tile's `box_of(t)` of src_of(t) → root's whole map.
template <class Box_, class Src>
void Segment::gather(const TensorView* full, Box_ box_of, Src src_of) {
  const int me = comm_.rank();
  for (int t = 0; t < plan_.tiles_count(); ++t) {
    const int r = tile_rank_[t];
    if (me == kRoot && r == kRoot)
      ctx_.device.copy_region(src_of(t), *full, box_of(t));
    else if (r == me)
      comm_.isend(src_of(t), box_of(t), kRoot, t);
    else if (me == kRoot)
      comm_.irecv(*full, box_of(t), r, t);
  }
  comm_.wait_all();
}

void Segment::refresh_weights() { weights_->refresh(); }

TensorView Segment::input_of(int t, int l) const { return tiles_[t]->in[l - plan_.first]; }

void Segment::forward(const TensorView& input, bool training) {
  input_ = &input;
  training_ = training;
  run(schedule_.forward, false);
}

void Segment::backward(const TensorView& delta_out, const TensorView* delta_in) {
  delta_out_ = &delta_out;
  delta_in_ = delta_in;
  run(schedule_.backward, true);
}

// Runs the steps in order, each timed into the bucket bench reports it in: moving whole
// maps is io, halos and batch-norm sums are halo, waiting for weights is weights, the rest
// is forward or backward compute.
void Segment::run(const std::vector<Step>& steps, bool backward) {
  const double t0 = now_s();
  double halo = 0, io = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& st = steps[k];
    const double s0 = now_s();
    execute(st);
    if (backward && grad_ready) {
      if (st.kind == StepKind::Backward) grad_ready(st.layer);
      if (link_free && k + 1 < steps.size() && computes(steps[k + 1].kind)) link_free();
      comm_.progress();
    }
    const double s1 = now_s();
    switch (st.kind) {
      case StepKind::ScatterInput:
      case StepKind::ScatterDelta:
      case StepKind::GatherInputDelta:
        io += s1 - s0;
        span("io", Lane::Comm, s0, s1, -1, step_name(st.kind));
        break;
      case StepKind::PostHalo:
      case StepKind::ExchangeFeatures:
      case StepKind::BackwardHalo:
      case StepKind::SumDeltas:
        halo += s1 - s0;
        span("halo", Lane::Comm, s0, s1, st.layer, step_name(st.kind));
        break;
      case StepKind::Forward:
      case StepKind::Backward:
        span(backward ? "backward" : "forward", Lane::Compute, s0, s1, st.layer);
        break;
      case StepKind::Pointwise:
      case StepKind::PointwiseBackward:
        span(backward ? "backward" : "forward", Lane::Compute, s0, s1, st.layer, step_name(st.kind));
        break;
      case StepKind::FetchWeights:
      case StepKind::ReduceGrad:
        break;  // the weight strategy spans its collectives
    }
  }
  times.halo += halo + halo_wait_ + bn_wait_;
  times.halo_exchange += halo + halo_wait_;
  if (!backward) times.halo_exchange_fwd += halo + halo_wait_;
  times.io += io;
  (backward ? times.bwd : times.fwd) += now_s() - t0 - halo - io - bn_wait_ - weights_wait_ - halo_wait_;
  times.weights += weights_wait_;
  bn_wait_ = weights_wait_ = halo_wait_ = 0;
}

// A step that only computes on this process's tiles and sends no message (batch-norm
// steps sum over tiles).
bool Segment::computes(StepKind k) { return k == StepKind::Forward || k == StepKind::Backward; }

void Segment::execute(const Step& st) {
  const int l = st.layer, first = plan_.first;
  switch (st.kind) {
    case StepKind::ScatterInput:
      scatter(
          *input_, [&](int t) { return plan_.at(t, first).in[0]; }, [&](int t) { return input_of(t, first); });
      return;
    case StepKind::PostHalo:
      post_halo(st.edge);
      return;
    case StepKind::FetchWeights:
      weights_->before_use(l, st.uses);
      return;
    case StepKind::Forward:
      forward_layer(l, st.halo_in_flight);
      return;
    case StepKind::Pointwise:
      pointwise_forward(l);
      return;
    case StepKind::ScatterDelta:
      scatter_delta();
      return;
    case StepKind::ExchangeFeatures:
      exchange_features(l);
      return;
    case StepKind::PointwiseBackward:
      pointwise_backward(l, st.owned_only);
      return;
    case StepKind::Backward:
      backward_layer(l, st.input_delta);
      return;
    case StepKind::ReduceGrad:
      weights_->end_grad(l);
      return;
    case StepKind::SumDeltas:
      sum_deltas(l);
      return;
    case StepKind::BackwardHalo:
      backward_halo(l);
      return;
    case StepKind::GatherInputDelta:
      gather(
          delta_in_, [&](int t) { return plan_.own_input[t]; }, [&](int t) { return tiles_[t]->cur; });
      return;
  }
}

// Edge e's producer's owned cells to the tiles whose input box (of the edge's slot) needs
// them. Messages of different edges in flight at once share tags: each pair of processes
// posts them in the schedule's order, which MPI keeps.
void Segment::post_halo(int e) {
  const PlanEdge& pe = plan_.edges[size_t(e)];
  const int from = pe.from - plan_.first, i = pe.to - plan_.first;
  links_.post(
      plan_.fwd_halo[size_t(e)], [&](int t) { return tiles_[t]->z[size_t(from)]; },
      [&](int t) {
        return pe.slot == 0 ? tiles_[t]->in[size_t(i)] : tiles_[t]->side_in[size_t(i)][size_t(pe.slot - 1)];
      });
}

// The part of layer l's delta that its side edges' readers produced, added into the delta
// its next layer produced (ts.cur). Where l + 1 starts a group, every reader produced its
// part on l's owned cells, which the backward halo then spreads: the sum is made there.
// Else a reader in a later group produced its part on the owned cells too: they are
// exchanged first (each tile's owned cells hold the sum of every side reader's part).
void Segment::sum_deltas(int l) {
  const int i = l - plan_.first;
  if (plan_.group_start(l + 1)) {
    for (int t : local_) ctx_.device.add_region(tiles_[t]->side_delta[size_t(i)], tiles_[t]->cur, plan_.at(t, l).own);
    return;
  }
  for (int e : plan_.consumers[size_t(i)])
    if (plan_.side_edge(e) && plan_.crosses_groups(e)) {
      auto side = [&](int t) { return tiles_[t]->side_delta[size_t(i)]; };
      links_.post(plan_.bwd_halo[size_t(e)], side, side);
      comm_.wait_all();
      break;  // every crossing edge's pieces are the same: l's owned cells to its delta boxes
    }
  for (int t : local_) ctx_.device.add_region(tiles_[t]->side_delta[size_t(i)], tiles_[t]->cur, plan_.at(t, l).delta);
}

// `halo_in_flight`: the halo of the layer's input was posted, not completed: tiles with
// overlap parts compute their interior first, then every tile waits for it.
void Segment::forward_layer(int l, bool halo_in_flight) {
  const int i = l - plan_.first;
  LayerTimes& lt = layer_times[size_t(i)];
  const double t0 = now_s();
  for (int t : local_) {
    TileState& ts = *tiles_[t];
    if (l > plan_.first && !plan_.group_start(l) && ts.in[i].data != ts.z[i - 1].data)
      ctx_.device.copy_region(ts.z[i - 1], ts.in[i], plan_.at(t, l).in[0]);      // crop of the previous output
    if (mem_.tiles[t].layers[size_t(i)].recompute) ts.y[i].data = ts.z[i].data;  // backward moved it to a delta buffer
  }
  double waited = 0;
  if (halo_in_flight) {
    for (int t : local_)
      if (!mem_.tiles[t].layers[size_t(i)].parts.empty()) {
        compute(t, l, 0);
        comm_.progress();
      }
    const double w0 = now_s();
    comm_.wait_all();
    waited = now_s() - w0;
    times.halo_overlap += w0 - t0;
    span("halo", Lane::Comm, w0, w0 + waited, l, "halo wait");
  }
  for (int t : local_) {
    const size_t parts = mem_.tiles[t].layers[size_t(i)].parts.size();
    if (!halo_in_flight || parts == 0) compute(t, l, -1);
    for (size_t k = 1; halo_in_flight && k < parts; ++k) compute(t, l, int(k));
  }
  halo_wait_ += waited;
  lt.fwd += now_s() - t0 - waited;
}

// Batch-norm (its statistics summed over all tiles when training) and activation of
// convolution l on every local tile: y -> z, unless the max-pool after it applies them.
void Segment::pointwise_forward(int l) {
  LayerState& L = *layers_[size_t(l - plan_.first)];
  const LayerSpec& s = *L.spec;
  const int i = l - plan_.first;
  const double t0 = now_s(), wait0 = bn_wait_;
  if (s.batch_normalize())
    L.pw->forward(pointwise_tiles(l), params_, batch_, training_ && bn_ == BnMode::Sync, sum_over_tiles(l));
  for (int t : local_) {
    if (act_in_pool_[size_t(i)]) break;
    TileState& ts = *tiles_[t];
    ctx_.device.affine_act_forward(ts.y[i], ts.z[i], plan_.at(t, l).fwd, L.pw->a(), L.pw->b(), s.conv().act);
  }
  layer_times[size_t(i)].fwd_pointwise += now_s() - t0 - (bn_wait_ - wait0);
}

// Layer l's op on tile t: its whole forward box (part -1), or one of its overlap parts
// (memory_plan.hpp). A max-pool that applies the convolution's batch-norm and activation
// on the fly reads the convolution's y.
void Segment::compute(int t, int l, int part) {
  const int i = l - plan_.first;
  TileState& ts = *tiles_[t];
  const Box box = part < 0 ? plan_.at(t, l).fwd : mem_.tiles[t].layers[size_t(i)].parts[size_t(part)];
  const bool fused = i > 0 && act_in_pool_[size_t(i - 1)];
  layers_[size_t(i)]->op->forward(t, part, box,
                                  TileMaps{fused ? ts.y[i - 1] : ts.in[i], ts.y[i], ts.z[i], ts.side_in[size_t(i)]});
}

// Batch-norm sums of every tile, added up in tile order (tile_order.hpp): a small
// all-gather, timed as halo waiting.
SumOverTiles Segment::sum_over_tiles(int l) {
  return [this, l](std::vector<double>& slots, int width, double* total) {
    const double w0 = now_s();
    order_.sum(slots, width, total);
    const double w1 = now_s();
    bn_wait_ += w1 - w0;
    span("bn", Lane::Comm, w0, w1, l, "batch-norm sums");
  };
}

void Segment::span(const char* cat, Lane lane, double t0, double t1, int l, const char* name) const {
  if (!trace_ || !trace_->on()) return;
  trace_->add(name ? name : net_.layers[size_t(l)].type_name(), cat, lane, t0, t1,
              trace_layer_ >= 0 && l >= 0 ? trace_layer_ + l : l);
}

std::vector<PointwiseTile> Segment::pointwise_tiles(int l) const {
  const int i = l - plan_.first;
  std::vector<PointwiseTile> v;
  for (int t : local_)
    v.push_back({t, tiles_[size_t(t)]->y[size_t(i)], tiles_[size_t(t)]->cur, plan_.at(t, l).own, grad_of(t)});
  return v;
}

void Segment::gather_output(const TensorView* out) {
  const double t0 = now_s();
  const int l = plan_.last - 1;
  gather(
      out, [&](int t) { return plan_.at(t, l).own; }, [&](int t) { return tiles_[t]->z[l - plan_.first]; });
  const double t1 = now_s();
  times.io += t1 - t0;
  span("io", Lane::Comm, t0, t1, -1, "gather output");
}

void Segment::scatter_delta() {
  const int last = plan_.last - 1;
  const LayerState& L = *layers_[size_t(last - plan_.first)];
  for (int t : local_) {
    TileState& ts = *tiles_[t];
    ts.cur = TensorView{ts.data(mem_.tiles[t].bwd[size_t(last - plan_.first)].out), batch_, L.spec->out.c, L.out_cb,
                        plan_.at(t, last).delta};
    for (const TensorView& d : ts.side_delta)
      if (d.data) ctx_.device.zero(d);  // side readers add their parts
  }
  scatter(
      *delta_out_, [&](int t) { return plan_.at(t, last).delta; }, [&](int t) { return tiles_[t]->cur; });
}

// At group start l: the pieces of the delta of layer l - 1's output that neighbours
// computed, added into each tile's (nothing to do when no tile needs another's).
void Segment::backward_halo(int l) {
  if (bwd_exchange_local(plan_, l, local_)) return;
  const LayerSpec& prev = net_.layers[size_t(l - 1)];
  const int cbk = layers_[size_t(l - 1 - plan_.first)]->out_cb;
  auto halo_of = [&](int t) {
    const TileState& ts = *tiles_[t];
    return TensorView{ts.data(mem_.tiles[t].bwd[size_t(l - plan_.first)].halo), batch_, prev.out.c, cbk,
                      plan_.at(t, l - 1).delta};
  };
  links_.post(
      plan_.bwd_halo[size_t(plan_.edge(l))], [&](int t) { return tiles_[t]->cur; }, halo_of);
  comm_.wait_all();
  for (int t : local_) tiles_[t]->cur = halo_of(t);
}

void Segment::measure_pointwise_scales() {
  if (!grad_scales_) return;
  for (const auto& L : layers_)
    if (L->pw) L->pw->measure_grad_scales(&(*grad_scales_)[size_t(L->spec->index)]);
}

// Backward-data of every tile first (the schedule's order says why), then backward-weights,
// then the input delta moved to where the layer before reads it.
void Segment::backward_layer(int l, bool want_delta_in) {
  LayerState& L = *layers_[l - plan_.first];
  const LayerSpec& s = *L.spec;
  const int i = l - plan_.first;
  TiledOp& op = *L.op;
  LayerTimes& lt = layer_times[size_t(i)];
  double t0 = now_s();
  for (int t : local_) {
    if (!want_delta_in) break;
    TileState& ts = *tiles_[t];
    const BackwardStep& st = mem_.tiles[t].bwd[size_t(i)];
    if (st.into_halo)  // the backward halo's buffer: its own cells written, the exchange fills the rest
      op.backward_data(t, ts.cur, TensorView{ts.data(st.in), batch_, s.in.c, L.in_cb, plan_.at(t, l - 1).delta},
                       st.in_box);
    else
      op.backward_data(t, ts.cur, TensorView{ts.data(st.in), batch_, s.in.c, L.in_cb, st.in_box}, Box{});
  }
  const std::vector<int>& edges = plan_.node_edges[size_t(i)];
  for (size_t k = 1; k < edges.size(); ++k) {
    const int f = plan_.edges[size_t(edges[k])].from - plan_.first;
    for (int t : local_)
      op.add_side_delta(t, int(k), tiles_[t]->cur, tiles_[t]->side_delta[size_t(f)], plan_.at(t, l).delta_in[k]);
  }
  double t1 = now_s();
  lt.bwd_data += t1 - t0;
  if (tiled_traits(s).weights) {
    const ParamSlice& ps = params_.slices[s.index];
    weights_->begin_grad(l);
    for (int t : local_) {
      TileState& ts = *tiles_[t];
      op.backward_weights(t, ts.cur, ts.in[i], weights_->grad_target(l, grad_of(t)), grad_of(t) + ps.biases,
                          shared_grad_);
    }
  }
  t0 = now_s();
  lt.bwd_weights += t0 - t1;
  for (int t : local_) {
    if (!want_delta_in) break;
    TileState& ts = *tiles_[t];
    const TileLayer& x = plan_.at(t, l);
    const BackwardStep& st = mem_.tiles[t].bwd[size_t(i)];
    const TensorView din{ts.data(st.in), batch_, s.in.c, L.in_cb, st.in_box};
    if (st.into_halo) {
      ts.cur = TensorView{ts.data(st.in), batch_, s.in.c, L.in_cb, plan_.at(t, l - 1).delta};
    } else if (st.keep_in_box) {
      ts.cur = din;
    } else {
      TensorView dst{ts.data(st.out), batch_, s.in.c, L.in_cb, x.delta_in[0]};
      ctx_.device.zero(dst);
      ctx_.device.copy_region(din, dst, intersect(st.in_box, x.delta_in[0]));
      ts.cur = dst;
    }
  }
  lt.bwd_data += now_s() - t0;
}

// Activation and batch-norm backward of layer l on every local tile's current delta:
// on its owned cells only, or on its whole box.
void Segment::pointwise_backward(int l, bool owned_only) {
  LayerState& L = *layers_[l - plan_.first];
  const int i = l - plan_.first;
  const double t0 = now_s(), waits0 = bn_wait_ + weights_wait_;
  for (int t : local_) {  // the same kernel on the same input: bit-identical to forward's y
    TileState& ts = *tiles_[t];
    if (!mem_.tiles[t].layers[size_t(i)].recompute) continue;
    ts.y[i].data = ts.data(mem_.tiles[t].bwd[size_t(i)].y);  // free until backward-data (see memory_plan.cpp)
    tiled_conv_recompute(*L.op, t, ts.in[i], ts.y[i].data);
  }
  L.pw->backward(
      pointwise_tiles(l), [&](const PointwiseTile& pt) { return owned_only ? pt.own : pt.delta.box; }, params_, batch_,
      bn_ == BnMode::Sync, sum_over_tiles(l));
  layer_times[size_t(i)].bwd_pointwise += now_s() - t0 - (bn_wait_ + weights_wait_ - waits0);
}

}  // namespace tt
