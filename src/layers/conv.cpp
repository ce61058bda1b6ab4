#include "layers/conv.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/error.hpp"

namespace tt {

using tag = memory::format_tag;
using dt = memory::data_type;

ConvGeom conv_geom(int n, int ic, int oc, const Window& w, const Box& out, int ih, int iw, int in_cb, bool bias) {
  Box in = window_in(out, w, ih, iw);
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
  g.pad = border_pad(out, w, ih, iw);
  g.in_cb = in_cb;
  g.bias = bias;
  return g;
}

ConvKernel::ConvKernel(DnnlContext& ctx, WeightCache& weights, const ConvGeom& g, int kinds)
    : ctx_(ctx), weights_(weights), g_(g) {
  const memory::dims strides{g.s, g.s}, pl{g.pad.t, g.pad.l}, pr{g.pad.b, g.pad.r};
  const memory::desc src({g.n, g.ic, g.ih, g.iw}, dt::f32, g.in_cb == 16 ? tag::nChw16c : tag::nchw);
  const memory::desc dst({g.n, g.oc, g.oh, g.ow}, dt::f32, tag::nChw16c);
  const memory::desc w_any({g.oc, g.ic, g.k, g.k}, dt::f32, tag::any);
  const memory::desc w_plain({g.oc, g.ic, g.k, g.k}, dt::f32, tag::oihw);
  const memory::desc b = g.bias ? memory::desc({g.oc}, dt::f32, tag::x) : memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = dnnl::algorithm::convolution_direct;

  dnnl::convolution_forward::primitive_desc fwd_pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, src, w_any, b, dst, strides, pl, pr),
      attr, ctx.eng);
  if (std::getenv("TILETRAIN_VERBOSE_KERNELS"))
    std::fprintf(stderr, "conv %dx%d k%d s%d %dx%d: %s\n", g.ic, g.oc, g.k, g.s, g.oh, g.ow, fwd_pd.impl_info_str());
  auto mem = [&](const memory::desc& d) { return memory(d, ctx.eng, DNNL_MEMORY_NONE); };

  if (kinds & kFwd) {
    fwd_ = dnnl::convolution_forward(fwd_pd);
    fwd_slot_ = weights.slot(fwd_pd.weights_desc(), WeightCache::kForward);
    fwd_args_ = {{DNNL_ARG_SRC, mem(src)},
                 {DNNL_ARG_WEIGHTS, mem(fwd_pd.weights_desc())},
                 {DNNL_ARG_DST, mem(dst)},
                 {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(fwd_pd.scratchpad_desc())}};
    if (g.bias) fwd_args_[DNNL_ARG_BIAS] = mem(b);
  }
  if (kinds & kBwdData) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(algo, src, w_any, dst, strides, pl, pr), attr, ctx.eng, fwd_pd);
    bwd_data_ = dnnl::convolution_backward_data(pd);
    bwd_data_slot_ = weights.slot(pd.weights_desc(), WeightCache::kBackwardData);
    bwd_data_args_ = {{DNNL_ARG_DIFF_DST, mem(dst)},
                      {DNNL_ARG_WEIGHTS, mem(pd.weights_desc())},
                      {DNNL_ARG_DIFF_SRC, mem(src)},
                      {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(pd.scratchpad_desc())}};
  }
  if (kinds & kBwdWeights) {
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(algo, src, w_any, b, dst, strides, pl, pr), attr, ctx.eng, fwd_pd);
    bwd_weights_ = dnnl::convolution_backward_weights(pd);
    diff_w_mem_ = ctx.grad_scratch(pd.diff_weights_desc());
    bwd_weights_args_ = {{DNNL_ARG_SRC, mem(src)},
                         {DNNL_ARG_DIFF_DST, mem(dst)},
                         {DNNL_ARG_DIFF_WEIGHTS, diff_w_mem_},
                         {DNNL_ARG_SCRATCHPAD, ctx.scratchpad(pd.scratchpad_desc())}};
    if (g.bias) {
      diff_b_ = Buffer(size_t(g.oc));
      bwd_weights_args_[DNNL_ARG_DIFF_BIAS] = memory(b, ctx.eng, diff_b_.data());
    }
    // backward-weights overwrites its output: accumulate into the plain gradient with a
    // reorder carrying a sum post-op.
    dnnl::primitive_attr sum;
    dnnl::post_ops po;
    po.append_sum(1.f);
    sum.set_post_ops(po);
    grad_plain_mem_ = mem(w_plain);
    grad_args_ = {{DNNL_ARG_FROM, diff_w_mem_}, {DNNL_ARG_TO, grad_plain_mem_}};
    grad_to_plain_ =
        dnnl::reorder(dnnl::reorder::primitive_desc(ctx.eng, pd.diff_weights_desc(), ctx.eng, w_plain, sum));
  }
}

void ConvKernel::forward(const float* src, const float* bias, float* dst) {
  fwd_args_.at(DNNL_ARG_SRC).set_data_handle(const_cast<float*>(src));
  fwd_args_.at(DNNL_ARG_WEIGHTS).set_data_handle(weights_.data(fwd_slot_));
  fwd_args_.at(DNNL_ARG_DST).set_data_handle(dst);
  if (g_.bias) fwd_args_.at(DNNL_ARG_BIAS).set_data_handle(const_cast<float*>(bias));
  ctx_.execute(fwd_, fwd_args_);
}

void ConvKernel::backward_data(const float* diff_dst, float* diff_src) {
  bwd_data_args_.at(DNNL_ARG_DIFF_DST).set_data_handle(const_cast<float*>(diff_dst));
  bwd_data_args_.at(DNNL_ARG_WEIGHTS).set_data_handle(weights_.data(bwd_data_slot_));
  bwd_data_args_.at(DNNL_ARG_DIFF_SRC).set_data_handle(diff_src);
  ctx_.execute(bwd_data_, bwd_data_args_);
}

void ConvKernel::backward_weights(const float* src, const float* diff_dst, float* grad_w, float* grad_b) {
  bwd_weights_args_.at(DNNL_ARG_SRC).set_data_handle(const_cast<float*>(src));
  bwd_weights_args_.at(DNNL_ARG_DIFF_DST).set_data_handle(const_cast<float*>(diff_dst));
  diff_w_mem_.set_data_handle(ctx_.grad_scratch_data());
  ctx_.execute(bwd_weights_, bwd_weights_args_);
  if (grad_w) {
    grad_plain_mem_.set_data_handle(grad_w);
    grad_to_plain_.execute(ctx_.strm, grad_args_);
    ctx_.strm.wait();
  }
  if (g_.bias)
    for (int i = 0; i < g_.oc; ++i) grad_b[i] += diff_b_.data()[i];
}

void ConvKernel::prepare_grad_rows(int rows) {
  for (const RowsReorder& r : grad_rows_)
    if (r.rows() == rows) return;
  grad_rows_.emplace_back(ctx_.eng, diff_w_mem_.get_desc(),
                          memory::desc({g_.oc, g_.ic, g_.k, g_.k}, dt::f32, tag::oihw), rows);
}

void ConvKernel::grad_rows(int o0, int rows, float* plain_rows) {
  for (RowsReorder& r : grad_rows_)
    if (r.rows() == rows) return r.run(ctx_.strm, ctx_.grad_scratch_data(), o0, plain_rows, 0);
  fail("internal: gradient rows of ", rows, " output channels were not prepared");
}

}  // namespace tt
