// What the tiling, the memory plan, the schedule and the cost model need to know about the
// op of a layer that runs tiled: one entry per op type (tiled_traits.cpp), read instead of
// asking which type a layer has. A new tiled op says here what it keeps, reads and writes.
#pragma once
#include "model/net_spec.hpp"

namespace tt {

struct TiledTraits {
  // Weights and biases: a weight cache, fetched and reduce-scattered with --low-memory,
  // and backward-weights on its boxes.
  bool weights = false;
  // Keeps y, its output before batch-norm and activation, beside z (its output): the
  // batch-norm/activation backward reads y, and the backward halo at a group end can carry
  // dL/dy of the owned cells only (no forward values outside them are needed).
  bool pre_activation = false;
  // Writes the channel-blocked layout of the kernels (DnnlContext::config.block); else
  // its output keeps its input's layout.
  bool blocked_output = false;
  // Backward reads the input map (backward-weights): a layer before it that hands over its
  // output in place keeps that output until backward.
  bool backward_reads_input = false;
  // Backward reads forward values on its delta box that only forward makes (max-pool
  // winners), whatever the batch-norm or activation.
  bool backward_reads_winners = false;
  // Backward reads its own output on its delta box (a shortcut's activation derivative):
  // it keeps its output as y, on box `held`.
  bool backward_reads_output = false;
  // Backward-data adds each output cell's delta into single input cells: it can write
  // straight into any buffer that covers its input delta box (the halo buffer at a group
  // start) on the cells its delta box reaches. Else it computes its input delta as a map
  // on a box of its own (bwd_data_box).
  bool backward_scatters = false;
  // Forward on a part of its box (overlap) reads and writes the maps where they are; else
  // a part runs on a staged crop of its input into a staged output.
  bool parts_in_place = false;
  // Forward can read the pre-activation output y of the layer before through that layer's
  // batch-norm and activation (applied to each value it reads), sparing z's buffer.
  bool reads_pre_activation = false;
  // Bytes per cell and channel of the forward values a feature exchange carries (y as
  // floats, winners as bytes).
  double feature_bytes = 4;
};

// Throws naming the layer for a type that does not run tiled.
const TiledTraits& tiled_traits(const LayerSpec& s);

// A layer with batch-norm and/or a non-linear activation after its pre-activation output.
bool has_pointwise(const LayerSpec& s);

}  // namespace tt
