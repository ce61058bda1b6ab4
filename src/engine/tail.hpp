// The layers after the cut on whole maps: each run of consecutive convolution/max-pool
// layers as an untiled Segment (the same kernels as the tiles), every other layer through
// its op (ops/op.hpp), which this executor runs without knowing its type. On the root
// process alone, or (--tail filters, TailOptions::blocks) on every process, each running
// its blocks of every convolution's filters (filter_blocks.hpp) and all of the rest.
// Every layer's output and delta live here as plain NCHW ([batch][c][h][w]) arrays; a
// delta is the sum over the layers that read that output.
#pragma once
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "engine/filter_blocks.hpp"
#include "engine/segment.hpp"
#include "layers/detector.hpp"
#include "ops/op.hpp"

namespace tt {

// What the tail allocates, computed once from the net: its runs and the floats of every
// layer's plain output (and delta, the same size), read by the Tail and the cost model.
struct TailLayout {
  std::vector<std::pair<int, int>> runs;  // [first, last) of each run of spatial layers
  std::vector<int64_t> out;               // per slot (0: the cut map; l - cut + 1: layer l), 0 inside runs
  std::vector<int64_t> saved;             // per slot: what its op keeps from forward for backward
  int64_t scratch = 0;                    // the largest op scratch or run input delta (before it is added)
  double maps_bytes() const;
  double deltas_bytes() const;
};
// filters: the convolutions that split into filter blocks are layers of their own.
TailLayout plan_tail(const NetSpec& net, int cut, int batch, bool filters = false);
// Whether any layer from `cut` on would run as filter blocks (--tail filters): an ungrouped
// convolution that no run of whole-map layers takes.
bool tail_has_filter_blocks(const NetSpec& net, int cut);
// --tail filters: per process, the ranges of the parameter vector its blocks hold, when
// block b of each layer after the cut runs on process block_rank[b] (known before the
// tail is built, so that the others' pages go back first).
std::vector<std::vector<std::pair<int64_t, int64_t>>> tail_block_ranges(const NetSpec& net, const Params& p, int cut,
                                                                        const std::vector<int>& block_rank,
                                                                        int processes);

struct TailOptions {
  int batch = 1;  // samples per micro-batch
  int in_cb = 1;  // layout of the map at the cut
  BnMode bn = BnMode::Sync;
  uint64_t seed = 1;                              // dropout masks
  Trace* trace = nullptr;                         // bench --trace: each layer's forward and backward (null: none)
  std::vector<GradScale>* grad_scales = nullptr;  // verify: see SegmentOptions (and Op::add_grad_scales)
  RunningStatsLog* stats_log = nullptr;           // data parallel: see SegmentOptions
  // --tail filters: the processes of `blocks` all run the tail; block b of each
  // convolution's filters runs on process block_rank[b]. Null: the root alone runs it.
  Comm* blocks = nullptr;
  std::vector<int> block_rank;
  bool staged_weights = false;  // formatted weights only while a layer (or block) runs (SegmentOptions)
};

class Tail {
 public:
  Tail(DnnlContext& ctx, const NetSpec& net, Params& params, float* grad, int cut, const TailOptions& opt);
  ~Tail();

  // `cut_map`: the whole output of layer cut - 1 (with blocks: on the root only, an empty
  // view elsewhere). `step` numbers dropout masks.
  void forward(const TensorView& cut_map, bool training, int64_t step);
  // Loss of the last forward against `truth` (per sample net.truth_size() floats: boxes for
  // detectors, else shaped like the output), then backward down to `cut_delta` (written).
  // `seen`: images seen before this micro-batch, as Darknet counts them ([region]'s prior).
  // With blocks every process computes the same loss and deltas; `cut_delta` may be empty.
  double loss_and_backward(const float* truth, int64_t step, int64_t seen, const TensorView& cut_delta);

  const float* output() const { return out_.back().data(); }            // the last layer's, plain
  const float* output_of(int l) const { return out_[slot(l)].data(); }  // layer l >= cut's
  DetectorLoss detector_loss;  // summed over the detector layers of the losses since reset

  std::vector<KernelUse> kernel_uses() const;
  SegmentTimes total_times() const;  // all layers, the runs' Segments included
  // Writes the entries of layers [cut, L) of a per-net-layer vector (see LayerTimes): a
  // run's from its Segment, the others' compute as fwd and bwd_data.
  void collect_layer_times(std::vector<LayerTimes>& v) const;
  void reset_times();
  Segment::MemoryUse memory_use() const;
  void refresh_weights();
  // With blocks: every process gets the running statistics of every block (before saving).
  void gather_running_stats();

 private:
  struct Run;                                                // a Segment over [first, last)
  struct Blocks;                                             // a convolution split into filter blocks
  size_t slot(int l) const { return size_t(l - cut_ + 1); }  // out_/delta_ index; slot 0: the cut map
  void forward_layer(int l, bool training, int64_t step);
  void backward_layer(int l, int64_t step);
  std::unique_ptr<Blocks> make_blocks(int l);
  // Calls f(segment, its first net layer, what to add to the segment's layer numbers) for
  // every segment here: the runs' (numbered as the net) and the blocks' (one-layer nets).
  template <class F>
  void each_segment(F f) const;
  void forward_blocks(int l, bool training);
  void backward_blocks(int l);
  OpStep op_step(bool training, int64_t step) const;
  OpTensors tensors(int l);  // layer l's op's inputs, output, deltas, parameters

  DnnlContext& ctx_;
  const NetSpec& net_;
  Params& params_;
  float* grad_;
  int cut_;
  TailOptions opt_;
  LocalComm comm_;
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<int> run_of_;                              // per layer from the cut: its run, or -1
  std::vector<std::unique_ptr<Blocks>> blocks_;          // per layer from the cut, with filter blocks
  std::vector<std::unique_ptr<Op>> ops_;                 // per layer from the cut, null inside runs
  std::vector<std::vector<float>> out_, delta_, saved_;  // per slot
  std::vector<float> scratch_;                           // ops' scratch, a run's input delta before it is added
  SegmentTimes times;                                    // of the layers outside runs
  std::vector<LayerTimes> layer_times;                   // per layer from the cut, outside runs
};

}  // namespace tt
