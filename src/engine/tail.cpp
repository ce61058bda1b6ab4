#include "engine/tail.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "layers/dense.hpp"
#include "layers/reshape_ops.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

struct Tail::Run {
  int first, last;
  std::unique_ptr<Segment> seg;
};

TailLayout plan_tail(const NetSpec& net, int cut, int batch) {
  const int L = int(net.layers.size());
  std::set<int> routed;  // layers whose output a [route] reads
  for (const LayerSpec& s : net.layers)
    for (int r : s.route) routed.insert(r);
  TailLayout t;
  t.out.assign(size_t(L - cut + 1), 0);
  t.pre.assign(t.out.size(), 0);
  t.out[0] = batch * net.layers[size_t(cut - 1)].out.size();
  for (int l = cut; l < L;) {
    const LayerSpec& s = net.layers[size_t(l)];
    t.scratch = std::max(t.scratch, batch * s.in.size());
    if (s.spatial()) {  // a run: up to the next layer that is not spatial or whose output a route reads
      int e = l + 1;
      while (e < L && net.layers[size_t(e)].spatial() && !routed.count(e - 1)) ++e;
      t.runs.push_back({l, e});
      t.out[size_t(e - cut)] = batch * net.layers[size_t(e - 1)].out.size();
      l = e;
      continue;
    }
    t.out[size_t(l - cut + 1)] = batch * s.out.size();
    if (s.type == LayerType::Connected) t.pre[size_t(l - cut + 1)] = t.out[size_t(l - cut + 1)];
    ++l;
  }
  return t;
}

double TailLayout::maps_bytes() const {
  double b = 0;
  for (size_t i = 0; i < out.size(); ++i) b += 4. * (out[i] + pre[i]);
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
      if (net.layers[size_t(r)].detector())
        fail(net.path, ":", s.line, ": layer ", s.index, " reads the output of [",
             layer_type_name(net.layers[size_t(r)].type), "] layer ", r, ", which is a loss");
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
                                                        .grad_scales = opt.grad_scales});
    for (int k = first; k < last; ++k) run_of_[size_t(k - cut)] = int(runs_.size());
    runs_.push_back(std::move(run));
  }
  for (size_t i = 0; i < t.out.size(); ++i) {
    out_.emplace_back(size_t(t.out[i]), 0.f);
    delta_.emplace_back(size_t(t.out[i]), 0.f);
    pre_.emplace_back(size_t(t.pre[i]), 0.f);
  }
  run_delta_in_.assign(size_t(t.scratch), 0.f);
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
    m.maps += (out_[i].size() + pre_[i].size()) * 4;
    m.deltas += delta_[i].size() * 4;
  }
  m.deltas += run_delta_in_.size() * 4;
  return m;
}

static TensorView plain_view(std::vector<float>& v, int n, const Shape& s) {
  return TensorView{v.data(), n, s.c, 1, full_box(s.h, s.w)};
}

void Tail::forward(const TensorView& cut_map, bool training, int64_t step) {
  const double t0 = now_s();
  const Shape at_cut = net_.layers[size_t(cut_ - 1)].out;
  copy_region(cut_map, plain_view(out_[0], opt_.batch, at_cut), cut_map.box);
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
  const float* x = out_[slot(l - 1)].data();
  float* y = out_[slot(l)].data();
  switch (s.type) {
    case LayerType::Route: {
      std::vector<RoutePart> parts;
      for (int r : s.route) parts.push_back({out_[slot(r)].data(), nullptr, net_.layers[size_t(r)].out.size()});
      route_forward(parts, y, n);
      break;
    }
    case LayerType::Reorg:
      reorg_forward(s, x, y, n);
      break;
    case LayerType::Upsample:
      upsample_forward(s, x, y, n);
      break;
    case LayerType::Region:
    case LayerType::Yolo:
      detector_forward(s, x, y, n);
      break;
    case LayerType::AvgPool:
      avgpool_forward(x, y, n, s.in.c, s.in.h * s.in.w);
      break;
    case LayerType::Connected: {
      const ParamSlice& ps = params_.slices[size_t(l)];
      connected_forward(x, params_.values.data() + ps.weights, params_.values.data() + ps.biases, pre_[slot(l)].data(),
                        y, n, int(s.in.size()), s.outputs, s.act);
      break;
    }
    case LayerType::Softmax:
      softmax_forward(x, y, n, int(s.in.size()));
      break;
    case LayerType::Dropout:
      if (training)
        dropout_apply(x, y, s.in.size(), n, s.probability, opt_.seed + uint64_t(l), step);
      else
        std::copy_n(x, size_t(n * s.in.size()), y);
      break;
    case LayerType::Cost:  // its output is its input
      std::copy_n(x, size_t(n * s.in.size()), y);
      break;
    case LayerType::Conv:
    case LayerType::MaxPool:
      fail("internal: layer ", l, " outside a run");
  }
  const double t1 = now_s(), dt = t1 - t0;
  layer_times[size_t(l - cut_)].fwd += dt;
  times.fwd += dt;
  if (opt_.trace && opt_.trace->on()) opt_.trace->add(layer_type_name(s.type), "forward", Lane::Compute, t0, t1, l);
}

double Tail::loss_and_backward(const float* truth, int64_t step, int64_t seen, const TensorView& cut_delta) {
  const double t0 = now_s();
  const int n = opt_.batch;
  const int L = int(net_.layers.size());
  for (auto& d : delta_) std::fill(d.begin(), d.end(), 0.f);
  double loss = 0;
  const LayerSpec& back = net_.layers.back();
  const int64_t count = n * net_.output().size();
  if (back.type == LayerType::Cost)
    loss += sse(output(), truth, delta_.back().data(), count);
  else if (back.type == LayerType::Softmax)
    loss += softmax_cross_entropy(output(), truth, delta_.back().data(), count);
  for (int l = cut_; l < L; ++l) {
    const LayerSpec& s = net_.layers[size_t(l)];
    if (!s.detector()) continue;
    const DetectorArgs a{net_.width, net_.height, seen};
    const DetectorLoss d = detector_delta(s, a, out_[slot(l)].data(), truth, n, delta_[slot(l)].data());
    detector_loss += d;
    loss += d.cost;
  }
  const double t1 = now_s();
  times.bwd += t1 - t0;
  if (opt_.trace) opt_.trace->add("loss", "backward", Lane::Compute, t0, t1);
  for (int l = L - 1; l >= cut_; --l) backward_layer(l, step);
  const double c0 = now_s();
  copy_region(plain_view(delta_[0], n, net_.layers[size_t(cut_ - 1)].out), cut_delta, cut_delta.box);
  const double c1 = now_s();
  times.io += c1 - c0;
  if (opt_.trace) opt_.trace->add("copy of the cut delta", "io", Lane::Compute, c0, c1);
  return loss;
}

void Tail::backward_layer(int l, int64_t step) {
  const LayerSpec& s = net_.layers[size_t(l)];
  const int n = opt_.batch;
  const int run = run_of_[size_t(l - cut_)];
  float* din = delta_[slot(l - 1)].data();
  const int64_t nin = n * s.in.size();
  if (run >= 0) {  // the whole run at its last layer; its input delta is added to the input's
    Run& r = *runs_[size_t(run)];
    if (l != r.last - 1) return;
    const LayerSpec& first = net_.layers[size_t(r.first)];
    TensorView in_delta = plain_view(run_delta_in_, n, first.in);
    r.seg->backward(plain_view(delta_[slot(l)], n, s.out), &in_delta);
    const double t0 = now_s();
    float* d = delta_[slot(r.first - 1)].data();
    const int64_t m = n * first.in.size();
    for (int64_t i = 0; i < m; ++i) d[i] += run_delta_in_[size_t(i)];
    const double t1 = now_s();
    times.io += t1 - t0;
    if (opt_.trace) opt_.trace->add("add of the input delta", "io", Lane::Compute, t0, t1);
    return;
  }
  const double t0 = now_s();
  float* g = delta_[slot(l)].data();
  float* tmp = run_delta_in_.data();  // for layers that write, not add, their input delta
  bool add_tmp = true;
  switch (s.type) {
    case LayerType::Route: {
      std::vector<RoutePart> parts;
      for (int r : s.route) parts.push_back({nullptr, delta_[slot(r)].data(), net_.layers[size_t(r)].out.size()});
      route_backward(parts, g, n);
      add_tmp = false;
      break;
    }
    case LayerType::Reorg:
      reorg_backward(s, g, din, n);
      add_tmp = false;
      break;
    case LayerType::Upsample:
      upsample_backward(s, g, din, n);
      add_tmp = false;
      break;
    case LayerType::Region:
    case LayerType::Yolo:
      detector_backward(s, out_[slot(l)].data(), g, din, n);
      add_tmp = false;
      break;
    case LayerType::AvgPool:
      avgpool_backward(g, tmp, n, s.in.c, s.in.h * s.in.w);
      break;
    case LayerType::Connected: {
      const ParamSlice& ps = params_.slices[size_t(l)];
      connected_backward(g, out_[slot(l - 1)].data(), params_.values.data() + ps.weights, pre_[slot(l)].data(),
                         grad_ + ps.weights, grad_ + ps.biases, tmp, n, int(s.in.size()), s.outputs, s.act);
      break;
    }
    case LayerType::Softmax:  // Darknet: the delta passes through (softmax + cross-entropy)
    case LayerType::Cost:
      std::copy_n(g, size_t(nin), tmp);
      break;
    case LayerType::Dropout:
      dropout_apply(g, tmp, s.in.size(), n, s.probability, opt_.seed + uint64_t(l), step);
      break;
    case LayerType::Conv:
    case LayerType::MaxPool:
      fail("internal: layer ", l, " outside a run");
  }
  if (add_tmp)
    for (int64_t i = 0; i < nin; ++i) din[i] += tmp[i];
  const double t1 = now_s(), dt = t1 - t0;
  layer_times[size_t(l - cut_)].bwd_data += dt;
  times.bwd += dt;
  if (opt_.trace && opt_.trace->on()) opt_.trace->add(layer_type_name(s.type), "backward", Lane::Compute, t0, t1, l);
}

}  // namespace tt
