// A tiled layer's own work on one tile's boxes. The schedule's Forward and Backward steps
// and its feature exchange call it (schedule.hpp), so the Segment moves maps between tiles
// and processes and never asks which kind of layer it runs. An op keeps its per-tile
// state (kernels, max-pool winners); the maps are the Segment's, wired by its memory plan.
// Kinds today: convolution (tiled_conv.cpp), max-pool (tiled_maxpool.cpp), the residual
// join (tiled_shortcut.cpp) and the concatenation (tiled_route.cpp).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/conv_pointwise.hpp"
#include "engine/grad_scale.hpp"
#include "engine/kernel_table.hpp"
#include "engine/memory_plan.hpp"
#include "engine/tile_links.hpp"
#include "layers/conv.hpp"
#include "layers/tensor.hpp"
#include "model/params.hpp"
#include "tiling/plan.hpp"

namespace tt {

// What every op of a Segment shares: the layer geometry, plan and buffers around it.
struct TiledOpEnv {
  DnnlContext& ctx;
  const NetSpec& net;
  const Plan& plan;
  const SegmentMemoryPlan& mem;
  const Params& params;
  int batch = 1;
  const std::vector<int>& local;                  // the tiles this process runs, ascending
  bool need_input_delta = false;                  // of the segment's first layer
  bool tiled = true;                              // SegmentOptions::tiled
  Buffer* stage = nullptr;                        // overlap parts: a part's input crop, then its output
  Buffer* crop = nullptr;                         // backward-weights: the input window of an owned box
  std::vector<GradScale>* grad_scales = nullptr;  // verify's scales (grad_scale.hpp), or null
};

// Tile t's maps of one layer (the views the memory plan gives them).
struct TileMaps {
  TensorView in;                     // the input on its box `in` (or, for a max-pool reading a convolution's
                                     // output through its batch-norm and activation, that convolution's y)
  TensorView y;                      // a convolution's output before batch-norm and activation, on box `held`
  TensorView z;                      // the layer's output, on box `fwd`
  std::span<const TensorView> side;  // a join's other inputs (slots 1, 2, ...), each covering its box `in`
};

class TiledOp {
 public:
  virtual ~TiledOp() = default;
  // Layer l's forward of tile t on `box`: its forward box (part < 0) or overlap part `part`
  // (memory_plan.hpp, LayerMemory::parts).
  virtual void forward(int t, int part, const Box& box, const TileMaps& m) = 0;
  // dL/d(input) of tile t into din, from dL/d(output) `delta` on its delta box: on din's
  // box, or only on `cells` of it when not empty.
  virtual void backward_data(int t, const TensorView& delta, const TensorView& din, const Box& cells) = 0;
  // A join, after backward_data: adds dL/d(input `slot`) of tile t on `cells` into `dside`.
  virtual void add_side_delta(int /*t*/, int /*slot*/, const TensorView& /*delta*/, const TensorView& /*dside*/,
                              const Box& /*cells*/) {
    fail("internal: an op with one input given a second");
  }
  // Adds tile t's weight and bias gradients into grad_w and grad_b (ops with weights), from
  // `delta` (its data may be rearranged: it is not read again) and the input `in`.
  // add_once: each element gets the tile's whole sum in one addition (Segment::tile_grads).
  virtual void backward_weights(int /*t*/, const TensorView& /*delta*/, const TensorView& /*in*/, float* /*grad_w*/,
                                float* /*grad_b*/, bool /*add_once*/) {}
  // Posts the forward values backward reads outside a tile's forward box (ExchangeFeatures):
  // y_of(t) is tile t's y; tags from tag0 on, one per piece.
  virtual void post_features(const std::vector<Piece>& pieces, int tag0, const TileLinks& links,
                             const std::function<TensorView(int)>& y_of) = 0;
  // Bytes the op keeps for tile t (max-pool winners).
  virtual size_t held_bytes(int /*t*/) const { return 0; }
  virtual void kernel_uses(std::vector<KernelUse>& /*uses*/) const {}
};

// Convolution l; `weights` is its weight cache, shared with the weight strategy.
std::unique_ptr<TiledOp> make_tiled_conv(const TiledOpEnv& env, int l, int in_cb, int out_cb, WeightCache& weights);
// The convolution's backward-weights kernel of tile t (the sharded weights read its
// gradient rows from it).
ConvKernel* tiled_conv_weights_kernel(TiledOp& conv, int t);
// The convolution of tile t again, dense over its forward box into `dst` (backward
// recomputes outputs it did not keep: memory_plan.hpp, LayerMemory::recompute).
void tiled_conv_recompute(TiledOp& conv, int t, const TensorView& in, float* dst);
// Max-pool l; with `pre`, it pools the previous convolution's y through that
// convolution's batch-norm and activation (TileMaps::in is then that y).
// Shortcut l, a residual join; out_of(t) is tile t's output (its activation's backward
// reads it).
std::unique_ptr<TiledOp> make_tiled_shortcut(const TiledOpEnv& env, int l, std::function<TensorView(int)> out_of);
// Route l, a concatenation whose first input is the layer before.
std::unique_ptr<TiledOp> make_tiled_route(const TiledOpEnv& env, int l);
std::unique_ptr<TiledOp> make_tiled_maxpool(const TiledOpEnv& env, int l, int out_cb, const ConvPointwise* pre,
                                            Act pre_act);

}  // namespace tt
