// A device's calibrated cost model for one net (`tiletrain calibrate`): per spatial
// layer and pass, seconds as a linear function of the cells a box holds (batch x rows x
// columns; the channels are the layer's), fitted to the real engine's per-layer timings
// on whole maps of several sizes; plus the dense head, the update, and the memory a
// process needs besides the buffers the memory plan counts. The planner's cost model
// (cost_model.hpp) reads it.
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/segment.hpp"  // LayerTimes
#include "model/net_spec.hpp"

namespace tt {

// t(cells) = a + b * cells, seconds.
struct LinearFit {
  double a = 0, b = 0;
  double at(double cells) const { return a + b * cells; }
};
// Least squares in relative error (every point weighs alike, small boxes too), with a
// and b kept >= 0. `cells` and `seconds` have the same length (>= 1).
LinearFit fit_linear(const std::vector<double>& cells, const std::vector<double>& seconds);

struct LayerModel {
  LinearFit fwd, fwd_pointwise, bwd_pointwise, bwd_data, bwd_weights;  // see LayerTimes (segment.hpp)
};

struct DeviceModel {
  std::string cfg, signature;  // the net it was calibrated on (net_signature)
  std::string host, isa, kernel_path;
  int threads = 1, channel_block = 8, batch = 1;
  double cpu_capacity = 1;                                  // cores the device gives (cpu_capacity())
  std::vector<LayerModel> layers;                           // spatial layers [0, first_untileable), by index
  double head_fwd_per_sample = 0, head_bwd_per_sample = 0;  // dense head and loss, seconds
  double sgd_per_param = 0;                                 // SGD update, seconds per parameter
  double reload_s = 0;          // re-formatting every weight for the kernels after an update
  double base_mb = 0;           // resident memory besides maps, deltas, weights and kernel scratch
  double scratch_mb = 0;        // kernel scratch (oneDNN scratchpad and gradient scratch), whole maps
  double weight_copies_mb = 0;  // weights in the kernels' layouts, replicated run
  double gflops = 0;            // convolution throughput at full size: to scale to a profile
  double solo_compute_s = 0;    // one step's layer compute at full size, the device to itself
  // With `concurrent_ranks` processes computing at once on the device (calibrate under
  // mpirun), each one's compute takes `concurrent_slowdown` times as long (shared caches
  // and memory bandwidth); 1 and 1 when not measured.
  int concurrent_ranks = 1;
  double concurrent_slowdown = 1;
  // Relative spread (standard deviation / mean) of a layer's compute time from step to
  // step with every rank busy: what ranks lose waiting for each other at each
  // synchronisation (batch-norm sums, halos).
  double jitter = 0;
  // The median step's layer compute over the sum of the layers' medians (at least 1; 1
  // when fewer than 3 steps were timed): what a CPU quota's pauses add to the layer fits
  // when the device computes without a break. The update and the formatting were timed as
  // long phases and hold their pauses. The cost model bounds a device's step below by its
  // kernels times this plus the rest (stretch_to_quota_pauses, cost_model.hpp).
  double paused = 1;
  double fit_median_err = 0, fit_max_err = 0;  // relative residuals of the per-layer fits
  nlohmann::json points;                       // the measurements the fits came from
  // What the fits miss at each calibrated map size (derive_size_correction): per point,
  // {cells over the largest point's cells, measured over fitted layer time}, by the first.
  // A device under a CPU quota needs it: its short kernels on small maps escape the
  // quota's pauses, so its time per cell is not one line from small maps to large ones,
  // and the fits (relative least squares) follow the small maps and fall well short of
  // the measured time at the largest sizes.
  std::vector<std::array<double, 2>> size_correction;
  std::vector<double> full_cells;  // per spatial layer: its cells at the largest point
  // Measured over fitted for a box of `cells` of layer l: interpolated in log(cells),
  // held beyond the ends; 1 without points.
  double correction(int layer, double cells) const;
};

// Sets m.size_correction and m.full_cells from m.points, for the net m was calibrated on
// (`net`: any input size; its layers are resized to each point's).
void derive_size_correction(DeviceModel& m, const NetSpec& net);

// CPU time over wall time of one spinning thread per online core, each free to run on
// any core: what this process gets while it spins (a cgroup quota shows; processes
// spinning at once share it).
double cpu_time_share();
// The cores a device gives from the share its processes got together: all of them
// within 10 %.
double capacity_of(double share);
// Cores this device gives one process measuring alone: capacity_of(cpu_time_share()).
double cpu_capacity();

// The layer shapes a model depends on, e.g. "conv3/1:3>32 max2/2 ...": a model is only
// valid for a net with the same signature (the input size may differ).
std::string net_signature(const NetSpec& net);

struct CalibrateOptions {
  int threads = 1;
  std::string kernels = "auto";
  int steps = 3;   // timed steps per map size (after one untimed)
  int rounds = 2;  // sweeps over the sizes; each size keeps its fastest (median-of-steps) sweep
  std::vector<double> scales = {1.0, 0.75, 0.5, 0.35, 0.25, 0.18};  // of the input's side
  // Cores the device gives, measured by the caller with every process on it at once
  // (capacity_of the summed cpu_time_share); 0: cpu_capacity() here.
  double cpu_capacity = 0;
  // Called after each map size is measured: (sizes measured, of how many), e.g. to print progress.
  std::function<void(int done, int total)> progress;
};
// `rounds` sweeps of measure(i, round) over i = 0..n-1 (a whole sweep before the next);
// for each i the result with the smallest time(result).
template <class Point, class Measure, class Time>
std::vector<Point> fastest_of_sweeps(size_t n, int rounds, Measure measure, Time time) {
  std::vector<Point> best(n);
  for (int round = 0; round < std::max(1, rounds); ++round)
    for (size_t i = 0; i < n; ++i) {
      Point p = measure(i, round);
      if (round == 0 || time(p) < time(best[i])) best[i] = std::move(p);
    }
  return best;
}

// From the engine's layer times of several steps: per layer and pass the median over the
// steps, and how much longer the median step's sum is than the medians' sum (at least 1;
// 1 with fewer than 3 steps, where the upper median of two is never above the sum).
// Under a CPU quota (an emulated device) the quota's pauses fall in a few layers of each
// step, so each layer's median is about its unpaused time; `paused` gives the rest back
// where the device computes without a break (DeviceModel::paused).
struct LayerMedians {
  std::vector<LayerTimes> layers;
  double paused = 1;
};
LayerMedians layer_medians(const std::vector<std::vector<LayerTimes>>& steps);

// Times the untiled engine on whole maps of each scale in this process (one process:
// run it on one rank per device at a time).
DeviceModel calibrate_device(const NetSpec& net, const CalibrateOptions& o);

// One step's layer compute at full size (median over o.steps steps) and the relative
// spread of the layers' times: every rank of a device runs this at once.
struct ComputeSample {
  double compute_s = 0, jitter = 0;
};
ComputeSample measure_compute(const NetSpec& net, const CalibrateOptions& o);

nlohmann::json device_model_to_json(const DeviceModel& m);
// `where` names the source in errors (a file, or "file: devices[2].model").
DeviceModel device_model_from_json(const nlohmann::json& j, const std::string& where);

// How much slower each of `ranks` ranks computing at once on a device of `capacity` cores
// runs than one alone, each with the model's threads (the fits were measured with the
// device to itself).
double crowd_slowdown(const DeviceModel& m, double ranks, double capacity);
// How many of those `ranks` compute side by side (the rest take turns): the cores the
// device gives over each rank's threads, at least 1, at most `ranks`.
double ranks_side_by_side(const DeviceModel& m, double ranks, double capacity);

}  // namespace tt
