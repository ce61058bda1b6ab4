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

// Data parallel (TrainOptions::replicas): each micro-batch's batch statistics, kept here in
// forward order instead of being folded into the running ones, so that the update can fold
// every replica's micro-batches in micro-batch order. Per layer and micro-batch: the layer's
// index, C, then C means and C variances (unbiased, as the running variance takes them).
using RunningStatsLog = std::vector<double>;
// Folds a log's records into params' running statistics, record by record, exactly as a
// forward without a log would have.
void fold_running_stats(const double* log, size_t n, Params& params);

class ConvPointwise {
 public:
  // log: null, or where forward puts the batch statistics instead of the running ones.
  ConvPointwise(const LayerSpec& s, int out_cb, int tiles, Device& device, RunningStatsLog* log);
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
  RunningStatsLog* log_ = nullptr;
  void add_grad_scales(const PointwiseTile& pt);
};

}  // namespace tt
