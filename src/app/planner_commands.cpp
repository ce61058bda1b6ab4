// tiletrain calibrate: measure this device (and, under mpirun, every device and link)
// for the planner.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "app/commands.hpp"
#include "planner/cluster.hpp"
#include "planner/device_model.hpp"
#include "planner/optimizer.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"
#include "util/median.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {

struct PairTiming {
  int a = 0, b = 0;
  double latency_s = 0, bytes_per_s = 0;
  std::vector<std::pair<double, double>> points;  // bytes, one-way seconds
};

// Ping-pong from rank a to rank b and back, 1 KB to 8 MB (stopping once a round trip
// takes over half a second); the fastest of a few round trips per size; latency +
// bytes / bandwidth fitted.
PairTiming ping_pong(Comm& comm, int a, int b) {
  PairTiming pt;
  pt.a = a;
  pt.b = b;
  const int me = comm.rank();
  std::vector<float> buf(size_t(8 << 20) / 4);
  std::vector<double> sizes, secs;
  int tag = 0;
  for (size_t bytes = 1024; bytes <= size_t(8 << 20); bytes *= 4) {
    const int n = int(bytes / 4);
    const TensorView v{buf.data(), 1, 1, 1, Box{0, 1, 0, n}};
    double best = 1e300;
    const int reps = bytes <= 65536 ? 20 : 4;
    for (int k = 0; k < reps; ++k) {
      const double t0 = now_s();
      if (me == a) {
        comm.isend(v, v.box, b, tag);
        comm.wait_all();
        comm.irecv(v, v.box, b, tag + 1);
        comm.wait_all();
      } else {
        comm.irecv(v, v.box, a, tag);
        comm.wait_all();
        comm.isend(v, v.box, a, tag + 1);
        comm.wait_all();
      }
      const double rtt = now_s() - t0;
      best = std::min(best, rtt / 2);
      tag += 2;
    }
    sizes.push_back(double(bytes));
    secs.push_back(best);
    pt.points.push_back({double(bytes), best});
    // Both ranks must agree on whether to go on: a's measure decides.
    float verdict[2] = {float(best), 0.f};
    const TensorView vv{verdict, 1, 1, 1, Box{0, 1, 0, 1}};
    if (me == a) comm.isend(vv, vv.box, b, tag);
    if (me == b) comm.irecv(vv, vv.box, a, tag);
    comm.wait_all();
    ++tag;
    if (2 * verdict[0] > 0.5) break;
  }
  // Latency: the smallest message; bandwidth: the slope between the two largest (a shaped
  // link passes small messages at line rate, in its burst).
  const size_t k = sizes.size();
  pt.latency_s = secs[0];
  const double slope = k >= 2 ? (secs[k - 1] - secs[k - 2]) / (sizes[k - 1] - sizes[k - 2]) : 0;
  pt.bytes_per_s = slope > 0 ? 1 / slope : sizes[k - 1] / std::max(secs[k - 1] - secs[0], 1e-9);
  return pt;
}

}  // namespace

int cmd_calibrate(const RunOptions& o, Comm& comm, const std::string& out, int steps) {
  if (comm.rank() == 0) check_can_write(out);
  NetSpec net = load_run_net(o);
  const double t0 = now_s();
  const std::vector<std::string> hosts = comm.all_hosts();
  const int me = comm.rank(), P = comm.size();
  // One rank per host measures the kernels (the device to itself); hosts at once.
  const bool leader = std::find(hosts.begin(), hosts.end(), hosts[size_t(me)]) - hosts.begin() == me;
  std::string model_text;
  CalibrateOptions co;
  co.threads = o.threads;
  co.kernels = o.kernels;
  co.steps = steps;
  // The cores each host gives: its ranks spin at once, each free of mpirun's binding to
  // one core, and their shares add up.
  comm.all_gather(0.);  // start together
  const std::vector<double> shares = comm.all_gather(cpu_time_share());
  double host_share = 0;
  for (int r = 0; r < P; ++r)
    if (hosts[size_t(r)] == hosts[size_t(me)]) host_share += shares[size_t(r)];
  co.cpu_capacity = capacity_of(host_share);
  // Progress on rank 0 (the leader of its host), on stderr: a calibration takes minutes.
  auto say = [&](const std::string& what) {
    if (me == 0) std::fprintf(stderr, "calibrate: %s (%.0f s so far)\n", what.c_str(), now_s() - t0);
  };
  co.progress = [&](int done, int total) {
    const double took = now_s() - t0;
    say("kernels: " + std::to_string(done) + " of " + std::to_string(total) + " map sizes measured, about " +
        std::to_string(int(std::lround(took / done * (total - done)))) + " s left for them");
  };
  say("measuring the kernels of " + net.path + " at " + std::to_string(co.scales.size()) + " map sizes, " +
      std::to_string(co.rounds) + " sweeps" + (P > 1 ? ", every host at once" : ""));
  if (leader) {
    DeviceModel m = calibrate_device(net, co);
    m.host = hosts[size_t(me)];
    nlohmann::json j = device_model_to_json(m);
    j["memory_limit_mb"] = memory_limit_mb();
    j["cores"] = int(sysconf(_SC_NPROCESSORS_ONLN));
    model_text = j.dump();
  }
  const std::vector<std::string> models = comm.all_gather(model_text);
  // Every rank at once: how much ranks computing side by side slow each other, and how
  // much their layer times spread (what synchronisations cost). Against the same compute
  // with one rank of each host alone, in turns: on a shared machine one sample of each
  // (or the kernel sweep's, taken earlier) can differ by a third for reasons of its own.
  std::vector<double> together, spread, alone;
  if (P > 1) {
    say("timing every rank computing at once, and alone, in turns");
    CalibrateOptions busy = co;
    busy.progress = nullptr;
    busy.steps = std::max(5, steps);
    std::vector<double> t_together, t_alone, t_spread;
    for (int round = 0; round < 3; ++round) {
      comm.all_gather(0.0);  // a barrier: every rank starts together
      const ComputeSample cs = measure_compute(net, busy);
      t_together.push_back(cs.compute_s);
      t_spread.push_back(cs.jitter);
      comm.all_gather(0.0);
      if (leader) t_alone.push_back(measure_compute(net, busy).compute_s);
    }
    together = comm.all_gather(median(t_together));
    spread = comm.all_gather(median(t_spread));
    alone = comm.all_gather(median(t_alone));
  }
  const double t_kernels = now_s() - t0;
  // Ping-pong between every pair of ranks, one pair at a time.
  if (P > 1) say("timing the links between the " + std::to_string(P) + " ranks, a pair at a time");
  std::vector<PairTiming> pairs;
  for (int a = 0; a < P; ++a)
    for (int b = a + 1; b < P; ++b) {
      if (me == a || me == b) {
        PairTiming pt = ping_pong(comm, a, b);
        if (me == a) pairs.push_back(std::move(pt));
      }
      comm.all_gather(0.0);  // a barrier: the next pair starts on a quiet network
    }
  nlohmann::json mine = nlohmann::json::array();
  for (const PairTiming& pt : pairs) mine.push_back({pt.a, pt.b, pt.latency_s, pt.bytes_per_s, pt.points});
  const std::vector<std::string> all_pairs = comm.all_gather(mine.dump());
  // The ring reduce-scatter and the all-gather the update runs, timed (slowest rank, best
  // of two) at two sizes: the 1 MB chunks --low-memory moves, and the net's parameters
  // (what the update moves; at most about 3 s of traffic). The efficiency of a shaped link
  // grows with the message, so a probe much smaller than the update would price the
  // update's collectives slow.
  double rs_s[2] = {0, 0}, ag_s[2] = {0, 0}, cg_s[2] = {0, 0}, crs_s[2] = {0, 0};
  int64_t coll_floats[2] = {0, 0};
  const int64_t chunk_floats[2] = {1 << 16, 1 << 18};
  // Rank r holding counts[r] floats at displs[r]: the reduce-scatter and the all-gather,
  // each timed on its slowest rank, the faster of two rounds: the training steps move the
  // update at about the faster round's rate, and a median of more rounds priced it slow.
  auto time_collectives = [&](const std::vector<int>& counts, const std::vector<int>& displs, double* rs_out,
                              double* ag_out) {
    size_t end = 0;
    for (size_t r = 0; r < counts.size(); ++r) end = std::max(end, size_t(displs[r] + counts[r]));
    std::vector<float> data(end, 1.f), tmp(size_t(*std::max_element(counts.begin(), counts.end())));
    *rs_out = *ag_out = 1e300;
    for (int rep = 0; rep < 2; ++rep) {
      comm.all_gather(0.0);
      double t = now_s();
      comm.reduce_scatter(data.data(), counts, displs, tmp.data());
      const std::vector<double> rs = comm.all_gather(now_s() - t);
      comm.all_gather(0.0);
      t = now_s();
      comm.all_gather_v(data.data(), counts, displs);
      const std::vector<double> ag = comm.all_gather(now_s() - t);
      *rs_out = std::min(*rs_out, *std::max_element(rs.begin(), rs.end()));
      *ag_out = std::min(*ag_out, *std::max_element(ag.begin(), ag.end()));
    }
  };
  if (P > 1) {
    say("timing the update's collectives");
    double slowest = 1e300;  // the slowest link's bytes/s, from the pairs
    for (const std::string& s : all_pairs)
      for (const auto& p : nlohmann::json::parse(s)) slowest = std::min(slowest, p[3].get<double>());
    coll_floats[0] = (1 << 18) / P * P;
    const int64_t params = net.param_count();
    const int64_t three_s = int64_t(3 * slowest * P / (P - 1) / 4);
    coll_floats[1] = std::max<int64_t>(std::min(params, three_s), 1 << 20) / P * P;
    for (int k = 0; k < 2; ++k) {
      const int part = int(coll_floats[k] / P);
      std::vector<int> counts(size_t(P), part), displs;
      for (int r = 0; r < P; ++r) displs.push_back(r * part);
      time_collectives(counts, displs, &rs_s[k], &ag_s[k]);
    }
    // A --low-memory weight chunk (0.25 and 1 MB) owned by rank 0 alone, as most are: its
    // ring reduce-scatter and its all-gather, the way Segment moves them.
    for (int k = 0; k < 2; ++k) {
      const int n = int(chunk_floats[k]);
      std::vector<int> counts(size_t(P), 0), displs(size_t(P), n);
      counts[0] = n;
      displs[0] = 0;
      time_collectives(counts, displs, &crs_s[k], &cg_s[k]);
    }
  }
  if (me != 0) return 0;

  if (P == 1) {
    nlohmann::json j = nlohmann::json::parse(models[0]);
    write_file_atomically(out, [&](std::ostream& f) { f << j.dump(2) << "\n"; });
    const DeviceModel m = device_model_from_json(j, out);
    std::printf(
        "calibrated %s on %s (%s, %d thread(s), %.2f cores): %zu map sizes in %.1f s; convolutions %.1f GFLOP/s; "
        "per-layer fits: median error %.1f%%, worst %.1f%%\nwrote %s\n",
        net.path.c_str(), m.host.c_str(), m.isa.c_str(), m.threads, m.cpu_capacity, m.points.size(), t_kernels,
        m.gflops, 100 * m.fit_median_err, 100 * m.fit_max_err, out.c_str());
    return 0;
  }
  // A cluster file: a device per host, the links between them.
  std::vector<std::string> dev_hosts;
  nlohmann::json devices = nlohmann::json::array();
  for (int r = 0; r < P; ++r) {
    if (models[size_t(r)].empty()) continue;
    nlohmann::json m = nlohmann::json::parse(models[size_t(r)]);
    std::vector<double> slow, jit;
    for (int q = 0; q < P; ++q)
      if (hosts[size_t(q)] == hosts[size_t(r)]) {
        slow.push_back(together[size_t(q)] / alone[size_t(r)]);  // r: the host's first rank
        jit.push_back(spread[size_t(q)]);
      }
    std::sort(slow.begin(), slow.end());
    std::sort(jit.begin(), jit.end());
    if (slow.size() > 1) {
      m["concurrent_ranks"] = int(slow.size());
      m["concurrent_slowdown"] = std::max(1., slow[slow.size() / 2]);
    }
    m["jitter"] = jit[jit.size() / 2];
    const double mem = m["memory_limit_mb"].get<double>();
    const int cores = m["cores"].get<int>();
    m.erase("memory_limit_mb");
    m.erase("cores");
    devices.push_back({{"name", hosts[size_t(r)]},
                       {"host", hosts[size_t(r)]},
                       {"cores", cores},
                       {"memory_mb", std::floor(mem)},
                       {"model", m}});
    dev_hosts.push_back(hosts[size_t(r)]);
  }
  auto dev_of = [&](int r) {
    return int(std::find(dev_hosts.begin(), dev_hosts.end(), hosts[size_t(r)]) - dev_hosts.begin());
  };
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> by_devices;  // latency, bytes/s
  std::vector<std::pair<double, double>> shm;
  std::vector<double> bursts;  // bytes, per pair of ranks on different devices
  std::printf("links (one way: the 1 KB message's time, and the rate between the two largest up to 4 MB):\n");
  for (const std::string& s : all_pairs)
    for (const auto& p : nlohmann::json::parse(s)) {
      const int a = p[0], b = p[1];
      const double lat = p[2], bw = p[3];
      std::printf("  rank %d (%s) - rank %d (%s): %.1f us, %.1f Mbit/s\n", a, hosts[size_t(a)].c_str(), b,
                  hosts[size_t(b)].c_str(), lat * 1e6, bw * 8 / 1e6);
      const int da = dev_of(a), db = dev_of(b);
      if (da == db) {
        shm.push_back({lat, bw});
        continue;
      }
      by_devices[{std::min(da, db), std::max(da, db)}].push_back({lat, bw});
      // What the link passes at once (a token bucket): the line through the largest
      // message at the measured rate starts that many bytes' time below the latency.
      const auto& largest = p[4].back();
      bursts.push_back(burst_from_ping_pong(lat, bw, largest[0].get<double>(), largest[1].get<double>()));
    }
  auto mean = [](const std::vector<std::pair<double, double>>& v) {
    std::pair<double, double> m{0, 0};
    for (auto& x : v) {
      m.first += x.first / double(v.size());
      m.second += x.second / double(v.size());
    }
    return m;
  };
  nlohmann::json links{{"topology", "switch"}};
  nlohmann::json jpairs = nlohmann::json::array();
  std::vector<double> lats, bws;
  for (auto& [k, v] : by_devices) {
    const auto [lat, bw] = mean(v);
    jpairs.push_back({{"a", dev_hosts[size_t(k.first)]},
                      {"b", dev_hosts[size_t(k.second)]},
                      {"bandwidth_mbit", bw * 8 / 1e6},
                      {"latency_us", lat * 1e6}});
    lats.push_back(lat);
    bws.push_back(bw);
  }
  if (!shm.empty()) {
    auto [lat, bw] = mean(shm);
    // On one host the ping-pong's fastest round trips can copy at cache speed, several
    // times faster than the engine's transfers (the update's above all) move: those move at
    // the rate the update's collectives measured. So the slower of the two.
    if (by_devices.empty()) {
      const double coll = shared_memory_collective_rate(P, 4. * double(coll_floats[1]), lat, ag_s[1], rs_s[1]);
      std::printf("shared memory: ping-pong %.1f Gbit/s, the update's collectives %.1f Gbit/s\n", bw * 8 / 1e9,
                  coll * 8 / 1e9);
      bw = std::min(bw, coll);
    }
    links["shared_memory"] = {{"bandwidth_mbit", bw * 8 / 1e6}, {"latency_us", lat * 1e6}};
  }
  if (!jpairs.empty()) {
    links["pairs"] = jpairs;
    std::sort(lats.begin(), lats.end());
    std::sort(bws.begin(), bws.end());
    links["latency_us"] = lats[lats.size() / 2] * 1e6;  // for pairs not measured (other devices)
    links["bandwidth_mbit"] = bws[bws.size() / 2] * 8 / 1e6;
    std::sort(bursts.begin(), bursts.end());
    links["burst_kb"] = bursts[bursts.size() / 2] / 1024;
    std::printf("links pass %.0f KB at once after a pause (median over the pairs)\n", bursts[bursts.size() / 2] / 1024);
  } else {  // one host: its shared memory is all there is
    links["latency_us"] = links["shared_memory"]["latency_us"];
    links["bandwidth_mbit"] = links["shared_memory"]["bandwidth_mbit"];
  }
  nlohmann::json cluster{
      {"comment", "written by tiletrain calibrate --cfg " + net.path + " on " + std::to_string(P) + " ranks"},
      {"devices", devices},
      {"links", links}};
  const auto profiles = load_profiles(default_profiles_path());
  ClusterSpec c = parse_cluster(cluster, out, profiles);  // loadable as it is
  // What fraction of the links' rates the collectives got across devices, and a fixed
  // cost per call: the cost model's times at full rate against the measured ones, through
  // the two sizes (measured = cost + predicted / efficiency).
  if (!by_devices.empty()) {
    std::vector<int> rank_dev;
    for (int r = 0; r < P; ++r) rank_dev.push_back(dev_of(r));
    double rs_pred[2], ag_pred[2], cg_pred[2], crs_pred[2];
    for (int k = 0; k < 2; ++k) {
      rs_pred[k] = reduce_scatter_time(c, rank_dev, 4. * double(coll_floats[k]));
      ag_pred[k] = all_gather_time(c, rank_dev, 4. * double(coll_floats[k]));
      std::vector<double> owned(size_t(P), 0.);
      owned[0] = double(chunk_floats[k]);
      // Each probe started with the sending links idle (their buckets full).
      LinkBuckets full(c), full_too(c);
      cg_pred[k] = chunk_gather_time(c, rank_dev, owned, &full, 0);
      crs_pred[k] = chunk_reduce_scatter_time(c, rank_dev, owned, &full_too);
    }
    auto fit = [](const double pred[2], const double meas[2]) {
      const double slope = (meas[1] - meas[0]) / std::max(pred[1] - pred[0], 1e-12);  // = 1 / efficiency
      const double eff = std::clamp(slope > 0 ? 1 / slope : 1., 0.05, 1.5);
      return std::pair{eff, std::max(0., meas[0] - pred[0] / eff)};
    };
    const auto [ring, ring_o] = fit(rs_pred, rs_s);
    const auto [many, many_o] = fit(ag_pred, ag_s);
    const auto [cg, cg_o] = fit(cg_pred, cg_s);
    const auto [crs, crs_o] = fit(crs_pred, crs_s);
    cluster["links"]["efficiency"] = {{"ring", ring},
                                      {"many_flows", many},
                                      {"ring_overhead_s", ring_o},
                                      {"many_flows_overhead_s", many_o},
                                      {"chunk_gather", cg},
                                      {"chunk_gather_overhead_s", cg_o},
                                      {"chunk_reduce_scatter", crs},
                                      {"chunk_reduce_scatter_overhead_s", crs_o}};
    c = parse_cluster(cluster, out, profiles);
    std::printf(
        "collectives of %.1f and %.1f MB: reduce-scatter %.3f and %.3f s (%.0f%% of the links' rate + %.1f ms a call), "
        "all-gather %.3f and %.3f s (%.0f%% + %.1f ms)\n",
        4. * coll_floats[0] / 1048576, 4. * coll_floats[1] / 1048576, rs_s[0], rs_s[1], 100 * ring, 1e3 * ring_o,
        ag_s[0], ag_s[1], 100 * many, 1e3 * many_o);
    std::printf(
        "one rank's weight chunk of %.2f and %.2f MB: all-gather %.3f and %.3f s (%.0f%% + %.1f ms), reduce-scatter "
        "%.3f and %.3f s (%.0f%% + %.1f ms)\n",
        4. * chunk_floats[0] / 1048576, 4. * chunk_floats[1] / 1048576, cg_s[0], cg_s[1], 100 * cg, 1e3 * cg_o,
        crs_s[0], crs_s[1], 100 * crs, 1e3 * crs_o);
  }
  save_cluster(c, out);
  for (const nlohmann::json& d : devices) {
    const DeviceModel m = device_model_from_json(d["model"], out);
    std::printf(
        "device %s: %s, %.2f cores, %.0f MB; convolutions %.1f GFLOP/s; fits: median error %.1f%%, worst %.1f%%; "
        "%d rank(s) at once: %.2fx slower each; layer times spread %.1f%%\n",
        m.host.c_str(), m.isa.c_str(), m.cpu_capacity, d["memory_mb"].get<double>(), m.gflops, 100 * m.fit_median_err,
        100 * m.fit_max_err, m.concurrent_ranks, m.concurrent_slowdown, 100 * m.jitter);
  }
  std::printf("calibrated in %.1f s (kernels %.1f s); wrote %s\n", now_s() - t0, t_kernels, out.c_str());
  return 0;
}

namespace {
// --cluster FILE: a cluster file, or the device model a one-process calibrate writes (then
// a cluster of that one device; said on stderr, since several devices need a cluster file).
ClusterSpec cluster_or_device(const std::string& path) {
  std::ifstream f(path);
  nlohmann::json j;
  if (f) try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception&) {
      j = nullptr;  // load_cluster names the problem
    }
  if (!j.is_object() || j.contains("devices") || !j.contains("signature") || !j.contains("points"))
    return load_cluster(path);
  const std::string host = j.value("host", std::string("this-host"));
  std::fprintf(stderr,
               "tiletrain: %s is a device model (calibrate in one process): planning for that one device, %s; for "
               "several devices, calibrate under mpirun, which writes a cluster file\n",
               path.c_str(), host.c_str());
  nlohmann::json device{{"name", host}, {"host", host}, {"model", j}};
  if (j.contains("cores")) device["cores"] = j["cores"];
  if (j.contains("memory_limit_mb")) device["memory_mb"] = j["memory_limit_mb"];
  // One device: no link between devices is ever used; the ranks on it share its memory.
  const nlohmann::json cluster{{"devices", {device}}, {"links", {{"bandwidth_mbit", 1000}, {"latency_us", 100}}}};
  return parse_cluster(cluster, path, load_profiles(default_profiles_path()));
}
}  // namespace

ClusterModel load_cluster_model(const PlanOptions& po, const NetSpec& net) {
  const ClusterSpec c = cluster_or_device(po.cluster);
  std::unique_ptr<DeviceModel> ref;
  if (!po.model.empty()) {
    std::ifstream f(po.model);
    if (!f) fail("cannot open device model '", po.model, "'");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      fail(po.model, ": not JSON: ", e.what());
    }
    ref = std::make_unique<DeviceModel>(device_model_from_json(j, po.model));
    if (ref->signature != net_signature(net))
      fail(po.model, ": calibrated on ", ref->cfg, ", a different net than ", net.path);
  }
  return resolve_cluster(c, net, ref.get());
}

Partition partition_of(const RunOptions& o, const PlanOptions& po, const NetSpec& net, const ClusterModel& cm) {
  Partition p;
  std::tie(p.rows, p.cols) = parse_pair(o.grid, "--grid");
  p.cut = resolve_cut(net, o.cut, p.rows, p.cols);
  p.group_starts = parse_groups(o.groups, net.first_tiled(), p.cut);
  p.tiles_per_rank = o.tiles_per_rank;
  p.low_memory = o.low_memory;
  p.replicas = o.replicas;
  p.tail_filters = tail_mode(o, net) == TailMode::Filters;
  if (!o.row_weights.empty()) p.split.rows = parse_weights(o.row_weights, p.rows, "--row-weights");
  if (!o.col_weights.empty()) p.split.cols = parse_weights(o.col_weights, p.cols, "--col-weights");
  p.features = parse_backward_features(o.backward_features);
  p.overlap = parse_overlap(o.overlap);
  const int D = int(cm.spec.devices.size());
  p.ranks_per_device = po.ranks_per_device > 0 ? po.ranks_per_device : (p.ranks() + D - 1) / D;
  if (p.replicas > 0) p.tiles_per_rank = p.rows * p.cols;  // each copy's tiles in its process
  return p;
}

namespace {
// Each device whose ranks need more memory than it has, and by how much.
void print_shortfalls(const Prediction& pr, const ClusterModel& cm, const char* prefix) {
  for (size_t d = 0; d < pr.memory_short_mb.size(); ++d)
    if (pr.memory_short_mb[d] > 0)
      std::printf("%sdevice %s is %.1f MB short (limit %.0f MB, of which the plan may use 90 %%)\n", prefix,
                  cm.spec.devices[d].name.c_str(), pr.memory_short_mb[d], cm.spec.devices[d].memory_mb);
}
}  // namespace

void print_prediction(const Prediction& pr, const ClusterModel& cm) {
  std::printf(
      "predicted step %.4f s (forward %.4f, backward %.4f, halo %.4f, weights %.4f, io %.4f, update %.4f; "
      "largest over ranks)\n",
      pr.step_s, pr.fwd_s, pr.bwd_s, pr.halo_s, pr.weights_s, pr.io_s, pr.update_s);
  std::printf("%-5s %-12s %8s %8s %8s %8s %8s %8s %8s | %8s %7s %7s %8s\n", "rank", "device", "step s", "fwd", "bwd",
              "halo", "weights", "io", "update", "peak MB", "maps", "deltas", "filters");
  for (size_t r = 0; r < pr.ranks.size(); ++r) {
    const RankPrediction& a = pr.ranks[r];
    std::printf("%-5zu %-12s %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f | %8.1f %7.1f %7.1f %8.1f\n", r,
                cm.spec.devices[size_t(a.device)].name.substr(0, 12).c_str(), a.step_s, a.fwd_s, a.bwd_s, a.halo_s,
                a.weights_s, a.io_s, a.update_s, a.peak_rss_mb, a.maps_mb, a.deltas_mb, a.filters_mb);
  }
  print_shortfalls(pr, cm, "does not fit: ");
}

int cmd_optimize(const RunOptions& o, const PlanOptions& po) {
  if (po.cluster.empty()) fail("plan --optimize needs --cluster FILE");
  const NetSpec net = load_run_net(o);
  const ClusterModel cm = load_cluster_model(po, net);
  SearchOptions so;
  so.top = po.top;
  const SearchResult r = optimize(net, cm, so);
  const int D = int(cm.spec.devices.size());
  RunContext ctx;  // what the printed commands must repeat besides the partition
  if (o.batch > 0) ctx.run_args += " --batch " + std::to_string(o.batch);
  if (o.subdivisions > 0) ctx.run_args += " --subdivisions " + std::to_string(o.subdivisions);
  if (!o.size.empty()) ctx.run_args += " --size " + o.size;
  if (o.bn != "sync") ctx.run_args += " --bn " + o.bn;
  if (o.seed != 1) ctx.run_args += " --seed " + std::to_string(o.seed);
  for (const DeviceSpec& d : cm.spec.devices) ctx.hosts.push_back(d.host.empty() ? d.name : d.host);
  if (o.json) {
    nlohmann::json best = nlohmann::json::array();
    for (const Candidate& c : r.best)
      best.push_back({{"grid", std::to_string(c.part.rows) + "x" + std::to_string(c.part.cols)},
                      {"groups", c.part.groups_str()},
                      {"cut", c.part.cut},
                      {"tiles_per_rank", c.part.tiles_per_rank},
                      {"ranks_per_device", c.part.ranks_per_device},
                      {"low_memory", c.part.low_memory},
                      {"ranks", c.part.ranks()},
                      {"command", command_line(o.cfg, c, ctx)},
                      {"prediction", prediction_to_json(c.pred)}});
    nlohmann::json j{{"cfg", o.cfg},         {"batch", net.batch}, {"configs", r.configs}, {"predictions", r.replays},
                     {"seconds", r.seconds}, {"best", best}};
    if (r.best.empty()) j["least_memory"] = prediction_to_json(r.least_memory.pred);
    std::cout << j.dump() << std::endl;
    return r.best.empty() ? 1 : 0;
  }
  std::printf("%s, batch %d, on %s (%d device(s)): %d configurations, %d predictions in %.2f s\n", net.path.c_str(),
              net.batch, po.cluster.c_str(), D, r.configs, r.replays, r.seconds);
  if (r.best.empty()) {
    const Candidate& c = r.least_memory;
    std::printf("nothing fits. Closest: %s\n", c.part.str().c_str());
    print_shortfalls(c.pred, cm, "  ");
    return 1;
  }
  std::printf("%-3s %9s %9s %9s %9s  %s\n", "#", "step s", "halo s", "weights s", "peak MB", "partition");
  for (size_t k = 0; k < r.best.size(); ++k) {
    const Candidate& c = r.best[k];
    std::printf("%-3zu %9.4f %9.4f %9.4f %9.1f  %s\n", k + 1, c.pred.step_s, c.pred.halo_s, c.pred.weights_s,
                c.pred.peak_rss_mb_max, c.part.str().c_str());
    std::printf("    %s\n", command_line(o.cfg, c, ctx).c_str());
  }
  return 0;
}
}  // namespace tt
