// A whole training step: the tiled segment (layers before the cut, R x C tiles), then the
// tail (every layer after the cut, on the root process, see tail.hpp) on the gathered map;
// loss; backward the same way in reverse; gradient reduction once per batch; Darknet's SGD
// update. Data parallel (TrainOptions::replicas), each process runs all of that as a whole
// copy of its own on its share of the batch's micro-batches, and only the gradient sum,
// the running statistics and the update cross processes.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "engine/gradient_sync.hpp"
#include "engine/segment.hpp"
#include "engine/shards.hpp"
#include "engine/tail.hpp"
#include "engine/trace.hpp"
#include "model/params.hpp"

namespace tt {

enum class Overlap { Auto, On, Off };
const char* overlap_name(Overlap o);
Overlap parse_overlap(const std::string& s);  // throws naming the flag

// Where the layers after the cut run: on the root process alone, or on every process with
// each convolution's filters split into blocks (engine/filter_blocks.hpp).
enum class TailMode { Root, Filters };
const char* tail_mode_name(TailMode t);
TailMode parse_tail_mode(const std::string& s);  // throws naming the flag

struct TrainOptions {
  int rows = 1, cols = 1;
  std::string groups = "none";
  int cut = -1;  // -1: every layer before the first untileable one
  BnMode bn = BnMode::Sync;
  bool need_input_delta = false;
  bool record_grad_scales = false;  // verify: measure the parameter gradients' scales (take_grad_scales)
  uint64_t seed = 1;                // dropout masks
  int tiles_per_rank = 1;           // with several processes: tile t runs on process t / tiles_per_rank
  // Shard the tiled convolutions' weights, gradients and momentum across processes (see
  // shards.hpp; kernel-formatted weights for the running layer only, whatever the
  // micro-batches), and recompute in backward the convolution outputs forward does not
  // otherwise keep.
  bool low_memory = false;
  // Keep every convolution's weights formatted for its kernels between steps (formatted
  // after each update) instead of formatting them just before each use into staging
  // buffers every layer shares: the same work where a process runs one micro-batch per
  // update (with more they stay kept), more memory (the kernels' copies of all the
  // weights). The planner's calibration measures that way (reload_s, weight copies);
  // commands that only run forward keep them (formatted once).
  bool keep_formatted_weights = false;
  KernelPath kernels = KernelPath::Auto;                    // see layers/backend.hpp
  int channel_block = 0;                                    // 0: oneDNN's preference on this CPU; else 8 or 16
  TileSplit split;                                          // weights of the grid's rows and columns (plan.hpp)
  BackwardFeatures features = BackwardFeatures::Recompute;  // see plan.hpp
  // At forward group starts, compute each tile's interior while its halo is in flight:
  // Auto where the halo comes from another host (a network link), On wherever it comes
  // from another tile (in one process only useful to test that it is exact), Off never.
  // On also sends the weight gradients in buckets during backward (gradient_sync.hpp).
  Overlap overlap = Overlap::Auto;
  // Processes per device, consecutive ranks together; 0: those with the same host name
  // share a device. Several on a device: the gradient sum and weight share go one copy per
  // device (engine/device_chain.hpp).
  int ranks_per_device = 0;
  // Data parallel: as many whole copies of the net as processes (0: the processes split the
  // net into tiles instead). Process r runs micro-batches S·r/P to S·(r+1)/P - 1 of a
  // batch's S (the root hands them out); batch-norm statistics stay inside a micro-batch as
  // on one device, the gradients are summed in micro-batch order (MicroBatchSync) and the
  // running statistics folded in that order, so the bits do not depend on the number of
  // copies (1 included). The grid then tiles each copy inside its process.
  int replicas = 0;
  // Filters: every process runs the tail, each convolution there split into as many blocks
  // of filters as the grid has tiles (block b where tile b runs); the blocks' weights,
  // gradients and momentum are updated only where they run, so they never cross a link.
  TailMode tail = TailMode::Root;
  // Filters: blocks per convolution; 0: the grid's tiles. One process only (verify's
  // reference runs the tested grid's blocks on its one tile).
  int filter_blocks = 0;
  // The device that holds the maps and does their element-wise work and the SGD update
  // (device/device.hpp); nullptr: this host's CPU.
  Device* device = nullptr;
  // Tests only: edits the tiled plan right after make_plan, before anything is laid out or
  // allocated from it (e.g. tests/test_verify.cpp plants a halo one row short, which verify
  // must catch). Empty: the plan as made. verify_training's untiled reference ignores it.
  std::function<void(Plan&)> adjust_plan;
};

// Which process runs each tile; throws if the process count does not fit the grid.
std::vector<int> tile_ranks(int tiles, int tiles_per_rank, int processes);

struct StepTimes {
  double fwd = 0, bwd = 0, halo = 0, update = 0, io = 0, weights = 0, total = 0;
  double halo_exchange = 0, halo_exchange_fwd = 0, halo_overlap = 0;  // see SegmentTimes
  double reload = 0;  // the part of `update` that re-formats the weights for the kernels
};

class Trainer {
 public:
  Trainer(const NetSpec& net, Params& params, const TrainOptions& opt, Comm& comm);
  ~Trainer();
  // The parameters process `rank` of `size` will neither run with nor update under `opt`
  // (the other processes' shards and filter blocks), sorted and disjoint: what its
  // Trainer hands back, and what the caller can leave unfilled (Params::unfilled) so that
  // they never count in its memory.
  // Weights formatted before each use rather than kept formatted: where each process runs
  // one micro-batch per update (with several, each would format them again).
  static bool stage_weights(const TrainOptions& opt, const NetSpec& net) {
    return !opt.keep_formatted_weights && net.subdivisions == (opt.replicas ? opt.replicas : 1);
  }
  static std::vector<std::pair<int64_t, int64_t>> weights_not_kept(const NetSpec& net, const Params& params,
                                                                    const TrainOptions& opt, int rank, int size);

  // Forward + backward of one micro-batch (net.micro_batch() samples, plain NCHW input,
  // net.truth_size() floats of truth per sample); gradients accumulate. Returns the loss (summed).
  // Input and truth are read on the root process only (elsewhere they may be null).
  double forward_backward(const float* input, const float* truth);
  // Forward only in inference mode (batch-norm running statistics, no dropout).
  const float* predict(const float* input);
  // Sums gradients across processes, applies the SGD update, zeroes the gradients. With
  // several processes each updates its own part of the parameters (gradient_sync.hpp).
  void update();
  // forward_backward over all subdivisions of a batch (net.batch samples) + update.
  double train_step(const float* input, const float* truth);

  // This process's gradients (sharded: only its parts of the sharded weights); with
  // several tiles here, their sum in tile order, into a copy valid until the next call.
  std::span<const float> grad() const;
  // With need_input_delta (verify): the whole summed gradient the last update() applied.
  const std::vector<float>& last_grad() const { return last_grad_; }
  const float* output() const { return out_; }  // [micro_batch][output size]
  // Root: the plain output of layer l >= cut() of the last forward (e.g. each [yolo] layer's).
  const float* output_of(int l) const { return tail_->output_of(l); }
  // Root: the detector layers' losses and statistics since reset_times().
  DetectorLoss detector_loss() const {
    return opt_.replicas ? replica_detector_loss_ : tail_ ? tail_->detector_loss : DetectorLoss{};
  }
  const float* input_delta() const { return input_delta_.data(); }  // with need_input_delta
  void reload_weights();                                            // after Params were changed from outside
  // Sharded: completes Params::values on every process; with TailMode::Filters, on the
  // root (the others keep only their own filter blocks). To save them, save_layers().
  void gather_weights();
  // Saving (collective): the weights and batch-norm statistics, and the momentum if asked,
  // whole on the root one layer at a time. The root's weights(l) saves layer l's weights,
  // then momentum(l, m) its momentum (m from l's first parameter on), each before anything
  // else is gathered, and every process then hands back the pages it neither updates nor
  // runs with: a checkpoint costs the root one layer more than it keeps, not a whole net.
  struct LayerSaver {
    std::function<void(const LayerSpec& l)> weights;
    std::function<void(const LayerSpec& l, std::span<const float> momentum)> momentum;  // empty: not saved
  };
  void save_layers(const LayerSaver& save);
  // Optimizer state (Darknet's momentum buffer), to start another trainer from this one's
  // state; with several processes, whole only with need_input_delta.
  std::span<const float> momentum() const { return {momentum_.data(), momentum_.size()}; }
  void set_momentum(std::span<const float> v);
  // Resuming: a whole momentum from which each process takes the parts it updates.
  void restore_momentum(std::span<const float> whole);
  int64_t step() const { return step_; }  // updates done (numbers dropout masks)
  void set_step(int64_t s) { step_ = s; }
  StepTimes times() const;  // accumulated since reset_times(), all parts
  // Per net layer, accumulated since reset_times(): the spatial layers' compute (see
  // segment.hpp); each other layer's forward in `fwd`, backward in `bwd_data` (the loss's
  // in backward).
  std::vector<LayerTimes> layer_times() const;
  struct Memory {
    double maps_mb = 0, deltas_mb = 0, filters_mb = 0, scratch_mb = 0;
    double kept_mb = 0;  // the part of filters_mb in weights, gradients and momentum (and their sums' buffers)
  };
  Memory memory() const;
  bool root() const { return comm_.rank() == kRoot; }
  void reset_times();
  int cut() const { return cut_; }
  const KernelConfig& kernel_config() const { return ctx_.config; }
  std::vector<KernelUse> kernel_uses() const;  // this process's convolution kernels
  // The spans of the steps from trace().start(comm) on (bench --trace).
  Trace& trace() { return trace_; }
  // With record_grad_scales, per net layer: the scales of its parameter gradients summed
  // since the last call (engine/grad_scale.hpp), zeros for layers without; then zeroes them.
  std::vector<GradScale> take_grad_scales();

 private:
  // Throws: `what` came out non-finite in step step_ + 1 (before anything is saved).
  [[noreturn]] void diverged(const std::string& what) const;
  // Throws, before anything is allocated, if this process's share of the run cannot fit
  // in its memory limit.
  void check_memory(const Plan& plan, const std::vector<int>& ranks) const;
  void forward(const float* input, bool training);
  double loss_and_backward(const float* truth);
  void make_tail(const std::vector<int>& ranks, RunningStatsLog* log);
  // Per filter block: its process.
  static std::vector<int> block_ranks(const TrainOptions& opt, const std::vector<int>& tile_rank, int size);
  TensorView cut_delta_view();                                            // root: the whole delta at the cut
  // Where the parameters of the layers after the cut begin.
  static int64_t tail_begin(const NetSpec& net, const Params& params, int cut);
  int64_t tail_begin() const { return tail_begin(net_, params_, cut_); }
  // Data parallel: the first micro-batch process r runs (r = processes: the batch's end).
  int first_micro_batch(int r) const { return int(int64_t(net_.subdivisions) * r / comm_.size()); }
  double forward_backward_replica(const float* input, const float* truth);
  double train_step_replicas(const float* input, const float* truth);
  void fold_running_stats_in_order();
  // The tiled part and the tail run on this process's copy: the root of the tiles' comm.
  bool tile_root() const { return tiles_comm_.rank() == kRoot; }
  bool filters() const { return opt_.tail == TailMode::Filters; }
  bool stage_weights() const { return stage_weights(opt_, net_); }

  const NetSpec& net_;
  Params& params_;
  TrainOptions opt_;
  Comm& comm_;
  LocalComm replica_comm_;  // data parallel: the copy on this process alone
  Comm& tiles_comm_;        // what the tiles and the tail run over: comm_, or replica_comm_
  int n_, cut_;
  int first_ = 0;  // the first tiled layer: layers before it run whole on the root (NetSpec::first_tiled)
  DnnlContext ctx_;
  Buffer grad_, momentum_;  // sharded: only this process's parts are ever touched
  std::vector<float> last_grad_;
  mutable std::vector<float> summed_grad_;  // grad() with several tiles
  std::unique_ptr<ShardPlan> shards_;       // --low-memory
  std::unique_ptr<GradientSync> sync_;      // how the batch's gradients become the update
  // The parameters this process neither updates nor runs with (the other processes' shards
  // and filter blocks): their pages are handed back (not with need_input_delta).
  std::vector<GradientSync::Range> unused_;
  void hand_back_unused_weights(GradientSync::Range r);
  void hand_back_unused_momentum(GradientSync::Range r);
  MicroBatchSync* micro_sync_ = nullptr;  // sync_, data parallel
  RunningStatsLog stats_log_;             // data parallel: this batch's micro-batches' statistics
  std::vector<float> replica_in_, replica_truth_,
      replica_out_;                     // data parallel: this process's micro-batches; the root's copy of an output
  DetectorLoss replica_detector_loss_;  // data parallel, root: every copy's, summed in process order
  std::unique_ptr<Segment> tiled_;
  std::unique_ptr<Tail> tail_;  // root only (every process with TailMode::Filters)
  std::vector<float> truth_;    // TailMode::Filters: the micro-batch's truth, from the root
  Buffer cut_map_, cut_delta_;  // whole map at the cut and its delta (root only)
  std::vector<float> input_delta_;
  // Root only, with a layer before the tiled part: its op, its output (the tiled part's
  // input) and that output's delta.
  std::unique_ptr<Op> prefix_;
  std::vector<float> prefix_out_, prefix_delta_;
  LayerTimes prefix_times_;  // the layer before the tiled part (layer_times()[first_ - 1])
  const float* input_ = nullptr;  // the micro-batch forward last read
  const float* out_ = nullptr;
  int64_t step_ = 0;
  int micro_ = 0;  // micro-batches since the last update
  StepTimes times_;
  Trace trace_;
  std::vector<GradScale> grad_scales_;  // with record_grad_scales: [layer]
  std::vector<GradScale>* grad_scales() { return grad_scales_.empty() ? nullptr : &grad_scales_; }
};

}  // namespace tt
