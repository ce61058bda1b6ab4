// How a batch's gradients become one update across processes: one object per way of doing
// it, chosen once by the trainer.
//   TileOrderSync  (default): the tiles' gradients are summed in tile order (tile_order.hpp).
//                  On several processes the optimizer is split: each one sums, and applies
//                  SGD to, one contiguous part of the flat parameter vector, then the
//                  weights are all-gathered; only that part of the momentum is touched.
//                  With `overlap`, the gradients move in buckets while backward still
//                  computes (as PyTorch DDP's do), summed in the same order. With
//                  several processes on a device (and no overlap), the sum runs as a
//                  chain over the devices and the weights cross each link once
//                  (device_chain.hpp), again the same bits.
//   MicroBatchSync (data parallel, TrainOptions::replicas): every process runs the whole net
//                  on its own micro-batches; each micro-batch's gradient is kept apart and the
//                  sum is a left fold over the batch's micro-batches in their order, whichever
//                  process ran which (tile_order.hpp, with micro-batches for tiles), so it is
//                  the same on any number of processes. The optimizer is split as above.
//   FilterBlocksSync (--tail filters): the layers before the cut as TileOrderSync does; after
//                  it, each filter block's whole gradient is on the process that runs the
//                  block (tail.hpp), which alone updates and keeps its weights: no traffic.
//                  The tail's other parameters (layers every process runs) are the root's
//                  to update, and go to the others after the update.
//   ShardedSync    (--low-memory): the tiled convolutions' weights, gradients and momentum
//                  are sharded (shards.hpp); their gradients were reduce-scattered during
//                  backward, the rest (replicated) is all-reduced here.
// The SGD itself (Trainer::update) is elementwise over the ranges updated() names.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "engine/device_chain.hpp"
#include "engine/segment.hpp"
#include "engine/shards.hpp"
#include "engine/tile_order.hpp"

namespace tt {

class GradientSync {
 public:
  using Range = std::pair<int64_t, int64_t>;  // [begin, end) of the flat parameter vector
  virtual ~GradientSync() = default;
  // Whether it moves gradients during backward (then ready() and link_free() matter).
  virtual bool overlaps() const { return false; }
  // Backward has made parameters [begin, end) final for this batch: a sync that overlaps
  // may start moving them. Every process reports the same ranges in the same order.
  virtual void ready(int64_t /*begin*/, int64_t /*end*/) {}
  // The link is free of other messages until compute that follows now ends: a good moment
  // to send some of what ready() took (returns true if it sent any).
  virtual bool link_free() { return false; }
  // Sums the batch's gradients over tiles and processes into `grad` on updated().
  virtual void reduce(float* grad) = 0;
  // The parameters this process applies SGD to (sorted, disjoint).
  virtual const std::vector<Range>& updated() const = 0;
  // Clears what the batch wrote, for the next one.
  virtual void zero(float* grad) = 0;
  // After SGD: every process gets the weights the others updated.
  virtual void share_weights(float* /*weights*/) {}
  // Parameters r (whole layers) of a gradient or momentum vector whole from every process's
  // parts, in place; gather_to_root: whole on the root at least (for saving, a layer at a
  // time).
  virtual void gather(float* v, Range r) = 0;
  virtual void gather_to_root(float* v, Range r) { gather(v, r); }
  // Weights r whole on every process (they are whole already unless sharded).
  virtual void gather_weights(float* /*weights*/, Range /*r*/) {}
  // Floats this process keeps for weights, gradient and momentum (and the sums' buffers).
  virtual double kept_floats() const = 0;
};

// The bookkeeping of gradient buckets (--overlap on): backward reports ranges of the
// parameters final from their end down; a bucket is posted once kBucketFloats of them are
// ready; a report out of that order leaves the rest to the end of the batch.
class Buckets {
 public:
  static constexpr int64_t kBucketFloats = int64_t(1) << 18;  // as PyTorch DDP's bucket_cap_mb
  bool open() const { return open_; }
  void start(int64_t n) {
    open_ = in_order_ = true;
    lo_ = bucket_end_ = n;
  }
  // [begin, end) is final: the range to post now ([0, 0): none).
  std::pair<int64_t, int64_t> report(int64_t begin, int64_t end);
  // The batch's end: what was not posted yet is [0, the result); closes.
  int64_t finish() {
    open_ = false;
    return bucket_end_;
  }

 private:
  bool open_ = false, in_order_ = true;
  int64_t lo_ = 0, bucket_end_ = 0;  // [lo_, n) reported final, [lo_, bucket_end_) not posted yet
};

// The tiles' gradients live where `tiled` keeps them (tile_grads()); `params` is the flat
// vector (its size and, sharded, the pages to release when need_input_delta is false).
class TileOrderSync final : public GradientSync {
 public:
  // overlap: buckets sent during backward (several processes only); grad: where the tail's
  // gradient (the root's only) is, as reduce() will be given it.
  // device[r]: process r's device (numbered as first seen); with several processes on a
  // device and no overlap, the sum and the weight share go one copy per device
  // (device_chain.hpp).
  TileOrderSync(Comm& comm, Segment& tiled, const std::vector<int>& tile_rank, int64_t params, bool overlap,
                float* grad, const std::vector<int>& device);
  bool overlaps() const override { return overlap_; }
  void ready(int64_t begin, int64_t end) override;
  bool link_free() override;
  void reduce(float* grad) override;
  const std::vector<Range>& updated() const override { return updated_; }
  void zero(float* grad) override;
  void share_weights(float* weights) override;
  void gather(float* v, Range r) override;
  void gather_to_root(float* v, Range r) override;
  double kept_floats() const override;

 private:
  Comm& comm_;
  Segment& tiled_;
  int64_t n_;
  std::vector<int> counts_, displs_;  // several processes: each one's part of [0, n)
  std::vector<Range> updated_;
  Buffer ring_tmp_;  // the tail's ring reduce-scatter: its largest part
  std::unique_ptr<TileOrder> order_;
  std::unique_ptr<DeviceChain> chain_;  // several processes on a device: the sum and the share
  void post(int64_t begin, int64_t end);
  bool overlap_ = false;
  Buckets buckets_;
  float* grad_ = nullptr;
};

class MicroBatchSync final : public GradientSync {
 public:
  // owner[m]: the process that runs micro-batch m; `tiled`: this process's copy of the tiled
  // part, whose tiles' gradients capture() adds up (in tile order) with the rest of `grad`.
  // overlap: during each process's last micro-batch, every layer's gradients leave in
  // buckets as soon as backward has made them final (one tile per copy only: several
  // are added up after backward).
  MicroBatchSync(Comm& comm, Segment& tiled, std::vector<int> owner, int64_t params, float* grad, bool overlap);
  bool overlaps() const override { return overlap_; }
  void ready(int64_t begin, int64_t end) override;
  bool link_free() override;
  // After micro-batch m's backward here: its gradient (the tiles' and the tail's) moves to its
  // own buffer and the working gradient is zeroed for the next one.
  void capture(int m);
  // The micro-batches captured here since the last update, summed in their order.
  void local_sum(std::vector<float>& out) const;
  void reduce(float* grad) override;
  const std::vector<Range>& updated() const override { return updated_; }
  void zero(float* grad) override;
  void share_weights(float* weights) override { gather(weights, {0, n_}); }
  void gather(float* v, Range r) override;
  void gather_to_root(float* v, Range r) override;
  double kept_floats() const override;

 private:
  Comm& comm_;
  Segment& tiled_;
  std::vector<int> owner_;
  int64_t n_;
  float* grad_;
  std::vector<int> counts_, displs_;
  std::vector<Range> updated_;
  std::unique_ptr<TileOrder> order_;
  std::vector<Buffer> kept_;                   // per micro-batch of this process (order_->local()) but the last
  size_t captured_ = 0;                        // micro-batches of this process captured since the update
  std::vector<const float*> captured() const;  // their gradients, in order
  std::vector<float*> mine() const;            // every micro-batch's gradient here, in order
  bool overlap_ = false;
  Buckets buckets_;
};

class ShardedSync final : public GradientSync {
 public:
  ShardedSync(Comm& comm, const ShardPlan& shards);
  void reduce(float* grad) override;
  const std::vector<Range>& updated() const override { return updated_; }
  void zero(float* grad) override;
  void gather(float* v, Range r) override;
  void gather_weights(float* weights, Range r) override { gather(weights, r); }
  double kept_floats() const override;

 private:
  Comm& comm_;
  const ShardPlan& shards_;
  std::vector<Range> updated_;
  std::vector<float> packed_;  // the replicated gradients, packed for one all-reduce
};

class FilterBlocksSync final : public GradientSync {
 public:
  // `head`: the sync of parameters [0, tail_begin); blocks[r]: the ranges of [tail_begin, n)
  // that process r's filter blocks hold (tail_block_ranges()).
  FilterBlocksSync(Comm& comm, std::unique_ptr<GradientSync> head, int64_t tail_begin, int64_t n,
                   std::vector<std::vector<Range>> blocks);
  bool overlaps() const override { return head_->overlaps(); }
  void ready(int64_t begin, int64_t end) override;
  bool link_free() override { return head_->link_free(); }
  void reduce(float* grad) override { head_->reduce(grad); }
  const std::vector<Range>& updated() const override { return updated_; }
  void zero(float* grad) override;
  void share_weights(float* weights) override;
  void gather(float* v, Range r) override;
  void gather_to_root(float* v, Range r) override;
  // The whole weights on the root only: the others keep only their own blocks' pages.
  void gather_weights(float* weights, Range r) override;
  double kept_floats() const override;

 private:
  Comm& comm_;
  std::unique_ptr<GradientSync> head_;
  int64_t tail_begin_, n_;
  std::vector<std::vector<Range>> owned_;  // per process: what it alone updates after the cut
  std::vector<Range> rest_;                // the part of the root's that every process runs with
  std::vector<Range> updated_;
  // Gathers the ranges owned[p] of v, as far as they lie in r, from each process p to every
  // process.
  void gather_owned(float* v, const std::vector<std::vector<Range>>& owned, Range r);
};

}  // namespace tt
