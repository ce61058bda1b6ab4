// --tail filters: the convolutions after the cut split by output channels (model parallel).
// Each such layer's filters are cut into as many blocks as the grid has tiles, block b run
// by the process that runs tile b, on the whole (small) input map, which every process
// holds. Block boundaries depend on the grid only, so the sums do too, not on the number of
// processes: a block's weight gradient is its own kernel's over the whole map; the input
// delta is the blocks' partial deltas added in block order (engine/tail.cpp).
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "engine/segment.hpp"
#include "model/params.hpp"

namespace tt {

// Output channels [first, second) of each of `blocks` blocks of `channels` filters: at
// multiples of 16 (a whole channel block of every CPU's layout), so some may be empty.
std::vector<std::pair<int, int>> filter_blocks(int channels, int blocks);
// Whether layer s runs split into filter blocks (a convolution without groups).
bool splits_into_filter_blocks(const LayerSpec& s);
// The part of layer s's work that blocks `mine` of `blocks` do: their share of its filters
// (1 for a layer every process runs whole).
double filter_share(const LayerSpec& s, const std::vector<int>& mine, int blocks);
// How many of the blocks of layer s have filters (each sends a part of the input delta).
int filled_filter_blocks(const LayerSpec& s, int blocks);
// The ranges of Params::values that hold output channels [o0, o1) of layer l: biases,
// batch-norm scales, weights (each contiguous in Darknet's layout).
std::vector<std::pair<int64_t, int64_t>> filter_block_ranges(const Params& p, const LayerSpec& s, int o0, int o1);

// One block of one convolution, as a one-layer net of its own run by the untiled tail's own
// segment code. Its weights, biases and scales are read in place from the net's parameters
// and its gradients added in place into the net's gradient (no second copy); only its
// running statistics are its own, copied from and to the net's.
class BlockConv {
 public:
  struct Options {
    int batch = 1;
    BnMode bn = BnMode::Sync;
    Trace* trace = nullptr;
    bool staged_weights = false;  // formatted weights only while the block runs (SegmentOptions)
    bool measure_scales = false;  // verify's reference measures its gradients' scales (take_scale)
  };
  // `p`, `grad`: the net's parameters and gradient (kept by reference).
  BlockConv(DnnlContext& ctx, const NetSpec& net, Params& p, float* grad, int layer, int o0, int o1,
            const Options& opt);
  ~BlockConv();
  // After the net's parameters changed: the block's running statistics from them, and its
  // kernels' copy of the weights.
  void load(const Params& p);
  // `in`: the layer's whole input (plain); writes the block's output, [batch][o1 - o0][h][w],
  // to `out`, and in training its running statistics back into `p`.
  void forward(const TensorView& in, bool training, float* out, Params& p);
  // `dout`: the delta of the block's output ([batch][o1 - o0][h][w]); writes the block's
  // part of the input delta (plain, whole map) to `din` and adds its parameter gradients
  // into the net's gradient.
  void backward(const float* dout, float* din);
  // The scales of the block's parameter gradients since the last call (grad_scale.hpp).
  GradScale take_scale();
  Segment& segment() { return *seg_; }
  int layer() const { return layer_; }

 private:
  NetSpec net_;
  Params params_;  // held by the net's: slices into its values, running statistics of its own
  int layer_, o0_, o1_, batch_;
  std::vector<GradScale> scales_;  // [0]: the block's, when measured
  LocalComm comm_;
  std::unique_ptr<Segment> seg_;
};

}  // namespace tt
