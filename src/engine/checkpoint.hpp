// Checkpoints a run can resume from bit for bit: a folder DIR/step-NNNNNNNN holding the
// weights (Darknet .weights: parameters, batch-norm statistics and `seen`, which fixes the
// learning rate), the optimizer's momentum and meta.json (step, seed, what the run trained).
// The data order, augmentation and dropout masks are functions of (seed, step), so nothing
// else is needed. A checkpoint is written into a temporary folder and renamed into place,
// so a crash leaves either the previous set or the new one, never half of one.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/net_spec.hpp"
#include "model/params.hpp"

namespace tt {

struct CheckpointMeta {
  int64_t step = 0;   // training steps (updates) done
  uint64_t seed = 1;  // the run's seed (data order, augmentation, dropout)
  std::string cfg;    // the cfg trained, and its parameter count, to refuse another net's checkpoint
  int64_t params = 0;
};

// Which run a checkpoint folder belongs to (DIR/run.json): a folder serves one run, which
// may stop and resume, and never two.
struct RunIdentity {
  std::string cfg;  // absolute path of the cfg
  uint64_t seed = 1;
  std::string grid;  // "RxC", then ", K micro-batches" and ", data parallel" where they apply
};

// Holds a checkpoint folder for this process's run: creates it, locks it (DIR/.lock, an
// flock held until destruction or the process's end, naming the holder) and records the
// run in DIR/run.json. Throws, before any training, if another process holds the folder,
// or if it holds checkpoints (or a run.json) and this run does not resume from this very
// folder (`resume_dir`, empty when not resuming), or its run.json names another cfg or seed. Resuming on another grid
// is allowed (noted on stderr): the result is then no longer bit-identical to an uninterrupted run.
class CheckpointFolder {
 public:
  CheckpointFolder() = default;
  CheckpointFolder(const std::string& dir, const RunIdentity& id, const std::string& resume_dir);
  CheckpointFolder(CheckpointFolder&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  CheckpointFolder& operator=(CheckpointFolder&& o) noexcept;
  ~CheckpointFolder();

 private:
  int fd_ = -1;
};

// A checkpoint written a layer at a time, for parameters gathered a layer at a time from
// several processes (Trainer::save_layers): into DIR/.tmp-step-<step>, renamed DIR/step-<step>
// by commit(), which then keeps only the newest `keep` checkpoints in DIR. Destroyed
// uncommitted, it removes what it wrote.
class CheckpointWriter {
 public:
  CheckpointWriter(const std::string& dir, int keep, const CheckpointMeta& meta, int64_t seen);
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();
  // Every layer with parameters, in order: its weights, and the momentum of its parameters
  // (`momentum` in the order of `p.values` from the layer's first parameter).
  void write_weights(const Params& p, const LayerSpec& l) { weights_->write(p, l); }
  void write_momentum(const Params& p, const LayerSpec& l, std::span<const float> momentum);
  void commit(const NetSpec& net);

 private:
  std::string dir_, tmp_, final_;
  int keep_;
  CheckpointMeta meta_;
  std::unique_ptr<WeightsWriter> weights_;
  std::unique_ptr<AtomicFile> momentum_;
  int64_t momentum_written_ = 0;
  bool done_ = false;
};

// Writes DIR/step-<step> from whole parameters and momentum at once, and keeps only the
// newest `keep` checkpoints in DIR.
void save_checkpoint(const std::string& dir, int keep, const NetSpec& net, const Params& params,
                     std::span<const float> momentum, const CheckpointMeta& meta);

struct Checkpoint {
  std::string path;  // the folder read
  CheckpointMeta meta;
  ZeroPageFloats momentum;  // zero where params.unfilled says
};
// Reads the newest complete checkpoint in `dir` into `params` (shaped for `net`), the
// weights and momentum in params.unfilled left zero and unread. Throws naming the folder or
// file if there is none, or it belongs to another net.
Checkpoint load_checkpoint(const std::string& dir, const NetSpec& net, Params& params);

}  // namespace tt
