// Convolution on a box: computes the outputs of box `out` from the clamped input box
// window_in(out), zero-padded only on the sides where the window leaves the real map.
// Wraps oneDNN forward, backward-data and backward-weights primitives built once.
#pragma once
#include "layers/box.hpp"
#include "layers/dnnl_context.hpp"

namespace tt {

struct ConvGeom {
  int n = 1, ic = 1, oc = 1, k = 1, s = 1;
  int ih = 1, iw = 1, oh = 1, ow = 1;
  Pad pad;
  int in_cb = 16;     // layout of src / diff_src: 1 = nchw, 16 = nChw16c; dst is nChw16c
  bool bias = false;  // conv bias (layers without batch-norm)
  bool operator==(const ConvGeom& o) const {
    return n == o.n && ic == o.ic && oc == o.oc && k == o.k && s == o.s && ih == o.ih && iw == o.iw && oh == o.oh &&
           ow == o.ow && pad.t == o.pad.t && pad.b == o.pad.b && pad.l == o.pad.l && pad.r == o.pad.r &&
           in_cb == o.in_cb && bias == o.bias;
  }
};

// Geometry for computing output box `out` of a layer with window `w` on an ih x iw map.
ConvGeom conv_geom(int n, int ic, int oc, const Window& w, const Box& out, int ih, int iw, int in_cb, bool bias);

class ConvKernel {
 public:
  enum Kinds { kFwd = 1, kBwdData = 2, kBwdWeights = 4 };
  ConvKernel(DnnlContext& ctx, WeightCache& weights, const ConvGeom& g, int kinds);
  const ConvGeom& geom() const { return g_; }

  void forward(const float* src, const float* bias, float* dst);
  void backward_data(const float* diff_dst, float* diff_src);
  // Adds this box's weight (and bias) gradient into plain oihw `grad_w` (and `grad_b`).
  // With grad_w null the weight gradient stays in the context's gradient scratch, in the
  // kernel's layout, for grad_rows.
  void backward_weights(const float* src, const float* diff_dst, float* grad_w, float* grad_b);
  // Output channels [o0, o0 + rows) of the last weight gradient left in the scratch, as
  // plain rows; `prepare_grad_rows(rows)` first, once, for each row count used.
  void prepare_grad_rows(int rows);
  void grad_rows(int o0, int rows, float* plain_rows);

 private:
  DnnlContext& ctx_;
  WeightCache& weights_;
  ConvGeom g_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  dnnl::reorder grad_to_plain_;
  Args fwd_args_, bwd_data_args_, bwd_weights_args_, grad_args_;
  int fwd_slot_ = -1, bwd_data_slot_ = -1;
  Buffer diff_b_;
  memory diff_w_mem_, grad_plain_mem_;
  std::vector<RowsReorder> grad_rows_;
};

}  // namespace tt
