// The state a Segment keeps per layer and per tile (private to engine/segment*.cpp).
#pragma once
#include <memory>
#include <vector>

#include "engine/segment.hpp"
#include "engine/tiled_op.hpp"

namespace tt {

struct Segment::LayerState {
  const LayerSpec* spec = nullptr;
  int in_cb = 0, out_cb = 0;  // layouts of the layer's input and output maps
  bool pointwise = false;     // conv followed by batch-norm and/or a non-linear activation
  std::unique_ptr<WeightCache> weights;
  std::unique_ptr<ConvPointwise> pw;  // convolutions: batch-norm and activation, z = act(a*y + b)
  std::unique_ptr<TiledOp> op;        // the layer's own work on tile boxes
};

struct Segment::TileState {
  std::vector<Buffer> owned;                     // storage behind the views below
  std::vector<TensorView> in, y, z;              // per layer: input box, conv output, layer output
  std::vector<std::vector<TensorView>> side_in;  // per layer: a join's other inputs (slots 1, ...)
  std::vector<TensorView> side_delta;            // per layer read by side edges: their part of its delta
  std::vector<Buffer> side_deltas;               // storage behind side_delta
  Buffer buf[2];                                 // the two delta buffers; they double as forward scratch
  float* data(int b) const { return buf[b].data(); }
  TensorView cur;  // current delta during backward
};

}  // namespace tt
