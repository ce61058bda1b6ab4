#include "planner/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/op_kind.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {

double step_of(const NetSpec& net, Partition p, const std::vector<int>& starts, const ClusterModel& cm, int* replays) {
  p.group_starts = starts;
  ++*replays;
  return predict(net, p, cm).step_s;
}

// Group starts from a bit mask over layers first+1 .. cut-1 (the first tiled layer always
// starts one).
std::vector<int> starts_of(unsigned mask, int first, int cut) {
  std::vector<int> s{first};
  for (int l = first + 1; l < cut; ++l)
    if (mask >> (l - first - 1) & 1u) s.push_back(l);
  return s;
}

// Dynamic programme over the per-layer times: exact when ranks finish every layer
// together (the batch-norm sums synchronise them at every layer); ranks drifting apart
// across layers without them make it approximate, so single boundaries are then toggled
// while that helps.
std::vector<int> grouping_by_dp(const NetSpec& net, const Partition& base, const ClusterModel& cm, int first, int cut,
                                int* replays) {
  // cost[s][e]: layers [s, e) as one group, every other layer a group of its own.
  std::vector<std::vector<double>> cost(size_t(cut), std::vector<double>(size_t(cut + 1), 0.));
  for (int s = first; s < cut; ++s)
    for (int e = s + 1; e <= cut; ++e) {
      Partition p = base;
      p.cut = cut;
      p.group_starts.clear();
      for (int l = first; l < cut; ++l)
        if (l <= s || l >= e) p.group_starts.push_back(l);
      const Prediction pr = predict(net, p, cm);
      ++*replays;
      for (int l = s; l < e; ++l) cost[size_t(s)][size_t(e)] += pr.layer_s[size_t(l)];
    }
  std::vector<double> best(size_t(cut + 1), std::numeric_limits<double>::infinity());
  std::vector<int> from(size_t(cut + 1), 0);
  best[size_t(first)] = 0;
  for (int e = first + 1; e <= cut; ++e)
    for (int s = first; s < e; ++s)
      if (best[size_t(s)] + cost[size_t(s)][size_t(e)] < best[size_t(e)]) {
        best[size_t(e)] = best[size_t(s)] + cost[size_t(s)][size_t(e)];
        from[size_t(e)] = s;
      }
  std::vector<int> starts;
  for (int e = cut; e > first; e = from[size_t(e)]) starts.push_back(from[size_t(e)]);
  std::reverse(starts.begin(), starts.end());
  double t = step_of(net, base, starts, cm, replays);
  for (bool better = true; better;) {
    better = false;
    for (int l = first + 1; l < cut; ++l) {
      std::vector<int> s = starts;
      const auto it = std::lower_bound(s.begin(), s.end(), l);
      if (it != s.end() && *it == l)
        s.erase(it);
      else
        s.insert(it, l);
      const double u = step_of(net, base, s, cm, replays);
      if (u < t) {
        t = u;
        starts = s;
        better = true;
      }
    }
  }
  return starts;
}

}  // namespace

std::vector<int> best_grouping(const NetSpec& net, const Partition& base, const ClusterModel& cm, int* replays) {
  const int cut = resolve_cut(net, base.cut), first = net.first_tiled();
  if (cut - first - 1 > kExhaustiveGroupingBits) return grouping_by_dp(net, base, cm, first, cut, replays);
  unsigned best_mask = 0;
  double best = std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; mask < 1u << (cut - first - 1); ++mask) {
    const double t = step_of(net, base, starts_of(mask, first, cut), cm, replays);
    if (t < best) {
      best = t;
      best_mask = mask;
    }
  }
  return starts_of(best_mask, first, cut);
}

namespace {

double worst_short(const Prediction& p) {
  double w = -std::numeric_limits<double>::infinity();
  for (double s : p.memory_short_mb) w = std::max(w, s);
  return w;
}

bool same(const Partition& a, const Partition& b) {
  return a.rows == b.rows && a.cols == b.cols && a.group_starts == b.group_starts && a.cut == b.cut &&
         a.tiles_per_rank == b.tiles_per_rank && a.ranks_per_device == b.ranks_per_device &&
         a.low_memory == b.low_memory && a.split.rows == b.split.rows && a.split.cols == b.split.cols &&
         a.features == b.features && a.replicas == b.replicas && a.tail_filters == b.tail_filters;
}

}  // namespace

namespace {
// Convolution throughput of a device's process: its model's (each calibrated device has its
// own, measured under its own CPU quota) over the cluster file's slowdown (a speed factor,
// or a profile scaling the reference model).
double device_speed(const ClusterModel& cm, int d) {
  return cm.models.at(size_t(d)).gflops / cm.slowdown.at(size_t(d));
}
}  // namespace

TileSplit split_by_speed(const Partition& p, const ClusterModel& cm) {
  // A tile's speed is its device's; a row's weight the sum over its tiles, a column's
  // likewise: exact for one row or column, a fair compromise otherwise.
  TileSplit s;
  s.rows.assign(size_t(p.rows), 0.);
  s.cols.assign(size_t(p.cols), 0.);
  for (int t = 0; t < p.rows * p.cols; ++t) {
    const int dev = t / p.tiles_per_rank / p.ranks_per_device;
    const double speed = device_speed(cm, dev);
    s.rows[size_t(t / p.cols)] += speed;
    s.cols[size_t(t % p.cols)] += speed;
  }
  if (p.rows == 1) s.rows.clear();
  if (p.cols == 1) s.cols.clear();
  return s;
}

SearchResult optimize(const NetSpec& net, const ClusterModel& cm, const SearchOptions& o) {
  const double t0 = now_s();
  SearchResult res;
  const int D = int(cm.spec.devices.size());
  int cores = 0, min_cores = std::numeric_limits<int>::max();
  for (const DeviceSpec& d : cm.spec.devices) {
    cores += d.cores;
    min_cores = std::min(min_cores, d.cores);
  }
  const int max_tiles = o.max_tiles > 0 ? o.max_tiles : cores;
  bool hetero = false;  // devices of different speeds: also try splits weighted by speed
  for (int d = 0; d < D; ++d) hetero |= std::abs(device_speed(cm, d) / device_speed(cm, 0) - 1) > 0.05;
  const int default_cut = resolve_cut(net, -1);
  // The default cut (as far as the grid fits), and after every layer before it that makes
  // the map smaller (smaller maps at the cut); where a join reads across that layer (a
  // residual stage's strided block), just before it, at the end of the stage.
  std::vector<int> cuts{default_cut};
  const int first = net.first_tiled();
  for (int l = first; l + 1 < default_cut; ++l) {
    const LayerSpec& x = net.layers[size_t(l)];
    if (x.out.h * x.out.w >= x.in.h * x.in.w) continue;
    const int cut = net.split_reader(l + 1) < 0 ? l + 1 : l > first && net.split_reader(l) < 0 ? l : 0;
    if (cut > first && std::find(cuts.begin(), cuts.end(), cut) == cuts.end()) cuts.push_back(cut);
  }

  std::vector<Candidate> all;
  res.least_memory.pred.memory_short_mb.assign(1, std::numeric_limits<double>::infinity());
  auto consider = [&](const Partition& p) -> const Candidate* {
    Candidate c{p, predict(net, p, cm)};
    ++res.replays;
    if (!c.pred.fits()) {
      if (worst_short(c.pred) < worst_short(res.least_memory.pred)) res.least_memory = c;
      return nullptr;
    }
    for (const Candidate& x : all) {
      if (same(x.part, p)) return nullptr;
      // Exchanging backward features where that changes next to nothing: the plainer
      // command (recompute, tried first) stands for both.
      Partition q = p;
      q.features = BackwardFeatures::Recompute;
      if (p.features == BackwardFeatures::Exchange && same(x.part, q) &&
          std::abs(x.pred.step_s - c.pred.step_s) <= 0.005 * x.pred.step_s &&
          std::abs(x.pred.peak_rss_mb_max - c.pred.peak_rss_mb_max) <= 0.005 * x.pred.peak_rss_mb_max)
        return nullptr;
    }
    all.push_back(std::move(c));
    return &all.back();
  };
  // Stage 1: every configuration with a group per layer and with one group.
  struct Config {
    Partition part;
    double best = std::numeric_limits<double>::infinity();
  };
  std::vector<Config> configs;
  // Tiles all in one process only save memory: tried only when the whole untiled net on
  // one device does not fit (1x1 comes first).
  bool untiled_fits = false;
  for (int R = 1; R <= o.max_side; ++R)
    for (int C = 1; C <= o.max_side && R * C <= max_tiles; ++C)
      for (int K = 1; K <= R * C; ++K) {
        if ((R * C) % K) continue;
        const int P = R * C / K, per = (P + D - 1) / D;
        if (per > min_cores) continue;  // more ranks on a device than it has cores
        if (P % per) continue;          // edge.sh run puts the same number of ranks on each device
        if (P == 1 && R * C > 1 && untiled_fits) continue;
        for (int stage_end : cuts) {
          if (R * C == 1 && stage_end != default_cut) continue;  // one tile: the cut changes nothing
          const int cut = stage_end == default_cut ? resolve_cut(net, -1, R, C) : stage_end;
          for (int variant = 0; variant < 16; ++variant) {
            const bool lm = variant & 1, weighted = variant & 2, exchange = variant & 4, filters = variant & 8;
            if (lm && (!o.low_memory || P == 1)) continue;
            if (filters && P == 1) continue;
            if (weighted && !hetero) continue;
            if (exchange && R * C == 1) continue;
            Partition p{.rows = R,
                        .cols = C,
                        .group_starts = {},
                        .cut = cut,
                        .tiles_per_rank = K,
                        .ranks_per_device = per,
                        .low_memory = lm,
                        .split = {},
                        .features = exchange ? BackwardFeatures::Exchange : BackwardFeatures::Recompute,
                        .tail_filters = filters};
            if (weighted) p.split = split_by_speed(p, cm);
            Config cfg{p};
            for (const std::vector<int>& g : {parse_groups("none", first, cut), parse_groups("all", first, cut)}) {
              if (R * C == 1 && g.size() == 1 && cut - first > 1) continue;
              p.group_starts = g;
              try {
                if (const Candidate* c = consider(p)) cfg.best = std::min(cfg.best, c->pred.step_s);
              } catch (const Error&) {
                break;  // the grid does not fit the maps (a tile would be empty)
              }
            }
            ++res.configs;
            if (cfg.best < std::numeric_limits<double>::infinity()) configs.push_back(cfg);
            untiled_fits |= R * C == 1 && cfg.best < std::numeric_limits<double>::infinity();
          }
        }
      }
  // Data parallel: a whole copy on each of 2, 3, ... devices, as far as the batch's
  // micro-batches go round (a copy runs whole micro-batches: --subdivisions).
  for (int P = 2; P <= std::min(D, net.subdivisions); ++P) {
    ++res.configs;
    Partition dp;  // 1x1, one tile per copy
    dp.group_starts = parse_groups("all", first, default_cut);
    dp.cut = default_cut;
    dp.replicas = P;
    consider(dp);
  }
  // Stage 2: the grouping search on the most promising configurations.
  std::sort(configs.begin(), configs.end(), [](const Config& a, const Config& b) { return a.best < b.best; });
  int searched = 0;
  for (size_t k = 0; k < configs.size() && searched < o.dp_configs; ++k) {
    Partition p = configs[k].part;
    if (p.rows * p.cols == 1) continue;  // one tile: groupings change nothing
    ++searched;
    p.group_starts = best_grouping(net, p, cm, &res.replays);
    consider(p);
  }
  // Ties (to the microsecond; 1xC and Rx1 of a square map predict the same) go to the
  // grid with fewer columns: its tiles are wider, and the kernels run along rows, so the
  // Rx1 twin measures as fast or faster. The device model has no term for a tile's shape
  // yet; this rule stands in for one.
  auto key = [](const Candidate& c) { return std::pair{std::llround(c.pred.step_s * 1e6), c.part.cols}; };
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  for (size_t k = 0; k < all.size() && int(k) < o.top; ++k) res.best.push_back(all[k]);
  res.seconds = now_s() - t0;
  return res;
}

std::string command_line(const std::string& cfg, const Candidate& c, const RunContext& ctx) {
  const Partition& p = c.part;
  const std::string args = "train --cfg " + cfg + ctx.run_args + " --grid " + std::to_string(p.rows) + "x" +
                           std::to_string(p.cols) + " --groups " + p.groups_str() + " --cut " + std::to_string(p.cut) +
                           " --tiles-per-rank " + std::to_string(p.tiles_per_rank) + p.flags() + " --steps 100";
  const int devices = int(ctx.hosts.size()), used = p.ranks() / p.ranks_per_device;
  const bool emulated = std::all_of(ctx.hosts.begin(), ctx.hosts.end(), [](const std::string& h) {
    return h.size() > 3 && h.rfind("dev", 0) == 0 && h.find_first_not_of("0123456789", 3) == std::string::npos;
  });
  if (devices > 1 && emulated)
    return "cluster/edge.sh run --ranks-per-device " + std::to_string(p.ranks_per_device) + " -- " + args +
           (used < devices ? "   # on a cluster of " + std::to_string(used) + " device(s)" : "");
  if (devices > 1) {
    std::string hosts;
    for (int d = 0; d < used; ++d)
      hosts += (d ? "," : "") + ctx.hosts[size_t(d)] + ":" + std::to_string(p.ranks_per_device);
    return "mpirun -np " + std::to_string(p.ranks()) + " --host " + hosts + " build/tiletrain " + args;
  }
  return "mpirun -np " + std::to_string(p.ranks()) + " build/tiletrain " + args;
}

}  // namespace tt
