#include "layers/conv.hpp"

#include <mutex>

#include "layers/fma_probe.hpp"
#include "layers/gemm_conv.hpp"
#include "layers/grouped_conv.hpp"
#include "layers/own_conv.hpp"
#include "layers/pointwise.hpp"
#include "util/error.hpp"

namespace tt {

using tag = memory::format_tag;
using dt = memory::data_type;

ConvGeom conv_geom(int n, int ic, int oc, const Window& w, const Box& out, int ih, int iw, int cb, int in_cb, bool bias,
                   int groups) {
  return conv_geom_on(n, ic, oc, w, out, window_in(out, w, ih, iw), cb, in_cb, bias, groups);
}

ConvGeom conv_geom_on(int n, int ic, int oc, const Window& w, const Box& out, const Box& in, int cb, int in_cb,
                      bool bias, int groups) {
  const Box u = window_in_unclamped(out, w);
  if (!contains(u, in)) fail("internal: input box ", in.str(), " outside the windows of output box ", out.str());
  ConvGeom g;
  g.n = n;
  g.ic = ic;
  g.oc = oc;
  g.k = w.size;
  g.s = w.stride;
  g.ih = in.h();
  g.iw = in.w();
  g.oh = out.h();
  g.ow = out.w();
  g.pad = Pad{in.y0 - u.y0, u.y1 - in.y1, in.x0 - u.x0, u.x1 - in.x1};
  g.win_pad = w.pad;
  g.cb = cb;
  g.in_cb = in_cb;
  g.bias = bias;
  g.groups = groups;
  return g;
}

const char* conv_pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::BackwardData:
      return "backward-data";
    case ConvPass::BackwardWeights:
      return "backward-weights";
    case ConvPass::Forward:
      break;
  }
  return "forward";
}

namespace {

tag blocked_tag(int cb) {
  switch (cb) {
    case 1:
      return tag::nchw;
    case 8:
      return tag::nChw8c;
    case 16:
      return tag::nChw16c;
  }
  fail("internal: no map layout with a channel block of ", cb, " (8 or 16)");
}

// oneDNN's descriptors of a geometry: maps in the engine's layouts, weights as the
// primitive likes them.
struct DnnlDescs {
  memory::desc src, dst, w_any, b;
  memory::dims strides, pl, pr;
  dnnl::primitive_attr attr;  // the scratchpad is the context's, shared by all primitives
  explicit DnnlDescs(const ConvGeom& g)
      : src({g.n, g.ic, g.ih, g.iw}, dt::f32, blocked_tag(g.in_cb)),
        dst({g.n, g.oc, g.oh, g.ow}, dt::f32, blocked_tag(g.cb)),
        w_any(conv_weights_dims(g.oc, g.ic, g.k, g.groups), dt::f32, tag::any),
        b(g.bias ? memory::desc({g.oc}, dt::f32, tag::x) : memory::desc()),
        strides{g.s, g.s},
        pl{g.pad.t, g.pad.l},
        pr{g.pad.b, g.pad.r} {
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  }
  dnnl::convolution_forward::primitive_desc forward(const dnnl::engine& eng) const {
    return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                            w_any, b, dst, strides, pl, pr),
            attr, eng};
  }
  dnnl::convolution_backward_data::primitive_desc backward_data(
      const dnnl::engine& eng, const dnnl::convolution_forward::primitive_desc& hint) const {
    return {
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, w_any, dst, strides, pl, pr),
        attr, eng, hint};
  }
  dnnl::convolution_backward_weights::primitive_desc backward_weights(
      const dnnl::engine& eng, const dnnl::convolution_forward::primitive_desc& hint) const {
    return {dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src, w_any, b, dst, strides,
                                                     pl, pr),
            attr, eng, hint};
  }
};

class DnnlConv final : public ConvImpl {
 public:
  DnnlConv(DnnlContext& ctx, const ConvGeom& g, ConvPass pass) : ctx_(ctx), pass_(pass) {
    const DnnlDescs d(g);
    auto fwd_pd = d.forward(ctx.eng);
    auto mem = [&](const memory::desc& m) { return memory(m, ctx.eng, DNNL_MEMORY_NONE); };
    switch (pass) {
      case ConvPass::Forward:
        name_ = fwd_pd.impl_info_str();
        prim_ = dnnl::convolution_forward(fwd_pd);
        weights_ = fwd_pd.weights_desc();
        args_ = {{DNNL_ARG_SRC, mem(d.src)},
                 {DNNL_ARG_WEIGHTS, mem(weights_)},
                 {DNNL_ARG_DST, mem(d.dst)},
                 {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(fwd_pd.scratchpad_desc())}};
        if (g.bias) args_[DNNL_ARG_BIAS] = mem(d.b);
        break;
      case ConvPass::BackwardData: {
        auto pd = d.backward_data(ctx.eng, fwd_pd);
        name_ = pd.impl_info_str();
        prim_ = dnnl::convolution_backward_data(pd);
        weights_ = pd.weights_desc();
        args_ = {{DNNL_ARG_DIFF_DST, mem(d.dst)},
                 {DNNL_ARG_WEIGHTS, mem(weights_)},
                 {DNNL_ARG_DIFF_SRC, mem(d.src)},
                 {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(pd.scratchpad_desc())}};
        break;
      }
      case ConvPass::BackwardWeights: {
        auto pd = d.backward_weights(ctx.eng, fwd_pd);
        name_ = pd.impl_info_str();
        prim_ = dnnl::convolution_backward_weights(pd);
        weights_ = pd.diff_weights_desc();
        args_ = {{DNNL_ARG_SRC, mem(d.src)},
                 {DNNL_ARG_DIFF_DST, mem(d.dst)},
                 {DNNL_ARG_DIFF_WEIGHTS, mem(weights_)},
                 {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(pd.scratchpad_desc())}};
        if (g.bias) args_[DNNL_ARG_DIFF_BIAS] = memory(d.b, ctx.eng);  // its own: ConvKernel sums the bias itself
        break;
      }
    }
  }
  void run(const ConvIo& io) override {
    auto set = [&](int arg, const float* p) { args_.at(arg).set_data_handle(const_cast<float*>(p)); };
    switch (pass_) {
      case ConvPass::Forward:
        set(DNNL_ARG_SRC, io.src);
        set(DNNL_ARG_WEIGHTS, io.weights);
        set(DNNL_ARG_DST, io.dst);
        if (args_.count(DNNL_ARG_BIAS)) set(DNNL_ARG_BIAS, io.bias);
        break;
      case ConvPass::BackwardData:
        set(DNNL_ARG_DIFF_DST, io.diff_dst);
        set(DNNL_ARG_WEIGHTS, io.weights);
        set(DNNL_ARG_DIFF_SRC, io.diff_src);
        break;
      case ConvPass::BackwardWeights:
        set(DNNL_ARG_SRC, io.src);
        set(DNNL_ARG_DIFF_DST, io.diff_dst);
        set(DNNL_ARG_DIFF_WEIGHTS, io.diff_weights);
        if (args_.count(DNNL_ARG_DIFF_BIAS) && io.diff_bias) set(DNNL_ARG_DIFF_BIAS, io.diff_bias);
        break;
    }
    ctx_.execute(prim_, args_);
  }
  const memory::desc& weights_desc() const override { return weights_; }
  const std::string& name() const override { return name_; }

 private:
  DnnlContext& ctx_;
  ConvPass pass_;
  dnnl::primitive prim_;
  memory::desc weights_;
  Args args_;  // built once: executing with a fresh argument map would allocate
  std::string name_;
};

OwnConvShape own_shape(const ConvGeom& g) {
  return {.n = g.n,
          .ic = g.ic,
          .oc = g.oc,
          .k = g.k,
          .s = g.s,
          .ih = g.ih,
          .iw = g.iw,
          .oh = g.oh,
          .ow = g.ow,
          .pt = g.pad.t,
          .pl = g.pad.l,
          .ib = g.in_cb,
          .b = g.cb};
}

OwnPass own_pass(ConvPass p) {
  return p == ConvPass::Forward        ? OwnPass::Forward
         : p == ConvPass::BackwardData ? OwnPass::BackwardData
                                       : OwnPass::BackwardWeights;
}

class OwnConv final : public ConvImpl {
 public:
  OwnConv(const ConvGeom& g, ConvPass pass)
      : shape_(own_shape(g)),
        pass_(pass),
        weights_({g.oc, g.ic, g.k, g.k}, dt::f32, own_weights_tag(g.cb, g.in_cb, own_pass(pass))),
        name_("own:" + own_conv_target()) {}
  void run(const ConvIo& io) override {
    switch (pass_) {
      case ConvPass::Forward:
        return own_conv_forward(shape_, io.src, io.weights, io.bias, io.dst);
      case ConvPass::BackwardData:
        return own_conv_backward_data(shape_, io.diff_dst, io.weights, io.diff_src);
      case ConvPass::BackwardWeights:
        return own_conv_backward_weights(shape_, io.src, io.diff_dst, io.diff_weights, io.diff_bias, io.accumulate);
    }
  }
  const memory::desc& weights_desc() const override { return weights_; }
  const std::string& name() const override { return name_; }
  bool accumulates() const override { return pass_ == ConvPass::BackwardWeights; }  // into the plain gradient
  bool adds_once() const override { return accumulates() && own_conv_weights_add_once(shape_); }

 private:
  OwnConvShape shape_;
  ConvPass pass_;
  memory::desc weights_;
  std::string name_;
};

// Grouped and depthwise convolutions (grouped_conv.hpp); backward-weights adds each
// weight's whole sum into the plain goihw gradient once.
class OwnGroupedConv final : public ConvImpl {
 public:
  OwnGroupedConv(const ConvGeom& g, ConvPass pass)
      : shape_(own_shape(g)),
        groups_(g.groups),
        pass_(pass),
        weights_(conv_weights_dims(g.oc, g.ic, g.k, g.groups), dt::f32,
                 grouped_weights_tag(shape_, g.groups, own_pass(pass))),
        name_(grouped_kernel_name(shape_, g.groups)) {}
  void run(const ConvIo& io) override {
    switch (pass_) {
      case ConvPass::Forward:
        return grouped_conv_forward(shape_, groups_, io.src, io.weights, io.bias, io.dst);
      case ConvPass::BackwardData:
        return grouped_conv_backward_data(shape_, groups_, io.diff_dst, io.weights, io.diff_src);
      case ConvPass::BackwardWeights:
        return grouped_conv_backward_weights(shape_, groups_, io.src, io.diff_dst, io.diff_weights, io.diff_bias,
                                             io.accumulate);
    }
  }
  const memory::desc& weights_desc() const override { return weights_; }
  const std::string& name() const override { return name_; }
  bool accumulates() const override { return pass_ == ConvPass::BackwardWeights; }
  bool adds_once() const override { return accumulates(); }

 private:
  OwnConvShape shape_;
  int groups_;
  ConvPass pass_;
  memory::desc weights_;
  std::string name_;
};

// OpenBLAS products (gemm_conv.hpp) on the plain oihw weights; backward-weights adds
// straight into the plain gradient.
class GemmConv final : public ConvImpl {
 public:
  GemmConv(DnnlContext& ctx, const ConvGeom& g, ConvPass pass)
      : ctx_(ctx),
        shape_(own_shape(g)),
        pass_(pass),
        weights_({g.oc, g.ic, g.k, g.k}, dt::f32, tag::oihw),
        name_("gemm:openblas") {
    ctx.reserve_work(gemm_conv_work_floats(shape_));
  }
  void run(const ConvIo& io) override {
    switch (pass_) {
      case ConvPass::Forward:
        return gemm_conv_forward(shape_, io.src, io.weights, io.bias, io.dst, ctx_.work());
      case ConvPass::BackwardData:
        return gemm_conv_backward_data(shape_, io.diff_dst, io.weights, io.diff_src, ctx_.work());
      case ConvPass::BackwardWeights:
        return gemm_conv_backward_weights(shape_, io.src, io.diff_dst, io.diff_weights, io.diff_bias, io.accumulate,
                                          ctx_.work());
    }
  }
  const memory::desc& weights_desc() const override { return weights_; }
  const std::string& name() const override { return name_; }
  bool accumulates() const override { return true; }

 private:
  DnnlContext& ctx_;
  OwnConvShape shape_;
  ConvPass pass_;
  memory::desc weights_;
  std::string name_;
};

}  // namespace

namespace {
// The oneDNN forward kernel every box of a layer gets, whatever its size and its place on
// the map, or "" if boxes differ (on AVX-512, oneDNN 2.7 sends 1-column boxes of a 5x5
// convolution to jit:avx2 or gemm:jit and wider ones to jit:avx512_core, and a 1-column
// box padded by more than k / 2 to ref:any) or any gets a GEMM. Probes every width and
// height up to k + 1, and a wide one, with every padding up to the layer's that a box at
// or near the map's edges has; cached per layer shape and padding.
std::string stable_forward_impl(const DnnlContext& ctx, const ConvGeom& g) {
  ConvGeom key = g;
  key.ih = key.iw = key.oh = key.ow = 0;
  key.pad = Pad{};
  static std::mutex mutex;
  static std::vector<std::pair<ConvGeom, std::string>> cache;
  std::lock_guard lock(mutex);
  for (const auto& [k, v] : cache)
    if (k == key) return v;
  const int p = g.win_pad;
  auto impl_of = [&](int oh, int ow, Pad pad) {
    ConvGeom q = g;
    q.oh = oh;
    q.ow = ow;
    q.pad = pad;
    q.ih = (oh - 1) * g.s + g.k - pad.t - pad.b;
    q.iw = (ow - 1) * g.s + g.k - pad.l - pad.r;
    if (q.ih < 1 || q.iw < 1) return std::string();
    return std::string(DnnlDescs(q).forward(ctx.eng).impl_info_str());
  };
  const int wide = 2 * g.k + 3;
  const std::string want = impl_of(wide, wide, Pad{p, p, p, p});
  bool stable = want.find("gemm") == std::string::npos;
  for (int n = 1; stable && n <= g.k + 2; ++n) {
    const int size = n == g.k + 2 ? wide : n;
    for (int a = 0; stable && a <= p; ++a)
      for (int b = 0; stable && b <= p; ++b)
        for (const std::string& got : {impl_of(wide, size, Pad{p, p, a, b}), impl_of(size, wide, Pad{a, b, p, p})})
          if (!got.empty() && got != want) stable = false;
  }
  cache.emplace_back(key, stable ? want : std::string());
  return cache.back().second;
}

// The oneDNN kernel a pass of this geometry gets.
std::string dnnl_impl(const DnnlContext& ctx, const ConvGeom& g, ConvPass pass) {
  const DnnlDescs d(g);
  const auto fwd = d.forward(ctx.eng);
  if (pass == ConvPass::BackwardData) return d.backward_data(ctx.eng, fwd).impl_info_str();
  if (pass == ConvPass::BackwardWeights) return d.backward_weights(ctx.eng, fwd).impl_info_str();
  return fwd.impl_info_str();
}

// Grouped convolutions: oneDNN's JIT kernels where it has them (x86: depthwise and groups
// of whole channel blocks) and a forward whose kernel is the same for every box; the own
// grouped kernels elsewhere (ARM, resnext's narrow groups), and the 1x1 forward, as below.
// Never OpenBLAS.
ConvChoice choose_grouped_conv(const DnnlContext& ctx, const ConvGeom& g, ConvPass pass) {
  const ConvChoice own{ConvChoice::Own, grouped_kernel_name(own_shape(g), g.groups)};
  if (ctx.config.path == KernelPath::Own || (pass == ConvPass::Forward && g.k == 1 && g.s == 1)) return own;
  const std::string impl = dnnl_impl(ctx, g, pass);
  if (ctx.config.path == KernelPath::Auto && (is_reference_impl(impl) || impl.find("gemm") != std::string::npos))
    return own;
  if (pass == ConvPass::Forward && stable_forward_impl(ctx, g) != impl) return own;
  return {ConvChoice::Dnnl, impl};
}

// Output pixels (over the batch) up to which layers after the cut may run on OpenBLAS
// (YOLOv2's 13x13 tail is 169; see choose_conv).
constexpr long kGemmMaxPixels = 200;
}  // namespace

// Forward values must not depend on the box a tile computes (a max-pool near-tie would
// send the gradient to another cell), so forwards that round by the map's size run on
// the own kernel, whatever the path: oneDNN's 1x1 kernels pick their reduction blocking
// from the map size, and its GEMM-based convolutions (im2col + sgemm, e.g. a 1-channel
// input without AVX2) sum in an order that depends on the product's shape.
// Under KernelPath::Auto, wide products go to OpenBLAS where oneDNN has no JIT kernel for
// them (every pass after the cut, backward-weights of tiled layers; the Pis) and, after the
// cut, on small maps (kGemmMaxPixels) where oneDNN has no AVX-512 kernel: OpenBLAS outruns
// oneDNN's AVX2 kernels there, not its AVX-512 ones. After the cut backward-weights on small
// maps run on OpenBLAS on AVX-512 too: it adds into the plain gradient, where oneDNN's
// blocked one needs a reorder pass over the weights; so do tiled layers' backward-weights on
// boxes that small. Tiled layers keep oneDNN's JIT kernels for forward and backward-data
// (OpenBLAS rounds by the product's shape) and for backward-weights on larger boxes where
// it has them (OpenBLAS did not pay there); on x86 their backward-weights run on the own
// kernel where it is the faster (bench/RESULTS.md, kernels per CPU).

ConvChoice choose_conv(const DnnlContext& ctx, const ConvGeom& g, ConvPass pass, bool tiled) {
  if (g.choose_oc > 0 && g.choose_oc != g.oc) {  // a filter block: the whole layer's backend
    ConvGeom whole = g;
    whole.oc = g.choose_oc;
    whole.choose_oc = 0;
    const ConvChoice c = choose_conv(ctx, whole, pass, tiled);
    return c.backend == ConvChoice::Dnnl ? ConvChoice{ConvChoice::Dnnl, dnnl_impl(ctx, g, pass)} : c;
  }
  if (g.groups > 1) return choose_grouped_conv(ctx, g, pass);
  const std::string own = "own:" + own_conv_target();
  const bool forward = pass == ConvPass::Forward;
  const bool gemm_candidate =
      ctx.config.path == KernelPath::Auto && (pass == ConvPass::BackwardWeights || !tiled) && gemm_pays(own_shape(g));
  // On x86 the own backward-weights beat oneDNN's JIT on 3x3 windows over blocked inputs
  // (bench/kernels/README.md) on boxes of 144 pixels and more, except on AVX-512 cores with
  // two full-width FMA units, where oneDNN's is 1.1-1.25x faster; tiled layers with such
  // boxes take it. On smaller boxes its per-image calls cost more than they sum, and its 1x1
  // and plain-input cases only match oneDNN. On ARM oneDNN has no JIT kernel and OpenBLAS
  // keeps the wide ones (below).
  const bool own_wins_weights = own == "own:avx2" || (own.rfind("own:avx3", 0) == 0 && !full_width_avx512_fma());
  const bool own_weights = ctx.config.path == KernelPath::Auto && tiled && pass == ConvPass::BackwardWeights &&
                           own_wins_weights && g.k > 1 && g.in_cb > 1 && g.oh * g.ow >= 144;
  const bool own_only = ctx.config.path == KernelPath::Own || own_weights || (forward && g.k == 1 && g.s == 1);
  if (own_only && !gemm_candidate) return {ConvChoice::Own, own};
  const std::string impl = dnnl_impl(ctx, g, pass);
  // After the cut OpenBLAS runs only on small maps (YOLOv2's 13x13 tail), where oneDNN's
  // extra pass over the weights (for backward-weights, its blocked gradient reordered into
  // the plain one) costs more than its product saves: on ResNet-18 at 256x256, OpenBLAS's
  // backward-weights are 1.10x faster than oneDNN's AVX-512 ones on its 8x8 layers but 1.64x
  // slower on 16x16 and 2.1x on 32x32 (bench --layers, 2026-11-28); under an AVX2 cap every
  // pass of its 32x32 layers ran 1.4x slower on OpenBLAS than the tiled layers on jit:avx2.
  const bool small_map = long(g.n) * g.oh * g.ow <= kGemmMaxPixels;
  const bool gemm_after_cut =
      small_map && (pass == ConvPass::BackwardWeights || impl.find("avx512") == std::string::npos);
  const bool gemm_tiled = is_reference_impl(impl) || (small_map && pass == ConvPass::BackwardWeights && !own_weights);
  if (gemm_candidate && (tiled ? gemm_tiled : gemm_after_cut)) return {ConvChoice::Gemm, "gemm:openblas"};
  if (own_only) return {ConvChoice::Own, own};
  if (forward) {
    const std::string layer_impl = stable_forward_impl(ctx, g);
    if (layer_impl.empty()) return {ConvChoice::Own, own};
    if (impl != layer_impl)
      fail("internal: oneDNN runs ", impl, " for a ", g.oh, "x", g.ow, " box of a layer whose other boxes run ",
           layer_impl, ": its tiles would not be bit-identical");
  }
  if (ctx.config.path == KernelPath::Auto && is_reference_impl(impl)) return {ConvChoice::Own, own};
  return {ConvChoice::Dnnl, impl};
}

std::unique_ptr<ConvImpl> make_conv_impl(DnnlContext& ctx, const ConvGeom& g, ConvPass pass, bool tiled) {
  switch (choose_conv(ctx, g, pass, tiled).backend) {
    case ConvChoice::Own:
      if (g.groups > 1) return std::make_unique<OwnGroupedConv>(g, pass);
      return std::make_unique<OwnConv>(g, pass);
    case ConvChoice::Gemm:
      return std::make_unique<GemmConv>(ctx, g, pass);
    case ConvChoice::Dnnl:
      break;
  }
  return std::make_unique<DnnlConv>(ctx, g, pass);
}

ConvKernel::ConvKernel(DnnlContext& ctx, WeightCache& weights, const ConvGeom& g, int kinds, bool tiled)
    : ctx_(ctx), weights_(weights), g_(g) {
  if (kinds & kFwd) {
    fwd_ = make_conv_impl(ctx, g, ConvPass::Forward, tiled);
    fwd_slot_ = weights.slot(fwd_->weights_desc(), WeightCache::kForward);
  }
  if (kinds & kBwdData) {
    bwd_data_ = make_conv_impl(ctx, g, ConvPass::BackwardData, tiled);
    bwd_data_slot_ = weights.slot(bwd_data_->weights_desc(), WeightCache::kBackwardData);
  }
  if (kinds & kBwdWeights) {
    bwd_weights_ = make_conv_impl(ctx, g, ConvPass::BackwardWeights, tiled);
    const memory::desc& dw = bwd_weights_->weights_desc();
    diff_w_mem_ = ctx.grad_scratch(dw);
    // backward-weights overwrites its output: accumulate into the plain gradient with a
    // reorder carrying a sum post-op.
    dnnl::primitive_attr sum;
    dnnl::post_ops po;
    po.append_sum(1.f);
    sum.set_post_ops(po);
    const memory::desc w_plain = plain_conv_weights_desc(g.oc, g.ic, g.k, g.groups);
    grad_plain_mem_ = memory(w_plain, ctx.eng, DNNL_MEMORY_NONE);
    grad_args_ = {{DNNL_ARG_FROM, diff_w_mem_}, {DNNL_ARG_TO, grad_plain_mem_}};
    grad_to_plain_ = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.eng, dw, ctx.eng, w_plain, sum));
  }
}

std::string ConvKernel::impl_name(ConvPass p) const {
  const ConvImpl* i = p == ConvPass::Forward        ? fwd_.get()
                      : p == ConvPass::BackwardData ? bwd_data_.get()
                                                    : bwd_weights_.get();
  return i ? i->name() : "";
}

void ConvKernel::forward(const float* src, const float* bias, float* dst) {
  ConvIo io;
  io.src = src;
  io.weights = weights_.data(fwd_slot_);
  io.bias = g_.bias ? bias : nullptr;
  io.dst = dst;
  fwd_->run(io);
}

void ConvKernel::backward_data(const float* diff_dst, float* diff_src) {
  ConvIo io;
  io.diff_dst = diff_dst;
  io.weights = weights_.data(bwd_data_slot_);
  io.diff_src = diff_src;
  bwd_data_->run(io);
}

void ConvKernel::backward_weights(const float* src, const float* diff_dst, float* grad_w, float* grad_b,
                                  bool add_once) {
  ConvIo io;
  io.src = src;
  io.diff_dst = diff_dst;
  io.diff_weights = ctx_.grad_scratch_data();
  // Else into the scratch, then added with the reorder (one addition per element).
  const bool direct = grad_w && bwd_weights_->accumulates() && (!add_once || bwd_weights_->adds_once());
  if (direct) {
    io.diff_weights = grad_w;
    io.accumulate = true;
  }
  bwd_weights_->run(io);
  if (grad_w && !direct) {
    diff_w_mem_.set_data_handle(ctx_.grad_scratch_data());
    grad_plain_mem_.set_data_handle(grad_w);
    grad_to_plain_.execute(ctx_.strm, grad_args_);
    ctx_.strm.wait();
  }
  // The bias gradient in double whatever kernel ran (the kernels' own float sums differ).
  if (g_.bias) add_channel_sums(diff_dst, g_.n, g_.oc, g_.cb, long(g_.oh) * g_.ow, grad_b);
}

void ConvKernel::prepare_grad_rows(int rows) {
  for (const RowsReorder& r : grad_rows_)
    if (r.rows() == rows) return;
  grad_rows_.emplace_back(ctx_.eng, diff_w_mem_.get_desc(), plain_conv_weights_desc(g_.oc, g_.ic, g_.k, g_.groups),
                          rows);
}

void ConvKernel::grad_rows(int o0, int rows, float* plain_rows) {
  for (RowsReorder& r : grad_rows_)
    if (r.rows() == rows) return r.run(ctx_.strm, ctx_.grad_scratch_data(), o0, plain_rows, 0);
  fail("internal: gradient rows of ", rows, " output channels were not prepared");
}

}  // namespace tt
