#include "engine/tail.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {
// --tail filters: which layers after the cut run as filter blocks (index l - cut): the
// ungrouped convolutions that no run of whole-map layers takes. Tail builds its blocks,
// and tail_block_ranges() names their parameters, from this one list.
std::vector<bool> block_layers(const NetSpec& net, int cut, const TailLayout& t) {
  std::vector<bool> split(net.layers.size() - size_t(cut));
  for (int l = cut; l < int(net.layers.size()); ++l)
    split[size_t(l - cut)] = splits_into_filter_blocks(net.layers[size_t(l)]);
  for (const auto& [first, last] : t.runs)
    for (int l = first; l < last; ++l) split[size_t(l - cut)] = false;
  return split;
}
}  // namespace

struct Tail::Run {
  int first, last;
  std::unique_ptr<Segment> seg;
};

// A convolution split into filter blocks. out_stage holds the blocks' outputs in block
// order, so each process's blocks (consecutive) are one part of an all-gather. In backward
// each process sums one slice of the input delta over all blocks, in block order, from the
// blocks' parts of that slice (parts: this process's blocks' whole parts; slices: every
// filled block's part of this process's slice), and the sums are all-gathered (folded).
struct Tail::Blocks {
  std::vector<std::pair<int, int>> bounds;                    // per block: its output channels
  std::vector<std::unique_ptr<BlockConv>> mine;               // per block: this process's, else null
  std::vector<int64_t> out_at, part_at;                       // per block: where it is in out_stage, parts (-1: none)
  std::vector<int> out_counts, out_displs;                    // per process: its blocks' outputs in out_stage
  std::vector<int> slice_counts, slice_displs;                // ... its slice of the input delta
  std::vector<int> stat_counts, stat_displs;                  // ... its blocks' channels (running statistics)
  std::vector<float> out_stage, parts, slices, folded, dout;  // dout: one block's output delta
};

TailLayout plan_tail(const NetSpec& net, int cut, int batch, bool filters) {
  const int L = int(net.layers.size());
  TailLayout t;
  t.out.assign(size_t(L - cut + 1), 0);
  t.saved.assign(t.out.size(), 0);
  t.out[0] = batch * net.layers[size_t(cut - 1)].out.size();
  // A run: spatial layers that read the one before, up to one whose output a later one
  // reads (a shortcut or a route runs as an op here).
  auto chained = [&](const LayerSpec& x) {
    return x.spatial() && x.inputs.size() <= 1 && !(filters && splits_into_filter_blocks(x));
  };
  for (int l = cut; l < L;) {
    const LayerSpec& s = net.layers[size_t(l)];
    if (chained(s)) {
      int e = l + 1;
      while (e < L && chained(net.layers[size_t(e)]) && net.far_reader(e - 1) < 0) ++e;
      t.runs.push_back({l, e});
      t.out[size_t(e - cut)] = batch * net.layers[size_t(e - 1)].out.size();
      t.scratch = std::max(t.scratch, batch * s.in.size());  // the run's input delta
      l = e;
      continue;
    }
    t.out[size_t(l - cut + 1)] = batch * s.out.size();
    if (filters && splits_into_filter_blocks(s)) {
      ++l;
      continue;
    }
    const std::unique_ptr<Op> op = make_op(net, s);
    t.saved[size_t(l - cut + 1)] = batch * op->saved_floats();
    t.scratch = std::max(t.scratch, batch * op->scratch_floats());
    ++l;
  }
  return t;
}

double TailLayout::maps_bytes() const {
  double b = 0;
  for (size_t i = 0; i < out.size(); ++i) b += 4. * (out[i] + saved[i]);
  return b;
}

double TailLayout::deltas_bytes() const {
  double b = 4. * scratch;
  for (int64_t v : out) b += 4. * v;
  return b;
}

Tail::Tail(DnnlContext& ctx, const NetSpec& net, Params& params, float* grad, int cut, const TailOptions& opt)
    : ctx_(ctx), net_(net), params_(params), grad_(grad), cut_(cut), opt_(opt) {
  const int L = int(net.layers.size());
  for (const LayerSpec& s : net.layers)
    for (int r : net.inputs_of(s.index))
      if (net.layers[size_t(r)].box_loss())
        fail(net.path, ":", s.line, ": layer ", s.index, " reads the output of [", net.layers[size_t(r)].type_name(),
             "] layer ", r, ", which is a loss");
  const TailLayout t = plan_tail(net, cut, opt.batch, opt.blocks != nullptr);
  if (opt.blocks && opt.grad_scales && opt.blocks->size() > 1)
    fail("internal: filter blocks' gradient scales are measured on one process only");
  run_of_.assign(size_t(L - cut), -1);
  for (auto [first, last] : t.runs) {
    auto run = std::make_unique<Run>();
    run->first = first;
    run->last = last;
    SegmentOptions so = whole_map_options(opt.batch, ctx.config.block, opt.bn, opt.trace);
    so.grad_scales = opt.grad_scales;
    so.stats_log = opt.stats_log;
    so.staged_weights = opt.staged_weights;
    run->seg = std::make_unique<Segment>(ctx, net, params, grad, make_plan(net, 1, 1, first, last, {first}), comm_, so);
    run->seg->measure_pointwise_scales();
    for (int k = first; k < last; ++k) run_of_[size_t(k - cut)] = int(runs_.size());
    runs_.push_back(std::move(run));
  }
  ops_.resize(size_t(L - cut));
  blocks_.resize(size_t(L - cut));
  const std::vector<bool> split = opt.blocks ? block_layers(net, cut, t) : std::vector<bool>(size_t(L - cut));
  for (int l = cut; l < L; ++l) {
    if (run_of_[size_t(l - cut)] >= 0) continue;
    if (split[size_t(l - cut)])
      blocks_[size_t(l - cut)] = make_blocks(l);
    else
      ops_[size_t(l - cut)] = make_op(net, net.layers[size_t(l)]);
  }
  for (size_t i = 0; i < t.out.size(); ++i) {
    out_.emplace_back(size_t(t.out[i]), 0.f);
    delta_.emplace_back(size_t(t.out[i]), 0.f);
    saved_.emplace_back(size_t(t.saved[i]), 0.f);
  }
  scratch_.assign(size_t(t.scratch), 0.f);
  layer_times.assign(size_t(L - cut), LayerTimes{});
}

Tail::~Tail() = default;

std::unique_ptr<Tail::Blocks> Tail::make_blocks(int l) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int P = opt_.blocks->size(), me = opt_.blocks->rank(), n = opt_.batch;
  const std::vector<int>& owner = opt_.block_rank;
  if (!std::is_sorted(owner.begin(), owner.end()) || owner.back() >= P)
    fail("internal: filter blocks must go to the processes in order");
  auto B = std::make_unique<Blocks>();
  B->bounds = filter_blocks(s.out.c, int(owner.size()));
  B->mine.resize(B->bounds.size());
  for (auto* v : {&B->out_counts, &B->out_displs, &B->slice_counts, &B->slice_displs, &B->stat_counts, &B->stat_displs})
    v->assign(size_t(P), 0);
  const int64_t cells = int64_t(s.out.h) * s.out.w, in_floats = n * s.in.size();
  if (in_floats > INT_MAX) fail("layer ", l, ": the map is too large for one message (a smaller --size or batch)");
  int64_t out_end = 0, parts_end = 0, widest = 0, filled = 0;
  for (size_t b = 0; b < B->bounds.size(); ++b) {
    const auto [o0, o1] = B->bounds[b];
    const int r = owner[b];
    B->out_at.push_back(o0 < o1 ? out_end : -1);
    B->part_at.push_back(o0 < o1 && r == me ? parts_end : -1);
    if (o0 == o1) continue;
    if (r == me) {
      B->mine[b] = std::make_unique<BlockConv>(ctx_, net_, params_, grad_, l, o0, o1,
                                               BlockConv::Options{.batch = n,
                                                                  .bn = opt_.bn,
                                                                  .trace = opt_.trace,
                                                                  .staged_weights = opt_.staged_weights,
                                                                  .measure_scales = opt_.grad_scales != nullptr});
      parts_end += in_floats;
    }
    const int64_t out_floats = n * (o1 - o0) * cells;
    if (out_end + out_floats > INT_MAX)
      fail("layer ", l, ": the tail's maps are too large for one message per process (a smaller --size or batch)");
    B->out_counts[size_t(r)] += int(out_floats);
    B->stat_counts[size_t(r)] += o1 - o0;
    out_end += out_floats;
    widest = std::max(widest, out_floats);
    ++filled;
  }
  for (int r = 0; r < P; ++r) {
    B->slice_displs[size_t(r)] = int(in_floats * r / P);
    B->slice_counts[size_t(r)] = int(in_floats * (r + 1) / P) - B->slice_displs[size_t(r)];
    if (r == 0) continue;
    B->out_displs[size_t(r)] = B->out_displs[size_t(r - 1)] + B->out_counts[size_t(r - 1)];
    B->stat_displs[size_t(r)] = B->stat_displs[size_t(r - 1)] + B->stat_counts[size_t(r - 1)];
  }
  B->out_stage.assign(size_t(out_end), 0.f);
  B->parts.assign(size_t(parts_end), 0.f);
  B->slices.assign(size_t(filled * B->slice_counts[size_t(me)]), 0.f);
  B->folded.assign(size_t(in_floats), 0.f);
  B->dout.assign(size_t(widest), 0.f);
  return B;
}

void Tail::refresh_weights() {
  for (auto& r : runs_) r->seg->refresh_weights();
  for (auto& B : blocks_)
    if (B)
      for (auto& c : B->mine)
        if (c) c->load(params_);
}

void Tail::gather_running_stats() {
  if (!opt_.blocks) return;
  for (int l = cut_; l < int(net_.layers.size()); ++l) {
    const Blocks* B = blocks_[size_t(l - cut_)].get();
    if (!B || !net_.layers[size_t(l)].batch_normalize()) continue;
    for (auto* stats : {&params_.rolling_mean[size_t(l)], &params_.rolling_var[size_t(l)]}) {
      std::vector<float> all;  // the blocks' channels in block order: the layer's own order
      for (size_t b = 0; b < B->bounds.size(); ++b)
        all.insert(all.end(), stats->begin() + B->bounds[b].first, stats->begin() + B->bounds[b].second);
      opt_.blocks->all_gather_v(all.data(), B->stat_counts, B->stat_displs);
      std::copy(all.begin(), all.end(), stats->begin());
    }
  }
}

bool tail_has_filter_blocks(const NetSpec& net, int cut) {
  const std::vector<bool> split = block_layers(net, cut, plan_tail(net, cut, 1, true));
  return std::find(split.begin(), split.end(), true) != split.end();
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> tail_block_ranges(const NetSpec& net, const Params& p, int cut,
                                                                        const std::vector<int>& block_rank,
                                                                        int processes) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> r(static_cast<size_t>(processes));
  const std::vector<bool> split = block_layers(net, cut, plan_tail(net, cut, 1, true));
  for (int l = cut; l < int(net.layers.size()); ++l) {
    const LayerSpec& s = net.layers[size_t(l)];
    if (!split[size_t(l - cut)]) continue;
    const auto bounds = filter_blocks(s.out.c, int(block_rank.size()));
    for (size_t b = 0; b < bounds.size(); ++b)
      for (const auto& range : filter_block_ranges(p, s, bounds[b].first, bounds[b].second))
        if (range.first < range.second) r[size_t(block_rank[b])].push_back(range);
  }
  return r;
}

template <class F>
void Tail::each_segment(F f) const {
  for (const auto& r : runs_) f(*r->seg, r->first, 0);
  for (const auto& B : blocks_)
    if (B)
      for (const auto& c : B->mine)
        if (c) f(c->segment(), c->layer(), c->layer());
}

std::vector<KernelUse> Tail::kernel_uses() const {
  std::vector<KernelUse> uses;
  each_segment([&](Segment& seg, int, int offset) {
    for (KernelUse& u : seg.kernel_uses()) {
      u.layer += offset;
      uses.push_back(std::move(u));
    }
  });
  return uses;
}

SegmentTimes Tail::total_times() const {
  SegmentTimes t = times;
  each_segment([&](Segment& seg, int, int) { t += seg.times; });
  return t;
}

void Tail::collect_layer_times(std::vector<LayerTimes>& v) const {
  for (size_t i = 0; i < layer_times.size(); ++i) v[size_t(cut_) + i] = layer_times[i];
  each_segment([&](Segment& seg, int first, int) {
    for (size_t i = 0; i < seg.layer_times.size(); ++i) v[size_t(first) + i] += seg.layer_times[i];
  });
}

void Tail::reset_times() {
  times = {};
  std::fill(layer_times.begin(), layer_times.end(), LayerTimes{});
  each_segment([&](Segment& seg, int, int) {
    seg.times = {};
    std::fill(seg.layer_times.begin(), seg.layer_times.end(), LayerTimes{});
  });
}

Segment::MemoryUse Tail::memory_use() const {
  Segment::MemoryUse m;
  each_segment([&](Segment& seg, int, int) {
    const Segment::MemoryUse u = seg.memory_use();
    m.maps += u.maps;
    m.deltas += u.deltas;
    m.weight_copies += u.weight_copies;
  });
  for (const auto& B : blocks_)
    if (B) {
      m.maps += B->out_stage.size() * 4;
      m.deltas += (B->parts.size() + B->slices.size() + B->folded.size() + B->dout.size()) * 4;
    }
  for (size_t i = 0; i < out_.size(); ++i) {
    m.maps += (out_[i].size() + saved_[i].size()) * 4;
    m.deltas += delta_[i].size() * 4;
  }
  m.deltas += scratch_.size() * 4;
  return m;
}

static TensorView plain_view(std::vector<float>& v, int n, const Shape& s) {
  return TensorView{v.data(), n, s.c, 1, full_box(s.h, s.w)};
}

OpStep Tail::op_step(bool training, int64_t step) const {
  return OpStep{.batch = opt_.batch, .training = training, .step = step, .seed = opt_.seed};
}

OpTensors Tail::tensors(int l) {
  const LayerSpec& s = net_.layers[size_t(l)];
  OpTensors t;
  for (int r : net_.inputs_of(l)) {
    t.in.push_back(out_[slot(r)].data());
    t.din.push_back(delta_[slot(r)].data());
  }
  t.out = out_[slot(l)].data();
  t.dout = delta_[slot(l)].data();
  t.saved = saved_[slot(l)].data();
  t.scratch = scratch_.data();
  if (s.has_params()) {
    const ParamSlice& ps = params_.slices[size_t(l)];
    t.weights = params_.values.data() + ps.weights;
    t.biases = params_.values.data() + ps.biases;
    t.grad_weights = grad_ + ps.weights;
    t.grad_biases = grad_ + ps.biases;
  }
  return t;
}

void Tail::forward(const TensorView& cut_map, bool training, int64_t step) {
  const double t0 = now_s();
  const Shape at_cut = net_.layers[size_t(cut_ - 1)].out;
  if (cut_map.data) ctx_.device.copy_region(cut_map, plain_view(out_[0], opt_.batch, at_cut), cut_map.box);
  const double t1 = now_s();
  times.io += t1 - t0;
  if (opt_.trace) opt_.trace->add("copy of the cut map", "io", Lane::Compute, t0, t1);
  if (opt_.blocks && opt_.blocks->size() > 1) {  // every process runs the tail: the root's map to all
    std::vector<int> counts(size_t(opt_.blocks->size()), 0), displs(counts.size(), 0);
    counts[kRoot] = int(out_[0].size());
    opt_.blocks->all_gather_v(out_[0].data(), counts, displs);
    const double t2 = now_s();
    times.halo += t2 - t1;
    if (opt_.trace) opt_.trace->add("broadcast of the cut map", "halo", Lane::Comm, t1, t2);
  }
  for (int l = cut_; l < int(net_.layers.size()); ++l) forward_layer(l, training, step);
}

void Tail::forward_layer(int l, bool training, int64_t step) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int n = opt_.batch;
  if (blocks_[size_t(l - cut_)]) return forward_blocks(l, training);
  const int run = run_of_[size_t(l - cut_)];
  if (run >= 0) {  // the whole run at its first layer
    Run& r = *runs_[size_t(run)];
    if (l != r.first) return;
    const LayerSpec& last = net_.layers[size_t(r.last - 1)];
    r.seg->forward(plain_view(out_[slot(l - 1)], n, s.in), training);
    TensorView out = plain_view(out_[slot(r.last - 1)], n, last.out);
    r.seg->gather_output(&out);
    return;
  }
  const double t0 = now_s();
  ops_[size_t(l - cut_)]->forward(op_step(training, step), tensors(l));
  const double t1 = now_s(), dt = t1 - t0;
  layer_times[size_t(l - cut_)].fwd += dt;
  times.fwd += dt;
  if (opt_.trace && opt_.trace->on()) opt_.trace->add(s.type_name(), "forward", Lane::Compute, t0, t1, l);
}

double Tail::loss_and_backward(const float* truth, int64_t step, int64_t seen, const TensorView& cut_delta) {
  const double t0 = now_s();
  const int n = opt_.batch;
  const int L = int(net_.layers.size());
  for (auto& d : delta_) std::fill(d.begin(), d.end(), 0.f);
  double loss = 0;
  for (int l = cut_; l < L; ++l) {
    const Op* op = ops_[size_t(l - cut_)].get();
    const bool last = l == L - 1;
    if (op && op->is_loss(last))
      loss += op->loss(op_step(true, step), tensors(l), LossArgs{truth, net_.width, net_.height, seen, last},
                       &detector_loss);
  }
  const double t1 = now_s();
  times.bwd += t1 - t0;
  if (opt_.trace) opt_.trace->add("loss", "backward", Lane::Compute, t0, t1);
  for (int l = L - 1; l >= cut_; --l) backward_layer(l, step);
  const double c0 = now_s();
  if (cut_delta.data)
    ctx_.device.copy_region(plain_view(delta_[0], n, net_.layers[size_t(cut_ - 1)].out), cut_delta, cut_delta.box);
  const double c1 = now_s();
  times.io += c1 - c0;
  if (opt_.trace) opt_.trace->add("copy of the cut delta", "io", Lane::Compute, c0, c1);
  return loss;
}

void Tail::backward_layer(int l, int64_t step) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int n = opt_.batch;
  if (blocks_[size_t(l - cut_)]) return backward_blocks(l);
  const int run = run_of_[size_t(l - cut_)];
  if (run >= 0) {  // the whole run at its last layer; its input delta is added to the input's
    Run& r = *runs_[size_t(run)];
    if (l != r.last - 1) return;
    const LayerSpec& first = net_.layers[size_t(r.first)];
    TensorView in_delta = plain_view(scratch_, n, first.in);
    r.seg->backward(plain_view(delta_[slot(l)], n, s.out), &in_delta);
    const double t0 = now_s();
    float* d = delta_[slot(r.first - 1)].data();
    const int64_t m = n * first.in.size();
    for (int64_t i = 0; i < m; ++i) d[i] += scratch_[size_t(i)];
    const double t1 = now_s();
    times.io += t1 - t0;
    if (opt_.trace) opt_.trace->add("add of the input delta", "io", Lane::Compute, t0, t1);
    return;
  }
  const double t0 = now_s();
  const Op& op = *ops_[size_t(l - cut_)];
  op.backward(op_step(true, step), tensors(l));
  const double t1 = now_s(), dt = t1 - t0;
  if (opt_.grad_scales && s.has_params()) {
    GradScale& g = (*opt_.grad_scales)[size_t(l)];
    op.add_grad_scales(op_step(true, step), tensors(l), g.weights, g.biases);
  }
  layer_times[size_t(l - cut_)].bwd_data += dt;
  times.bwd += dt;
  if (opt_.trace && opt_.trace->on()) opt_.trace->add(s.type_name(), "backward", Lane::Compute, t0, t1, l);
}

// Each block of this process on the whole input, then every block's output to every process.
void Tail::forward_blocks(int l, bool training) {
  const LayerSpec& s = net_.layers[size_t(l)];
  Blocks& B = *blocks_[size_t(l - cut_)];
  const int n = opt_.batch;
  const int64_t cells = int64_t(s.out.h) * s.out.w;
  const TensorView in = plain_view(out_[slot(l - 1)], n, s.in);
  for (size_t b = 0; b < B.mine.size(); ++b)
    if (B.mine[b]) B.mine[b]->forward(in, training, B.out_stage.data() + B.out_at[b], params_);
  const double t0 = now_s();
  opt_.blocks->all_gather_v(B.out_stage.data(), B.out_counts, B.out_displs);
  const double t1 = now_s();
  float* out = out_[slot(l)].data();
  for (size_t b = 0; b < B.bounds.size(); ++b) {
    const auto [o0, o1] = B.bounds[b];
    for (int i = 0; i < n && o0 < o1; ++i)
      std::copy_n(B.out_stage.data() + B.out_at[b] + int64_t(i) * (o1 - o0) * cells, (o1 - o0) * cells,
                  out + (int64_t(i) * s.out.c + o0) * cells);
  }
  const double t2 = now_s();
  times.halo += t1 - t0;
  times.io += t2 - t1;
  if (opt_.trace && opt_.trace->on()) opt_.trace->add("filter blocks' outputs", "halo", Lane::Comm, t0, t1, l);
}

// Each block of this process on its channels of the output delta; then each process adds
// up its slice of the input delta over every block in block order (the parts it lacks
// come from the blocks' processes), and the slices go to every process.
void Tail::backward_blocks(int l) {
  const LayerSpec& s = net_.layers[size_t(l)];
  Blocks& B = *blocks_[size_t(l - cut_)];
  Comm& comm = *opt_.blocks;
  const int n = opt_.batch, me = comm.rank();
  const int64_t cells = int64_t(s.out.h) * s.out.w;
  const float* d = delta_[slot(l)].data();
  for (size_t b = 0; b < B.mine.size(); ++b) {
    if (!B.mine[b]) continue;
    const auto [o0, o1] = B.bounds[b];
    for (int i = 0; i < n; ++i)
      std::copy_n(d + (int64_t(i) * s.out.c + o0) * cells, (o1 - o0) * cells,
                  B.dout.data() + int64_t(i) * (o1 - o0) * cells);
    B.mine[b]->backward(B.dout.data(), B.parts.data() + B.part_at[b]);
  }
  if (opt_.grad_scales) {  // a 2-norm over the entries: the blocks' (disjoint channels) in squares
    GradScale sq, &to = (*opt_.grad_scales)[size_t(l)];
    for (auto& c : B.mine) {
      const GradScale g = c ? c->take_scale() : GradScale{};
      sq.weights += g.weights * g.weights, sq.biases += g.biases * g.biases, sq.scales += g.scales * g.scales;
    }
    to.weights += std::sqrt(sq.weights), to.biases += std::sqrt(sq.biases), to.scales += std::sqrt(sq.scales);
  }
  const double t0 = now_s();
  const int64_t s0 = B.slice_displs[size_t(me)], sn = B.slice_counts[size_t(me)];
  // Messages between two processes pair up in block order (MPI keeps the order of one tag).
  std::vector<const float*> parts;
  for (size_t b = 0; b < B.bounds.size(); ++b) {
    if (B.out_at[b] < 0) continue;
    float* dst = B.slices.data() + int64_t(parts.size()) * sn;
    if (B.mine[b]) {
      parts.push_back(B.parts.data() + B.part_at[b] + s0);
      for (int q = 0; q < comm.size(); ++q)
        if (q != me && B.slice_counts[size_t(q)] > 0)
          comm.isend_floats(B.parts.data() + B.part_at[b] + B.slice_displs[size_t(q)],
                            size_t(B.slice_counts[size_t(q)]), q, 0);
    } else {
      parts.push_back(dst);
      if (sn > 0) comm.irecv_floats(dst, size_t(sn), opt_.block_rank[b], 0);
    }
  }
  comm.wait_all();
  const double t1 = now_s();
  for (int64_t i = 0; i < sn; ++i) {
    float sum = parts[0][i];
    for (size_t k = 1; k < parts.size(); ++k) sum += parts[k][i];
    B.folded[size_t(s0 + i)] = sum;
  }
  const double t2 = now_s();
  comm.all_gather_v(B.folded.data(), B.slice_counts, B.slice_displs);
  const double t3 = now_s();
  float* din = delta_[slot(l - 1)].data();
  for (size_t i = 0; i < B.folded.size(); ++i) din[i] += B.folded[i];
  const double t4 = now_s();
  times.halo += (t1 - t0) + (t3 - t2);
  times.io += (t2 - t1) + (t4 - t3);
  if (opt_.trace && opt_.trace->on()) {
    opt_.trace->add("filter blocks' input-delta parts", "halo", Lane::Comm, t0, t1, l);
    opt_.trace->add("input-delta sums", "halo", Lane::Comm, t2, t3, l);
  }
}

}  // namespace tt
