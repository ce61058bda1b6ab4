#include "engine/tail.hpp"

#include <algorithm>
#include <cstring>

#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

struct Tail::Run {
  int first, last;
  std::unique_ptr<Segment> seg;
};

TailLayout plan_tail(const NetSpec& net, int cut, int batch) {
  const int L = int(net.layers.size());
  TailLayout t;
  t.out.assign(size_t(L - cut + 1), 0);
  t.saved.assign(t.out.size(), 0);
  t.out[0] = batch * net.layers[size_t(cut - 1)].out.size();
  // A run: spatial layers that read the one before, up to one whose output a later one
  // reads (a shortcut or a route runs as an op here).
  auto chained = [](const LayerSpec& x) { return x.spatial() && x.inputs.size() <= 1; };
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
    const std::unique_ptr<Op> op = make_op(net, s);
    t.out[size_t(l - cut + 1)] = batch * s.out.size();
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
  const TailLayout t = plan_tail(net, cut, opt.batch);
  run_of_.assign(size_t(L - cut), -1);
  for (auto [first, last] : t.runs) {
    auto run = std::make_unique<Run>();
    run->first = first;
    run->last = last;
    run->seg = std::make_unique<Segment>(ctx, net, params, grad, make_plan(net, 1, 1, first, last, {first}), comm_,
                                         SegmentOptions{.batch = opt.batch,
                                                        .in_cb = ctx.config.block,
                                                        .bn = opt.bn,
                                                        .need_input_delta = true,
                                                        .tile_rank = {0},
                                                        .shards = nullptr,
                                                        .recompute = false,
                                                        .far = {},
                                                        .tiled = false,
                                                        .trace = opt.trace,
                                                        .grad_scales = opt.grad_scales,
                                                        .stats_log = opt.stats_log});
    run->seg->measure_pointwise_scales();
    for (int k = first; k < last; ++k) run_of_[size_t(k - cut)] = int(runs_.size());
    runs_.push_back(std::move(run));
  }
  ops_.resize(size_t(L - cut));
  for (int l = cut; l < L; ++l)
    if (run_of_[size_t(l - cut)] < 0) ops_[size_t(l - cut)] = make_op(net, net.layers[size_t(l)]);
  for (size_t i = 0; i < t.out.size(); ++i) {
    out_.emplace_back(size_t(t.out[i]), 0.f);
    delta_.emplace_back(size_t(t.out[i]), 0.f);
    saved_.emplace_back(size_t(t.saved[i]), 0.f);
  }
  scratch_.assign(size_t(t.scratch), 0.f);
  layer_times.assign(size_t(L - cut), LayerTimes{});
}

Tail::~Tail() = default;

void Tail::refresh_weights() {
  for (auto& r : runs_) r->seg->refresh_weights();
}

std::vector<KernelUse> Tail::kernel_uses() const {
  std::vector<KernelUse> uses;
  for (const auto& r : runs_)
    for (KernelUse& u : r->seg->kernel_uses()) uses.push_back(std::move(u));
  return uses;
}

SegmentTimes Tail::total_times() const {
  SegmentTimes t = times;
  for (const auto& r : runs_) t += r->seg->times;
  return t;
}

void Tail::collect_layer_times(std::vector<LayerTimes>& v) const {
  for (size_t i = 0; i < layer_times.size(); ++i) v[size_t(cut_) + i] = layer_times[i];
  for (const auto& r : runs_) std::copy(r->seg->layer_times.begin(), r->seg->layer_times.end(), v.begin() + r->first);
}

void Tail::reset_times() {
  times = {};
  std::fill(layer_times.begin(), layer_times.end(), LayerTimes{});
  for (auto& r : runs_) {
    r->seg->times = {};
    std::fill(r->seg->layer_times.begin(), r->seg->layer_times.end(), LayerTimes{});
  }
}

Segment::MemoryUse Tail::memory_use() const {
  Segment::MemoryUse m;
  for (const auto& r : runs_) {
    const Segment::MemoryUse u = r->seg->memory_use();
    m.maps += u.maps;
    m.deltas += u.deltas;
    m.weight_copies += u.weight_copies;
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
  ctx_.device.copy_region(cut_map, plain_view(out_[0], opt_.batch, at_cut), cut_map.box);
  const double t1 = now_s();
  times.io += t1 - t0;
  if (opt_.trace) opt_.trace->add("copy of the cut map", "io", Lane::Compute, t0, t1);
  for (int l = cut_; l < int(net_.layers.size()); ++l) forward_layer(l, training, step);
}

void Tail::forward_layer(int l, bool training, int64_t step) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int n = opt_.batch;
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
  ctx_.device.copy_region(plain_view(delta_[0], n, net_.layers[size_t(cut_ - 1)].out), cut_delta, cut_delta.box);
  const double c1 = now_s();
  times.io += c1 - c0;
  if (opt_.trace) opt_.trace->add("copy of the cut delta", "io", Lane::Compute, c0, c1);
  return loss;
}

void Tail::backward_layer(int l, int64_t step) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int n = opt_.batch;
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

}  // namespace tt
