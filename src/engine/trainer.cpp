#include "engine/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/memory_plan.hpp"
#include "layers/fma_probe.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

const char* overlap_name(Overlap o) { return o == Overlap::Auto ? "auto" : o == Overlap::On ? "on" : "off"; }

Overlap parse_overlap(const std::string& s) {
  for (Overlap o : {Overlap::Auto, Overlap::On, Overlap::Off})
    if (s == overlap_name(o)) return o;
  fail("--overlap: '", s, "' is none of auto, on, off");
}

const char* tail_mode_name(TailMode t) { return t == TailMode::Root ? "root" : "filters"; }

TailMode parse_tail_mode(const std::string& s) {
  for (TailMode t : {TailMode::Root, TailMode::Filters})
    if (s == tail_mode_name(t)) return t;
  fail("--tail: '", s, "' is none of root, filters");
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

namespace {
// Each process's device, numbered as first seen in rank order.
std::vector<int> devices_of(Comm& comm, int ranks_per_device) {
  std::vector<int> device(size_t(comm.size()));
  if (ranks_per_device > 0) {
    for (int r = 0; r < comm.size(); ++r) device[size_t(r)] = r / ranks_per_device;
    return device;
  }
  const std::vector<std::string> hosts = comm.all_hosts();
  int next = 0;
  std::vector<int> id(hosts.size(), -1);
  for (size_t r = 0; r < hosts.size(); ++r) {
    const size_t first = size_t(std::find(hosts.begin(), hosts.end(), hosts[r]) - hosts.begin());
    if (id[first] < 0) id[first] = next++;
    device[r] = id[first];
  }
  return device;
}
}  // namespace

void Trainer::check_memory(const Plan& plan, const std::vector<int>& ranks) const {
  // A lower bound of what this process allocates: its tiles' maps and deltas as the
  // memory plan lays them out, the parameters with gradient and momentum (sharded with
  // --low-memory: then only the values are counted) and, on the root, every tail layer's
  // output and the gathered map with its delta.
  std::vector<int> local;
  for (size_t t = 0; t < ranks.size(); ++t)
    if (ranks[t] == tiles_comm_.rank()) local.push_back(int(t));
  const SegmentMemoryPlan mp =
      plan_segment_memory(net_, plan, n_, 1, ctx_.config.block, opt_.low_memory, opt_.need_input_delta, local);
  const double mb = 1024. * 1024.;
  const double maps = double(mp.maps_bytes + mp.deltas_bytes) / mb;
  // Data parallel: also one gradient per micro-batch this process runs but the last (MicroBatchSync).
  const int own_micro = opt_.replicas ? first_micro_batch(comm_.rank() + 1) - first_micro_batch(comm_.rank()) : 1;
  // Filter blocks: about a process's share of the parameters after the cut.
  double floats = double(params_.values.size());
  if (filters())
    for (const LayerSpec& l : net_.layers)
      if (l.index >= cut_ && l.has_params()) {
        floats -= double(params_.values.size() - params_.slices[size_t(l.index)].biases) * (1 - 1. / comm_.size());
        break;
      }
  const double weights = floats * 4 * (opt_.low_memory ? 1 : 2 + own_micro) / mb;
  double tail = 0, largest = 0;
  int largest_layer = 0;
  for (const LayerSpec& l : net_.layers) {
    const double bytes = double(l.out.size()) * n_ * 4 / mb;
    if (l.index >= cut_ - 1 && (tile_root() || filters())) tail += bytes * (l.index == cut_ - 1 ? 2 : 1);
    if (bytes > largest) largest = bytes, largest_layer = l.index;
  }
  const double need = maps + weights + tail, limit = memory_limit_mb();
  if (need > limit)
    fail("this run needs at least ", int64_t(need), " MB on rank ", comm_.rank(), " (maps ", int64_t(maps + tail),
         " MB, parameters with gradients and momentum ", int64_t(weights), " MB; the largest map, layer ",
         largest_layer, " [", net_.layers[size_t(largest_layer)].type_name(), "] of ",
         net_.layers[size_t(largest_layer)].out.c, "x", net_.layers[size_t(largest_layer)].out.h, "x",
         net_.layers[size_t(largest_layer)].out.w, " for ", n_, " sample(s), alone ", int64_t(largest),
         " MB) but may use ", int64_t(limit),
         opt_.replicas ? " MB: use a smaller --size or --batch, fewer micro-batches per copy (--subdivisions) or "
                         "tiles instead of copies (--grid without --replicas)"
                       : " MB: use a smaller --size or --batch, more tiles (--grid) or --low-memory");
}

Trainer::Trainer(const NetSpec& net, Params& params, const TrainOptions& opt, Comm& comm)
    : net_(net),
      params_(params),
      opt_(opt),
      comm_(comm),
      tiles_comm_(opt.replicas ? static_cast<Comm&>(replica_comm_) : comm),
      n_(net.micro_batch()),
      ctx_(opt.kernels, opt.channel_block, opt.device ? *opt.device : cpu_device()) {
  if (!net.layers.back().loss())
    fail(net.path, ": the net has no loss: end it with [cost], [softmax], [region] or [yolo]");
  if (filters() && opt.replicas)
    fail(
        "--tail filters splits the layers after the cut over the processes of one copy; with --replicas each "
        "process runs a whole copy: use one of them");
  if (opt.replicas) {
    if (opt.replicas != comm.size())
      fail("--replicas ", opt.replicas, " runs one whole copy of the net per process, but ", comm.size(),
           " process(es) were started (start as many as copies; copies that span several processes are not "
           "done yet)");
    if (net.subdivisions < opt.replicas)
      fail("--replicas ", opt.replicas, ": a batch of ", net.batch, " in ", net.subdivisions,
           " micro-batch(es) leaves some copies without one; each copy runs whole micro-batches, since batch-norm "
           "statistics are taken per micro-batch as Darknet does: set --subdivisions (or subdivisions= in ",
           net.path, ") to at least ", opt.replicas,
           ", dividing the batch, or split the net into tiles with --grid instead");
    if (opt.low_memory)
      fail(
          "--low-memory shards one copy's weights over its processes; with --replicas every process holds a "
          "whole copy: use one of them");
    if (opt.tiles_per_rank != 1 && opt.tiles_per_rank != opt.rows * opt.cols)
      fail("--tiles-per-rank ", opt.tiles_per_rank, ": with --replicas each copy runs all its ", opt.rows * opt.cols,
           " tile(s) in its own process");
  }
  cut_ = resolve_cut(net, opt.cut, opt.rows, opt.cols);
  first_ = net.first_tiled();
  // Kernels follow what the FMA units do, timed per process; the ranks take rank 0's answer
  // so that they all run the same kernels (layers/fma_probe.hpp).
  if (comm.size() > 1) set_full_width_avx512_fma(comm.all_gather(full_width_avx512_fma() ? 1. : 0.)[0] != 0);
  Plan plan = make_plan(net, opt.rows, opt.cols, first_, cut_, parse_groups(opt.groups, first_, cut_),
                        {opt.split, opt.features});
  if (opt.adjust_plan) opt.adjust_plan(plan);
  std::vector<int> ranks = tile_ranks(plan.tiles_count(), opt.tiles_per_rank, tiles_comm_.size());
  check_memory(plan, ranks);
  std::vector<std::vector<GradientSync::Range>> blocks;  // --tail filters: each process's
  if (filters()) blocks = tail_block_ranges(net, params, cut_, block_ranks(opt, ranks, comm.size()), comm.size());
  grad_ = Buffer(params.values.size(), ctx_.device);
  momentum_ = Buffer(params.values.size(), ctx_.device);
  if (opt.record_grad_scales) grad_scales_.assign(net.layers.size(), GradScale{});
  if (opt.low_memory)
    shards_ = std::make_unique<ShardPlan>(
        make_shard_plan(net, params, first_, cut_, comm.rank(), comm.size(), filters() ? tail_begin() : -1));
  // Handed back before anything else is built, if the caller filled them (not leaving them
  // out as Params::unfilled): they would add to the peak.
  unused_ = weights_not_kept(net, params, opt, comm.rank(), comm.size());
  hand_back_unused_weights({0, params.size()});
  const std::vector<int> device = devices_of(tiles_comm_, opt.ranks_per_device);
  std::vector<bool> far;
  if (opt.overlap != Overlap::Off)
    for (int r : ranks)
      far.push_back(opt.overlap == Overlap::On || device[size_t(r)] != device[size_t(tiles_comm_.rank())]);
  RunningStatsLog* log = opt.replicas ? &stats_log_ : nullptr;
  tiled_ = std::make_unique<Segment>(ctx_, net, params, grad_.data(), std::move(plan), tiles_comm_,
                                     SegmentOptions{.batch = n_,
                                                    .in_cb = 1,
                                                    .bn = opt.bn,
                                                    .need_input_delta = opt.need_input_delta,
                                                    .tile_rank = ranks,
                                                    .shards = shards_.get(),
                                                    .staged_weights = stage_weights(),
                                                    .recompute = opt.low_memory,
                                                    .far = std::move(far),
                                                    .trace = &trace_,
                                                    .grad_scales = grad_scales(),
                                                    .stats_log = log});
  tiled_->measure_pointwise_scales();
  if (opt.replicas) {
    std::vector<int> owner(size_t(net.subdivisions));
    for (int r = 0; r < comm.size(); ++r)
      for (int m = first_micro_batch(r); m < first_micro_batch(r + 1); ++m) owner[size_t(m)] = r;
    auto sync = std::make_unique<MicroBatchSync>(comm, *tiled_, std::move(owner), params.size(), grad_.data(),
                                                 opt.overlap == Overlap::On);
    micro_sync_ = sync.get();
    sync_ = std::move(sync);
    const int own = first_micro_batch(comm.rank() + 1) - first_micro_batch(comm.rank());
    if (!root()) {
      replica_in_.assign(size_t(own * n_ * net.input().size()), 0.f);
      replica_truth_.assign(size_t(own * n_ * net.truth_size()), 0.f);
    }
  } else {
    // The tiled layers' and (tail on the root) the tail's; filter blocks: the tail apart.
    const int64_t E = filters() ? tail_begin() : params.size();
    // Gradient buckets during backward: only when asked (docs/tiling.md says why).
    sync_ = shards_ ? std::unique_ptr<GradientSync>(std::make_unique<ShardedSync>(comm, *shards_))
                    : std::make_unique<TileOrderSync>(comm, *tiled_, ranks, E, opt.overlap == Overlap::On, grad_.data(),
                                                      device);
    if (filters()) {
      make_tail(ranks, log);
      sync_ = std::make_unique<FilterBlocksSync>(comm, std::move(sync_), E, params.size(), std::move(blocks));
    }
  }
  if (sync_->overlaps())
    tiled_->link_free = [this] {
      const double t0 = now_s();
      if (sync_->link_free()) trace_.end("gradient bucket", "weights", Lane::Comm, t0);
      // Data parallel: the segment runs on this process's comm alone, whose progress is not
      // the buckets' (Open MPI moves a message only inside its calls).
      if (opt_.replicas) comm_.progress();
    };
  if (!tile_root()) return;  // the rest of the net lives on the root process
  if (!tail_) make_tail(ranks, log);
  const Shape at_cut = net.layers[size_t(cut_ - 1)].out;
  cut_map_ = Buffer(size_t(tensor_floats(n_, at_cut.c, tiled_->out_cb(), full_box(at_cut.h, at_cut.w))), ctx_.device);
  cut_delta_ = Buffer(cut_map_.size(), ctx_.device);
  if (opt.need_input_delta) input_delta_.assign(size_t(n_ * net.input().size()), 0.f);
  if (first_ > 0) {
    const LayerSpec& pre = net.layers[size_t(first_ - 1)];
    prefix_ = make_op(net, pre);
    prefix_out_.assign(size_t(n_ * pre.out.size()), 0.f);
    if (opt.need_input_delta) prefix_delta_.assign(prefix_out_.size(), 0.f);
  }
}

void Trainer::make_tail(const std::vector<int>& ranks, RunningStatsLog* log) {
  tail_ = std::make_unique<Tail>(ctx_, net_, params_, grad_.data(), cut_,
                                 TailOptions{.batch = n_,
                                             .in_cb = tiled_->out_cb(),
                                             .bn = opt_.bn,
                                             .seed = opt_.seed,
                                             .trace = &trace_,
                                             .grad_scales = grad_scales(),
                                             .stats_log = log,
                                             .blocks = filters() ? &comm_ : nullptr,
                                             .block_rank = block_ranks(opt_, ranks, comm_.size()),
                                             .staged_weights = opt_.low_memory || stage_weights()});
  if (filters()) truth_.assign(size_t(n_ * net_.truth_size()), 0.f);
}

Trainer::Memory Trainer::memory() const {
  Memory m;
  std::vector<Segment::MemoryUse> uses{tiled_->memory_use()};
  if (tail_) uses.push_back(tail_->memory_use());
  for (const Segment::MemoryUse& u : uses) {
    m.maps_mb += u.maps / 1048576.0;
    m.deltas_mb += u.deltas / 1048576.0;
    m.filters_mb += u.weight_copies / 1048576.0;
  }
  m.scratch_mb = ctx_.scratch_bytes() / 1048576.0;
  m.maps_mb += cut_map_.size() * 4 / 1048576.0;
  m.deltas_mb += cut_delta_.size() * 4 / 1048576.0;
  m.maps_mb += prefix_out_.size() * 4 / 1048576.0;  // a [crop] before the tiled part
  m.deltas_mb += prefix_delta_.size() * 4 / 1048576.0;
  // Weights, gradients and momentum: all of them, or the replicated ones and this process's parts.
  const double kept = sync_->kept_floats();
  m.kept_mb = kept * 4 / 1048576.0;
  m.filters_mb += m.kept_mb + ctx_.staging_bytes() / 1048576.0;
  return m;
}

std::vector<GradScale> Trainer::take_grad_scales() {
  if (grad_scales_.empty()) fail("take_grad_scales: the trainer was made without record_grad_scales");
  // Copied, then zeroed in place: the segments (and batch-norms) keep pointers into it.
  std::vector<GradScale> s = grad_scales_;
  std::fill(grad_scales_.begin(), grad_scales_.end(), GradScale{});
  return s;
}

Trainer::~Trainer() = default;

std::span<const float> Trainer::grad() const {
  if (micro_sync_) {
    micro_sync_->local_sum(summed_grad_);
    return summed_grad_;
  }
  const std::vector<float*> tiles = tiled_->tile_grads();
  if (shards_ || tiles.size() == 1) return {grad_.data(), grad_.size()};
  summed_grad_.assign(grad_.data(), grad_.data() + grad_.size());
  const int64_t E = tiled_->tile_grad_end();
  for (size_t k = 1; k < tiles.size(); ++k)
    for (int64_t i = 0; i < E; ++i) summed_grad_[size_t(i)] += tiles[k][i];
  return summed_grad_;
}

std::vector<KernelUse> Trainer::kernel_uses() const {
  std::vector<KernelUse> uses = tiled_->kernel_uses();
  if (tail_)
    for (KernelUse& u : tail_->kernel_uses()) uses.push_back(std::move(u));
  return uses;
}

void Trainer::set_momentum(std::span<const float> v) {
  if (v.size() != momentum_.size()) fail("internal: momentum of ", v.size(), " values for ", momentum_.size());
  std::copy(v.begin(), v.end(), momentum_.data());
}

void Trainer::save_layers(const LayerSaver& save) {
  if (filters()) tail_->gather_running_stats();
  for (const LayerSpec& l : net_.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = params_.slices[size_t(l.index)];
    const GradientSync::Range r{s.biases, s.weights + s.n_weights};
    sync_->gather_weights(params_.values.data(), r);
    if (root()) save.weights(l);
    hand_back_unused_weights(r);
    if (!save.momentum) continue;
    sync_->gather_to_root(momentum_.data(), r);
    if (root()) save.momentum(l, {momentum_.data() + r.first, size_t(r.second - r.first)});
    hand_back_unused_momentum(r);
  }
}

// The pages of r (rounded inwards) that this process's weights do not need.
void Trainer::hand_back_unused_weights(GradientSync::Range r) {
  for (const auto& [b, e] : unused_) {
    const int64_t lo = std::max(b, r.first), hi = std::min(e, r.second);
    if (lo < hi) ctx_.device.discard(params_.values.data() + lo, size_t(hi - lo));
  }
}

// ... and of the momentum: all but what this process updates.
void Trainer::hand_back_unused_momentum(GradientSync::Range r) {
  if (opt_.need_input_delta) return;
  int64_t at = r.first;
  for (const auto& [b, e] : sync_->updated()) {
    const int64_t lo = std::max(b, r.first), hi = std::min(e, r.second);
    if (lo >= hi) continue;
    if (lo > at) ctx_.device.discard(momentum_.data() + at, size_t(lo - at));
    at = std::max(at, hi);
  }
  if (at < r.second) ctx_.device.discard(momentum_.data() + at, size_t(r.second - at));
}

// Only this process's parts: the others' pages stay untouched (sharded: unmapped).
void Trainer::restore_momentum(std::span<const float> whole) {
  if (whole.size() != momentum_.size()) fail("internal: momentum of ", whole.size(), " values for ", momentum_.size());
  for (const auto& [b, e] : sync_->updated()) std::copy(whole.begin() + b, whole.begin() + e, momentum_.data() + b);
}

void Trainer::gather_weights() {
  sync_->gather_weights(params_.values.data(), {0, params_.size()});
  if (filters()) tail_->gather_running_stats();
}

void Trainer::reload_weights() {
  tiled_->refresh_weights();
  if (tail_) tail_->refresh_weights();
}

StepTimes Trainer::times() const {
  SegmentTimes s = tiled_->times;
  if (tail_) s += tail_->total_times();
  StepTimes t = times_;
  t.fwd += s.fwd + prefix_times_.fwd;  // a [crop] before the tiled part
  t.bwd += s.bwd + prefix_times_.bwd_data;
  t.halo += s.halo;
  t.io += s.io;
  t.weights += s.weights;
  t.halo_exchange += s.halo_exchange;
  t.halo_exchange_fwd += s.halo_exchange_fwd;
  t.halo_overlap += s.halo_overlap;
  return t;
}

std::vector<LayerTimes> Trainer::layer_times() const {
  std::vector<LayerTimes> v(net_.layers.size());
  if (first_ > 0) v[size_t(first_ - 1)] = prefix_times_;
  std::copy(tiled_->layer_times.begin(), tiled_->layer_times.end(), v.begin() + first_);
  if (tail_) tail_->collect_layer_times(v);
  return v;
}

void Trainer::reset_times() {
  times_ = {};
  tiled_->times = {};
  std::fill(tiled_->layer_times.begin(), tiled_->layer_times.end(), LayerTimes{});
  prefix_times_ = {};
  if (tail_) {
    tail_->reset_times();
    tail_->detector_loss = {};
  }
  replica_detector_loss_ = {};
}

void Trainer::forward(const float* input, bool training) {
  input_ = input;
  const float* x = input;
  if (prefix_) {  // the layer before the tiled part, whole, on the root
    OpTensors t;
    t.in = {input};
    t.out = prefix_out_.data();
    const double t0 = now_s();
    prefix_->forward(OpStep{.batch = n_, .training = training, .step = step_, .seed = opt_.seed}, t);
    prefix_times_.fwd += now_s() - t0;
    x = prefix_out_.data();
  }
  const Shape in = first_ > 0 ? net_.layers[size_t(first_ - 1)].out : net_.input();
  const TensorView input_view{const_cast<float*>(x), n_, in.c, 1, full_box(in.h, in.w)};
  tiled_->forward(input_view, training);
  const Shape at_cut = net_.layers[size_t(cut_ - 1)].out;
  TensorView cut_map{cut_map_.data(), n_, at_cut.c, tiled_->out_cb(), full_box(at_cut.h, at_cut.w)};
  tiled_->gather_output(tile_root() ? &cut_map : nullptr);
  if (!tail_) return;
  const double t0 = trace_.on() ? now_s() : 0;
  tail_->forward(tile_root() ? cut_map : TensorView{}, training, step_);
  trace_.end("tail forward", "tail", Lane::Compute, t0);
  out_ = tail_->output();
}

const float* Trainer::predict(const float* input) {
  if (opt_.replicas && !root()) return nullptr;  // data parallel: the root's copy alone
  forward(input, false);
  return root() ? out_ : nullptr;
}

double Trainer::loss_and_backward(const float* truth) {
  const Shape in = first_ > 0 ? net_.layers[size_t(first_ - 1)].out : net_.input();
  TensorView din{first_ > 0 ? prefix_delta_.data() : input_delta_.data(), n_, in.c, 1, full_box(in.h, in.w)};
  // Gradient buckets, in the batch's last micro-batch: each layer's gradients may leave as
  // soon as they are final.
  const int last = opt_.replicas ? first_micro_batch(comm_.rank() + 1) : net_.subdivisions;
  const bool buckets = sync_->overlaps() && micro_ + 1 == last;
  const int64_t tail_begin = tiled_->tile_grad_end(), n = int64_t(grad_.size());
  tiled_->grad_ready = nullptr;
  if (buckets)
    tiled_->grad_ready = [this](int l) {
      const ParamSlice& ps = params_.slices[size_t(l)];
      if (ps.biases >= 0) sync_->ready(ps.biases, ps.weights + ps.n_weights);
    };
  // Darknet counts a micro-batch's images before its forward ([region]'s early prior).
  const int64_t seen = params_.seen + int64_t(micro_ + 1) * n_;
  double loss = 0;
  if (filters()) {  // every process runs the tail: the root's truth to all
    if (tile_root()) std::copy_n(truth, truth_.size(), truth_.data());
    std::vector<int> counts(size_t(comm_.size()), 0), displs(counts.size(), 0);
    counts[kRoot] = int(truth_.size());
    comm_.all_gather_v(truth_.data(), counts, displs);
    const double t0 = trace_.on() ? now_s() : 0;
    TensorView none;
    loss = tail_->loss_and_backward(truth_.data(), step_, seen, tile_root() ? cut_delta_view() : none);
    trace_.end("tail loss and backward", "tail", Lane::Compute, t0);
  }
  if (!tile_root()) {  // the root sends each tile its delta
    if (buckets) sync_->ready(tail_begin, n);
    tiled_->backward(TensorView{}, &din);
    return 0;
  }
  const TensorView cut_delta = cut_delta_view();
  if (!filters()) {
    const double t0 = trace_.on() ? now_s() : 0;
    loss = tail_->loss_and_backward(truth, step_, seen, cut_delta);
    trace_.end("tail loss and backward", "tail", Lane::Compute, t0);
  }
  if (buckets) sync_->ready(tail_begin, n);
  if (prefix_ && opt_.need_input_delta) std::fill(prefix_delta_.begin(), prefix_delta_.end(), 0.f);
  tiled_->backward(cut_delta, &din);
  if (prefix_ && opt_.need_input_delta) {
    std::fill(input_delta_.begin(), input_delta_.end(), 0.f);
    OpTensors t;
    t.in = {input_};
    t.out = prefix_out_.data();
    t.dout = prefix_delta_.data();
    t.din = {input_delta_.data()};
    const double t0 = now_s();
    prefix_->backward(OpStep{.batch = n_, .training = true, .step = step_, .seed = opt_.seed}, t);
    prefix_times_.bwd_data += now_s() - t0;
  }
  return loss;
}

TensorView Trainer::cut_delta_view() {
  const Shape at_cut = net_.layers[size_t(cut_ - 1)].out;
  return TensorView{cut_delta_.data(), n_, at_cut.c, tiled_->out_cb(), full_box(at_cut.h, at_cut.w)};
}

double Trainer::forward_backward(const float* input, const float* truth) {
  if (opt_.replicas) return forward_backward_replica(input, truth);
  forward(input, true);
  const double loss = loss_and_backward(truth);
  ++micro_;
  return loss;
}

void Trainer::update() {
  const double w0 = now_s();
  float* g = grad_.data();
  sync_->reduce(g);
  if (opt_.replicas) fold_running_stats_in_order();
  const double w1 = now_s();
  times_.weights += w1 - w0;
  trace_.add("gradient sum", "weights", Lane::Comm, w0, w1);
  if (opt_.need_input_delta) {
    last_grad_.assign(g, g + grad_.size());
    sync_->gather(last_grad_.data(), {0, params_.size()});
  }
  const double u0 = now_s();
  params_.seen += net_.batch;  // Darknet counts this batch before asking for its rate
  const int64_t batch_num = params_.seen / net_.batch;
  const float lr = net_.rate_at(batch_num), m = net_.momentum, decay = net_.decay;
  const float B = float(net_.batch);
  float* w = params_.values.data();
  float* v = momentum_.data();
  // On this process's parts of [begin, end); false if a weight came out inf or NaN.
  auto sgd = [&](int64_t begin, int64_t end, float wd) {
    bool ok = true;
    for (const auto& [lo, hi] : sync_->updated()) {
      const int64_t b = std::max(begin, lo), e = std::min(end, hi);
      if (b < e) ok &= ctx_.device.sgd(w, v, g, b, e, {.rate = lr, .momentum = m, .decay = wd, .batch = B});
    }
    return ok;
  };
  for (const auto& l : net_.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& ps = params_.slices[l.index];
    const bool ok = sgd(ps.biases, ps.biases + ps.n_out, 0.f) &
                    (ps.scales < 0 || sgd(ps.scales, ps.scales + ps.n_out, 0.f)) &
                    sgd(ps.weights, ps.weights + ps.n_weights, decay);
    if (!ok) diverged("layer " + std::to_string(l.index) + " ([" + l.type_name() + "])'s parameters");
    for (const auto* stats : {&params_.rolling_mean[size_t(l.index)], &params_.rolling_var[size_t(l.index)]})
      if (!std::all_of(stats->begin(), stats->end(), [](float x) { return std::isfinite(x); }))
        diverged("layer " + std::to_string(l.index) + "'s batch-norm running statistics");
  }
  sync_->zero(g);
  const double a0 = now_s();
  trace_.add("SGD", "update", Lane::Compute, u0, a0);
  sync_->share_weights(w);
  const double gather_s = now_s() - a0;
  times_.weights += gather_s;
  trace_.add("weight all-gather", "weights", Lane::Comm, a0, a0 + gather_s);
  ++step_;
  micro_ = 0;
  const double r0 = now_s();
  reload_weights();
  const double r1 = now_s();
  times_.reload += r1 - r0;
  trace_.add("reload weights", "update", Lane::Compute, r0, r1);
  times_.update += now_s() - u0 - gather_s;
  if (opt_.need_input_delta) {  // verify compares whole weights and momentum
    gather_weights();
    sync_->gather(momentum_.data(), {0, params_.size()});
  }
}

void Trainer::diverged(const std::string& what) const {
  fail("training diverged at step ", step_ + 1, ": ", what,
       " became inf or NaN; nothing of this step was saved (earlier checkpoints and weights files are kept). "
       "A lower learning_rate (or a longer burn_in) in the cfg usually helps");
}

double Trainer::train_step(const float* input, const float* truth) {
  if (opt_.replicas) return train_step_replicas(input, truth);
  const double t0 = now_s();
  const int64_t in_size = net_.input().size() * n_, out_size = net_.truth_size() * n_;
  double loss = 0;
  for (int sub = 0; sub < net_.subdivisions; ++sub)
    loss +=
        root() ? forward_backward(input + sub * in_size, truth + sub * out_size) : forward_backward(nullptr, nullptr);
  if (root() && !std::isfinite(loss)) diverged("the loss (" + std::to_string(loss) + ")");
  update();
  const double t1 = now_s();
  times_.total += t1 - t0;
  trace_.add("step", "step", Lane::Compute, t0, t1);
  return loss;
}

}  // namespace tt
