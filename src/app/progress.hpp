// A training run's progress: one line per logged step on stdout (step, epoch, loss and its
// parts, learning rate, images/s, ETA) and, with --metrics FILE, the same as one JSON object
// per line (appended when the run resumes), for scripts/plot_metrics.py.
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

 private:
  std::string path_;
  std::ofstream out_;
  int64_t first_, total_;
  int batch_;
  double t0_;
};

}  // namespace tt
