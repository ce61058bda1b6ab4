// The tiletrain subcommands. Each returns the process exit code and throws tt::Error
// on bad input; main() turns errors into messages.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "data/darknet_data.hpp"
#include "engine/checkpoint.hpp"
#include "engine/kernel_table.hpp"
#include "engine/trainer.hpp"
#include "model/net_spec.hpp"
#include "planner/cost_model.hpp"

namespace tt {

struct RunOptions {
  std::string cfg;
  int threads = 1;
  int batch = 0;         // 0: the cfg's
  int subdivisions = 0;  // 0: the cfg's (1 with --batch)
  std::string grid = "1x1";
  std::string groups = "none";
  int cut = -1;
  std::string bn = "sync";
  std::string size;  // HxW; empty: the cfg's
  uint64_t seed = 1;
  bool json = false;
  int tiles_per_rank = 1;
  int ranks_per_device = 0;   // 0: by host name
  int replicas = 0;           // data parallel copies (engine/trainer.hpp); 0: tiles across the processes
  std::string tail = "auto";  // root | filters | auto: where the layers after the cut run (engine/trainer.hpp)
  bool low_memory = false;
  std::string kernels = "auto";                 // auto | onednn | own (layers/backend.hpp)
  std::string row_weights, col_weights;         // uneven split: a weight per grid row / column
  std::string backward_features = "recompute";  // recompute | exchange (tiling/plan.hpp)
  std::string overlap = "auto";                 // auto | on | off (engine/trainer.hpp)
};

// plan with a cluster: predicted time and memory (planner/cost_model.hpp), or a search.
struct PlanOptions {
  std::string cluster;       // cluster file; empty: geometry only
  std::string model;         // device model for devices with only a profile
  int ranks_per_device = 0;  // 0: as few devices as the ranks fit on, spread evenly
  bool optimize = false;
  int top = 5;
  std::string draw;       // a PNG of the partition (tiling/plan_picture.hpp); empty: none
  bool schedule = false;  // print the compiled schedule (engine/schedule.hpp)
};

// The cfg with --batch and --size applied (and the thread count set).
NetSpec load_run_net(const RunOptions& o);
// "RxC" → {R, C}; throws naming `what` otherwise.
std::pair<int, int> parse_pair(const std::string& s, const char* what);

int cmd_info(const RunOptions& o);
int cmd_plan(const RunOptions& o, const PlanOptions& po);
// plan --cluster: the cluster with every device's model resolved, the partition the
// options describe, and the prediction printed as text.
ClusterModel load_cluster_model(const PlanOptions& po, const NetSpec& net);
Partition partition_of(const RunOptions& o, const PlanOptions& po, const NetSpec& net, const ClusterModel& cm);
void print_prediction(const Prediction& pr, const ClusterModel& cm);
int cmd_optimize(const RunOptions& o, const PlanOptions& po);
// Writes a device model (one process) or, under mpirun, a cluster file of every host's
// model and the measured links (planner/device_model.hpp, planner/cluster.hpp).
int cmd_calibrate(const RunOptions& o, Comm& comm, const std::string& out, int steps);
struct BenchOptions {
  int steps = 10, warmup = 2;
  bool layers = false;  // also each layer's time per pass, on every rank
  std::string trace;    // write the timed steps' spans here (engine/trace.hpp); empty: none
};
int cmd_bench(const RunOptions& o, Comm& comm, const BenchOptions& b);
// Where a training run starts and what it leaves behind.
struct RunFiles {
  std::string weights_in;      // Darknet .weights to start from
  std::string weights_out;     // written at the end (atomically)
  std::string checkpoint_dir;  // empty: no checkpoints (engine/checkpoint.hpp)
  int checkpoint_every = 100;  // steps between checkpoints (and one at the end)
  int keep_checkpoints = 3;
  std::string resume;  // a checkpoint folder: continue its newest checkpoint
};
int cmd_train(const RunOptions& o, Comm& comm, int steps, const RunFiles& f);
int cmd_verify(const RunOptions& o, Comm& comm, int steps);

struct DataOptions {
  std::string data;  // "fashion-mnist" or a folder with the four IDX files
  int epochs = 1;
  int max_steps = 0;  // 0: whole epochs
  int log_every = 50;
  std::string loss_log;          // one loss per line, written at the end
  std::string metrics;           // one JSON object per logged step (app/progress.hpp)
  bool skip_bad_images = false;  // .data sets: warn and go on instead of stopping
  int loader_threads = 1;        // .data sets: threads preparing batches ahead
  // .data sets: pictures larger than this are refused before decoding
  int64_t max_pixels = int64_t(4096) * 4096;
};
int cmd_train_data(const RunOptions& o, Comm& comm, const DataOptions& d, const RunFiles& f);
// Classifiers (classify_commands.cpp): training on a Darknet .data file with labels=.
int cmd_train_classifier(const RunOptions& o, Comm& comm, const DataOptions& d, const RunFiles& f);
// Collective: every rank's mean time per step by part and its peak memory, printed by the root.
void print_rank_times(Comm& comm, const Trainer& trainer, int64_t steps);
// "tiletrain: warning: M" on stderr (the data loaders' threads call it too).
void warn(const std::string& m);
// A .data file's train= (valid: valid=) pictures with their truths, checked before any work
// (data/darknet_data.hpp check_list), with a progress line: the usable ones.
std::vector<std::string> checked_pictures(const DataConfig& dc, bool valid, int64_t max_pixels, bool skip_bad,
                                          const TruthCheck& check_truth);
// Throws on the root unless --loss-log and --metrics can be written: checked before training.
void check_data_outputs(const DataOptions& d, const Comm& comm);

// Shared by the training subcommands.
TrainOptions train_options(const RunOptions& o, const NetSpec& net);
// For commands that only run forward (detect, map): the weights formatted once, kept.
TrainOptions inference_options(const RunOptions& o, const NetSpec& net);
// --tail auto: filter blocks where the grid has several tiles, no copies run, and a
// convolution after the cut splits into blocks; else the root. As asked otherwise.
TailMode tail_mode(const RunOptions& o, const NetSpec& net);
void print_kernel_warnings(const Trainer& t);
void print_kernel_warnings(const std::vector<KernelUse>& uses);
// A run's starting point: the newest checkpoint of --resume (weights, momentum, step,
// seed, which replaces o.seed), a .weights file, or a fresh initialisation.
struct Start {
  Params params;
  int64_t step = 0;
  ZeroPageFloats momentum;  // empty: zero; what this process keeps of it (Params::unfilled)
};
Start start_run(const NetSpec& net, RunOptions& o, const Comm& comm, const RunFiles& f);
// The net's parameters, all zero, with the ones this process will not keep under `o`
// marked to be left unfilled (Params::unfilled): fill them, then make the Trainer.
Params params_to_fill(const NetSpec& net, const RunOptions& o, const Comm& comm);
// What every training subcommand sets up, in this order: the output checked writable, the
// net, its starting point (which may replace o.seed), the checkpoint folder claimed for this
// run (engine/checkpoint.hpp), the trainer resumed from it.
struct TrainingRun {
  TrainingRun(const RunOptions& run, Comm& comm, const RunFiles& f);
  RunOptions o;
  NetSpec net;
  Start start;
  CheckpointFolder checkpoints;  // the root's hold on --checkpoint's folder
  Params& params;
  Trainer trainer;
};
// After `done` steps: a checkpoint if one is due (every N steps, and at the end). Collective.
void checkpoint_if_due(Trainer& tr, const NetSpec& net, Params& params, const RunOptions& o, const RunFiles& f,
                       int64_t done, bool last);
// At the end of training: the weights into f.weights_out if given (the root writes,
// a layer at a time). Collective.
void save_weights_if_asked(Trainer& tr, const NetSpec& net, const Params& params, const RunFiles& f);

// Detectors (detect_commands.cpp): training on a Darknet .data file, detection on pictures,
// and VOC mAP on a list of labelled pictures.
int cmd_train_detection(const RunOptions& o, Comm& comm, const DataOptions& d, const RunFiles& f);
struct DetectOptions {
  std::string weights;
  std::vector<std::string> images;
  std::string out;      // folder for the pictures with boxes; empty: print only
  std::string montage;  // one PNG of every picture with its boxes, in a grid; empty: none
  std::string names;    // class names (a .names file, or a .data file's names=)
  float thresh = 0.5f;
  int64_t max_pixels = int64_t(4096) * 4096;  // larger pictures refused before decoding
};
int cmd_detect(const RunOptions& o, Comm& comm, const DetectOptions& d);
int cmd_map(const RunOptions& o, Comm& comm, const std::string& weights, const std::string& data,
            int64_t max_pixels = int64_t(4096) * 4096);

}  // namespace tt
