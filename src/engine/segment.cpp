#include "engine/segment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/affine_act.hpp"
#include "layers/maxpool.hpp"
#include "layers/pointwise.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

struct Segment::LayerState {
  const LayerSpec* spec = nullptr;
  int in_cb = 0, out_cb = 0;  // layouts of the layer's input and output maps
  bool pointwise = false;     // conv followed by batch-norm and/or a non-linear activation
  std::unique_ptr<WeightCache> weights;
  std::vector<std::unique_ptr<ConvKernel>> kernels;
  std::unique_ptr<ConvPointwise> pw;  // convolutions: batch-norm and activation, z = act(a*y + b)
};

struct Segment::TileState {
  std::vector<Buffer> owned;                 // storage behind the views below
  std::vector<TensorView> in, y, z;          // per layer: input box, conv output, layer output
  std::vector<std::vector<uint8_t>> argmax;  // max-pool winners (see maxpool.hpp)
  std::vector<ConvKernel*> fwd, bwd_data, bwd_weights;
  Buffer buf[2];  // the two delta buffers; they double as forward scratch
  float* data(int b) const { return buf[b].data(); }
  TensorView cur;  // current delta during backward
};

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
      order_(comm, tile_rank_, 0),
      trace_(opt.trace),
      grad_scales_(opt.grad_scales) {
  const int first = plan_.first, last = plan_.last, T = plan_.tiles_count(), batch = batch_, in_cb = in_cb_;
  const bool need_input_delta = need_input_delta_;
  if (int(tile_rank_.size()) != T) fail("internal: tile map has ", tile_rank_.size(), " entries for ", T, " tiles");
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
  if (!shards)
    for (size_t k = 1; k < local_.size(); ++k) tile_grad_[size_t(local_[k])] = extra_grads_.emplace_back(grad_end_).data();
  // Per-layer state.
  for (int l = first; l < last; ++l) {
    auto st = std::make_unique<LayerState>();
    const LayerSpec& s = net.layers[l];
    st->spec = &s;
    st->in_cb = mem_.in_cb[size_t(l - first)];
    st->out_cb = mem_.out_cb[size_t(l - first)];
    if (s.type == LayerType::Conv) {
      st->pointwise = conv_pointwise(s);
      st->weights = std::make_unique<WeightCache>(
          ctx,
          memory::desc({s.out.c, s.in.c, s.win.size, s.win.size}, memory::data_type::f32, memory::format_tag::oihw),
          shards != nullptr);
      st->pw = std::make_unique<ConvPointwise>(s, st->out_cb, T);
    }
    layers_.push_back(std::move(st));
  }
  out_cb_ = mem_.out_cb.empty() ? in_cb : mem_.out_cb.back();
  layer_times.assign(size_t(last - first), LayerTimes{});

  // Kernels: one per distinct geometry, with the union of the uses it serves.
  for (int l = first; l < last; ++l) {
    LayerState& L = *layers_[l - first];
    if (L.spec->type != LayerType::Conv) continue;
    const LayerSpec& s = *L.spec;
    std::vector<std::pair<ConvGeom, int>> want;
    auto request = [&](const Box& out, int kind, const Box& in) {
      ConvGeom g = conv_geom_on(batch, s.in.c, s.out.c, s.win, out, in, L.out_cb, L.in_cb, !s.batch_normalize);
      for (auto& w : want)
        if (w.first == g) {
          w.second |= kind;
          return;
        }
      want.push_back({g, kind});
    };
    for (int t : local_) {
      const TileLayer& x = plan_.at(t, l);
      auto whole = [&](const Box& out) { return window_in(out, s.win, s.in.h, s.in.w); };
      request(x.fwd, ConvKernel::kFwd, whole(x.fwd));
      for (const Box& part : mem_.tiles[t].layers[l - first].parts) request(part, ConvKernel::kFwd, whole(part));
      const Box bw = mem_.tiles[t].layers[l - first].weights_on_delta ? x.delta : x.own;
      request(bw, ConvKernel::kBwdWeights, whole(bw));
      if (l > first || need_input_delta)
        request(x.delta, ConvKernel::kBwdData, mem_.tiles[t].bwd[size_t(l - first)].in_box);
    }
    for (auto& [g, kinds] : want) L.kernels.push_back(std::make_unique<ConvKernel>(ctx, *L.weights, g, kinds, opt.tiled));
  }

  // Buffers per tile, as the memory plan says.
  part_kernels_.assign(size_t(T), std::vector<std::vector<ConvKernel*>>(size_t(last - first)));
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
    ts->argmax.resize(last - first);
    ts->fwd.assign(last - first, nullptr);
    ts->bwd_data.assign(last - first, nullptr);
    ts->bwd_weights.assign(last - first, nullptr);
    ts->buf[0] = Buffer(mp.buf[0]);
    ts->buf[1] = Buffer(mp.buf[1]);
    auto make = [&](int c, int cbk, const Box& b) {
      ts->owned.emplace_back(size_t(tensor_floats(batch, c, cbk, b)));
      return TensorView{ts->owned.back().data(), batch, c, cbk, b};
    };
    auto find_kernel = [&](LayerState& L, const LayerSpec& s, const Box& out, const Box& in) -> ConvKernel* {
      ConvGeom g = conv_geom_on(batch, s.in.c, s.out.c, s.win, out, in, L.out_cb, L.in_cb, !s.batch_normalize);
      for (auto& k : L.kernels)
        if (k->geom() == g) return k.get();
      return nullptr;
    };
    for (int l = first; l < last; ++l)
      if (mp.layers[l - first].in == MapStore::Own)
        ts->in[l - first] = make(net.layers[l].in.c, layers_[l - first]->in_cb, plan_.at(t, l).in);
    for (int l = first; l < last; ++l) {
      LayerState& L = *layers_[l - first];
      const LayerSpec& s = *L.spec;
      const TileLayer& x = plan_.at(t, l);
      const int i = l - first;
      const LayerMemory& m = mp.layers[i];
      const TensorView transient{m.home >= 0 ? ts->data(m.home) : nullptr, batch, s.out.c, L.out_cb, x.fwd};
      if (s.type == LayerType::Conv) {
        ts->y[i] = m.y == MapStore::Own ? make(s.out.c, L.out_cb, x.held) : transient;  // recomputed: z's buffer
        auto whole = [&](const Box& out) { return window_in(out, s.win, s.in.h, s.in.w); };
        ts->fwd[i] = find_kernel(L, s, x.fwd, whole(x.fwd));
        for (const Box& part : m.parts) part_kernels_[t][size_t(i)].push_back(find_kernel(L, s, part, whole(part)));
        const Box bw = m.weights_on_delta ? x.delta : x.own;
        ts->bwd_weights[i] = find_kernel(L, s, bw, whole(bw));
        if (l > first || need_input_delta) ts->bwd_data[i] = find_kernel(L, s, x.delta, mp.bwd[size_t(i)].in_box);
      } else {
        ts->argmax[i].assign(m.argmax_bytes, kNoWinner);
      }
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
    tiles_.push_back(std::move(ts));
  }
  // A max-pool right after a convolution reads the convolution's y through its
  // batch-norm and activation when nothing else reads z: the pool's input is z itself
  // (no crop, no halo), and y holds every cell the pool reads.
  act_in_pool_.assign(size_t(last - first), 0);
  for (int l = first; l + 1 < last; ++l) {
    const LayerState& L = *layers_[l - first];
    const int i = l - first;
    bool fuse = L.spec->type == LayerType::Conv && L.pointwise && vector_act(L.spec->act) &&
                net.layers[l + 1].type == LayerType::MaxPool && plan_.fwd_halo[size_t(i + 1)].empty();
    for (int t : local_)
      fuse = fuse && mem_.tiles[t].layers[size_t(i + 1)].in == MapStore::PrevOutput &&
             contains(tiles_[t]->y[i].box, plan_.at(t, l + 1).in);
    act_in_pool_[size_t(i)] = fuse;
  }
  crop_src_ = Buffer(mem_.crop_floats);
  stage_ = Buffer(mem_.stage_floats);
  std::vector<ConvWeightsLayer> convs;
  for (int l = first; l < last; ++l) {
    LayerState& L = *layers_[size_t(l - first)];
    if (!L.weights) continue;
    ConvKernel* single = local_.size() == 1 ? tiles_[size_t(local_[0])]->bwd_weights[size_t(l - first)] : nullptr;
    convs.push_back({l, L.weights.get(), single});
  }
  weights_ = shards ? sharded_conv_weights(ctx, params, grad, comm, *shards, net, std::move(convs), int(local_.size()),
                                           &weights_wait_, trace_)
                    : replicated_conv_weights(params, std::move(convs));
  weights_->refresh();
}

Segment::~Segment() = default;

std::vector<KernelUse> Segment::kernel_uses() const {
  std::vector<KernelUse> uses;
  for (const auto& L : layers_)
    for (const auto& k : L->kernels)
      for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
        KernelUse u{L->spec->index, p, k->impl_name(p)};
        if (!u.impl.empty() && std::find(uses.begin(), uses.end(), u) == uses.end()) uses.push_back(u);
      }
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
    for (auto& a : ts.argmax) m.maps += a.size();
    m.deltas += (ts.buf[0].size() + ts.buf[1].size()) * 4;
  }
  for (const auto& L : layers_) {
    if (L->weights) m.weight_copies += L->weights->bytes();
  }
  m.weight_copies += weights_->staging_bytes();
  return m;
}

// Moves every piece (cells `box` from tile `from` to tile `to`): a copy when both tiles
// are here, a message straight between the two tiles' buffers when they are not.
template <class Src, class Dst>
void Segment::exchange(const std::vector<Piece>& pieces, Src src_of, Dst dst_of) {
  post(pieces, src_of, dst_of);
  comm_.wait_all();
}

// Copies the pieces between local tiles and posts the messages, tagged tag0 + the
// piece's index; wait_all completes them.
template <class Src, class Dst>
void Segment::post(const std::vector<Piece>& pieces, Src src_of, Dst dst_of, int tag0) {
  const int me = comm_.rank();
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& pc = pieces[k];
    const int from = tile_rank_[pc.from], to = tile_rank_[pc.to], tag = tag0 + int(k);
    if (from == me && to == me) {
      const TensorView a = src_of(pc.from), b = dst_of(pc.to);
      if (a.data != b.data) copy_region(a, b, pc.box);
    } else if (from == me) {
      comm_.isend(src_of(pc.from), pc.box, to, tag);
    } else if (to == me) {
      comm_.irecv(dst_of(pc.to), pc.box, from, tag);
    }
  }
}

// With BackwardFeatures::Exchange: the forward values the backward of the group ending
// at layer `end` reads outside its tiles' forward boxes, from their owners, in one exchange.
void Segment::exchange_features(int end) {
  const int me = comm_.rank();
  int tag = 0;
  for (int l = end;; --l) {
    const int i = l - plan_.first;
    const LayerSpec& s = net_.layers[l];
    const std::vector<Piece>& pieces = plan_.feature_halo[i];
    if (s.type == LayerType::Conv) {
      auto y_of = [&](int t) { return tiles_[t]->y[i]; };
      post(pieces, y_of, y_of, tag);
    } else {  // max-pool winners: bytes
      auto winners_shape = [&](int t) {
        return TensorView{nullptr, batch_, s.out.c, layers_[i]->out_cb, plan_.at(t, l).held};
      };
      for (size_t n = 0; n < pieces.size(); ++n) {
        const Piece& pc = pieces[n];
        const int from = tile_rank_[pc.from], to = tile_rank_[pc.to], k = tag + int(n);
        const TensorView a = winners_shape(pc.from), b = winners_shape(pc.to);
        if (from == me && to == me)
          copy_winners(tiles_[pc.from]->argmax[i].data(), a.box, tiles_[pc.to]->argmax[i].data(), b.box, a, pc.box);
        else if (from == me)
          comm_.isend_bytes(tiles_[pc.from]->argmax[i].data(), a, pc.box, to, k);
        else if (to == me)
          comm_.irecv_bytes(tiles_[pc.to]->argmax[i].data(), b, pc.box, from, k);
      }
    }
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
      copy_region(full, dst_of(t), box_of(t));
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
      copy_region(src_of(t), *full, box_of(t));
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
  const double t0 = now_s();
  double halo = 0;
  const int first = plan_.first;
  const double s0 = now_s();
  scatter(
      input, [&](int t) { return plan_.at(t, first).in; }, [&](int t) { return input_of(t, first); });
  const double s1 = now_s(), io = s1 - s0;
  span("io", Lane::Comm, s0, s1, -1, "scatter input");
  for (int l = first; l < plan_.last; ++l) {
    // At a group start the halo is posted, and forward_layer computes what it can before
    // waiting for it.
    const bool halo_in_flight = l > first && plan_.group_start(l);
    if (halo_in_flight) {
      const double h0 = now_s();
      post(
          plan_.fwd_halo[l - first], [&](int t) { return tiles_[t]->z[l - 1 - first]; },
          [&](int t) { return input_of(t, l); });
      const double h1 = now_s();
      halo += h1 - h0;
      span("halo", Lane::Comm, h0, h1, l, "halo post");
    }
    forward_layer(l, training, halo_in_flight);
  }
  times.halo += halo + halo_wait_ + bn_wait_;
  times.halo_exchange += halo + halo_wait_;
  times.halo_exchange_fwd += halo + halo_wait_;
  times.io += io;
  times.fwd += now_s() - t0 - halo - io - bn_wait_ - weights_wait_ - halo_wait_;
  times.weights += weights_wait_;
  bn_wait_ = weights_wait_ = halo_wait_ = 0;
}

// `halo_in_flight`: the halo of the layer's input was posted, not completed: tiles with
// overlap parts compute their interior first, then every tile waits for it.
void Segment::forward_layer(int l, bool training, bool halo_in_flight) {
  LayerState& L = *layers_[l - plan_.first];
  const LayerSpec& s = *L.spec;
  const int i = l - plan_.first;
  if (L.weights) weights_->before_use(l, WeightCache::kForward);
  LayerTimes& lt = layer_times[size_t(i)];
  const double t0 = now_s();
  for (int t : local_) {
    TileState& ts = *tiles_[t];
    if (l > plan_.first && !plan_.group_start(l) && ts.in[i].data != ts.z[i - 1].data)
      copy_region(ts.z[i - 1], ts.in[i], plan_.at(t, l).in);                     // crop of the previous output
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
  const double t1 = now_s(), wait0 = bn_wait_;
  lt.fwd += t1 - t0 - waited;
  if (s.type == LayerType::Conv && L.pointwise) {
    if (s.batch_normalize) bn_forward(l, training);
    for (int t : local_) {
      if (act_in_pool_[size_t(i)]) break;
      TileState& ts = *tiles_[t];
      affine_act_forward(ts.y[i], ts.z[i], plan_.at(t, l).fwd, L.pw->a(), L.pw->b(), s.act);
    }
  }
  const double t2 = now_s();
  lt.fwd_pointwise += t2 - t1 - (bn_wait_ - wait0);
  span("forward", Lane::Compute, t0, t2, l);
}

// Layer l's convolution or max-pool on tile t: its whole forward box (part -1), or one
// of its overlap parts (memory_plan.hpp), which for a convolution runs on a dense crop of
// its input window into a dense output, then moves into y.
void Segment::compute(int t, int l, int part) {
  const int i = l - plan_.first;
  const LayerState& L = *layers_[size_t(i)];
  const LayerSpec& s = *L.spec;
  TileState& ts = *tiles_[t];
  const TileLayer& x = plan_.at(t, l);
  const Box box = part < 0 ? x.fwd : mem_.tiles[t].layers[size_t(i)].parts[size_t(part)];
  if (s.type != LayerType::Conv && i > 0 && act_in_pool_[size_t(i - 1)]) {
    const LayerState& C = *layers_[size_t(i - 1)];
    const PoolInputAct pre{C.pw->a(), C.pw->b(), C.spec->act};
    maxpool_forward(ts.y[i - 1], ts.z[i], box, ts.argmax[i].data(), x.held, s.win, &pre);
  } else if (s.type != LayerType::Conv) {
    maxpool_forward(ts.in[i], ts.z[i], box, ts.argmax[i].data(), x.held, s.win);
  } else if (part >= 0) {
    const Box src = window_in(box, s.win, s.in.h, s.in.w);
    const TensorView crop{stage_.data(), batch_, s.in.c, L.in_cb, src};
    copy_region(ts.in[i], crop, src);
    const TensorView out{stage_.data() + crop.size(), batch_, s.out.c, L.out_cb, box};
    const float* bias = s.batch_normalize ? nullptr : params_.values.data() + params_.slices[s.index].biases;
    part_kernels_[size_t(t)][size_t(i)][size_t(part)]->forward(crop.data, bias, out.data);
    copy_region(out, ts.y[i], box);
  } else if (!(ts.y[i].box == x.fwd)) {
    // y is held on a larger box than forward computes (the feature exchange fills the
    // rest): the kernel writes its dense output into z's buffer, then it moves into y.
    conv_forward(t, l, ts.z[i].data);
    copy_region(TensorView{ts.z[i].data, batch_, s.out.c, L.out_cb, x.fwd}, ts.y[i], x.fwd);
  } else {
    conv_forward(t, l, ts.y[i].data);
  }
}

// The convolution of layer l on tile t: ts.in → `dst`, dense over the forward box.
void Segment::conv_forward(int t, int l, float* dst) {
  const LayerState& L = *layers_[l - plan_.first];
  const LayerSpec& s = *L.spec;
  TileState& ts = *tiles_[t];
  const int i = l - plan_.first;
  const float* bias = s.batch_normalize ? nullptr : params_.values.data() + params_.slices[s.index].biases;
  ts.fwd[i]->forward(ts.in[i].data, bias, dst);
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
  trace_->add(name ? name : layer_type_name(net_.layers[size_t(l)].type), cat, lane, t0, t1, l);
}

std::vector<float*> Segment::tile_grads() const {
  std::vector<float*> v;
  for (int t : local_) v.push_back(grad_of(t));
  return v;
}

void Segment::zero_tile_grads() {
  for (Buffer& b : extra_grads_) std::fill(b.data(), b.data() + b.size(), 0.f);
}

void Segment::bn_forward(int l, bool training) {
  layers_[size_t(l - plan_.first)]->pw->forward(pointwise_tiles(l), params_, batch_, training && bn_ == BnMode::Sync,
                                                sum_over_tiles(l));
}

std::vector<PointwiseTile> Segment::pointwise_tiles(int l) const {
  const int i = l - plan_.first;
  std::vector<PointwiseTile> v;
  for (int t : local_) v.push_back({t, tiles_[size_t(t)]->y[size_t(i)], tiles_[size_t(t)]->cur, plan_.at(t, l).own, grad_of(t)});
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

void Segment::backward(const TensorView& delta_out, const TensorView* delta_in) {
  const double t0 = now_s();
  double halo = 0, io = 0;
  const int last = plan_.last - 1;
  const LayerState& Llast = *layers_[last - plan_.first];
  for (int t : local_) {
    TileState& ts = *tiles_[t];
    ts.cur = TensorView{ts.data(mem_.tiles[t].bwd[size_t(last - plan_.first)].out), batch_, Llast.spec->out.c,
                        Llast.out_cb, plan_.at(t, last).delta};
  }
  scatter(
      delta_out, [&](int t) { return plan_.at(t, last).delta; }, [&](int t) { return tiles_[t]->cur; });
  const double s1 = now_s();
  io += s1 - t0;
  span("io", Lane::Comm, t0, s1, -1, "scatter delta");
  for (int l = last; l >= plan_.first; --l) {
    if (l + 1 == plan_.group_end(l)) {
      const double h0 = now_s();
      exchange_features(l);
      const double h1 = now_s();
      halo += h1 - h0;
      span("halo", Lane::Comm, h0, h1, l, "feature exchange");
    }
    backward_layer(l);
    if (l > plan_.first && pointwise_before_exchange(net_, plan_, l - 1)) pointwise_backward(l - 1, true);
    if (l > plan_.first && plan_.group_start(l) && !bwd_exchange_local(plan_, l, local_)) {
      const double h0 = now_s();
      const LayerSpec& prev = net_.layers[l - 1];
      const int cbk = layers_[l - 1 - plan_.first]->out_cb;
      auto halo_of = [&](int t) {
        const TileState& ts = *tiles_[t];
        return TensorView{ts.data(mem_.tiles[t].bwd[size_t(l - plan_.first)].halo), batch_, prev.out.c, cbk,
                          plan_.at(t, l - 1).delta};
      };
      exchange(
          plan_.bwd_halo[l - plan_.first], [&](int t) { return tiles_[t]->cur; }, halo_of);
      for (int t : local_) tiles_[t]->cur = halo_of(t);
      const double h1 = now_s();
      halo += h1 - h0;
      span("halo", Lane::Comm, h0, h1, l, "halo exchange");
    }
  }
  if (need_input_delta_) {
    const double g0 = now_s();
    gather(
        delta_in, [&](int t) { return plan_.own_input[t]; }, [&](int t) { return tiles_[t]->cur; });
    const double g1 = now_s();
    io += g1 - g0;
    span("io", Lane::Comm, g0, g1, -1, "gather input delta");
  }
  times.halo += halo + bn_wait_;
  times.halo_exchange += halo;
  times.io += io;
  times.bwd += now_s() - t0 - halo - io - bn_wait_ - weights_wait_;
  times.weights += weights_wait_;
  bn_wait_ = weights_wait_ = 0;
}

// verify's scales of layer l's weight and bias gradients from one tile (engine/grad_scale.hpp):
// the weight gradient sums products of `src` and `delta` over the cells of `own`, so by
// Cauchy-Schwarz the sum of their magnitudes is at most sqrt(window cells) ||src|| ||delta||;
// the bias gradient (without batch-norm) sums `delta` itself there: per channel at most
// sqrt(own cells x samples) ||delta_c||, i.e. sqrt(cells) ||delta|| over the layer. `delta`
// is zero outside `own` and in the block padding.
void Segment::add_grad_scale(int l, const TensorView& src, const TensorView& delta, const Box& own) {
  if (!grad_scales_) return;
  auto sum_sq = [](const TensorView& v) {
    double s = 0;
    for (int64_t k = 0; k < v.size(); ++k) s += double(v.data[k]) * v.data[k];
    return s;
  };
  const LayerSpec& s = net_.layers[size_t(l)];
  const double dd = sum_sq(delta);
  GradScale& g = (*grad_scales_)[size_t(l)];
  g.weights += std::sqrt(double(s.win.size) * s.win.size * sum_sq(src) * dd);
  if (!s.batch_normalize) g.biases += std::sqrt(double(delta.n) * double(own.area()) * dd);
}

void Segment::measure_pointwise_scales() {
  if (!grad_scales_) return;
  for (const auto& L : layers_)
    if (L->pw) L->pw->measure_grad_scales(&(*grad_scales_)[size_t(L->spec->index)]);
}

void Segment::backward_layer(int l) {
  LayerState& L = *layers_[l - plan_.first];
  const LayerSpec& s = *L.spec;
  const int i = l - plan_.first;
  const bool want_delta_in = l > plan_.first || need_input_delta_;
  const bool conv = s.type == LayerType::Conv;
  const double b0 = trace_ && trace_->on() ? now_s() : 0;  // no clock read unless tracing
  if (conv && L.pointwise && !pointwise_before_exchange(net_, plan_, l)) pointwise_backward(l, false);
  // Backward-data of every tile first: then the delta is free to be reshaped for
  // backward-weights, and (sharded) the staged weights are free to hold its output.
  if (conv && want_delta_in) weights_->before_use(l, WeightCache::kBackwardData);
  LayerTimes& lt = layer_times[size_t(i)];
  double t0 = now_s();
  for (int t : local_) {
    if (!want_delta_in) break;
    TileState& ts = *tiles_[t];
    const TileLayer& x = plan_.at(t, l);
    const BackwardStep& st = mem_.tiles[t].bwd[size_t(i)];
    const TensorView din{ts.data(st.in), batch_, s.in.c, L.in_cb, st.in_box};
    if (conv) {
      ts.bwd_data[i]->backward_data(ts.cur.data, din.data);
    } else {
      maxpool_backward(ts.cur, x.delta, x.held, ts.argmax[i].data(), din, s.win);
    }
  }
  double t1 = now_s();
  lt.bwd_data += t1 - t0;
  if (conv) {
    const ParamSlice& ps = params_.slices[s.index];
    weights_->begin_grad(l);
    for (int t : local_) {
      float* gw = weights_->grad_target(l, grad_of(t));
      TileState& ts = *tiles_[t];
      const TileLayer& x = plan_.at(t, l);
      if (mem_.tiles[t].layers[size_t(i)].weights_on_delta) {
        // The delta is no longer needed outside the owned box: zero it there and take the
        // weight gradient over the whole delta box, with no crops.
        if (!(ts.cur.box == x.own)) zero_outside(ts.cur, x.own);
        add_grad_scale(l, ts.in[i], ts.cur, x.own);
        ts.bwd_weights[i]->backward_weights(ts.in[i].data, ts.cur.data, gw, grad_of(t) + ps.biases);
        continue;
      }
      // Over the owned box: its input window cropped out of a larger input buffer, and the
      // owned delta moved to the front of its buffer (in place: the delta is not read again).
      const Box src_box = window_in(x.own, s.win, s.in.h, s.in.w);
      TensorView src = ts.in[i];
      if (!(ts.in[i].box == src_box)) {
        src = TensorView{crop_src_.data(), batch_, s.in.c, L.in_cb, src_box};
        copy_region(ts.in[i], src, src_box);
      }
      if (!(ts.cur.box == x.own)) compact_region(ts.cur, x.own);
      TensorView owned_delta = ts.cur;
      owned_delta.box = x.own;
      add_grad_scale(l, src, owned_delta, x.own);
      ts.bwd_weights[i]->backward_weights(src.data, ts.cur.data, gw, grad_of(t) + ps.biases);
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
    if (st.keep_in_box) {
      ts.cur = din;
    } else {
      TensorView dst{ts.data(st.out), batch_, s.in.c, L.in_cb, x.delta_in};
      zero(dst);
      copy_region(din, dst, intersect(st.in_box, x.delta_in));
      ts.cur = dst;
    }
  }
  const double t2 = now_s();
  lt.bwd_data += t2 - t0;
  span("backward", Lane::Compute, b0, t2, l);
  if (conv) weights_->end_grad(l);
}

// Activation and batch-norm backward of layer l on every local tile's current delta:
// on its owned cells only, or on its whole box.
void Segment::pointwise_backward(int l, bool owned_only) {
  LayerState& L = *layers_[l - plan_.first];
  const int i = l - plan_.first;
  const double t0 = now_s(), waits0 = bn_wait_ + weights_wait_;
  bool any = false;
  for (int t : local_) any |= mem_.tiles[t].layers[size_t(i)].recompute;
  if (any) {  // the same kernel on the same input: bit-identical to forward's y
    weights_->before_use(l, WeightCache::kForward);
    for (int t : local_) {
      TileState& ts = *tiles_[t];
      if (!mem_.tiles[t].layers[size_t(i)].recompute) continue;
      ts.y[i].data = ts.data(mem_.tiles[t].bwd[size_t(i)].y);  // free until backward-data (see memory_plan.cpp)
      conv_forward(t, l, ts.y[i].data);
    }
  }
  L.pw->backward(
      pointwise_tiles(l), [&](const PointwiseTile& pt) { return owned_only ? pt.own : pt.delta.box; }, params_, batch_,
      bn_ == BnMode::Sync, sum_over_tiles(l));
  const double t1 = now_s();
  layer_times[size_t(i)].bwd_pointwise += t1 - t0 - (bn_wait_ + weights_wait_ - waits0);
  // Its own span when it runs apart, before the exchange; else inside backward_layer's.
  if (owned_only) span("backward", Lane::Compute, t0, t1, l);
}

}  // namespace tt
