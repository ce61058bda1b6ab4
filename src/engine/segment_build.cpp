// Building a Segment: its buffers wired as the memory plan says, a kernel per distinct
// tile geometry, the weight mode, and the schedule its forward and backward run.
#include <algorithm>

#include "engine/segment.hpp"
#include "engine/segment_state.hpp"
#include "layers/affine_act.hpp"
#include "layers/grouped_conv.hpp"
#include "model/op_kind.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {

Segment::Segment(DnnlContext& ctx, const NetSpec& net, Params& params, float* grad, Plan plan, Comm& comm,
                 SegmentOptions opt)
    : ctx_(ctx),
      net_(net),
      params_(params),
      grad_(grad),
      plan_(std::move(plan)),
      batch_(opt.batch),
      in_cb_(opt.in_cb),
      bn_(opt.bn),
      need_input_delta_(opt.need_input_delta),
      comm_(comm),
      tile_rank_(std::move(opt.tile_rank)),
      links_(comm, ctx.device, tile_rank_),
      order_(comm, tile_rank_, 0),
      trace_(opt.trace),
      trace_layer_(opt.trace_layer),
      grad_scales_(opt.grad_scales) {
  const int first = plan_.first, last = plan_.last, T = plan_.tiles_count(), batch = batch_, in_cb = in_cb_;
  const bool need_input_delta = need_input_delta_;
  if (int(tile_rank_.size()) != T) fail("internal: tile map has ", tile_rank_.size(), " entries for ", T, " tiles");
  // The engine runs chains (each node's first input is the node before) with side edges
  // into joins: a join's other inputs come from any earlier tiled node.
  for (int l = first + 1; l < last; ++l)
    if (plan_.edges[size_t(plan_.edge(l))].from != l - 1)
      fail("internal: tiled layer ", l, " does not read layer ", l - 1, " first; the engine runs chains with joins");
  for (int t = 0; t < T; ++t)
    if (tile_rank_[t] == comm.rank()) local_.push_back(t);
  mem_ =
      plan_segment_memory(net, plan_, batch, in_cb, ctx.config.block, opt.recompute, need_input_delta, local_, opt.far);
  const ShardPlan* shards = opt.shards;
  if (shards) ctx.put_grad_scratch_in_staging();  // see backward_layer
  for (int l = first; l < last; ++l)
    if (net.layers[size_t(l)].has_params()) {
      const ParamSlice& ps = params.slices[size_t(l)];
      grad_end_ = std::max(grad_end_, ps.weights + ps.n_weights);
    }
  tile_grad_.assign(size_t(T), grad_);
  // (One tile alone adds its partial sums into grad straight away, as before.)
  shared_grad_ = !shards && comm.size() == 1 && local_.size() > 1 && int(local_.size()) == T && net.subdivisions == 1;
  if (!shards && !shared_grad_)
    for (size_t k = 1; k < local_.size(); ++k)
      tile_grad_[size_t(local_[k])] = extra_grads_.emplace_back(grad_end_).data();
  // Per-layer state.
  for (int l = first; l < last; ++l) {
    auto st = std::make_unique<LayerState>();
    const LayerSpec& s = net.layers[l];
    st->spec = &s;
    st->in_cb = mem_.in_cb[size_t(l - first)];
    st->out_cb = mem_.out_cb[size_t(l - first)];
    const TiledTraits& traits = tiled_traits(s);
    st->pointwise = has_pointwise(s);
    if (traits.weights)
      st->weights =
          std::make_unique<WeightCache>(ctx, plain_conv_weights_desc(s.out.c, s.in.c, s.window().size, s.conv().groups),
                                        opt.staged_weights, shards != nullptr);
    if (traits.pre_activation) st->pw = std::make_unique<ConvPointwise>(s, st->out_cb, T, ctx.device, opt.stats_log);
    layers_.push_back(std::move(st));
  }
  out_cb_ = mem_.out_cb.empty() ? in_cb : mem_.out_cb.back();
  layer_times.assign(size_t(last - first), LayerTimes{});

  // Buffers per tile, as the memory plan says.
  for (int t = 0; t < T; ++t) {
    if (tile_rank_[t] != comm.rank()) {
      tiles_.push_back(nullptr);  // another process runs this tile
      continue;
    }
    const TileMemoryPlan& mp = mem_.tiles[t];
    auto ts = std::make_unique<TileState>();
    ts->in.resize(last - first);
    ts->y.resize(last - first);
    ts->z.resize(last - first);
    ts->buf[0] = Buffer(mp.buf[0], ctx.device);
    ts->buf[1] = Buffer(mp.buf[1], ctx.device);
    auto make = [&](int c, int cbk, const Box& b) {
      ts->owned.emplace_back(size_t(tensor_floats(batch, c, cbk, b)));
      return TensorView{ts->owned.back().data(), batch, c, cbk, b};
    };
    for (int l = first; l < last; ++l)
      if (mp.layers[l - first].in == MapStore::Own)
        ts->in[l - first] = make(net.layers[l].in.c, layers_[l - first]->in_cb, plan_.at(t, l).in[0]);
    for (int l = first; l < last; ++l) {
      LayerState& L = *layers_[l - first];
      const LayerSpec& s = *L.spec;
      const TileLayer& x = plan_.at(t, l);
      const int i = l - first;
      const LayerMemory& m = mp.layers[i];
      const TensorView transient{m.home >= 0 ? ts->data(m.home) : nullptr, batch, s.out.c, L.out_cb, x.fwd};
      if (m.y != MapStore::None)
        ts->y[i] = m.y == MapStore::Own ? make(s.out.c, L.out_cb, x.held) : transient;  // recomputed: z's buffer
      if (m.z == MapStore::Y)
        ts->z[i] = ts->y[i];
      else if (m.z == MapStore::NextInput)
        ts->z[i] = ts->in[i + 1];
      else if (m.z == MapStore::Own)
        ts->z[i] = make(s.out.c, L.out_cb, x.fwd);
      else
        ts->z[i] = transient;
    }
    for (int l = first + 1; l < last; ++l)
      if (mp.layers[l - first].in == MapStore::PrevOutput) ts->in[l - first] = ts->z[l - 1 - first];
    // A join's other inputs: a buffer the halo fills, or the producer's output in place.
    ts->side_in.resize(size_t(last - first));
    ts->side_delta.resize(size_t(last - first));
    for (int l = first; l < last; ++l) {
      const int i = l - first;
      const std::vector<int>& edges = plan_.node_edges[size_t(i)];
      for (size_t k = 1; k < edges.size(); ++k) {
        const int f = plan_.edges[size_t(edges[k])].from - first;
        const LayerSpec& from = net.layers[size_t(f + first)];
        const Box& box = plan_.at(t, l).in[k];
        if (mp.layers[size_t(i)].side_in_floats[k - 1] > 0)
          ts->side_in[size_t(i)].push_back(make(from.out.c, layers_[size_t(f)]->out_cb, box));
        else if (contains(ts->z[size_t(f)].box, box))
          ts->side_in[size_t(i)].push_back(ts->z[size_t(f)]);
        else
          fail("internal: layer ", l, "'s input ", k, " is not within layer ", f + first, "'s output on tile ", t);
      }
      if (const size_t n = mp.layers[size_t(i)].side_delta_floats) {
        const LayerSpec& s = net.layers[size_t(l)];
        ts->side_delta[size_t(i)] = TensorView{ts->side_deltas.emplace_back(n, ctx.device).data(), batch, s.out.c,
                                               layers_[size_t(i)]->out_cb, plan_.at(t, l).delta};
      }
    }
    tiles_.push_back(std::move(ts));
  }
  // A layer that can (a max-pool) reads the y of a convolution before it through the
  // convolution's batch-norm and activation when nothing else reads z: its input is z
  // itself (no crop, no halo), and y holds every cell it reads.
  act_in_pool_.assign(size_t(last - first), 0);
  for (int l = first; l + 1 < last; ++l) {
    const LayerState& L = *layers_[l - first];
    const int i = l - first;
    bool fuse = L.pointwise && vector_act(L.spec->activation()) && !plan_.read_by_side_edge(l) &&
                tiled_traits(net.layers[l + 1]).reads_pre_activation &&
                plan_.fwd_halo[size_t(plan_.edge(l + 1))].empty();
    for (int t : local_)
      fuse = fuse && mem_.tiles[t].layers[size_t(i + 1)].in == MapStore::PrevOutput &&
             contains(tiles_[t]->y[i].box, plan_.at(t, l + 1).in[0]);
    act_in_pool_[size_t(i)] = fuse;
  }
  crop_src_ = Buffer(mem_.crop_floats, ctx.device);
  stage_ = Buffer(mem_.stage_floats, ctx.device);
  // The layers' ops.
  op_env_ = std::make_unique<TiledOpEnv>(TiledOpEnv{.ctx = ctx,
                                                    .net = net,
                                                    .plan = plan_,
                                                    .mem = mem_,
                                                    .params = params,
                                                    .batch = batch,
                                                    .local = local_,
                                                    .need_input_delta = need_input_delta,
                                                    .tiled = opt.tiled,
                                                    .stage = &stage_,
                                                    .crop = &crop_src_,
                                                    .grad_scales = grad_scales_});
  std::vector<ConvWeightsLayer> convs;
  for (int l = first; l < last; ++l) {
    LayerState& L = *layers_[size_t(l - first)];
    const int i = l - first;
    if (L.spec->is(kConvKind)) {
      L.op = make_tiled_conv(*op_env_, l, L.in_cb, L.out_cb, *L.weights);
      ConvKernel* single = local_.size() == 1 ? tiled_conv_weights_kernel(*L.op, local_[0]) : nullptr;
      convs.push_back({l, L.weights.get(), single});
    } else if (L.spec->is(kRouteKind)) {
      L.op = make_tiled_route(*op_env_, l);
    } else if (L.spec->is(kShortcutKind)) {
      L.op = make_tiled_shortcut(*op_env_, l, [this, i](int t) { return tiles_[size_t(t)]->z[size_t(i)]; });
    } else {
      const bool fused = i > 0 && act_in_pool_[size_t(i - 1)];
      const LayerState& C = *layers_[size_t(i > 0 ? i - 1 : 0)];
      L.op = make_tiled_maxpool(*op_env_, l, L.out_cb, fused ? C.pw.get() : nullptr,
                                fused ? C.spec->conv().act : Act::Linear);
    }
  }
  weights_ = shards ? sharded_conv_weights(ctx, params, grad, comm, *shards, net, std::move(convs), int(local_.size()),
                                           &weights_wait_, trace_)
             : opt.staged_weights ? staged_conv_weights(params, std::move(convs))
                                  : replicated_conv_weights(params, std::move(convs));
  weights_->refresh();
  schedule_ = compile_schedule(net, plan_,
                               {.fetch_weights = opt.staged_weights,
                                .sharded = shards != nullptr,
                                .recompute = opt.recompute,
                                .need_input_delta = need_input_delta});
}

Segment::~Segment() = default;

std::vector<KernelUse> Segment::kernel_uses() const {
  std::vector<KernelUse> uses;
  for (const auto& L : layers_) L->op->kernel_uses(uses);
  return uses;
}

// Counts the buffers as allocated: plan_segment_memory predicts maps and deltas exactly
// (tests/test_memory_plan.cpp holds it to that).
Segment::MemoryUse Segment::memory_use() const {
  MemoryUse m;
  m.deltas = (crop_src_.size() + stage_.size()) * 4;
  for (int t : local_) {
    const TileState& ts = *tiles_[t];
    for (auto& o : ts.owned) m.maps += o.size() * 4;
    for (const auto& L : layers_) m.maps += L->op->held_bytes(t);
    m.deltas += (ts.buf[0].size() + ts.buf[1].size()) * 4;
    for (const Buffer& b : ts.side_deltas) m.deltas += b.size() * 4;
  }
  for (const auto& L : layers_) {
    if (L->weights) m.weight_copies += L->weights->bytes();
  }
  m.weight_copies += weights_->staging_bytes();
  return m;
}

std::vector<float*> Segment::tile_grads() const {
  if (shared_grad_) return {grad_};
  std::vector<float*> v;
  for (int t : local_) v.push_back(grad_of(t));
  return v;
}

void Segment::zero_tile_grads() {
  for (Buffer& b : extra_grads_) std::fill(b.data(), b.data() + b.size(), 0.f);
}

}  // namespace tt
