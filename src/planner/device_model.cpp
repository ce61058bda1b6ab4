#include "planner/device_model.hpp"

#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "data/synthetic.hpp"
#include "engine/trainer.hpp"
#include "layers/backend.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "util/error.hpp"
#include "util/json_number.hpp"
#include "util/median.hpp"
#include "util/sys.hpp"

namespace tt {

LinearFit fit_linear(const std::vector<double>& x, const std::vector<double>& t) {
  if (x.empty() || x.size() != t.size()) fail("internal: fit_linear on ", x.size(), " cells and ", t.size(), " times");
  // Minimise sum ((a + b x - t) / t)^2: weighted least squares, weight 1/t^2.
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = 1 / std::max(t[i] * t[i], 1e-18);
    sw += w;
    sx += w * x[i];
    sxx += w * x[i] * x[i];
    st += w * t[i];
    sxt += w * x[i] * t[i];
  }
  const double det = sw * sxx - sx * sx;
  LinearFit f;
  if (det > 1e-12 * sw * sxx) {
    f.b = (sw * sxt - sx * st) / det;
    f.a = (st - f.b * sx) / sw;
  }
  if (f.a < 0 || det <= 1e-12 * sw * sxx) f = {0, sxx > 0 ? sxt / sxx : 0};  // through the origin
  if (f.b < 0) f = {st / sw, 0};                                             // a constant
  return f;
}

double cpu_time_share() {
  // Measured, not read: inside an emulated device (ip netns exec) /sys/fs/cgroup is not
  // visible, and containers limit CPU in ways files do not always show. One spinning
  // thread per online core for 0.3 s, each free to run on any core (mpirun binds each
  // rank to one, which is not what the device gives); their CPU time over the wall time.
  const int n = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  constexpr double kSpin = 0.3;
  std::vector<double> got(size_t(n), 0.);
  std::vector<std::thread> threads;
  const double t0 = now_s();
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&got, i, t0] {
      allow_all_cpus();
      timespec a{}, b{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
      volatile double x = 0;
      while (now_s() - t0 < kSpin) x = x + 1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
      got[size_t(i)] = double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
    });
  for (auto& t : threads) t.join();
  double cpu = 0;
  for (double g : got) cpu += g;
  return cpu / (now_s() - t0);
}

double capacity_of(double share) {
  // Within 10 % of the core count counts as all of them (other processes' moments).
  const int n = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return share > 0.9 * n ? n : std::max(0.01, share);
}

double cpu_capacity() { return capacity_of(cpu_time_share()); }

std::string net_signature(const NetSpec& net) {
  std::string s;
  for (const LayerSpec& l : net.layers) {
    if (!s.empty()) s += ' ';
    s += l.type_name();
    // append, not chained +: GCC 12 warns falsely (-Wrestrict) on the chain
    if (l.spatial()) s.append(std::to_string(l.window().size)).append("/").append(std::to_string(l.window().stride));
    if (l.is(kConvKind))
      s.append(":")
          .append(std::to_string(l.in.c))
          .append(">")
          .append(std::to_string(l.out.c))
          .append(l.conv().groups > 1 ? "/g" + std::to_string(l.conv().groups) : "")
          .append(l.batch_normalize() ? "+bn" : "")
          .append(",")
          .append(act_name(l.conv().act));
    if (l.is(kConnectedKind)) s.append(">").append(std::to_string(l.connected().outputs));
  }
  return s;
}

namespace {

// The five passes of a layer (kLayerPasses: their name in a model file, the engine's
// time) with their fit.
struct PassEntry {
  const char* name;
  double LayerTimes::*time;
  LinearFit LayerModel::*fit;
};
constexpr PassEntry pass_entry(int i, LinearFit LayerModel::*fit) {
  return {kLayerPasses[i].name, kLayerPasses[i].time, fit};
}
constexpr PassEntry kPasses[] = {pass_entry(0, &LayerModel::fwd), pass_entry(1, &LayerModel::fwd_pointwise),
                                 pass_entry(2, &LayerModel::bwd_pointwise), pass_entry(3, &LayerModel::bwd_data),
                                 pass_entry(4, &LayerModel::bwd_weights)};
static_assert(std::size(kPasses) == std::size(kLayerPasses));

// One map size: the untiled engine's per-layer times (median over steps) and what the
// process holds.
struct SizePoint {
  int height = 0, width = 0;
  std::vector<LayerTimes> layers;
  std::vector<double> cells;       // per layer: batch x rows x columns of its output map
  double compute = 0, jitter = 0;  // layer compute per step (median); relative spread of layer times
  double paused = 1;               // see LayerMedians
  // The head: everything from the first untileable layer on.
  double head_fwd = 0, head_bwd = 0, update = 0, reload = 0, total = 0;
};

}  // namespace

LayerMedians layer_medians(const std::vector<std::vector<LayerTimes>>& steps) {
  LayerMedians m;
  if (steps.empty()) return m;
  const size_t L = steps[0].size();
  m.layers.resize(L);
  std::vector<double> step_sum(steps.size(), 0.);
  double sum_of_medians = 0;
  for (size_t l = 0; l < L; ++l)
    for (const LayerPass& e : kLayerPasses) {
      std::vector<double> all;
      for (size_t k = 0; k < steps.size(); ++k) {
        all.push_back(steps[k][l].*e.time);
        step_sum[k] += steps[k][l].*e.time;
      }
      m.layers[l].*e.time = median(all);
      sum_of_medians += m.layers[l].*e.time;
    }
  if (steps.size() >= 3 && sum_of_medians > 0) m.paused = std::max(1., median(step_sum) / sum_of_medians);
  return m;
}

namespace {

SizePoint measure(const NetSpec& net, const CalibrateOptions& o, DeviceModel* full) {
  Params params(net);
  init_params(params, net, 1);
  TrainOptions topt;
  topt.kernels = parse_kernel_path(o.kernels);
  topt.keep_formatted_weights = true;  // measures the formatting as reload_s and its memory as weight copies
  LocalComm local;
  Trainer trainer(net, params, topt, local);
  std::vector<float> input, truth;
  synthetic_batch(net, net.batch, 1, input, truth);
  trainer.train_step(input.data(), truth.data());
  std::vector<std::vector<LayerTimes>> steps;
  std::vector<double> update, reload, total;
  for (int k = 0; k < o.steps; ++k) {
    trainer.reset_times();
    trainer.train_step(input.data(), truth.data());
    steps.push_back(trainer.layer_times());
    const StepTimes t = trainer.times();
    update.push_back(t.update - t.reload);
    reload.push_back(t.reload);
    total.push_back(t.total);
  }
  SizePoint p;
  p.height = net.height;
  p.width = net.width;
  const size_t L = net.layers.size();
  for (const LayerSpec& l : net.layers) p.cells.push_back(double(net.batch) * l.out.h * l.out.w);
  LayerMedians lm = layer_medians(steps);
  p.layers = std::move(lm.layers);
  p.paused = lm.paused;
  for (const LayerTimes& t : p.layers)
    for (const LayerPass& e : kLayerPasses) p.compute += t.*e.time;
  // The spread, standard deviation / mean across steps, of what a rank computes between
  // two synchronisations: a layer's forward (with its batch-norm and activation), its
  // backward; those of over 1 ms. Not of each pass: under a CPU quota a pass's time swings
  // with where the quota's pause falls, but the pause falls in one pass or the next.
  std::vector<double> spreads;
  double (*const parts[])(const LayerTimes&) = {
      [](const LayerTimes& t) { return t.fwd + t.fwd_pointwise; },
      [](const LayerTimes& t) { return t.bwd_pointwise + t.bwd_data + t.bwd_weights; }};
  for (size_t l = 0; l < L; ++l)
    for (const auto part : parts) {
      double m = 0, v = 0;
      for (auto& st : steps) m += part(st[l]) / double(steps.size());
      if (m < 1e-3 || steps.size() < 3) continue;
      for (auto& st : steps) v += (part(st[l]) - m) * (part(st[l]) - m) / double(steps.size() - 1);
      spreads.push_back(std::sqrt(v) / m);
    }
  p.jitter = median(spreads);
  for (size_t l = size_t(net.first_untileable()); l < L; ++l) {
    p.head_fwd += p.layers[l].fwd + p.layers[l].fwd_pointwise;
    p.head_bwd += p.layers[l].bwd_pointwise + p.layers[l].bwd_data + p.layers[l].bwd_weights;
  }
  p.update = median(update);
  p.reload = median(reload);
  p.total = median(total);
  if (full) {  // memory besides what the engine accounts for, and the convolutions' speed
    const Trainer::Memory m = trainer.memory();
    const double in_mb = (input.size() + truth.size()) * 4 / 1048576.0;
    full->scratch_mb = m.scratch_mb;
    full->weight_copies_mb = m.filters_mb - 3. * double(params.size()) * 4 / 1048576.0;
    full->base_mb = peak_rss_mb() - m.maps_mb - m.deltas_mb - m.filters_mb - m.scratch_mb - in_mb;
    full->sgd_per_param = p.update / double(params.size());
    full->reload_s = p.reload;
    double flops = 0, secs = 0;
    for (const LayerSpec& l : net.layers)
      if (l.is(kConvKind)) {
        flops += 3 * l.forward_flops() * net.batch;
        secs +=
            p.layers[size_t(l.index)].fwd + p.layers[size_t(l.index)].bwd_data + p.layers[size_t(l.index)].bwd_weights;
      }
    full->gflops = secs > 0 ? flops / secs / 1e9 : 0;
    full->isa = cpu_isa_name();
    full->kernel_path = kernel_path_name(trainer.kernel_config().path);
    full->channel_block = trainer.kernel_config().block;
  }
  return p;
}

}  // namespace

ComputeSample measure_compute(const NetSpec& net0, const CalibrateOptions& o) {
  omp_set_num_threads(o.threads);
  NetSpec net = net0;
  net.subdivisions = 1;
  net.batch = net0.micro_batch();
  const SizePoint p = measure(net, o, nullptr);
  return {p.compute, p.jitter};
}

DeviceModel calibrate_device(const NetSpec& net0, const CalibrateOptions& o) {
  omp_set_num_threads(o.threads);
  DeviceModel m;
  m.cfg = net0.path;
  m.signature = net_signature(net0);
  m.host = LocalComm().host();
  m.threads = o.threads;
  m.cpu_capacity = o.cpu_capacity > 0 ? o.cpu_capacity : cpu_capacity();
  m.batch = net0.micro_batch();
  const int spatial = net0.first_untileable();
  std::vector<NetSpec> sized;  // the net at each map size it accepts
  for (double s : o.scales) {
    NetSpec net = net0;
    net.subdivisions = 1;
    net.batch = net0.micro_batch();
    const int h = std::max(1, int(std::lround(net0.height * s))), w = std::max(1, int(std::lround(net0.width * s)));
    if (!sized.empty() && h == sized.back().height && w == sized.back().width) continue;
    try {
      resize_net(net, h, w);
    } catch (const Error&) {
      break;  // the net does not fit a map this small: enough sizes
    }
    sized.push_back(std::move(net));
  }
  if (sized.empty()) fail(net0.path, ": calibration needs at least one map size the net accepts");
  // Every size in o.rounds sweeps, each size keeping its fastest sweep. A shared host slows
  // a device for seconds at a time, so a single sweep can time the largest sizes slow while
  // the training steps run at the speed of the other sweeps.
  int measured = 0;
  const int to_measure = int(sized.size()) * o.rounds;
  const std::vector<SizePoint> pts = fastest_of_sweeps<SizePoint>(
      sized.size(), o.rounds,
      [&](size_t i, int round) {
        SizePoint p = measure(sized[i], o, round == 0 && i == 0 ? &m : nullptr);
        if (o.progress) o.progress(++measured, to_measure);
        return p;
      },
      [](const SizePoint& p) { return p.compute; });
  // Per layer and pass: seconds against the cells of the layer's output map at each size.
  m.layers.resize(size_t(spatial));
  std::vector<double> errs;
  nlohmann::json points = nlohmann::json::array();
  for (const SizePoint& p : pts) {
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < spatial; ++l) {
      const LayerTimes& t = p.layers[size_t(l)];
      layers.push_back({t.fwd, t.fwd_pointwise, t.bwd_pointwise, t.bwd_data, t.bwd_weights});
    }
    points.push_back({{"height", p.height}, {"width", p.width}, {"step_s", p.total}, {"layers", layers}});
  }
  for (int l = 0; l < spatial; ++l) {
    for (const PassEntry& e : kPasses) {
      std::vector<double> cells, secs;
      for (const SizePoint& p : pts) {
        if (p.layers[size_t(l)].*e.time <= 0) continue;  // a pass the layer does not have
        cells.push_back(p.cells[size_t(l)]);
        secs.push_back(p.layers[size_t(l)].*e.time);
      }
      LinearFit fit;
      if (!cells.empty()) fit = fit_linear(cells, secs);
      for (size_t i = 0; i < cells.size(); ++i)  // passes of under 0.1 ms do not count: they matter nowhere
        if (secs[i] > 1e-4) errs.push_back(std::abs(fit.at(cells[i]) / secs[i] - 1));
      m.layers[size_t(l)].*e.fit = fit;
    }
  }
  m.solo_compute_s = pts[0].compute;
  m.jitter = pts[0].jitter;
  m.paused = pts[0].paused;
  m.head_fwd_per_sample = pts[0].head_fwd / m.batch;
  m.head_bwd_per_sample = pts[0].head_bwd / m.batch;
  m.fit_median_err = median(errs);
  m.fit_max_err = errs.empty() ? 0 : *std::max_element(errs.begin(), errs.end());
  m.points = points;
  derive_size_correction(m, net0);
  return m;
}

void derive_size_correction(DeviceModel& m, const NetSpec& net0) try {
  m.size_correction.clear();
  m.full_cells.clear();
  // calibrate measures the layers before the first untileable one; a file that says
  // otherwise was damaged or edited (its signature alone does not say how many it holds)
  const int spatial = int(m.layers.size());
  if (spatial != net0.first_untileable())
    fail("the device model of ", m.host, " (", m.cfg, ") holds ", spatial, " layer(s), but ", net0.path, " has ",
         net0.first_untileable(), " before its first untileable layer: a damaged or edited file (calibrate again)");
  if (!m.points.is_array() || m.points.empty()) return;
  std::vector<std::vector<double>> cells;  // per point, per layer
  for (const nlohmann::json& p : m.points) {
    NetSpec net = net0;
    net.subdivisions = 1;
    net.batch = m.batch;
    resize_net(net, int(json_whole(p.at("height"), 1, INT32_MAX, m.host + "'s model: a point's height")),
               int(json_whole(p.at("width"), 1, INT32_MAX, m.host + "'s model: a point's width")));
    cells.emplace_back();
    for (int l = 0; l < spatial; ++l)
      cells.back().push_back(double(m.batch) * net.layers[size_t(l)].out.h * net.layers[size_t(l)].out.w);
  }
  size_t big = 0;
  for (size_t i = 0; i < cells.size(); ++i)
    if (cells[i][0] > cells[big][0]) big = i;
  m.full_cells = cells[big];
  for (size_t i = 0; i < cells.size(); ++i) {
    const nlohmann::json& layers = m.points[i].at("layers");
    double measured = 0, fitted = 0;
    for (int l = 0; l < spatial; ++l)
      for (size_t k = 0; k < std::size(kPasses); ++k) {
        const double t = layers.at(size_t(l)).at(k).get<double>();
        if (t <= 0) continue;
        measured += t;
        fitted += (m.layers[size_t(l)].*kPasses[k].fit).at(cells[i][size_t(l)]);
      }
    if (measured > 0 && fitted > 0) m.size_correction.push_back({cells[i][0] / m.full_cells[0], measured / fitted});
  }
  std::sort(m.size_correction.begin(), m.size_correction.end());
} catch (const nlohmann::json::exception& e) {
  fail("the device model of ", m.host, " (", m.cfg, "): its points are malformed: ", e.what());
}

double DeviceModel::correction(int layer, double cells) const {
  const auto& c = size_correction;
  if (c.empty() || size_t(layer) >= full_cells.size() || full_cells[size_t(layer)] <= 0) return 1;
  const double x = std::log(std::max(cells, 1e-9) / full_cells[size_t(layer)]);
  if (x <= std::log(c.front()[0])) return c.front()[1];
  if (x >= std::log(c.back()[0])) return c.back()[1];
  size_t i = 1;
  while (std::log(c[i][0]) < x) ++i;
  const double x0 = std::log(c[i - 1][0]), x1 = std::log(c[i][0]);
  if (x1 <= x0) return c[i][1];
  return c[i - 1][1] + (c[i][1] - c[i - 1][1]) * (x - x0) / (x1 - x0);
}

nlohmann::json device_model_to_json(const DeviceModel& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < m.layers.size(); ++l) {
    nlohmann::json j{{"layer", l}};
    for (const PassEntry& e : kPasses) {
      const LinearFit& f = m.layers[l].*e.fit;
      j[e.name] = {f.a, f.b};
    }
    layers.push_back(j);
  }
  return {{"kind", "tiletrain-device-model"},
          {"version", 1},
          {"cfg", m.cfg},
          {"signature", m.signature},
          {"host", m.host},
          {"isa", m.isa},
          {"kernel_path", m.kernel_path},
          {"threads", m.threads},
          {"channel_block", m.channel_block},
          {"batch", m.batch},
          {"cpu_capacity", m.cpu_capacity},
          {"gflops", m.gflops},
          {"solo_compute_s", m.solo_compute_s},
          {"concurrent_ranks", m.concurrent_ranks},
          {"concurrent_slowdown", m.concurrent_slowdown},
          {"jitter", m.jitter},
          {"paused", m.paused},
          {"head_fwd_s_per_sample", m.head_fwd_per_sample},
          {"head_bwd_s_per_sample", m.head_bwd_per_sample},
          {"sgd_s_per_param", m.sgd_per_param},
          {"reload_s", m.reload_s},
          {"base_mb", m.base_mb},
          {"scratch_mb", m.scratch_mb},
          {"weight_copies_mb", m.weight_copies_mb},
          {"fit_median_rel_err", m.fit_median_err},
          {"fit_max_rel_err", m.fit_max_err},
          {"layers_note", "per layer and pass: [a, b], seconds = a + b * cells (batch x rows x columns of the box)"},
          {"layers", layers},
          {"points_note", "per map size, per layer: [fwd, fwd_pointwise, bwd_pointwise, bwd_data, bwd_weights] s"},
          {"points", m.points}};
}

DeviceModel device_model_from_json(const nlohmann::json& j, const std::string& where) {
  auto get = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key))
      fail(where, ": not a device model from `tiletrain calibrate` (no '", key, "')");
    return j.at(key);
  };
  try {
    if (get("kind") != "tiletrain-device-model") fail(where, ": kind is not tiletrain-device-model");
    if (get("version") != 1) fail(where, ": device model version ", get("version").dump(), ", this tiletrain reads 1");
    DeviceModel m;
    m.cfg = get("cfg").get<std::string>();
    m.signature = get("signature").get<std::string>();
    m.host = get("host").get<std::string>();
    m.isa = get("isa").get<std::string>();
    m.kernel_path = get("kernel_path").get<std::string>();
    m.threads = int(json_whole(get("threads"), 1, 1 << 20, where + ": threads"));
    m.channel_block = int(json_whole(get("channel_block"), 1, 1 << 20, where + ": channel_block"));
    m.batch = int(json_whole(get("batch"), 1, 1 << 20, where + ": batch"));
    m.cpu_capacity = get("cpu_capacity").get<double>();
    m.gflops = get("gflops").get<double>();
    m.solo_compute_s = get("solo_compute_s").get<double>();
    m.concurrent_ranks = int(json_whole(get("concurrent_ranks"), 1, 1 << 20, where + ": concurrent_ranks"));
    m.concurrent_slowdown = get("concurrent_slowdown").get<double>();
    m.jitter = get("jitter").get<double>();
    if (j.contains("paused")) {  // older files: never paused
      m.paused = get("paused").get<double>();
      if (!(m.paused >= 1 && m.paused <= 100))
        fail(where, ": paused is ", m.paused, "; calibrate writes 1 to about 3 (1: no CPU quota)");
    }
    m.head_fwd_per_sample = get("head_fwd_s_per_sample").get<double>();
    m.head_bwd_per_sample = get("head_bwd_s_per_sample").get<double>();
    m.sgd_per_param = get("sgd_s_per_param").get<double>();
    m.reload_s = get("reload_s").get<double>();
    m.base_mb = get("base_mb").get<double>();
    m.scratch_mb = get("scratch_mb").get<double>();
    m.weight_copies_mb = get("weight_copies_mb").get<double>();
    m.fit_median_err = get("fit_median_rel_err").get<double>();
    m.fit_max_err = get("fit_max_rel_err").get<double>();
    for (const auto& lj : get("layers")) {
      LayerModel lm;
      for (const PassEntry& e : kPasses) {
        const auto& ab = lj.at(e.name);
        lm.*e.fit = {ab.at(0).get<double>(), ab.at(1).get<double>()};
      }
      m.layers.push_back(lm);
    }
    if (j.contains("points")) m.points = j.at("points");
    return m;
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": malformed device model: ", e.what());
  }
}

// Ranks computing at once slow each other (the slowdown calibrate measured with its ranks
// on the device, interpolated); beyond the device's cores they share them.
double ranks_side_by_side(const DeviceModel& m, double ranks, double capacity) {
  return std::min(ranks, std::max(1., std::max(1e-3, capacity) / m.threads));
}

double crowd_slowdown(const DeviceModel& m, double ranks, double capacity) {
  const double k = ranks, t = m.threads, cap = std::max(1e-3, capacity);
  const double busy = ranks_side_by_side(m, k, capacity);
  // Calibrated with more ranks than cores, the slowdown includes their sharing of the
  // cores, which is counted apart here: only what is left (caches, memory) interpolates.
  const double cal_k = m.concurrent_ranks, cal_busy = ranks_side_by_side(m, cal_k, capacity);
  const double cal_pure = m.concurrent_slowdown / std::max(1., cal_k * t / cap);
  const double shared = cal_busy > 1 ? 1 + (cal_pure - 1) * (busy - 1) / (cal_busy - 1) : 1;
  return std::max(1., shared) * std::max(1., k * t / cap) / std::max(1., t / cap);
}

}  // namespace tt
