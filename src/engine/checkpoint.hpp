// Checkpoints a run can resume from bit for bit: a folder DIR/step-NNNNNNNN holding the
// weights (Darknet .weights: parameters, batch-norm statistics and `seen`, which fixes the
// learning rate), the optimizer's momentum and meta.json (step, seed, what the run trained).
// The data order, augmentation and dropout masks are functions of (seed, step), so nothing
// else is needed. A checkpoint is written into a temporary folder and renamed into place,
// so a crash leaves either the previous set or the new one, never half of one.
#pragma once
#include <cstdint>
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

// Writes DIR/step-<step> and keeps only the newest `keep` checkpoints in DIR.
void save_checkpoint(const std::string& dir, int keep, const NetSpec& net, const Params& params,
                     std::span<const float> momentum, const CheckpointMeta& meta);

struct Checkpoint {
  std::string path;  // the folder read
  CheckpointMeta meta;
  std::vector<float> momentum;
};
// Reads the newest complete checkpoint in `dir` into `params` (shaped for `net`). Throws
// naming the folder or file if there is none, or it belongs to another net.
Checkpoint load_checkpoint(const std::string& dir, const NetSpec& net, Params& params);

}  // namespace tt
