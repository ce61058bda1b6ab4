// Runs the spatial layers [first, last) of a net as fused tile stacks: forward group by
// group (halo exchange at each group's input), backward group by group over delta
// maps, weight gradients over owned boxes only. This process runs the tiles tile_rank
// gives it, layer by layer in lockstep with the other processes' tiles (batch-norm
// statistics are a synchronisation point inside groups), as its compiled schedule lists
// the steps (schedule.hpp). The layers form a chain (each reads the one before) with side
// edges into joins (a residual shortcut): docs/tiling.md, "Residual blocks in the engine".
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "engine/conv_pointwise.hpp"
#include "engine/conv_weights.hpp"
#include "engine/grad_scale.hpp"
#include "engine/kernel_table.hpp"
#include "engine/memory_plan.hpp"
#include "engine/schedule.hpp"
#include "engine/shards.hpp"
#include "engine/tile_links.hpp"
#include "engine/tile_order.hpp"
#include "engine/trace.hpp"
#include "layers/conv.hpp"
#include "layers/tensor.hpp"
#include "model/params.hpp"
#include "tiling/plan.hpp"

namespace tt {

enum class BnMode { Sync, Frozen };
struct TiledOpEnv;

struct SegmentTimes {
  double fwd = 0, bwd = 0, halo = 0, io = 0;  // halo includes batch-norm reductions
  double weights = 0;                         // sharded weights: gathers and gradient reduce-scatters
  double halo_exchange = 0;                   // the part of halo spent in halo exchanges (posting, copying, waiting)
  double halo_exchange_fwd = 0;               // the part of halo_exchange in forward
  double halo_overlap = 0;                    // forward compute done while halo messages were in flight (part of fwd)
  SegmentTimes& operator+=(const SegmentTimes& o) {
    fwd += o.fwd, bwd += o.bwd, halo += o.halo, io += o.io, weights += o.weights;
    halo_exchange += o.halo_exchange, halo_exchange_fwd += o.halo_exchange_fwd, halo_overlap += o.halo_overlap;
    return *this;
  }
};

// Where one layer's compute time goes, summed over this process's tiles (waits for other
// processes excluded): what `tiletrain calibrate` fits its cost model to.
struct LayerTimes {
  double fwd = 0;            // convolution (with the crop of its input) or max-pool
  double fwd_pointwise = 0;  // batch-norm statistics, batch-norm and activation
  double bwd_pointwise = 0;  // their backward (and, with recompute, the convolution again)
  double bwd_data = 0;       // backward-data (or max-pool backward) and the input delta's copy
  double bwd_weights = 0;    // backward-weights (with its crops)
  LayerTimes& operator+=(const LayerTimes& o);
};
// The five passes by name (as bench --layers and device model files call them).
struct LayerPass {
  const char* name;
  double LayerTimes::*time;
};
inline constexpr LayerPass kLayerPasses[] = {{"fwd", &LayerTimes::fwd},
                                             {"fwd_pointwise", &LayerTimes::fwd_pointwise},
                                             {"bwd_pointwise", &LayerTimes::bwd_pointwise},
                                             {"bwd_data", &LayerTimes::bwd_data},
                                             {"bwd_weights", &LayerTimes::bwd_weights}};
inline LayerTimes& LayerTimes::operator+=(const LayerTimes& o) {
  for (const LayerPass& p : kLayerPasses) this->*p.time += o.*p.time;
  return *this;
}

constexpr int kRoot = 0;  // the process that holds whole maps, the untiled layers and the loss

struct SegmentOptions {
  int batch = 1;
  int in_cb = 1;  // layout of the segment's input map (1 = plain NCHW, or ctx.config.block)
  BnMode bn = BnMode::Sync;
  bool need_input_delta = false;
  // `tile_rank[t]`: the process that runs tile t; this process runs those equal to comm.rank().
  std::vector<int> tile_rank;
  const ShardPlan* shards = nullptr;  // the convolution weights are sharded (shards.hpp); null: replicated
  // Not sharded, but formatted for the kernels just before each use, into the context's
  // staging buffers that every segment shares, instead of kept formatted (a layer's
  // formatted weights exist only while it runs: Trainer::stage_weights).
  bool staged_weights = false;
  // Convolutions whose activated output is not kept (e.g. before a max-pool) do not keep
  // their output either; backward recomputes it (one more convolution).
  bool recompute = false;
  // far[t]: at group starts, compute the interior while tile t's halo pieces are in flight
  // (memory_plan.hpp, overlap_parts); empty: never.
  std::vector<bool> far;
  // false: nothing here is split into tiles (the tail after the cut), so forward and
  // backward-data may run on kernels whose sums depend on the map's size (conv.hpp).
  bool tiled = true;
  Trace* trace = nullptr;  // bench --trace: where the spans go (null: nowhere)
  int trace_layer =
      -1;  // a one-layer net standing for a layer of a larger one (a filter block): that layer's index in the spans
  // verify: per net layer, the scales of each convolution's parameter gradients are added
  // here (engine/grad_scale.hpp; the batch-norm's once measure_pointwise_scales() is called);
  // null: not measured.
  std::vector<GradScale>* grad_scales = nullptr;
  // Data parallel: where batch-norm forwards put their batch statistics instead of folding
  // them into the running ones (conv_pointwise.hpp); null: folded at once.
  RunningStatsLog* stats_log = nullptr;
};

// One tile in one process on whole maps (the tail's runs, filter blocks): the input in the
// context's channel block, its delta wanted, any kernel.
inline SegmentOptions whole_map_options(int batch, int block, BnMode bn, Trace* trace) {
  return SegmentOptions{.batch = batch,
                        .in_cb = block,
                        .bn = bn,
                        .need_input_delta = true,
                        .tile_rank = {0},
                        .shards = nullptr,
                        .staged_weights = false,
                        .recompute = false,
                        .far = {},
                        .tiled = false,
                        .trace = trace};
}

class Segment {
 public:
  Segment(DnnlContext& ctx, const NetSpec& net, Params& params, float* grad, Plan plan, Comm& comm, SegmentOptions opt);
  ~Segment();

  // `input`: the whole input map of layer `first` (read on the root process only).
  void forward(const TensorView& input, bool training);
  // Copies the owned output cells of every tile into `out` (whole map, root only).
  void gather_output(const TensorView* out);
  // `delta_out`: dL/d(output) on the whole output map (root only); with
  // need_input_delta, `delta_in` receives dL/d(input) on the whole input map (root only).
  void backward(const TensorView& delta_out, const TensorView* delta_in);
  // Re-reads the master weights into the kernels' formats (after an update or load;
  // sharded, each layer's weights are gathered and formatted just before use instead).
  void refresh_weights();
  const Schedule& schedule() const { return schedule_; }
  // Called after each layer's backward with the layer's index, once its parameters'
  // gradients are final on this process (the next backward's are left alone); null: never.
  // Posted messages are progressed after every backward step while it is set, and
  // link_free is called where compute follows that sends no message (backward only).
  std::function<void(int layer)> grad_ready;
  std::function<void()> link_free;

  int out_cb() const { return out_cb_; }
  // The kernel every convolution pass of this process runs (one entry per layer, pass
  // and kernel; tiles of different shapes may run different kernels).
  std::vector<KernelUse> kernel_uses() const;
  SegmentTimes times;
  std::vector<LayerTimes> layer_times;  // per layer [first, last), accumulated like `times`
  struct MemoryUse {
    size_t maps = 0, deltas = 0;  // bytes: feature maps (+ max-pool winners), delta maps (+ crops)
    size_t weight_copies = 0;     // weights in the layouts the kernels chose (+ staging)
  };
  MemoryUse memory_use() const;
  // Not sharded: this process's tiles' weight gradients, kept apart (in tile order) until
  // the per-batch sum adds them up in tile order (tile_order.hpp). The first is `grad`
  // itself; the others cover parameters [0, tile_grad_end()). One process holding every
  // tile with one micro-batch a step: the tiles add into `grad` itself, in tile order, each
  // its whole sum in one addition: the same bits as the sum of separate gradients (the
  // first addition is to +0, which gives what a separate gradient would hold), without
  // their memory and passes. tile_grads() is then {grad}.
  std::vector<float*> tile_grads() const;
  int64_t tile_grad_end() const { return grad_end_; }
  void zero_tile_grads();
  // verify: with SegmentOptions::grad_scales, the batch-norms' backward measures the scales
  // of dβ and dγ too (they are summed there, before add_grad_scale sees the delta). Call
  // before the first backward.
  void measure_pointwise_scales();

 private:
  struct LayerState;  // per layer: its op, batch-norm state
  struct TileState;   // per tile: buffers
  TensorView input_of(int t, int l) const;
  template <class Box_, class Dst>
  void scatter(const TensorView& full, Box_ box_of, Dst dst_of);
  template <class Box_, class Src>
  void gather(const TensorView* full, Box_ box_of, Src src_of);
  void run(const std::vector<Step>& steps, bool backward);
  void execute(const Step& st);
  static bool computes(StepKind k);
  void forward_layer(int l, bool halo_in_flight);
  void pointwise_forward(int l);
  void compute(int t, int l, int part);
  void scatter_delta();
  void backward_layer(int l, bool want_delta_in);
  void backward_halo(int l);
  void post_halo(int e);
  void sum_deltas(int l);
  SumOverTiles sum_over_tiles(int l);  // batch-norm sums, timed as waiting
  std::vector<PointwiseTile> pointwise_tiles(int l) const;
  float* grad_of(int t) const { return tile_grad_[size_t(t)]; }
  void pointwise_backward(int l, bool owned_only);
  void exchange_features(int end);
  // bench --trace: a span [t0, t1] of layer l (or of none, l < 0); `name` null: the layer's type.
  void span(const char* cat, Lane lane, double t0, double t1, int l, const char* name = nullptr) const;

  DnnlContext& ctx_;
  const NetSpec& net_;
  Params& params_;
  float* grad_;
  Plan plan_;
  int batch_, in_cb_, out_cb_;
  BnMode bn_;
  bool need_input_delta_;
  std::vector<std::unique_ptr<LayerState>> layers_;
  std::vector<std::unique_ptr<TileState>> tiles_;
  Buffer crop_src_;  // input cells of an owned box for backward-weights
  Buffer stage_;     // overlap: a part's input crop, then its output
  // Per layer: a convolution whose batch-norm and activation the max-pool after it applies
  // to its input on the fly (its z is never written: one pass over the map less).
  std::vector<char> act_in_pool_;
  Comm& comm_;
  std::vector<int> tile_rank_;
  TileLinks links_;                     // pieces between tiles, here or to other processes
  std::vector<int> local_;              // tiles this process runs
  std::unique_ptr<TiledOpEnv> op_env_;  // what the layers' ops share (stable address)
  TileOrder order_;                     // batch-norm sums
  std::vector<float*> tile_grad_;       // [tile]: where its gradients go (grad_, or one of extra_grads_)
  std::vector<Buffer> extra_grads_;
  bool shared_grad_ = false;  // the local tiles add into grad_ one after another (tile_grads())
  int64_t grad_end_ = 0;
  SegmentMemoryPlan mem_;  // every buffer of local_'s tiles: its size and role
  double bn_wait_ = 0, weights_wait_ = 0, halo_wait_ = 0;
  Trace* trace_;
  int trace_layer_;
  std::vector<GradScale>* grad_scales_;
  std::unique_ptr<ConvWeights> weights_;  // replicated or sharded (conv_weights.hpp)
  Schedule schedule_;                     // what forward and backward run, in order
  // The current pass's arguments, for the steps.
  const TensorView* input_ = nullptr;
  const TensorView* delta_out_ = nullptr;
  const TensorView* delta_in_ = nullptr;
  bool training_ = false;
};

}  // namespace tt
