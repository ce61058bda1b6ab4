// Convolution on a box: computes the outputs of box `out` from the clamped input box
// window_in(out), zero-padded only on the sides where the window leaves the real map.
// Each pass (forward, backward-data, backward-weights) runs on a backend chosen once at
// set-up (see backend.hpp): a oneDNN primitive, or tiletrain's own kernel.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "layers/backend.hpp"
#include "layers/box.hpp"
#include "layers/dnnl_context.hpp"

namespace tt {

struct ConvGeom {
  int n = 1, ic = 1, oc = 1, k = 1, s = 1;
  int ih = 1, iw = 1, oh = 1, ow = 1;
  Pad pad;
  int win_pad = 0;    // the layer's padding: no box of the layer pads a side by more
  int cb = 8;         // channel block of dst / diff_dst
  int in_cb = 8;      // layout of src / diff_src: 1 = plain nchw, or cb
  bool bias = false;  // conv bias (layers without batch-norm)
  int groups = 1;     // grouped convolution (Darknet's groups=; depthwise when = ic = oc)
  int choose_oc = 0;  // the backend is chosen as for this many output channels (a filter block); 0: oc
  bool operator==(const ConvGeom& o) const = default;
};

// Geometry for computing output box `out` of a layer with window `w` on an ih x iw map.
ConvGeom conv_geom(int n, int ic, int oc, const Window& w, const Box& out, int ih, int iw, int cb, int in_cb, bool bias,
                   int groups = 1);
// The same on input box `in`, any part of out's windows (the rest is padding): for a
// backward-data that computes only the input cells a tile needs.
ConvGeom conv_geom_on(int n, int ic, int oc, const Window& w, const Box& out, const Box& in, int cb, int in_cb,
                      bool bias, int groups = 1);

enum class ConvPass { Forward, BackwardData, BackwardWeights };
const char* conv_pass_name(ConvPass p);  // "forward", "backward-data", "backward-weights"

// The buffers of one pass; those a pass does not use stay null.
struct ConvIo {
  const float* src = nullptr;       // forward, backward-weights
  const float* weights = nullptr;   // forward, backward-data: in weights_desc()
  const float* bias = nullptr;      // forward
  const float* diff_dst = nullptr;  // backward-data, backward-weights
  float* dst = nullptr;             // forward
  float* diff_src = nullptr;        // backward-data
  float* diff_weights = nullptr;    // backward-weights: overwritten, in weights_desc()
  bool accumulate = false;          // backward-weights: add into diff_weights (only where accumulates())
  float* diff_bias = nullptr;       // backward-weights with bias: overwritten (null: not wanted)
};

// One pass of one convolution geometry on one backend.
class ConvImpl {
 public:
  virtual ~ConvImpl() = default;
  virtual void run(const ConvIo& io) = 0;
  // The weights (forward, backward-data) or weight gradient (backward-weights) layout.
  virtual const memory::desc& weights_desc() const = 0;
  virtual const std::string& name() const = 0;  // "jit:avx2", "own:neon", ...
  // Backward-weights that can add into a plain oihw gradient itself (no reorder after).
  virtual bool accumulates() const { return false; }
  // ... and adds each element's whole sum in one addition when it does.
  virtual bool adds_once() const { return false; }
};

// The backend a pass runs on, decided from the kernel path and what oneDNN offers for
// the geometry (a reference kernel counts as nothing under KernelPath::Auto).
struct ConvChoice {
  enum Backend { Dnnl, Own, Gemm } backend = Dnnl;
  std::string name;  // the kernel that runs
};
// `tiled`: the map may be split into tiles, so forward and backward-data values must not
// depend on the box's size (false after the cut, where any kernel will do).
ConvChoice choose_conv(const DnnlContext& ctx, const ConvGeom& g, ConvPass pass, bool tiled = true);
std::unique_ptr<ConvImpl> make_conv_impl(DnnlContext& ctx, const ConvGeom& g, ConvPass pass, bool tiled = true);

class ConvKernel {
 public:
  enum Kinds { kFwd = 1, kBwdData = 2, kBwdWeights = 4 };
  ConvKernel(DnnlContext& ctx, WeightCache& weights, const ConvGeom& g, int kinds, bool tiled = true);
  const ConvGeom& geom() const { return g_; }
  // The kernel each requested pass runs on (empty for passes not requested).
  std::string impl_name(ConvPass p) const;

  void forward(const float* src, const float* bias, float* dst);
  void backward_data(const float* diff_dst, float* diff_src);
  // Adds this box's weight (and bias) gradient into plain oihw (goihw) `grad_w` (and `grad_b`).
  // With `add_once`, each element gets the box's whole sum in one addition (as the tiles
  // sharing one gradient need, segment_build.cpp), not partial sums one after another.
  // With grad_w null the weight gradient stays in the context's gradient scratch, in the
  // kernel's layout, for grad_rows.
  void backward_weights(const float* src, const float* diff_dst, float* grad_w, float* grad_b, bool add_once = false);
  // Output channels [o0, o0 + rows) of the last weight gradient left in the scratch, as
  // plain rows; `prepare_grad_rows(rows)` first, once, for each row count used.
  void prepare_grad_rows(int rows);
  void grad_rows(int o0, int rows, float* plain_rows);

 private:
  DnnlContext& ctx_;
  WeightCache& weights_;
  ConvGeom g_;
  std::unique_ptr<ConvImpl> fwd_, bwd_data_, bwd_weights_;
  int fwd_slot_ = -1, bwd_data_slot_ = -1;
  dnnl::reorder grad_to_plain_;
  Args grad_args_;
  memory diff_w_mem_, grad_plain_mem_;
  std::vector<RowsReorder> grad_rows_;
};

}  // namespace tt
