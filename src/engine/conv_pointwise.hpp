// A convolution's batch-norm and activation over the tiles of a segment, folded per channel
// into z = act(a·y + b). Batch statistics are each tile's sums over its owned cells, added
// up in tile order by the segment (tile_order.hpp), so they are the same however the map is
// split; Frozen (or outside training) uses the running statistics. Without batch-norm a = 1
// and b = 0 and only the activation runs.
#pragma once
#include <functional>
#include <vector>

#include "device/device.hpp"
#include "engine/grad_scale.hpp"
#include "layers/tensor.hpp"
#include "model/params.hpp"

namespace tt {

// One local tile's view of the layer: its convolution output y and current delta, the cells
// it owns, and where its parameter gradients go.
struct PointwiseTile {
  int tile = 0;
  TensorView y, delta;
  Box own;
  float* grad = nullptr;  // the tile's gradient buffer (whole parameter vector)
};

// Adds every tile's `width` doubles in `slots` ([tile][width]) in tile order into `total`.
using SumOverTiles = std::function<void(std::vector<double>& slots, int width, double* total)>;

class ConvPointwise {
 public:
  ConvPointwise(const LayerSpec& s, int out_cb, int tiles, Device& device);
  const float* a() const { return a_.data(); }
  const float* b() const { return b_.data(); }

  // Forward: a and b for this micro-batch (updates the running statistics with batch ones).
  void forward(const std::vector<PointwiseTile>& tiles, Params& params, int batch, bool batch_stats,
               const SumOverTiles& sum);
  // Backward of the activation (and batch-norm) on each tile's delta over `region(tile)`;
  // with batch-norm also the tiles' dβ, dγ and, `sync`, the batch statistics' part.
  void backward(const std::vector<PointwiseTile>& tiles, const std::function<Box(const PointwiseTile&)>& region,
                const Params& params, int batch, bool sync, const SumOverTiles& sum);
  // verify: from now on each batch-norm backward adds the scales of dβ and dγ (the delta
  // after the activation's backward, over the owned cells: engine/grad_scale.hpp) to
  // `to`'s biases and scales; null: no more (the default: it costs a pass over the delta).
  void measure_grad_scales(GradScale* to) { scale_ = to; }

 private:
  const LayerSpec& s_;
  Device& dev_;
  std::vector<float> a_, b_, k1_, k2_, k3_, mean_f_;
  std::vector<double> mean_, rstd_, s1_, s2_;
  std::vector<double> slots_;  // per tile: its own sums (s1_ or s2_ are their sum in tile order)
  GradScale* scale_ = nullptr;
  void add_grad_scales(const PointwiseTile& pt);
};

}  // namespace tt
