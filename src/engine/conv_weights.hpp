// How a segment's convolutions get their weights and give back their weight gradients,
// one strategy per weight mode:
//   Replicated  every process holds all weights: they are formatted for the kernels after
//               each update, and each tile adds its gradient into its own gradient buffer
//               (summed in tile order once per batch, engine/gradient_sync.hpp)
//   Sharded     --low-memory (engine/shards.hpp): a layer's weights are all-gathered and
//               formatted just before each use, and its gradient reduce-scattered right after
//               its backward, in chunks of output channels so no layer is held whole
//   Staged      every weight of the segment is here, formatted just before each use into
//               the context's shared staging buffers (SegmentOptions::staged_weights)
// The segment calls the same four hooks either way and never asks which mode runs.
#pragma once
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "engine/shards.hpp"
#include "engine/trace.hpp"
#include "layers/conv.hpp"
#include "model/params.hpp"

namespace tt {

// A convolution of the segment, as the weight modes see it.
struct ConvWeightsLayer {
  int layer = 0;                             // net layer index
  WeightCache* cache = nullptr;              // the kernels' formatted weights
  ConvKernel* single_bwd_weights = nullptr;  // the backward-weights kernel when one local tile runs it, else null
};

class ConvWeights {
 public:
  virtual ~ConvWeights() = default;
  // After an update or a load: formats the master weights for the kernels (sharded: nothing,
  // each use fetches them).
  virtual void refresh() = 0;
  // Before layer l's kernels run the passes `uses` (WeightCache::kForward, kBackwardData).
  virtual void before_use(int l, int uses) = 0;
  // Layer l's backward-weights: begin_grad, then grad_target for each local tile t (where its
  // weight gradient is added; null: left in the kernel's scratch), then end_grad.
  virtual void begin_grad(int l) = 0;
  virtual float* grad_target(int l, float* tile_grad) = 0;
  virtual void end_grad(int l) = 0;
  virtual size_t staging_bytes() const = 0;  // buffers of their own (counted as weight copies)
};

std::unique_ptr<ConvWeights> replicated_conv_weights(Params& params, std::vector<ConvWeightsLayer> layers);
std::unique_ptr<ConvWeights> staged_conv_weights(Params& params, std::vector<ConvWeightsLayer> layers);
// `wait`: seconds spent in the collectives are added here; `trace`: their spans (may be null).
std::unique_ptr<ConvWeights> sharded_conv_weights(DnnlContext& ctx, Params& params, float* grad, Comm& comm,
                                                  const ShardPlan& shards, const NetSpec& net,
                                                  std::vector<ConvWeightsLayer> layers, int local_tiles, double* wait,
                                                  Trace* trace);

}  // namespace tt
