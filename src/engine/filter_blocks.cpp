#include "engine/filter_blocks.hpp"

#include <algorithm>

#include "model/op_kind.hpp"

namespace tt {

std::vector<std::pair<int, int>> filter_blocks(int channels, int blocks) {
  constexpr int kAlign = 16;
  std::vector<std::pair<int, int>> b;
  int prev = 0;
  for (int i = 1; i <= blocks; ++i) {
    const int end = i == blocks ? channels : std::min(channels, int(int64_t(channels) * i / blocks) / kAlign * kAlign);
    b.push_back({prev, std::max(prev, end)});
    prev = std::max(prev, end);
  }
  return b;
}

bool splits_into_filter_blocks(const LayerSpec& s) { return s.is(kConvKind) && s.conv().groups == 1; }

double filter_share(const LayerSpec& s, const std::vector<int>& mine, int blocks) {
  if (!splits_into_filter_blocks(s)) return 1;
  const std::vector<std::pair<int, int>> b = filter_blocks(s.out.c, blocks);
  int n = 0;
  for (int k : mine) n += b[size_t(k)].second - b[size_t(k)].first;
  return double(n) / s.out.c;
}

int filled_filter_blocks(const LayerSpec& s, int blocks) {
  int n = 0;
  for (const auto& [o0, o1] : filter_blocks(s.out.c, blocks)) n += o0 < o1;
  return n;
}

std::vector<std::pair<int64_t, int64_t>> filter_block_ranges(const Params& p, const LayerSpec& s, int o0, int o1) {
  const ParamSlice& ps = p.slices[size_t(s.index)];
  const int64_t per = ps.n_weights / ps.n_out;
  std::vector<std::pair<int64_t, int64_t>> r{{ps.biases + o0, ps.biases + o1}};
  if (ps.scales >= 0) r.push_back({ps.scales + o0, ps.scales + o1});
  r.push_back({ps.weights + o0 * per, ps.weights + o1 * per});
  return r;
}

namespace {
// The layer as the first and only layer of a net whose input is the layer's input.
NetSpec one_block_net(const NetSpec& net, int l, int o0, int o1) {
  NetSpec b;
  b.path = net.path;
  b.batch = net.batch;
  b.subdivisions = net.subdivisions;
  const LayerSpec& s = net.layers[size_t(l)];
  b.channels = s.in.c;
  b.height = s.in.h;
  b.width = s.in.w;
  LayerSpec c = s;
  c.index = 0;
  c.inputs = {};
  c.out.c = o1 - o0;
  c.conv().filters = o1 - o0;
  c.conv().kernel_filters = s.out.c;
  b.layers = {c};
  return b;
}
}  // namespace

BlockConv::BlockConv(DnnlContext& ctx, const NetSpec& net, Params& p, float* grad, int layer, int o0, int o1,
                     const Options& opt)
    : net_(one_block_net(net, layer, o0, o1)), params_(net_), layer_(layer), o0_(o0), o1_(o1), batch_(opt.batch) {
  // The block's biases, scales and weights where they are in the net's vectors (each
  // contiguous there), so the segment reads and adds to them in place.
  const auto at = filter_block_ranges(p, net.layers[size_t(layer)], o0, o1);
  ParamSlice& ps = params_.slices[0];
  ps.biases = at.front().first;
  if (ps.scales >= 0) ps.scales = at[1].first;
  ps.weights = at.back().first;
  ZeroPageFloats().swap(params_.values);
  params_.held_by = &p.values;
  SegmentOptions so = whole_map_options(opt.batch, ctx.config.block, opt.bn, opt.trace);
  so.staged_weights = opt.staged_weights;
  so.trace_layer = layer;
  if (opt.measure_scales) {
    scales_.assign(1, GradScale{});
    so.grad_scales = &scales_;
  }
  seg_ = std::make_unique<Segment>(ctx, net_, params_, grad, make_plan(net_, 1, 1, 0, 1, {0}), comm_, so);
  if (opt.measure_scales) seg_->measure_pointwise_scales();
  load(p);
}

BlockConv::~BlockConv() = default;

GradScale BlockConv::take_scale() {
  if (scales_.empty()) return {};
  const GradScale g = scales_[0];
  scales_[0] = {};
  return g;
}

void BlockConv::load(const Params& p) {
  if (!params_.rolling_mean[0].empty()) {
    std::copy_n(p.rolling_mean[size_t(layer_)].begin() + o0_, o1_ - o0_, params_.rolling_mean[0].begin());
    std::copy_n(p.rolling_var[size_t(layer_)].begin() + o0_, o1_ - o0_, params_.rolling_var[0].begin());
  }
  seg_->refresh_weights();
}

void BlockConv::forward(const TensorView& in, bool training, float* out, Params& p) {
  seg_->forward(in, training);
  const Shape& s = net_.layers[0].out;
  TensorView o{out, batch_, s.c, 1, full_box(s.h, s.w)};
  seg_->gather_output(&o);
  if (training && !params_.rolling_mean[0].empty()) {
    std::copy(params_.rolling_mean[0].begin(), params_.rolling_mean[0].end(),
              p.rolling_mean[size_t(layer_)].begin() + o0_);
    std::copy(params_.rolling_var[0].begin(), params_.rolling_var[0].end(),
              p.rolling_var[size_t(layer_)].begin() + o0_);
  }
}

void BlockConv::backward(const float* dout, float* din) {
  const Shape& so = net_.layers[0].out;
  const Shape in = net_.input();
  TensorView d{const_cast<float*>(dout), batch_, so.c, 1, full_box(so.h, so.w)};
  TensorView di{din, batch_, in.c, 1, full_box(in.h, in.w)};
  seg_->backward(d, &di);
}

}  // namespace tt
