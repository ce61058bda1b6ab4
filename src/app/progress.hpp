// A training run's progress: one line per logged step on stdout (step, epoch, loss and its
// parts, learning rate, images/s, ETA) and, with --metrics FILE, the same as one JSON object
// per line (appended when the run resumes), for scripts/plot_metrics.py; the file also has
// the batch and the mean seconds per step since the previous line ("step_s"), the
// throughput over that window (images_per_s is the mean since the run started).
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace tt {

class Progress {
 public:
  // Steps [first, total) run in this process, `batch` images each.
  Progress(const std::string& metrics_path, int64_t first, int64_t total, int batch);
  // After `done` steps: `loss` is the mean per image over the last `window` steps; `parts`
  // are named loss parts (e.g. detector coord/obj/noobj/class), per image.
  void log(int64_t done, int64_t epoch, double loss, int window, double lr, const std::map<std::string, double>& parts);
  // One more object in the metrics file (e.g. the final accuracy), with the step.
  void record(int64_t done, nlohmann::json fields);
  // `seconds` spent on something other than training (an evaluation between epochs): left
  // out of the images/s, the seconds per step and the ETA.
  void exclude(double seconds) {
    t0_ += seconds;
    last_t_ += seconds;
  }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t first_, total_;
  int batch_;
  double t0_;
  int64_t last_done_;  // the step and time of the previous line
  double last_t_;
};

// A progress line on stderr for work that may take more than a few seconds (checking a
// data set's pictures, an mAP evaluation): nothing if the work ends within 3 s, then a line
// at most every 5 s with the count, the share and the ETA, and a last line at the end.
class Ticker {
 public:
  explicit Ticker(std::string what) : what_(std::move(what)) {}
  ~Ticker();
  void tick(int64_t done, int64_t total);  // `done` of `total` finished

 private:
  std::string what_;
  int64_t total_ = 0;
  double t0_ = now(), last_ = 0;
  static double now();
};

}  // namespace tt
