// What a Prediction says about itself (whether it fits, its JSON for plan --json), and the
// bound a CPU quota's pauses put on a step (stretch_to_quota_pauses).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/cost_model.hpp"

namespace tt {

void stretch_to_quota_pauses(const ClusterModel& cm, const std::vector<int>& rank_dev, const AloneCompute& alone,
                             std::vector<double>& clock, std::vector<RankPrediction>& ranks) {
  const size_t P = rank_dev.size();
  std::vector<double> need(cm.spec.devices.size(), 0.);
  std::vector<int> on(need.size(), 0);
  for (int d : rank_dev) on[size_t(d)]++;
  for (size_t r = 0; r < P; ++r) {
    const size_t d = size_t(rank_dev[r]);
    need[d] += (alone.cpu[r] + alone.kernels[r] * (cm.models[d].paused - 1)) /
               ranks_side_by_side(cm.models[d], on[d], cm.capacity[d]);
  }
  const double end = *std::max_element(clock.begin(), clock.end());
  const double bound = *std::max_element(need.begin(), need.end());
  if (bound <= end) return;
  for (size_t r = 0; r < P; ++r) {
    RankPrediction& a = ranks[r];
    const double extra = bound - clock[r], compute = a.fwd_s + a.bwd_s;
    if (need[size_t(rank_dev[r])] < bound || compute <= 0)
      a.halo_s += extra;
    else  // the pauses fall in the kernels
      for (double* part : {&a.fwd_s, &a.bwd_s}) *part += extra * *part / compute;
    clock[r] = bound;
  }
}

bool Prediction::fits() const {
  for (double s : memory_short_mb)
    if (s > 0) return false;
  return true;
}

void Prediction::summarize(const ClusterSpec& spec) {
  fwd_s = bwd_s = halo_s = weights_s = io_s = update_s = peak_rss_mb_max = 0;
  std::vector<double> used(spec.devices.size(), 0);
  for (const RankPrediction& a : ranks) {
    fwd_s = std::max(fwd_s, a.fwd_s);
    bwd_s = std::max(bwd_s, a.bwd_s);
    halo_s = std::max(halo_s, a.halo_s);
    weights_s = std::max(weights_s, a.weights_s);
    io_s = std::max(io_s, a.io_s);
    update_s = std::max(update_s, a.update_s);
    peak_rss_mb_max = std::max(peak_rss_mb_max, a.peak_rss_mb);
    used[size_t(a.device)] += a.peak_rss_mb;
  }
  // A partition fits a device if its predicted peak leaves a tenth of the memory free: the
  // model's peaks are within 10 % of the measured ones (bench/RESULTS.md, planner accuracy),
  // under as often as over, and a peak over the device's memory is a process killed.
  constexpr double kUsable = 0.9;
  memory_short_mb.assign(spec.devices.size(), -1e300);
  for (size_t d = 0; d < used.size(); ++d)
    if (used[d] > 0) memory_short_mb[d] = used[d] - kUsable * spec.devices[d].memory_mb;
}

nlohmann::json prediction_to_json(const Prediction& p) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPrediction& a = p.ranks[r];
    ranks.push_back({{"rank", r},
                     {"device", a.device},
                     {"step_s", a.step_s},
                     {"fwd_s", a.fwd_s},
                     {"bwd_s", a.bwd_s},
                     {"halo_s", a.halo_s},
                     {"weights_s", a.weights_s},
                     {"io_s", a.io_s},
                     {"update_s", a.update_s},
                     {"peak_rss_mb", a.peak_rss_mb},
                     {"maps_mb", a.maps_mb},
                     {"deltas_mb", a.deltas_mb},
                     {"filters_mb", a.filters_mb}});
  }
  return {{"step_s", p.step_s},
          {"fwd_s", p.fwd_s},
          {"bwd_s", p.bwd_s},
          {"halo_s", p.halo_s},
          {"weights_s", p.weights_s},
          {"io_s", p.io_s},
          {"update_s", p.update_s},
          {"peak_rss_mb_max", p.peak_rss_mb_max},
          {"fits", p.fits()},
          {"cells_computed_per_sample", p.cells_computed},
          {"halo_bytes_per_sample", p.halo_bytes},
          {"halo_messages", p.halo_messages},
          {"ranks", ranks}};
}

}  // namespace tt
