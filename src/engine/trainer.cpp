#include "engine/trainer.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "layers/dense.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

const char* overlap_name(Overlap o) { return o == Overlap::Auto ? "auto" : o == Overlap::On ? "on" : "off"; }

Overlap parse_overlap(const std::string& s) {
  for (Overlap o : {Overlap::Auto, Overlap::On, Overlap::Off})
    if (s == overlap_name(o)) return o;
  fail("--overlap: '", s, "' is none of auto, on, off");
}

std::vector<int> tile_ranks(int tiles, int tiles_per_rank, int processes) {
  if (tiles_per_rank < 1) fail("--tiles-per-rank must be at least 1");
  std::vector<int> ranks(size_t(tiles), 0);
  if (processes == 1) return ranks;  // one process runs every tile
  if (tiles % tiles_per_rank != 0)
    fail("the grid has ", tiles, " tiles, which do not split into ", tiles_per_rank,
         " tile(s) per rank (--tiles-per-rank must divide the tile count)");
  if (tiles / tiles_per_rank != processes)
    fail("the grid has ", tiles, " tiles; with ", tiles_per_rank, " tile(s) per rank that needs ",
         tiles / tiles_per_rank, " ranks, but ", processes,
         " were started (mpirun -np must equal tiles / --tiles-per-rank)");
  for (int t = 0; t < tiles; ++t) ranks[size_t(t)] = t / tiles_per_rank;
  return ranks;
}

Trainer::Trainer(const NetSpec& net, Params& params, const TrainOptions& opt, Comm& comm)
    : net_(net), params_(params), opt_(opt), comm_(comm), n_(net.micro_batch()), ctx_(opt.kernels, opt.channel_block) {
  const LayerType lt = net.layers.back().type;
  if (lt != LayerType::Cost && lt != LayerType::Softmax)
    fail(net.path, ": the net has no loss: end it with [cost] or [softmax]");
  cut_ = resolve_cut(net, opt.cut);
  dense_begin_ = net.first_untileable();
  grad_ = Buffer(params.values.size());
  momentum_ = Buffer(params.values.size());

  Plan plan = make_plan(net, opt.rows, opt.cols, 0, cut_, parse_groups(opt.groups, 0, cut_), {opt.split, opt.features});
  std::vector<int> ranks = tile_ranks(plan.tiles_count(), opt.tiles_per_rank, comm.size());
  if (opt.low_memory) {
    shards_ = std::make_unique<ShardPlan>(make_shard_plan(net, params, 0, cut_, comm.rank(), comm.size()));
    replicated_grad_.assign(size_t(ShardPlan::total(shards_->replicated)), 0.f);
    if (!opt.need_input_delta)  // keep only this process's parts of the sharded weights
      for (const ShardPlan::Layer& L : shards_->layers) {
        if (L.n == 0) continue;
        const auto [b, e] = shards_->mine(L);
        release_pages(params.values.data() + L.offset, size_t(b - L.offset));
        release_pages(params.values.data() + e, size_t(L.offset + L.n - e));
      }
  }
  if (!opt.low_memory && comm.size() > 1) {  // the flat vector in one contiguous part per process
    const int P = comm.size();
    if (params.size() / P >= INT_MAX) fail("the net has too many parameters for one MPI message per process");
    for (int r = 0; r < P; ++r) {
      split_displs_.push_back(int(params.size() * r / P));
      split_counts_.push_back(int(params.size() * (r + 1) / P) - split_displs_.back());
    }
    split_tmp_ = Buffer(size_t(*std::max_element(split_counts_.begin(), split_counts_.end())));
  }
  std::vector<bool> far;
  if (opt.overlap != Overlap::Off) {
    const std::vector<std::string> hosts = comm.all_hosts();
    for (int r : ranks) far.push_back(opt.overlap == Overlap::On || hosts[size_t(r)] != hosts[size_t(comm.rank())]);
  }
  tiled_ = std::make_unique<Segment>(ctx_, net, params, grad_.data(), std::move(plan), comm,
                                     SegmentOptions{.batch = n_,
                                                    .in_cb = 1,
                                                    .bn = opt.bn,
                                                    .need_input_delta = opt.need_input_delta,
                                                    .tile_rank = std::move(ranks),
                                                    .shards = shards_.get(),
                                                    .recompute = opt.low_memory,
                                                    .far = std::move(far)});
  int cb = tiled_->out_cb();
  if (!root()) return;  // the rest of the net lives on the root process
  if (dense_begin_ > cut_) {
    Plan p1 = make_plan(net, 1, 1, cut_, dense_begin_, {cut_});
    untiled_ = std::make_unique<Segment>(
        ctx_, net, params, grad_.data(), std::move(p1), local_comm_,
        SegmentOptions{.batch = n_,
                       .in_cb = cb,
                       .bn = opt.bn,
                       .need_input_delta = true,
                       .tile_rank = {0},
                       .shards = nullptr,
                       .recompute = false,
                       .far = {}});
    cb = untiled_->out_cb();
  }
  // Whole maps at the cut and at the start of the dense head.
  const Shape at_cut = net.layers[cut_ - 1].out;
  const Shape at_dense = net.layers[dense_begin_ - 1].out;
  const int cb_cut = tiled_->out_cb();
  map_a_ = Buffer(size_t(tensor_floats(n_, at_cut.c, cb_cut, full_box(at_cut.h, at_cut.w))));
  delta_map_a_ = Buffer(map_a_.size());
  if (untiled_) {
    map_b_ = Buffer(size_t(tensor_floats(n_, at_dense.c, cb, full_box(at_dense.h, at_dense.w))));
    delta_map_b_ = Buffer(map_b_.size());
  }
  const size_t L = net.layers.size();
  dense_out_.resize(L);
  dense_pre_.resize(L);
  dense_delta_.resize(L + 1);
  dense_delta_[dense_begin_].assign(size_t(n_ * at_dense.size()), 0.f);    // delta at the head's input
  dense_out_[dense_begin_ - 1].assign(size_t(n_ * at_dense.size()), 0.f);  // plain copy of the head's input
  for (size_t l = dense_begin_; l < L; ++l) {
    const LayerSpec& s = net.layers[l];
    if (s.type == LayerType::Cost) continue;  // its output is its input, its delta the loss gradient
    dense_out_[l].assign(size_t(n_ * s.out.size()), 0.f);
    if (s.type == LayerType::Connected) dense_pre_[l].assign(size_t(n_ * s.out.size()), 0.f);
    dense_delta_[l + 1].assign(size_t(n_ * s.out.size()), 0.f);
  }
  if (opt.need_input_delta) input_delta_.assign(size_t(n_ * net.input().size()), 0.f);
}

Trainer::Memory Trainer::memory() const {
  Memory m;
  for (const Segment* s : {tiled_.get(), untiled_.get()}) {
    if (!s) continue;
    Segment::MemoryUse u = s->memory_use();
    m.maps_mb += u.maps / 1048576.0;
    m.deltas_mb += u.deltas / 1048576.0;
    m.filters_mb += u.weight_copies / 1048576.0;
  }
  m.scratch_mb = ctx_.scratch_bytes() / 1048576.0;
  m.maps_mb += (map_a_.size() + map_b_.size()) * 4 / 1048576.0;
  m.deltas_mb += (delta_map_a_.size() + delta_map_b_.size()) * 4 / 1048576.0;
  for (auto& v : dense_out_) m.maps_mb += v.size() * 4 / 1048576.0;
  for (auto& v : dense_pre_) m.maps_mb += v.size() * 4 / 1048576.0;
  for (auto& v : dense_delta_) m.deltas_mb += v.size() * 4 / 1048576.0;
  // Weights, gradients and momentum: all of them, or the replicated ones and this process's parts.
  double kept = 3. * double(params_.values.size());
  if (shards_) kept = 3. * double(ShardPlan::total(shards_->replicated) + ShardPlan::total(shards_->owned));
  if (!split_counts_.empty()) kept = 2. * double(params_.values.size()) + split_counts_[size_t(comm_.rank())];
  m.filters_mb += kept * 4 / 1048576.0 + ctx_.staging_bytes() / 1048576.0;
  return m;
}

Trainer::~Trainer() = default;

std::vector<KernelUse> Trainer::kernel_uses() const {
  std::vector<KernelUse> uses = tiled_->kernel_uses();
  if (untiled_)
    for (KernelUse& u : untiled_->kernel_uses()) uses.push_back(std::move(u));
  return uses;
}

void Trainer::set_momentum(std::span<const float> v) {
  if (v.size() != momentum_.size()) fail("internal: momentum of ", v.size(), " values for ", momentum_.size());
  std::copy(v.begin(), v.end(), momentum_.data());
}

void Trainer::gather_weights() {
  if (!shards_) return;
  for (const ShardPlan::Layer& L : shards_->layers)
    if (L.n > 0) comm_.all_gather_v(params_.values.data() + L.offset, L.counts, L.displs);
}

void Trainer::reload_weights() {
  tiled_->refresh_weights();
  if (untiled_) untiled_->refresh_weights();
}

StepTimes Trainer::times() const {
  StepTimes t = times_;
  for (const Segment* s : {tiled_.get(), untiled_.get()}) {
    if (!s) continue;
    t.fwd += s->times.fwd;
    t.bwd += s->times.bwd;
    t.halo += s->times.halo;
    t.io += s->times.io;
    t.weights += s->times.weights;
    t.halo_exchange += s->times.halo_exchange;
    t.halo_exchange_fwd += s->times.halo_exchange_fwd;
    t.halo_overlap += s->times.halo_overlap;
  }
  return t;
}

std::vector<LayerTimes> Trainer::layer_times() const {
  std::vector<LayerTimes> v(net_.layers.size());
  for (const Segment* s : {tiled_.get(), untiled_.get()}) {
    if (!s) continue;
    const int first = s == tiled_.get() ? 0 : cut_;
    std::copy(s->layer_times.begin(), s->layer_times.end(), v.begin() + first);
  }
  v[size_t(dense_begin_)].fwd = head_fwd_;
  v[size_t(dense_begin_)].bwd_data = head_bwd_;
  return v;
}

void Trainer::reset_times() {
  head_fwd_ = head_bwd_ = 0;
  times_ = {};
  for (Segment* s : {tiled_.get(), untiled_.get()}) {
    if (!s) continue;
    s->times = {};
    std::fill(s->layer_times.begin(), s->layer_times.end(), LayerTimes{});
  }
}

void Trainer::forward(const float* input, bool training) {
  const Shape in = net_.input();
  const TensorView input_view{const_cast<float*>(input), n_, in.c, 1, full_box(in.h, in.w)};
  tiled_->forward(input_view, training);
  const Shape at_cut = net_.layers[cut_ - 1].out;
  TensorView cut_map{map_a_.data(), n_, at_cut.c, tiled_->out_cb(), full_box(at_cut.h, at_cut.w)};
  tiled_->gather_output(&cut_map);
  if (!root()) return;
  TensorView head_in = cut_map;
  if (untiled_) {
    untiled_->forward(cut_map, training);
    const Shape s = net_.layers[dense_begin_ - 1].out;
    head_in = TensorView{map_b_.data(), n_, s.c, untiled_->out_cb(), full_box(s.h, s.w)};
    untiled_->gather_output(&head_in);
  }
  // Dense head on plain [n][c*h*w].
  const double d0 = now_s();
  std::vector<float>& x0 = dense_out_[dense_begin_ - 1];
  copy_region(head_in, TensorView{x0.data(), n_, head_in.c, 1, head_in.box}, head_in.box);
  const float* x = x0.data();
  for (size_t l = dense_begin_; l < net_.layers.size(); ++l) {
    const LayerSpec& s = net_.layers[l];
    float* y = dense_out_[l].data();
    switch (s.type) {
      case LayerType::AvgPool:
        avgpool_forward(x, y, n_, s.in.c, s.in.h * s.in.w);
        break;
      case LayerType::Connected: {
        const ParamSlice& ps = params_.slices[l];
        connected_forward(x, params_.values.data() + ps.weights, params_.values.data() + ps.biases,
                          dense_pre_[l].data(), y, n_, int(s.in.size()), s.outputs, s.act);
        break;
      }
      case LayerType::Softmax:
        softmax_forward(x, y, n_, int(s.in.size()));
        break;
      case LayerType::Dropout:
        if (training)
          dropout_apply(x, y, s.in.size(), n_, s.probability, opt_.seed + uint64_t(l), step_);
        else
          std::memcpy(y, x, size_t(n_ * s.in.size()) * 4);
        break;
      case LayerType::Cost:  // the last layer: its output is its input
        y = const_cast<float*>(x);
        break;
      default:
        fail("internal: layer ", l, " in the dense head");
    }
    x = y;
  }
  out_ = x;
  head_fwd_ += now_s() - d0;
  times_.fwd += now_s() - d0;
}

const float* Trainer::predict(const float* input) {
  forward(input, false);
  return root() ? out_ : nullptr;
}

double Trainer::loss_and_backward(const float* truth) {
  const Shape in = net_.input();
  TensorView din{input_delta_.data(), n_, in.c, 1, full_box(in.h, in.w)};
  if (!root()) {  // the root computes the head and sends each tile its delta
    tiled_->backward(TensorView{}, &din);
    return 0;
  }
  const double d0 = now_s();
  const size_t L = net_.layers.size();
  const int64_t count = n_ * net_.output().size();
  double loss;
  // dense_delta_[l + 1] is dL/d(output of layer l); the loss writes the last one (a
  // [cost] layer passes it through unchanged: the loss writes its input's delta).
  const bool cost = net_.layers.back().type == LayerType::Cost;
  float* g = dense_delta_[cost ? L - 1 : L].data();
  if (cost)
    loss = sse(out_, truth, g, count);
  else
    loss = softmax_cross_entropy(out_, truth, g, count);
  for (size_t l = cost ? L - 1 : L; l-- > size_t(dense_begin_);) {
    const LayerSpec& s = net_.layers[l];
    float* gin = dense_delta_[l].data();
    const float* x = dense_out_[l - 1].data();
    g = dense_delta_[l + 1].data();
    const int64_t nin = n_ * s.in.size();
    switch (s.type) {
      case LayerType::AvgPool:
        avgpool_backward(g, gin, n_, s.in.c, s.in.h * s.in.w);
        break;
      case LayerType::Connected: {
        const ParamSlice& ps = params_.slices[l];
        connected_backward(g, x, params_.values.data() + ps.weights, dense_pre_[l].data(), grad_.data() + ps.weights,
                           grad_.data() + ps.biases, gin, n_, int(s.in.size()), s.outputs, s.act);
        break;
      }
      case LayerType::Softmax:  // Darknet: the delta passes through (softmax + cross-entropy)
      case LayerType::Cost:
        std::memcpy(gin, g, size_t(nin) * 4);
        break;
      case LayerType::Dropout:
        dropout_apply(g, gin, s.in.size(), n_, s.probability, opt_.seed + uint64_t(l), step_);
        break;
      default:
        fail("internal: layer ", l, " in the dense head");
    }
  }
  head_bwd_ += now_s() - d0;
  times_.bwd += now_s() - d0;
  // Back into the spatial segments.
  const Shape sd = net_.layers[dense_begin_ - 1].out;
  const Shape sc = net_.layers[cut_ - 1].out;
  TensorView cut_delta{delta_map_a_.data(), n_, sc.c, tiled_->out_cb(), full_box(sc.h, sc.w)};
  const TensorView plain{dense_delta_[dense_begin_].data(), n_, sd.c, 1, full_box(sd.h, sd.w)};
  if (untiled_) {
    TensorView head_delta{delta_map_b_.data(), n_, sd.c, untiled_->out_cb(), full_box(sd.h, sd.w)};
    copy_region(plain, head_delta, head_delta.box);
    untiled_->backward(head_delta, &cut_delta);
  } else {
    copy_region(plain, cut_delta, cut_delta.box);
  }
  tiled_->backward(cut_delta, &din);
  return loss;
}

double Trainer::forward_backward(const float* input, const float* truth) {
  forward(input, true);
  return loss_and_backward(truth);
}

void Trainer::update() {
  const double w0 = now_s();
  float* g = grad_.data();
  const bool split = !shards_ && comm_.size() > 1;  // optimizer state split across processes
  if (split) {                                      // each process sums, and then updates, its part of the flat vector
    comm_.reduce_scatter(g, split_counts_, split_displs_, split_tmp_.data());
  } else if (!shards_) {
    comm_.allreduce_sum(g, grad_.size());
  } else {  // the sharded weights' gradients were reduce-scattered during backward
    float* r = replicated_grad_.data();
    for (const auto& [b, e] : shards_->replicated) r = std::copy(g + b, g + e, r);
    comm_.allreduce_sum(replicated_grad_.data(), replicated_grad_.size());
    r = replicated_grad_.data();
    for (const auto& [b, e] : shards_->replicated) {
      std::copy(r, r + (e - b), g + b);
      r += e - b;
    }
  }
  times_.weights += now_s() - w0;
  if (opt_.need_input_delta) {
    last_grad_.assign(g, g + grad_.size());
    if (split) comm_.all_gather_v(last_grad_.data(), split_counts_, split_displs_);
    if (shards_)
      for (const ShardPlan::Layer& L : shards_->layers)
        if (L.n > 0) comm_.all_gather_v(last_grad_.data() + L.offset, L.counts, L.displs);
  }
  const double u0 = now_s();
  params_.seen += net_.batch;  // Darknet counts this batch before asking for its rate
  const int64_t batch_num = params_.seen / net_.batch;
  const float lr = net_.rate_at(batch_num), m = net_.momentum, decay = net_.decay;
  const float B = float(net_.batch);
  float* w = params_.values.data();
  float* v = momentum_.data();
  const int64_t lo = split ? split_displs_[size_t(comm_.rank())] : 0;
  const int64_t hi = split ? lo + split_counts_[size_t(comm_.rank())] : params_.size();
  auto sgd = [&](int64_t begin, int64_t end, float wd) {  // on this process's part of [begin, end)
    for (int64_t i = std::max(begin, lo); i < std::min(end, hi); ++i) {
      v[i] = m * v[i] - g[i] - wd * B * w[i];
      w[i] += (lr / B) * v[i];
    }
  };
  for (const auto& l : net_.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& ps = params_.slices[l.index];
    sgd(ps.biases, ps.biases + ps.n_out, 0.f);
    if (ps.scales >= 0) sgd(ps.scales, ps.scales + ps.n_out, 0.f);
    if (shards_ && shards_->layers[l.index].n > 0) {  // this process's part only
      const auto [b, e] = shards_->mine(shards_->layers[l.index]);
      sgd(b, e, decay);
    } else {
      sgd(ps.weights, ps.weights + ps.n_weights, decay);
    }
  }
  // Zeroed for the next batch: everything, or (sharded) the parts this process touched.
  if (shards_) {
    for (const auto& [b, e] : shards_->replicated) std::fill(g + b, g + e, 0.f);
    for (const auto& [b, e] : shards_->owned) std::fill(g + b, g + e, 0.f);
  } else {
    std::fill(g, g + grad_.size(), 0.f);
  }
  double gather_s = 0;
  if (split) {
    const double a0 = now_s();
    comm_.all_gather_v(w, split_counts_, split_displs_);
    gather_s = now_s() - a0;
    times_.weights += gather_s;
  }
  ++step_;
  const double r0 = now_s();
  reload_weights();
  times_.reload += now_s() - r0;
  times_.update += now_s() - u0 - gather_s;
  if (opt_.need_input_delta) {  // verify compares whole weights and momentum
    gather_weights();
    if (split) comm_.all_gather_v(momentum_.data(), split_counts_, split_displs_);
    if (shards_)
      for (const ShardPlan::Layer& L : shards_->layers)
        if (L.n > 0) comm_.all_gather_v(momentum_.data() + L.offset, L.counts, L.displs);
  }
}

double Trainer::train_step(const float* input, const float* truth) {
  const double t0 = now_s();
  const int64_t in_size = net_.input().size() * n_, out_size = net_.output().size() * n_;
  double loss = 0;
  for (int sub = 0; sub < net_.subdivisions; ++sub)
    loss +=
        root() ? forward_backward(input + sub * in_size, truth + sub * out_size) : forward_backward(nullptr, nullptr);
  update();
  times_.total += now_s() - t0;
  return loss;
}

}  // namespace tt
