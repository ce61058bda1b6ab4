// The planner: the linear fits, the cost model's arithmetic (halo bytes, messages,
// cells, memory) against brute-force counts from the plan and a real trainer, the
// replay's bookkeeping, the grouping search against exhaustive search, the optimizer's
// answers, and calibration's output. No timing is asserted anywhere.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <cmath>
#include <random>
#include <thread>

#include "engine/filter_blocks.hpp"
#include "engine/trainer.hpp"
#include "layers/tensor.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "planner/cost_model.hpp"
#include "planner/device_model.hpp"
#include "planner/optimizer.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {
namespace {

NetSpec net_at(const std::string& rel, int h = 0, int w = 0, int batch = 0) {
  NetSpec n = load_net(test::source_dir() + "/" + rel);
  if (batch) {
    n.batch = batch;
    n.subdivisions = 1;
  }
  if (h) resize_net(n, h, w);
  return n;
}

// A device model with made-up but plausible coefficients: every pass a + b * cells,
// different per layer so that mistakes in which box feeds which fit show.
DeviceModel synthetic_model(const NetSpec& net) {
  DeviceModel m;
  m.cfg = net.path;
  m.signature = net_signature(net);
  m.host = "synthetic";
  m.isa = "none";
  m.kernel_path = "auto";
  m.channel_block = 8;
  m.cpu_capacity = 4;
  m.gflops = 10;
  for (int l = 0; l < net.first_untileable(); ++l) {
    const double k = 1 + 0.1 * l;
    LayerModel lm;
    lm.fwd = {2e-5 * k, 3e-8 * k};
    lm.fwd_pointwise = {1e-6, 5e-9 * k};
    lm.bwd_pointwise = {1e-6, 6e-9 * k};
    lm.bwd_data = {3e-5 * k, 4e-8 * k};
    lm.bwd_weights = {4e-5 * k, 5e-8 * k};
    m.layers.push_back(lm);
  }
  m.head_fwd_per_sample = 1e-4;
  m.head_bwd_per_sample = 2e-4;
  m.sgd_per_param = 1e-9;
  m.reload_s = 1e-3;
  m.base_mb = 20;
  m.scratch_mb = 1;
  m.weight_copies_mb = 2;
  return m;
}

// `devices` devices with that model, one shared link (with `efficiency` as links.efficiency
// when given).
ClusterSpec synthetic_spec(const NetSpec& net, int devices, double mbit, double memory_mb = 4096,
                           std::vector<double> speeds = {}, const nlohmann::json& efficiency = nullptr) {
  nlohmann::json devs = nlohmann::json::array();
  const nlohmann::json model = device_model_to_json(synthetic_model(net));
  for (int d = 0; d < devices; ++d)
    devs.push_back({{"name", std::string("d").append(std::to_string(d))},
                    {"cores", 4},
                    {"memory_mb", memory_mb},
                    {"speed", speeds.empty() ? 1.0 : speeds[size_t(d)]},
                    {"model", model}});
  nlohmann::json j{{"devices", devs}, {"links", {{"bandwidth_mbit", mbit}, {"latency_us", 100}}}};
  if (!efficiency.is_null()) j["links"]["efficiency"] = efficiency;
  return parse_cluster(j, "synthetic.json", {});
}

ClusterModel synthetic_cluster(const NetSpec& net, int devices, double mbit, double memory_mb = 4096,
                               std::vector<double> speeds = {}) {
  return resolve_cluster(synthetic_spec(net, devices, mbit, memory_mb, std::move(speeds)), net, nullptr);
}

Partition part(int r, int c, const std::string& groups, int cut, int k = 1, int per = 1, bool lm = false) {
  return Partition{.rows = r,
                   .cols = c,
                   .group_starts = parse_groups(groups, 0, cut),
                   .cut = cut,
                   .tiles_per_rank = k,
                   .ranks_per_device = per,
                   .low_memory = lm,
                   .split = {}};
}

// The synthetic model with this CPU's channel block (memory plans depend on it) and no
// weight copies (the trainer's memory report counts none in one process).
DeviceModel model_here(const NetSpec& net, const DnnlContext& ctx) {
  DeviceModel m = synthetic_model(net);
  m.channel_block = ctx.config.block;
  m.weight_copies_mb = 0;
  return m;
}

// What a trainer of `net` tiled r x c in one process allocates.
Trainer::Memory one_process_memory(const NetSpec& net, int r, int c, const std::string& groups) {
  Params params(net);
  init_params(params, net, 1);
  TrainOptions topt;
  topt.rows = r;
  topt.cols = c;
  topt.groups = groups;
  LocalComm local;
  Trainer tr(net, params, topt, local);
  return tr.memory();
}

// The fastest predicted step over every grouping of tiled layers [first, cut).
double fastest_grouping_s(const NetSpec& net, const Partition& base, const ClusterModel& cm, int first, int cut) {
  double best = 1e300;
  for (unsigned mask = 0; mask < 1u << (cut - first - 1); ++mask) {
    Partition p = base;
    p.group_starts = {first};
    for (int l = first + 1; l < cut; ++l)
      if (mask >> (l - first - 1) & 1u) p.group_starts.push_back(l);
    best = std::min(best, predict(net, p, cm).step_s);
  }
  return best;
}

TEST(PlannerFit, RecoversALineAndKeepsCoefficientsNonNegative) {
  const LinearFit f = fit_linear({100, 1000, 10000, 100000},
                                 {1e-3 + 2e-7 * 100, 1e-3 + 2e-7 * 1000, 1e-3 + 2e-7 * 10000, 1e-3 + 2e-7 * 100000});
  EXPECT_NEAR(f.a, 1e-3, 1e-9);
  EXPECT_NEAR(f.b, 2e-7, 1e-12);
  // Times falling with size cannot give a negative slope: a constant instead.
  const LinearFit g = fit_linear({1, 2, 3}, {3, 2, 1});
  EXPECT_EQ(g.b, 0);
  EXPECT_GT(g.a, 0);
  // A negative intercept is clamped: a line through the origin.
  const LinearFit h = fit_linear({10, 20, 40}, {0.5, 1.5, 3.5});
  EXPECT_EQ(h.a, 0);
  EXPECT_GT(h.b, 0);
  EXPECT_THROW(fit_linear({}, {}), Error);
}

// A CPU quota pauses a step in one layer or another: each layer's median misses the
// pauses, `paused` is how much longer the median step is than the medians' sum.
TEST(PlannerFit, LayerMediansAndTheQuotasPauses) {
  const int L = 4;
  std::vector<std::vector<LayerTimes>> steps(5, std::vector<LayerTimes>(L));
  for (size_t k = 0; k < steps.size(); ++k)
    for (int l = 0; l < L; ++l) {
      steps[k][size_t(l)].fwd = 1e-3 * (l + 1);
      steps[k][size_t(l)].bwd_data = 2e-3;
      if (int(k) % L == l) steps[k][size_t(l)].fwd += 10e-3;  // this step's pause
    }
  const LayerMedians m = layer_medians(steps);
  ASSERT_EQ(m.layers.size(), size_t(L));
  for (int l = 0; l < L; ++l) {
    EXPECT_EQ(m.layers[size_t(l)].fwd, 1e-3 * (l + 1));
    EXPECT_EQ(m.layers[size_t(l)].bwd_data, 2e-3);
  }
  const double medians = 10e-3 + 4 * 2e-3;
  EXPECT_NEAR(m.paused, (medians + 10e-3) / medians, 1e-12);
  // Steady steps whose median step (2.8 ms) is below the medians' sum (3 ms): never below 1.
  std::vector<std::vector<LayerTimes>> steady(3, std::vector<LayerTimes>(1));
  const double fwd[] = {1e-3, 1.1e-3, 0.9e-3}, bwd[] = {1.8e-3, 2.2e-3, 2.0e-3};
  for (size_t k = 0; k < 3; ++k) steady[k][0].fwd = fwd[k], steady[k][0].bwd_data = bwd[k];
  const LayerMedians s = layer_medians(steady);
  EXPECT_EQ(s.layers[0].fwd, 1e-3);
  EXPECT_EQ(s.layers[0].bwd_data, 2e-3);
  EXPECT_EQ(s.paused, 1.);
  // Two steps say nothing: each median is the larger of two, never below a step's sum.
  const LayerMedians two = layer_medians({steps[0], steps[1]});
  EXPECT_EQ(two.paused, 1.);
  EXPECT_EQ(two.layers[0].fwd, steps[0][0].fwd);
  EXPECT_TRUE(layer_medians({}).layers.empty());
}

// Halo bytes and messages as the model counts them, against a count over the plan's
// pieces written out here; cells against the plan's forward boxes.
TEST(PlannerCostModel, HaloBytesMessagesAndCellsMatchTheBruteForceCount) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 128);
  const ClusterModel cm = synthetic_cluster(net, 6, 100);
  struct Case {
    int r, c;
    std::string groups;
    int k;
    BackwardFeatures features = BackwardFeatures::Recompute;
  };
  constexpr auto X = BackwardFeatures::Exchange;
  for (const Case& cs : std::vector<Case>{{2, 2, "none", 1},
                                          {2, 3, "0,4,8,12", 1},
                                          {3, 2, "all", 1},
                                          {2, 2, "0,2,5,9", 2},
                                          {1, 3, "none", 3},
                                          {3, 3, "0,8", 3},
                                          {2, 2, "all", 1, X},
                                          {3, 2, "0,4,8,12", 2, X}}) {
    const int cut = resolve_cut(net, -1);
    Partition p = part(cs.r, cs.c, cs.groups, cut, cs.k, (cs.r * cs.c / cs.k + 5) / 6);
    p.features = cs.features;
    const Prediction pr = predict(net, p, cm);
    const Plan plan = make_plan(net, cs.r, cs.c, 0, cut, p.group_starts, {{}, cs.features});
    if (cs.features == X) {
      size_t pieces = 0;
      for (const auto& v : plan.feature_halo) pieces += v.size();
      EXPECT_GT(pieces, 0u) << "a case that exchanges nothing tests nothing";
    }
    double bytes = 0, cells = 0;
    int msgs = 0;
    for (int l = 0; l < cut; ++l) {
      for (int t = 0; t < plan.tiles_count(); ++t) cells += double(plan.at(t, l).fwd.area());
      for (int pass = 0; pass < 2; ++pass) {
        const int map_layer = l - 1;  // both halos at group start l are cells of layer l-1's output
        for (const Piece& pc : (pass == 0 ? plan.fwd_halo : plan.bwd_halo)[size_t(plan.edge(l))]) {
          if (pc.from / cs.k == pc.to / cs.k) continue;  // same rank: a copy
          const int ch = net.layers[size_t(map_layer)].out.c;
          bytes += 4. * ((ch + 7) / 8 * 8) * pc.box.area();
          ++msgs;
        }
      }
      // y (floats) or max-pool winners (a byte each) of layer l, for backward
      for (const Piece& pc : plan.feature_halo[size_t(l)]) {
        if (pc.from / cs.k == pc.to / cs.k) continue;
        const int ch = net.layers[size_t(l)].out.c;
        bytes += (net.layers[size_t(l)].is(kMaxPoolKind) ? 1. : 4.) * ((ch + 7) / 8 * 8) * pc.box.area();
        ++msgs;
      }
    }
    EXPECT_DOUBLE_EQ(pr.halo_bytes, bytes) << p.str();
    EXPECT_EQ(pr.halo_messages, msgs) << p.str();
    EXPECT_DOUBLE_EQ(pr.cells_computed, cells) << p.str();
    // One rank per tile: the plan's own (independent) halo statistics agree.
    if (cs.k == 1) {
      const PlanStats st = plan_stats(net, plan);
      EXPECT_DOUBLE_EQ(pr.halo_bytes, st.halo_bytes_fwd + st.halo_bytes_bwd + st.halo_bytes_features) << p.str();
    }
  }
}

// The per-layer times, the cut, the tail and the update add up to the step; the parts a
// rank reports add up to its step; a slower device makes every step slower.
TEST(PlannerCostModel, ReplayBookkeeping) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  for (bool lm : {false, true}) {
    const ClusterModel cm = synthetic_cluster(net, 4, 100);
    const Prediction pr = predict(net, part(2, 2, "0,4,8,12", cut, 1, 1, lm), cm);
    for (const RankPrediction& r : pr.ranks)
      EXPECT_NEAR(r.fwd_s + r.bwd_s + r.halo_s + r.weights_s + r.io_s + r.update_s, r.step_s, 1e-12);
    double layers = 0;
    for (double s : pr.layer_s) layers += s;
    EXPECT_LT(layers, pr.step_s);
    EXPECT_GT(layers, 0);
    // Device 1 at half speed (on fast links, so compute matters): its compute doubles, the
    // step grows by most of that, and the others wait (halo) for it.
    const ClusterModel fast = synthetic_cluster(net, 4, 10000);
    const ClusterModel slow = synthetic_cluster(net, 4, 10000, 4096, {1, 0.5, 1, 1});
    const Prediction pf = predict(net, part(2, 2, "0,4,8,12", cut, 1, 1, lm), fast);
    const Prediction ps = predict(net, part(2, 2, "0,4,8,12", cut, 1, 1, lm), slow);
    EXPECT_NEAR(ps.ranks[1].fwd_s + ps.ranks[1].bwd_s, 2 * (pf.ranks[1].fwd_s + pf.ranks[1].bwd_s), 1e-12);
    EXPECT_GT(ps.step_s - pf.step_s, 0.8 * (pf.ranks[1].fwd_s + pf.ranks[1].bwd_s));
    EXPECT_GT(ps.ranks[0].halo_s, pf.ranks[0].halo_s);
  }
  // A faster link: less halo and weight time, never more.
  const Prediction a = predict(net, part(2, 2, "none", cut), synthetic_cluster(net, 4, 30));
  const Prediction b = predict(net, part(2, 2, "none", cut), synthetic_cluster(net, 4, 1000));
  EXPECT_LT(b.halo_s, a.halo_s);
  EXPECT_LT(b.weights_s, a.weights_s);
}

// Calibrated with more ranks than cores, the measured slowdown includes the ranks' sharing
// of the cores, which the model counts apart: a device calibrated on 8 ranks of 4 cores
// (2x from sharing, 1.1x from caches) predicts what one calibrated on 4 ranks (1.1x) does.
TEST(PlannerCostModel, CoreSharingInTheCalibrationIsNotCountedTwice) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  auto cluster = [&](int ranks, double slowdown) {
    nlohmann::json model = device_model_to_json(synthetic_model(net));
    model["concurrent_ranks"] = ranks;
    model["concurrent_slowdown"] = slowdown;
    const nlohmann::json j{{"devices", {{{"name", "d0"}, {"cores", 4}, {"memory_mb", 4096}, {"model", model}}}},
                           {"links", {{"bandwidth_mbit", 1000}, {"latency_us", 100}}}};
    return resolve_cluster(parse_cluster(j, "synthetic.json", {}), net, nullptr);
  };
  const ClusterModel on8 = cluster(8, 2.2), on4 = cluster(4, 1.1);
  for (int ranks : {1, 2, 4, 6}) {
    SCOPED_TRACE(ranks);
    const Partition p = part(1, ranks, "none", cut, 1, ranks);
    EXPECT_NEAR(predict(net, p, on8).step_s, predict(net, p, on4).step_s, 1e-9);
  }
  // and 4 busy ranks compute 1.1x as long as with no slowdown measured
  const Partition four = part(2, 2, "none", cut, 1, 4);
  EXPECT_NEAR(predict(net, four, on4).ranks[0].fwd_s / predict(net, four, cluster(1, 1.0)).ranks[0].fwd_s, 1.1, 1e-9);
}

// The scatter and gather at the cut go one way through rank 0's link: at the rate one pair
// measured, whatever the all-to-all efficiency; the weights' all-gather pays that efficiency.
TEST(PlannerCostModel, TransfersAtTheCutRunAtThePairRate) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  auto cluster = [&](double many_flows) {
    return resolve_cluster(synthetic_spec(net, 4, 30, 4096, {}, {{"many_flows", many_flows}}), net, nullptr);
  };
  const Partition p = part(2, 2, "none", cut);
  const Prediction full = predict(net, p, cluster(1)), crowded = predict(net, p, cluster(0.5));
  EXPECT_GT(full.io_s, 0);
  EXPECT_NEAR(crowded.io_s, full.io_s, 1e-9);
  EXPECT_GT(crowded.weights_s, 1.8 * full.weights_s);  // both halves are all-to-all
}

// The gradients' sum is the engine's: with one rank a device the tile-order exchange
// (every rank sends each other rank its part at once), not a ring, 3 of 4 parts each way;
// with two ranks on each of 4 devices the chain over the devices (engine/device_chain.hpp):
// into a middle device the running sum (8 of 8 parts) and its own 2 parts' sums, then 6 of
// 8 parts of the weights. Counted here from the bytes, at full efficiency on one shared link.
TEST(PlannerCostModel, GradientSumIsTheEnginesExchange) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  const ClusterModel cm =
      resolve_cluster(synthetic_spec(net, 4, 100, 4096, {}, {{"many_flows", 1}, {"ring", 1}}), net, nullptr);
  double params = 0;
  for (const LayerSpec& l : net.layers) params += double(l.param_count());
  const double B = 4 * params, rate = 100e6 / 8;
  const Prediction two = predict(net, part(2, 4, "none", cut, 1, 2), cm);
  EXPECT_NEAR(two.weights_s, (1.25 * B + 0.75 * B) / rate, 0.02 * 2 * B / rate);
  // One rank a device: 3 of 4 parts each way, whatever the pattern.
  const Prediction one = predict(net, part(2, 2, "none", cut), cm);
  EXPECT_NEAR(one.weights_s, (0.75 * B + 0.75 * B) / rate, 0.02 * 1.5 * B / rate);
}

// --low-memory's weight chunks at their own calibrated efficiencies; a file without them
// falls back to the pair rate (gather) and the ring's values (reduce-scatter).
TEST(PlannerCostModel, LowMemoryChunksAtTheirOwnEfficiency) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  auto spec = [&](const nlohmann::json& efficiency) { return synthetic_spec(net, 4, 100, 4096, {}, efficiency); };
  const ClusterSpec old =
      spec({{"ring", 0.8}, {"many_flows", 0.6}, {"ring_overhead_s", 0.01}, {"many_flows_overhead_s", 0.002}});
  EXPECT_EQ(old.chunk_gather_efficiency, 1);
  EXPECT_EQ(old.chunk_gather_overhead_s, 0.002);
  EXPECT_EQ(old.chunk_reduce_scatter_efficiency, 0.8);
  EXPECT_EQ(old.chunk_reduce_scatter_overhead_s, 0.01);
  const ClusterSpec slow = spec({{"chunk_gather", 0.5},
                                 {"chunk_reduce_scatter", 0.5},
                                 {"chunk_gather_overhead_s", 0.003},
                                 {"chunk_reduce_scatter_overhead_s", 0.004}});
  // One rank's 1 MB chunk, the others' links idle: (P-1) MB out of the owner at half the rate.
  const std::vector<int> devs{0, 1, 2, 3};
  const std::vector<double> owned{262144, 0, 0, 0};
  const LinkSpec l = slow.link(0, 1);
  EXPECT_NEAR(chunk_gather_time(slow, devs, owned), l.latency_s() + 3 * 1048576 / l.bytes_per_s() / 0.5 + 0.003, 1e-12);
  EXPECT_NEAR(chunk_reduce_scatter_time(slow, devs, owned),
              3 * (l.latency_s() + 1048576 / l.bytes_per_s() / 0.5) + 0.004, 1e-12);
  // Round trip through a saved file, and the model reads them.
  const ClusterSpec back = parse_cluster(cluster_to_json(slow), "back.json", {});
  EXPECT_EQ(back.chunk_gather_efficiency, 0.5);
  EXPECT_EQ(back.chunk_reduce_scatter_overhead_s, 0.004);
  const Partition lm = part(2, 2, "none", cut, 1, 1, true), plain = part(2, 2, "none", cut);
  const ClusterSpec fast = spec({{"chunk_gather", 1}, {"chunk_reduce_scatter", 1}});
  const Prediction a = predict(net, lm, resolve_cluster(fast, net, nullptr)),
                   b = predict(net, lm, resolve_cluster(slow, net, nullptr));
  EXPECT_GT(b.weights_s, 1.8 * a.weights_s);
  EXPECT_NEAR(predict(net, plain, resolve_cluster(slow, net, nullptr)).weights_s,
              predict(net, plain, resolve_cluster(fast, net, nullptr)).weights_s, 1e-12);
}

// A link shaped by a token bucket (`tc tbf`, links.burst_kb) passes what the bucket holds
// at once and the rest at its rate; the bucket refills at the rate after a send.
TEST(PlannerCostModel, LinkBurstsFollowTheBucket) {
  ClusterSpec c;
  c.devices.resize(2);
  c.burst_bytes = 250e3;
  LinkBuckets b(c);
  const double R = 100e6;                                            // bytes/s
  EXPECT_EQ(b.send(0, 0, 100e3, R), 0);                              // within the full bucket
  EXPECT_NEAR(b.send(0, 0, 200e3, R), 50e3 / R, 1e-15);              // 150 KB left: the rest at the rate
  EXPECT_NEAR(b.send(0, 0.5e-3 + 1e-3, 150e3, R), 50e3 / R, 1e-15);  // 1 ms after: 100 KB back
  EXPECT_NEAR(b.send(0, 1, 1e6, R), 750e3 / R, 1e-12);               // long after: full again
  EXPECT_EQ(b.send(1, 0, 250e3, R), 0);                              // another device's link has its own
  EXPECT_NEAR(LinkBuckets().send(0, 0, 1e6, R), 1e6 / R, 1e-15);     // none: the rate alone
  // At half the link's rate a send drains slower; the bucket still refills at the link's.
  LinkBuckets h(c);
  EXPECT_NEAR(h.send(0, 0, 350e3, R, 0.5), 100e3 / R / 0.5, 1e-15);
  EXPECT_NEAR(h.send(0, 2e-3 + 1e-3, 100e3, R, 0.5), 0, 1e-15);  // 1 ms after it ended: 100 KB back

  // calibrate's estimate from a ping-pong over such a link: 100 us, then 250 KB at once.
  auto one_way = [&](double bytes) { return 100e-6 + std::max(0., bytes - 250e3) / R; };
  EXPECT_NEAR(burst_from_ping_pong(one_way(1024), R, 4194304, one_way(4194304)), 250e3, 1e-6);
  EXPECT_EQ(burst_from_ping_pong(100e-6, R, 4194304, 100e-6 + 4194304 / R + 1e-4), 0);  // none, slower than that

  // A one-owner chunk gather: its owner's link sends 3 copies, the first burst at once;
  // a second right after finds the bucket about empty.
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  ClusterSpec spec = synthetic_spec(net, 4, 100);
  spec.burst_bytes = 250e3;
  const std::vector<int> devs{0, 1, 2, 3};
  const std::vector<double> owned{65536, 0, 0, 0};  // 256 KB
  const double plain = chunk_gather_time(spec, devs, owned), rate = spec.link(0, 1).bytes_per_s();
  LinkBuckets buckets(spec);
  const double first = chunk_gather_time(spec, devs, owned, &buckets, 0);
  EXPECT_NEAR(first, plain - 250e3 / rate, 1e-12);
  // (its bucket refilled only while the first one's last bytes crossed: one latency's worth)
  EXPECT_NEAR(chunk_gather_time(spec, devs, owned, &buckets, first), plain - spec.link(0, 1).latency_s(), 1e-12);
  // A one-owner chunk round the ring: each of its 3 hops leaves a different device's full
  // bucket, so each is a burst's time shorter.
  LinkBuckets ring(spec);
  const std::vector<double> zero(4, 0.);
  const std::vector<double> with = chunk_ring_finish(spec, devs, {owned}, zero, &ring),
                            without = chunk_ring_finish(spec, devs, {owned}, zero);
  EXPECT_NEAR(*std::max_element(without.begin(), without.end()) - *std::max_element(with.begin(), with.end()),
              3 * 250e3 / rate, 1e-12);
  // Saved and read back; a --low-memory step with bursts is faster, one without the same.
  EXPECT_EQ(parse_cluster(cluster_to_json(spec), "back.json", {}).burst_bytes, 250e3);
  const int cut = resolve_cut(net, -1);
  const Partition lm = part(2, 2, "none", cut, 1, 1, true), plain_part = part(2, 2, "none", cut);
  const ClusterSpec none = synthetic_spec(net, 4, 100);
  EXPECT_LT(predict(net, lm, resolve_cluster(spec, net, nullptr)).weights_s,
            predict(net, lm, resolve_cluster(none, net, nullptr)).weights_s);
  EXPECT_NEAR(predict(net, plain_part, resolve_cluster(spec, net, nullptr)).step_s,
              predict(net, plain_part, resolve_cluster(none, net, nullptr)).step_s, 1e-12);
}

// calibrate on one host takes the shared memory's rate from the update's collectives when
// the ping-pong's is faster: solving the model's two formulas for the rate gives it back.
TEST(PlannerCostModel, SharedMemoryRateFromTheCollectivesRoundTrips) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const ClusterModel cm = local_cluster(synthetic_model(net), 2, 4096, LinkSpec{20000, 7});
  for (int P : {2, 3, 4}) {
    const std::vector<int> one_host(size_t(P), 0);
    const double bytes = 13e6, ag = all_gather_time(cm.spec, one_host, bytes),
                 rs = reduce_scatter_time(cm.spec, one_host, bytes);
    EXPECT_NEAR(shared_memory_collective_rate(P, bytes, 7e-6, ag, rs), 20000e6 / 8, 1e-6 * 20000e6 / 8) << P;
    // Collectives twice as slow (less their latency) give half the rate.
    EXPECT_NEAR(shared_memory_collective_rate(P, bytes, 7e-6, 2 * ag - 7e-6, 2 * rs - (P - 1) * 7e-6), 20000e6 / 16,
                1e-6 * 20000e6 / 8)
        << P;
  }
}

// Several ranks per device (engine/device_chain.hpp): the gradient sum runs as a chain over
// the devices and the weights cross each device's link once. Into a middle device of 4 x 4
// ranks: the running sum of every part (1 x the vector) and its parts' sums from the last
// device (1/4) in the sum, 3/4 in the share; not 4 ranks' worth of an all-to-all each.
TEST(PlannerCostModel, SeveralRanksPerDeviceSumAsAChain) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const ClusterModel cm = synthetic_cluster(net, 4, 1);  // 1 Mbit/s: bytes, not latency
  std::vector<int> dev, tiles;
  for (int r = 0; r < 16; ++r) dev.push_back(r / 4), tiles.push_back(r);
  EXPECT_TRUE(DeviceChain::useful(dev));
  EXPECT_FALSE(DeviceChain::useful({0, 1, 2, 3}));
  EXPECT_FALSE(DeviceChain::useful({0, 0, 0, 0}));
  const double bytes = 13e6, rate = cm.spec.link(0, 1).bytes_per_s();
  const double sum = 1.25 * bytes / rate / cm.spec.ring_efficiency;
  EXPECT_GT(device_chain_reduce_time(cm.spec, dev, tiles, bytes), sum);
  EXPECT_LT(device_chain_reduce_time(cm.spec, dev, tiles, bytes), 1.05 * sum);  // + the pipeline's filling
  const double share = 0.75 * bytes / rate / cm.spec.many_flows_efficiency;
  EXPECT_GT(device_share_time(cm.spec, dev, bytes), share);
  EXPECT_LT(device_share_time(cm.spec, dev, bytes), 1.01 * share);
  // The whole step's weight exchange: 4 x 4 ranks about 4/3 of 4 x 1's (2 vectors into a
  // middle device against 3/2), where an all-to-all of 16 ranks would be 4 x.
  const int cut = resolve_cut(net, -1);
  const double one = predict(net, part(2, 2, "none", cut), cm).weights_s,
               four = predict(net, part(4, 4, "none", cut, 1, 4), cm).weights_s;
  EXPECT_GT(four, 1.2 * one);
  EXPECT_LT(four, 1.5 * one);
}

// Batch-norm sums are gathered tile by tile (TileOrder::sum): with 4 tiles on 4 devices each
// device's link brings in 3 tiles' 2 x C doubles per batch-norm layer, forward and backward.
// On a slow link that alone is a floor under the halo time.
TEST(PlannerCostModel, BatchNormSumsAreAnAllGatherOfEveryTile) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const int cut = resolve_cut(net, -1);
  const ClusterModel cm = synthetic_cluster(net, 4, 1);  // 1 Mbit/s: bytes, not latency
  double bytes = 0;
  for (int l = 0; l < cut; ++l)
    if (net.layers[size_t(l)].is(kConvKind) && net.layers[size_t(l)].batch_normalize())
      bytes += 2 * 3 * 16. * net.layers[size_t(l)].out.c;  // forward and backward, 3 other tiles
  const double floor = bytes / cm.spec.link(0, 1).bytes_per_s();
  const Prediction p = predict(net, part(2, 2, "all", cut), cm);
  EXPECT_GT(p.halo_s, floor);
  EXPECT_LT(p.halo_s, 3 * floor);  // the one group has no halo in forward: little else is in it
}

// Gradient chunks go round the ring one after another without waiting for each other: the
// owner's neighbour starts the next chunk once it has passed this one on, so a run of one
// owner's chunks takes two hops a chunk, not three (measured on the emulated cluster: 0.60
// of three hops a chunk over eight 1 MB chunks, bench/archive/RESULTS-until-2026-11-26.md,
// fourteenth session).
TEST(PlannerCostModel, LowMemoryGradientChunksOverlapRoundTheRing) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const ClusterSpec c =
      synthetic_spec(net, 4, 100, 4096, {}, {{"chunk_reduce_scatter", 0.5}, {"chunk_reduce_scatter_overhead_s", 0.}});
  const std::vector<int> devs{0, 1, 2, 3};
  const LinkSpec l = c.link(0, 1);
  const double hop = l.latency_s() + 1048576 / l.bytes_per_s() / 0.5;
  const std::vector<double> owned{262144, 0, 0, 0};
  for (int k : {1, 2, 8}) {
    const std::vector<double> t =
        chunk_ring_finish(c, devs, std::vector<std::vector<double>>(size_t(k), owned), std::vector<double>(4, 0.));
    // The last chunk's third hop ends at 2k + 1 hops (into the owner, rank 0, and out of rank
    // 3), and a latency a chunk after the first: the empty message that lets the owner's
    // neighbour's neighbour move on.
    EXPECT_NEAR(*std::max_element(t.begin(), t.end()), (2 * k + 1) * hop + (k - 1) * l.latency_s(), 1e-9)
        << k << " chunks";
    EXPECT_NEAR(t[0], t[3], 1e-9);
    EXPECT_LT(t[1], t[0]);  // the owner's neighbours are done a hop earlier
  }
  // A rank that comes late holds up the ring from where it is: the chunk cannot start
  // through rank 1 before it has posted.
  const std::vector<double> late = chunk_ring_finish(c, devs, {owned}, {0, 1.0, 0, 0});
  EXPECT_NEAR(*std::max_element(late.begin(), late.end()), 1.0 + 3 * hop, 1e-9);
  // Two ranks on one device share its link: their hops queue behind each other.
  const std::vector<int> paired{0, 0, 1, 1};
  const std::vector<double> spread{131072, 131072, 131072, 131072};  // every rank owns a 0.5 MB part
  const double across = l.latency_s() + 524288 / l.bytes_per_s() / 0.5,
               local = c.link(0, 0).latency_s() + 524288 / c.link(0, 0).bytes_per_s();
  const std::vector<double> t = chunk_ring_finish(c, paired, {spread}, std::vector<double>(4, 0.));
  // Each step: ranks 1 -> 2 and 3 -> 0 cross (on different devices' links, at once), 0 -> 1
  // and 2 -> 3 stay on their devices.
  EXPECT_NEAR(*std::max_element(t.begin(), t.end()), 3 * std::max(across, local), 1e-9);
}

// Maps, deltas and kept weights (with the tiles' separate gradients) of a one-process run:
// the model against the trainer.
TEST(PlannerCostModel, MemoryOfOneProcessMatchesTheTrainer) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 64, 96, 2);
  const int cut = resolve_cut(net, -1);
  const DnnlContext ctx;  // the model's channel block must be this CPU's
  for (const std::string groups : {"none", "all", "0,4,8,12"}) {
    for (auto [r, c] : {std::pair{1, 1}, {2, 2}, {1, 3}}) {
      const ClusterModel cm = local_cluster(model_here(net, ctx), 4, 4096, LinkSpec{40000, 1});
      const Partition p = part(r, c, groups, cut, r * c, 1);
      const Prediction pr = predict(net, p, cm);
      const Trainer::Memory mem = one_process_memory(net, r, c, groups);
      EXPECT_NEAR(pr.ranks[0].maps_mb, mem.maps_mb, 1e-9) << p.str();
      EXPECT_NEAR(pr.ranks[0].deltas_mb, mem.deltas_mb, 1e-9) << p.str();
      EXPECT_NEAR(pr.ranks[0].filters_mb, mem.kept_mb, 1e-9) << p.str();
      EXPECT_GE(mem.kept_mb, 3. * Params(net).size() * 4 / 1048576.0) << p.str();
    }
  }
}

// A [crop] before the tiled layers (vgg-16, strided): it runs whole on the root, so the
// root's memory holds its output, its forward is the root's, and groupings start at the
// first tiled layer. The planner's memory against the trainer's, the crop's time against a
// grid of one tile, and the grouping search against every grouping of the tiled layers.
TEST(PlannerCostModel, CropBeforeTheTiledLayers) {
  NetSpec net = parse_net(
      "[net]\nbatch=2\nwidth=40\nheight=36\nchannels=3\n[crop]\ncrop_height=32\ncrop_width=32\n"
      "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n[maxpool]\nsize=2\n"
      "stride=2\n[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n[convolutional]\nfilters=4\n"
      "size=1\nactivation=leaky\n[connected]\noutput=3\nactivation=linear\n[softmax]\n",
      "crop.cfg");
  ASSERT_EQ(net.first_tiled(), 1);
  const int cut = resolve_cut(net, -1);
  const DnnlContext ctx;
  const DeviceModel m = model_here(net, ctx);
  const ClusterModel one = local_cluster(m, 4, 4096, LinkSpec{40000, 1});
  for (auto [r, c] : {std::pair{1, 1}, {2, 2}}) {
    Partition p = part(r, c, "none", cut, r * c, 1);
    p.group_starts = parse_groups("none", 1, cut);
    const Prediction pr = predict(net, p, one);
    const Trainer::Memory mem = one_process_memory(net, r, c, "none");
    EXPECT_NEAR(pr.ranks[0].maps_mb, mem.maps_mb, 1e-9) << p.str();
    EXPECT_NEAR(pr.ranks[0].deltas_mb, mem.deltas_mb, 1e-9) << p.str();
    // The crop's forward, at its fitted time for the batch's output cells, on the root.
    const double crop_s = m.layers[0].fwd.at(2. * 32 * 32);
    EXPECT_NEAR(pr.layer_s[0], crop_s, 1e-12) << p.str();
  }
  const ClusterModel cm = synthetic_cluster(net, 4, 30);
  Partition base = part(2, 2, "none", cut);
  base.group_starts = parse_groups("none", 1, cut);
  int replays = 0;
  const std::vector<int> found = best_grouping(net, base, cm, &replays);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0], 1);
  base.group_starts = found;
  EXPECT_EQ(predict(net, base, cm).step_s, fastest_grouping_s(net, base, cm, 1, cut));
  // Every variant prices the crop on the root: sharded weights, exchanged features, a cut
  // after the first tiled layer.
  for (bool lm : {false, true})
    for (BackwardFeatures f : {BackwardFeatures::Recompute, BackwardFeatures::Exchange})
      for (int c : {2, cut}) {
        Partition p = part(2, 2, "none", c, 1, 1, lm);
        p.group_starts = parse_groups("all", 1, c);
        p.features = f;
        const Prediction pr = predict(net, p, cm);
        EXPECT_GE(pr.ranks[0].fwd_s, m.layers[0].fwd.at(2. * 32 * 32)) << p.str();
        EXPECT_GT(pr.step_s, pr.ranks[0].fwd_s) << p.str();
      }
}

// How long ranks wait for the slowest at a synchronisation: the spread of their compute
// (the calibrated jitter) as one draw per device. Ranks of one device are slowed alike (its
// quota's pauses, the host's other work), so on one host the jitter adds nothing; on four
// devices it adds waits.
TEST(PlannerCostModel, ComputeSpreadIsOneDrawPerDevice) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 64, 64, 1);
  const int cut = resolve_cut(net, -1);
  DeviceModel calm = synthetic_model(net), jittery = calm;
  calm.jitter = 0;
  jittery.jitter = 0.5;
  const Partition one_host = part(2, 2, "none", cut, 1, 4), p = part(2, 2, "none", cut);
  const LinkSpec shm{20000, 7};
  EXPECT_NEAR(predict(net, one_host, local_cluster(jittery, 4, 4096, shm)).step_s,
              predict(net, one_host, local_cluster(calm, 4, 4096, shm)).step_s, 1e-12);
  auto four_devices = [&](const DeviceModel& m) {
    nlohmann::json devs = nlohmann::json::array();
    for (int d = 0; d < 4; ++d)
      devs.push_back({{"name", std::string("d").append(std::to_string(d))},
                      {"cores", 4},
                      {"memory_mb", 4096},
                      {"model", device_model_to_json(m)}});
    const nlohmann::json j{{"devices", devs}, {"links", {{"bandwidth_mbit", 1000}, {"latency_us", 100}}}};
    return resolve_cluster(parse_cluster(j, "four.json", {}), net, nullptr);
  };
  const Prediction a = predict(net, p, four_devices(calm)), b = predict(net, p, four_devices(jittery));
  EXPECT_GT(b.step_s, a.step_s + 1e-4);
  EXPECT_NEAR(b.ranks[0].fwd_s, a.ranks[0].fwd_s, 1e-12);  // the waits, not the compute
}

// A device under a CPU quota: alone it computes without a break and its step is its
// compute with the quota's pauses; on 4 devices with slow links it waits for the weights
// between bursts, and the pauses no longer show.
TEST(PlannerCostModel, QuotaPausesBoundADevicesStep) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 64, 64, 1);
  const int cut = resolve_cut(net, -1);
  DeviceModel steady = synthetic_model(net);
  steady.cpu_capacity = 0.45;
  steady.reload_s = 0;  // no formatting: fwd and bwd are the kernels alone
  DeviceModel paused = steady;
  paused.paused = 2.5;
  // n devices with model m (the first with `first` if given).
  auto devices = [&](const DeviceModel& m, int n, double mbit, const DeviceModel* first = nullptr) {
    nlohmann::json devs = nlohmann::json::array();
    for (int d = 0; d < n; ++d)
      devs.push_back({{"name", std::string("d").append(std::to_string(d))},
                      {"cores", 1},
                      {"memory_mb", 4096},
                      {"model", device_model_to_json(d == 0 && first ? *first : m)}});
    const nlohmann::json j{{"devices", devs}, {"links", {{"bandwidth_mbit", mbit}, {"latency_us", 100}}}};
    return resolve_cluster(parse_cluster(j, "quota.json", {}), net, nullptr);
  };
  const Partition alone = part(1, 1, "none", cut);
  const Prediction a = predict(net, alone, devices(steady, 1, 1000)), b = predict(net, alone, devices(paused, 1, 1000));
  // The kernels' pauses; the update was timed with its own.
  const double kernels = a.fwd_s + a.bwd_s;
  EXPECT_GT(a.update_s, 0);
  EXPECT_NEAR(b.step_s, a.step_s + 1.5 * kernels, 1e-9);
  EXPECT_NEAR(b.fwd_s + b.bwd_s + b.update_s, 2.5 * kernels + a.update_s, 1e-9);  // the parts still add up
  EXPECT_NEAR(b.fwd_s / b.bwd_s, a.fwd_s / a.bwd_s, 1e-9);
  // Two ranks side by side on the one core (each computing at half speed): their compute
  // alone adds up before the pauses.
  const Partition two = part(1, 2, "none", cut, 1, 2);
  const Prediction c = predict(net, two, devices(paused, 1, 1000)), d = predict(net, two, devices(steady, 1, 1000));
  double bound = 0;
  for (const RankPrediction& r : d.ranks) bound += ((r.fwd_s + r.bwd_s) * 2.5 + r.update_s) / 2;
  ASSERT_GT(bound, d.step_s);
  EXPECT_NEAR(c.step_s, bound, 1e-9);
  for (const RankPrediction& r : c.ranks)
    EXPECT_NEAR(r.fwd_s + r.bwd_s + r.update_s + r.halo_s + r.weights_s + r.io_s, c.step_s, 1e-9);
  // A steady device beside one paused beyond its waits: the steady one waits for it, as at
  // a synchronisation.
  DeviceModel very = paused;
  very.paused = 6;
  const Partition pair = part(1, 2, "none", cut);
  const Prediction m = predict(net, pair, devices(steady, 2, 100000, &very)),
                   n = predict(net, pair, devices(steady, 2, 100000));
  const double need = (n.ranks[0].fwd_s + n.ranks[0].bwd_s) * 6 + n.ranks[0].update_s;
  ASSERT_GT(need, n.step_s);
  EXPECT_NEAR(m.step_s, need, 1e-9);
  EXPECT_NEAR(m.ranks[1].fwd_s, n.ranks[1].fwd_s, 1e-12);  // the steady rank's compute as it was
  EXPECT_GT(m.ranks[1].halo_s, n.ranks[1].halo_s);
  // A model from before `paused` reads as 1; a nonsense one is refused.
  nlohmann::json old = device_model_to_json(paused);
  old.erase("paused");
  EXPECT_EQ(device_model_from_json(old, "old.json").paused, 1.);
  nlohmann::json bad = device_model_to_json(paused);
  bad["paused"] = 0.5;
  EXPECT_THROW(device_model_from_json(bad, "bad.json"), Error);
  // Four devices at 10 Mbit/s: the weights take far longer than the paused compute.
  const Partition four = part(2, 2, "none", cut);
  const Prediction e = predict(net, four, devices(steady, 4, 10)), f = predict(net, four, devices(paused, 4, 10));
  EXPECT_NEAR(f.step_s, e.step_s, 1e-12);
}

// A batch in S micro-batches (--subdivisions) runs forward and backward S times, then
// exchanges the gradients and updates once: 3 micro-batches against 2 of the same size
// (both keep the weights formatted between micro-batches).
TEST(PlannerCostModel, MicroBatchesEachRunForwardAndBackward) {
  NetSpec two = net_at("cfgs/yolov2-16.cfg", 64, 64, 2);
  two.batch = 4;
  two.subdivisions = 2;
  NetSpec three = two;
  three.batch = 6;
  three.subdivisions = 3;
  ASSERT_EQ(three.micro_batch(), two.micro_batch());
  const int cut = resolve_cut(two, -1);
  for (auto [r, c] : {std::pair{1, 1}, {2, 2}}) {
    const ClusterModel cm = synthetic_cluster(two, r * c, 100);
    const Partition p = part(r, c, "none", cut);
    const Prediction a = predict(two, p, cm), b = predict(three, p, cm);
    EXPECT_NEAR(b.ranks[0].fwd_s, 1.5 * a.ranks[0].fwd_s, 1e-9 * a.ranks[0].fwd_s) << p.str();
    EXPECT_NEAR(b.ranks[0].bwd_s, 1.5 * a.ranks[0].bwd_s, 1e-9 * a.ranks[0].bwd_s) << p.str();
    EXPECT_NEAR(b.ranks[0].update_s, a.ranks[0].update_s, 1e-12) << p.str();
    EXPECT_GE(b.ranks[0].weights_s, 0.99 * a.ranks[0].weights_s) << p.str();
    EXPECT_LT(b.ranks[0].weights_s, 1.01 * a.ranks[0].weights_s + 1e-12) << p.str();
    EXPECT_NEAR(b.peak_rss_mb_max, a.peak_rss_mb_max, 1e-9) << p.str();
  }
}

// Every contiguous grouping, predicted one by one, against the grouping search: on a small
// net (exhaustive inside the search too) and on W1's 16 layers (dynamic programming and
// boundary toggling: 2^15 groupings here, a few hundred predictions there).
TEST(PlannerOptimizer, GroupingSearchFindsTheExhaustiveOptimum) {
  for (const std::string cfg : {"tests/fixtures/pool_mix/net.cfg", "cfgs/yolov2-16.cfg"}) {
    const NetSpec net = cfg[0] == 'c' ? net_at(cfg, 64, 64) : net_at(cfg);
    const int cut = resolve_cut(net, -1);
    for (double mbit : {30., 1000.}) {
      const ClusterModel cm = synthetic_cluster(net, 4, mbit);
      for (bool lm : {false, true}) {
        Partition base = part(2, 2, "none", cut, 1, 1, lm);
        int replays = 0;
        base.group_starts = best_grouping(net, base, cm, &replays);
        const double found = predict(net, base, cm).step_s;
        const double best = fastest_grouping_s(net, base, cm, 0, cut);
        const std::string what = cfg + " " + std::to_string(mbit) + " Mbit/s" + (lm ? " low memory" : "");
        if (cut - 1 <= kExhaustiveGroupingBits) {
          EXPECT_EQ(found, best) << what;
        } else {
          EXPECT_LE(found, best * 1.001) << what;
          EXPECT_LT(replays, 1 << (cut - 4)) << what;  // far fewer than every grouping
        }
      }
    }
  }
}

TEST(PlannerOptimizer, BestFirstWithinMemoryOrNamesTheShortDevice) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const ClusterModel cm = synthetic_cluster(net, 4, 100);
  SearchOptions o;
  const SearchResult r = optimize(net, cm, o);
  ASSERT_EQ(r.best.size(), 5u);
  for (size_t k = 1; k < r.best.size(); ++k) EXPECT_LE(r.best[k - 1].pred.step_s, r.best[k].pred.step_s);
  // The winner is no slower than a hand-picked partition the search also covers.
  const int cut = resolve_cut(net, -1);
  EXPECT_LE(r.best[0].pred.step_s, predict(net, part(2, 2, "none", cut), cm).step_s);
  EXPECT_LE(r.best[0].pred.step_s, predict(net, part(1, 1, "none", cut), cm).step_s);
  // 30 MB per device fits nothing (the base alone is 20 MB): the closest names its shortfall.
  const ClusterModel tiny = synthetic_cluster(net, 4, 100, 30);
  const SearchResult none = optimize(net, tiny, o);
  EXPECT_TRUE(none.best.empty());
  double worst = 0;
  for (double s : none.least_memory.pred.memory_short_mb) worst = std::max(worst, s);
  EXPECT_GT(worst, 0);
}

// A 1xC grid and its Rx1 twin predict the same step on a square map; the twin with wider
// tiles (fewer columns) comes first.
TEST(PlannerOptimizer, TiesGoToTheGridWithFewerColumns) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96);
  const ClusterModel cm = synthetic_cluster(net, 2, 100);
  SearchOptions o;
  o.top = 40;
  const SearchResult r = optimize(net, cm, o);
  int ties = 0;
  for (size_t a = 0; a < r.best.size(); ++a)
    for (size_t b = a + 1; b < r.best.size(); ++b)
      if (std::llround(r.best[a].pred.step_s * 1e6) == std::llround(r.best[b].pred.step_s * 1e6)) {
        ++ties;
        EXPECT_LE(r.best[a].part.cols, r.best[b].part.cols)
            << r.best[a].part.rows << "x" << r.best[a].part.cols << " before " << r.best[b].part.rows << "x"
            << r.best[b].part.cols;
      }
  EXPECT_GT(ties, 0);  // the square map gives twins
}

TEST(PlannerCostModel, ModelOfAnotherNetIsRefused) {
  const NetSpec w1 = net_at("cfgs/yolov2-16.cfg");
  const NetSpec fm = net_at("cfgs/fashion-mnist.cfg");
  const nlohmann::json j{
      {"devices",
       {{{"name", "a"}, {"cores", 1}, {"memory_mb", 100}, {"model", device_model_to_json(synthetic_model(fm))}}}},
      {"links", {{"bandwidth_mbit", 100}, {"latency_us", 10}}}};
  try {
    resolve_cluster(parse_cluster(j, "c.json", {}), w1, nullptr);
    FAIL() << "a model of fashion-mnist accepted for W1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: devices[0].model was calibrated on"), std::string::npos) << e.what();
  }
}

// fuzz_cluster: a model of the right net (its signature matches) whose layer list was cut
// short or padded was read past its end; now it is refused naming the host and the counts.
TEST(PlannerCostModel, ModelWithAnotherLayerCountIsRefused) {
  const NetSpec w1 = net_at("cfgs/yolov2-16.cfg");
  for (int extra : {-3, 2}) {
    DeviceModel m = synthetic_model(w1);
    m.layers.resize(size_t(int(m.layers.size()) + extra));
    const nlohmann::json j{
        {"devices", {{{"name", "a"}, {"cores", 1}, {"memory_mb", 100}, {"model", device_model_to_json(m)}}}},
        {"links", {{"bandwidth_mbit", 100}, {"latency_us", 10}}}};
    try {
      resolve_cluster(parse_cluster(j, "c.json", {}), w1, nullptr);
      FAIL() << "a model of " << m.layers.size() << " layers accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("holds " + std::to_string(m.layers.size()) + " layer(s)"), std::string::npos)
          << e.what();
    }
  }
}

// calibrate's spinners measure the cores the device gives, not the one core mpirun bound
// the rank to (a bound rank measured 1.00 of 2 cores: every multi-rank prediction 2x).
TEST(PlannerCalibrate, SpinnersLeaveTheRanksCoreBinding) {
  cpu_set_t allowed;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one core allowed";
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  cpu_set_t bound, after;
  std::thread bound_thread([&] {  // a thread of its own: the test binary's threads keep their cores
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_getaffinity_np(pthread_self(), sizeof bound, &bound);
    allow_all_cpus();
    pthread_getaffinity_np(pthread_self(), sizeof after, &after);
  });
  bound_thread.join();
  EXPECT_EQ(CPU_COUNT(&bound), 1);
  cpu_set_t both;
  CPU_AND(&both, &after, &allowed);
  EXPECT_TRUE(CPU_EQUAL(&both, &allowed))
      << CPU_COUNT(&after) << " cores after allow_all_cpus, " << CPU_COUNT(&allowed) << " allowed";
}

// A model whose calibration measured 1.2x its fits on the whole map and exactly its fits
// on a map of half the side (as a device under a CPU quota does): the correction comes
// out of the points, is interpolated in log(cells) between them and held beyond, and the
// replay's compute follows it.
TEST(PlannerCostModel, SizeCorrectionFollowsTheMeasuredPoints) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 64, 96, 1);
  const int spatial = net.first_untileable();
  DeviceModel m = synthetic_model(net);
  m.reload_s = 0;  // formatting the weights before each use does not depend on the map
  const ClusterModel plain = local_cluster(m, 4, 4096, LinkSpec{40000, 1});
  for (auto [h, w, factor] : {std::tuple{64, 96, 1.2}, {32, 48, 1.0}}) {
    NetSpec at = net;
    resize_net(at, h, w);
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < spatial; ++l) {
      const double cells = double(at.layers[size_t(l)].out.h) * at.layers[size_t(l)].out.w;
      const LayerModel& f = m.layers[size_t(l)];
      layers.push_back({factor * f.fwd.at(cells), factor * f.fwd_pointwise.at(cells),
                        factor * f.bwd_pointwise.at(cells), factor * f.bwd_data.at(cells),
                        factor * f.bwd_weights.at(cells)});
    }
    m.points.push_back({{"height", h}, {"width", w}, {"step_s", 1.0}, {"layers", layers}});
  }
  derive_size_correction(m, net);
  ASSERT_EQ(m.size_correction.size(), 2u);
  EXPECT_NEAR(m.size_correction[0][0], 0.25, 1e-12);
  for (int l : {0, 5, spatial - 1}) {
    const double full = m.full_cells[size_t(l)];
    EXPECT_NEAR(m.correction(l, full), 1.2, 1e-12);
    EXPECT_NEAR(m.correction(l, full / 4), 1.0, 1e-12);
    EXPECT_NEAR(m.correction(l, full / 2), 1.1, 1e-12);  // halfway in log(cells)
    EXPECT_NEAR(m.correction(l, 4 * full), 1.2, 1e-12);
    EXPECT_NEAR(m.correction(l, full / 64), 1.0, 1e-12);
  }
  // One process on the whole map: every layer's compute 1.2x (the head is not a layer's).
  const Partition whole = part(1, 1, "none", resolve_cut(net, -1));
  const Prediction a = predict(net, whole, plain),
                   b = predict(net, whole, local_cluster(m, 4, 4096, LinkSpec{40000, 1}));
  const double head_f = m.head_fwd_per_sample * net.micro_batch(), head_b = m.head_bwd_per_sample * net.micro_batch();
  EXPECT_NEAR((b.fwd_s - head_f) / (a.fwd_s - head_f), 1.2, 1e-9);
  EXPECT_NEAR((b.bwd_s - head_b) / (a.bwd_s - head_b), 1.2, 1e-9);
}

// calibrate sweeps the map sizes twice and keeps each size's faster sweep: a slow spell of
// the host in one sweep does not end up in the model.
TEST(PlannerCalibrate, EachSizeKeepsItsFastestSweep) {
  std::vector<std::pair<size_t, int>> calls;
  const double secs[2][3] = {{1.0, 0.5, 0.9}, {0.8, 0.7, 0.9}};  // [round][size]
  const auto best = fastest_of_sweeps<std::pair<double, int>>(
      3, 2,
      [&](size_t i, int round) {
        calls.emplace_back(i, round);
        return std::pair{secs[round][i], round};
      },
      [](const std::pair<double, int>& p) { return p.first; });
  const std::vector<std::pair<size_t, int>> order{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}};
  EXPECT_EQ(calls, order);  // whole sweeps, one after the other
  EXPECT_EQ(best[0], (std::pair{0.8, 1}));
  EXPECT_EQ(best[1], (std::pair{0.5, 0}));
  EXPECT_EQ(best[2], (std::pair{0.9, 0}));  // a tie keeps the first
  EXPECT_EQ(fastest_of_sweeps<int>(
                2, 0, [](size_t i, int) { return int(i); }, [](int v) { return v; })
                .size(),
            2u);
}

TEST(PlannerCalibrate, FitsEveryLayerAndRoundTrips) {
  const NetSpec net = net_at("tests/fixtures/pool_mix/net.cfg");
  CalibrateOptions o;
  o.steps = 1;
  o.scales = {1.0, 0.5};
  const DeviceModel m = calibrate_device(net, o);
  ASSERT_EQ(int(m.layers.size()), net.first_untileable());
  EXPECT_EQ(m.signature, net_signature(net));
  EXPECT_EQ(m.points.size(), 2u);
  EXPECT_EQ(m.size_correction.size(), 2u);  // measured over fitted at each size
  for (const LayerModel& l : m.layers) {
    EXPECT_GE(l.fwd.a, 0);
    EXPECT_GE(l.fwd.b, 0);
    EXPECT_GT(l.fwd.at(100), 0);  // every layer has a forward pass
  }
  EXPECT_GT(m.base_mb, 0);
  const DeviceModel back = device_model_from_json(device_model_to_json(m), "m.json");
  EXPECT_EQ(back.signature, m.signature);
  EXPECT_EQ(back.layers[1].bwd_data.b, m.layers[1].bwd_data.b);
  EXPECT_EQ(back.cpu_capacity, m.cpu_capacity);
  EXPECT_THROW(device_model_from_json(nlohmann::json{{"kind", "x"}}, "bad.json"), Error);
}

}  // namespace
}  // namespace tt

namespace tt {
namespace {

// Uneven splits: a column weighted 2 gets about twice the cells of one weighted 1, at
// every layer; bad weights are refused; the optimizer weighs devices of different
// speeds and its best partition then splits unevenly.
TEST(PlannerHeterogeneous, WeightedSplitAndItsSearch) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 192);
  const int cut = resolve_cut(net, -1);
  const Plan plan = make_plan(net, 1, 2, 0, cut, parse_groups("none", 0, cut), {TileSplit{{}, {2, 1}}});
  for (int l = 0; l < cut; ++l) {
    const double w0 = plan.at(0, l).own.w(), w1 = plan.at(1, l).own.w();
    EXPECT_NEAR(w0 / (w0 + w1), 2. / 3, 0.1) << "layer " << l;
  }
  EXPECT_NEAR(double(plan.own_input[0].w()) / net.width, 2. / 3, 0.02);
  EXPECT_THROW(parse_weights("2,0", 2, "--col-weights"), Error);
  EXPECT_THROW(parse_weights("2", 2, "--col-weights"), Error);
  EXPECT_THROW(parse_weights("2,x", 2, "--col-weights"), Error);
  EXPECT_EQ(parse_weights("2,1.5", 2, "--col-weights"), (std::vector<double>{2, 1.5}));

  // Compute-bound (a large map, fast links): two devices beat the fast one alone.
  const NetSpec big = net_at("cfgs/yolov2-16.cfg", 416, 416);
  const ClusterModel cm = synthetic_cluster(big, 2, 100000, 4096, {1, 0.5});
  Partition even = part(1, 2, "none", cut);
  Partition weighted = even;
  weighted.split = split_by_speed(even, cm);
  ASSERT_EQ(weighted.split.cols.size(), 2u);
  EXPECT_DOUBLE_EQ(weighted.split.cols[0] / weighted.split.cols[1], 2);
  EXPECT_LT(predict(big, weighted, cm).step_s, predict(big, even, cm).step_s);
  const SearchResult r = optimize(big, cm, SearchOptions{});
  ASSERT_FALSE(r.best.empty());
  EXPECT_FALSE(r.best[0].part.split.rows.empty() && r.best[0].part.split.cols.empty()) << r.best[0].part.str();

  // The same two devices calibrated each on its own (calibrate under mpirun writes every
  // device's model, speed 1): the slow one's model has every time doubled. The search must
  // see them as different (it once read only the speed factors, and never split unevenly).
  DeviceModel fast = synthetic_model(big), slow = fast;
  for (LayerModel& l : slow.layers)
    for (LinearFit* f : {&l.fwd, &l.fwd_pointwise, &l.bwd_pointwise, &l.bwd_data, &l.bwd_weights}) {
      f->a *= 2;
      f->b *= 2;
    }
  slow.gflops = fast.gflops / 2;
  slow.sgd_per_param *= 2;
  slow.reload_s *= 2;
  slow.head_fwd_per_sample *= 2;
  slow.head_bwd_per_sample *= 2;
  nlohmann::json devs = nlohmann::json::array();
  for (const DeviceModel* m : {&fast, &slow})
    devs.push_back({{"name", m == &fast ? "fast" : "slow"},
                    {"cores", 4},
                    {"memory_mb", 4096},
                    {"model", device_model_to_json(*m)}});
  const ClusterModel own = resolve_cluster(
      parse_cluster({{"devices", devs}, {"links", {{"bandwidth_mbit", 100000}, {"latency_us", 100}}}}, "own.json", {}),
      big, nullptr);
  const TileSplit by_model = split_by_speed(even, own);
  ASSERT_EQ(by_model.cols.size(), 2u);
  EXPECT_DOUBLE_EQ(by_model.cols[0] / by_model.cols[1], 2);
  const SearchResult ro = optimize(big, own, SearchOptions{});
  ASSERT_FALSE(ro.best.empty());
  EXPECT_FALSE(ro.best[0].part.split.rows.empty() && ro.best[0].part.split.cols.empty()) << ro.best[0].part.str();
  EXPECT_NEAR(ro.best[0].pred.step_s, r.best[0].pred.step_s, 0.02 * r.best[0].pred.step_s);
}

// The printed command runs the candidate where the cluster is: edge.sh for an emulated one
// (hosts devK), mpirun with the hosts for real machines, plain mpirun on one host; and it
// repeats the options that change what is trained.
// Data parallel: every copy runs its micro-batches as one process alone on its device,
// then the micro-batches' gradients are summed (an all-to-all of every micro-batch's parts)
// and the weights all-gathered; what each copy keeps is what the trainer counts.
TEST(PlannerCostModel, DataParallelCopiesRunTheirMicroBatchesThenSum) {
  NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96, 4);
  net.subdivisions = 4;
  NetSpec one = net;
  one.subdivisions = 1;
  one.batch = 1;
  const int cut = resolve_cut(net, -1);
  const ClusterModel cm =
      resolve_cluster(synthetic_spec(net, 4, 100, 4096, {}, {{"many_flows", 1}, {"ring", 1}}), net, nullptr);
  double n = 0;
  for (const LayerSpec& l : net.layers) n += double(l.param_count());
  const double rate = 100e6 / 8, in_bytes = 4. * net.input().size();
  const Prediction alone = predict(one, part(1, 1, "all", cut), cm);
  Partition dp = part(1, 1, "all", cut);
  for (int P : {2, 4}) {
    dp.replicas = P;
    const Prediction pr = predict(net, dp, cm);
    ASSERT_EQ(pr.ranks.size(), size_t(P));
    const int K = 4 / P;
    EXPECT_NEAR(pr.fwd_s, K * alone.fwd_s, 1e-12) << P;
    EXPECT_NEAR(pr.bwd_s, K * alone.bwd_s, 1e-12) << P;
    // The root hands out the others' micro-batches over its link, then each copy computes.
    const double handed = (P - 1) * K * in_bytes / rate;
    const double computed = handed + K * (alone.step_s - alone.update_s);
    // Sum: each rank's link carries (P-1)/P of K micro-batches' gradients each way; the
    // weights' all-gather (P-1)/P of them.
    const double sum = double(P - 1) / P * 4 * n * (K + 1) / rate;
    EXPECT_GT(pr.weights_s, sum) << P;
    EXPECT_LT(pr.weights_s, 1.05 * sum + 0.01) << P;
    EXPECT_GT(pr.step_s, computed + sum) << P;
    EXPECT_LT(pr.step_s, computed + 1.05 * sum + 0.02) << P;
    EXPECT_GT(pr.ranks[size_t(P - 1)].io_s, handed) << P;
  }
  // What a copy keeps, against the trainer's count: one copy on one process with 4
  // micro-batches keeps the weights, the working gradient, 3 more and the momentum.
  const DnnlContext ctx;
  DeviceModel m = synthetic_model(net);
  m.channel_block = ctx.config.block;
  m.weight_copies_mb = 0;
  const ClusterModel here = local_cluster(m, 4, 4096, LinkSpec{40000, 1});
  dp.replicas = 1;
  const Prediction pr = predict(net, dp, here);
  Params params(net);
  init_params(params, net, 1);
  TrainOptions topt;
  topt.groups = "all";
  topt.replicas = 1;
  LocalComm local;
  Trainer tr(net, params, topt, local);
  EXPECT_NEAR(pr.ranks[0].filters_mb, tr.memory().kept_mb, 1e-9);
  EXPECT_NEAR(tr.memory().kept_mb, 6. * params.size() * 4 / 1048576.0, 1e-9);
  // More copies than devices or than micro-batches: refused.
  dp.replicas = 5;
  EXPECT_THROW(predict(net, dp, cm), Error);
  net.subdivisions = 2;
  dp.replicas = 4;
  EXPECT_THROW(predict(net, dp, cm), Error);
}

// With micro-batches to share, the search weighs whole copies on 2, 3 and 4 devices against
// the tilings, as predicted, and says how to run them; without, it has none.
TEST(PlannerOptimizer, DataParallelCopiesAreCandidates) {
  NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96, 8);
  net.subdivisions = 4;
  const ClusterModel cm = synthetic_cluster(net, 4, 100000);
  SearchOptions o;
  o.top = 1 << 20;  // every candidate
  const SearchResult r = optimize(net, cm, o);
  ASSERT_FALSE(r.best.empty());
  std::vector<int> copies;
  for (const Candidate& c : r.best) {
    EXPECT_LE(r.best[0].pred.step_s, c.pred.step_s);
    if (c.part.replicas == 0) continue;
    copies.push_back(c.part.replicas);
    EXPECT_EQ(c.pred.step_s, predict(net, c.part, cm).step_s) << c.part.str();
    EXPECT_NE(c.part.str().find("data parallel over " + std::to_string(c.part.replicas) + " copies"),
              std::string::npos);
    RunContext ctx{" --batch 8 --subdivisions 4", {"a", "b", "c", "d"}};
    const std::string cmd = command_line("w.cfg", c, ctx);
    EXPECT_EQ(cmd.rfind("mpirun -np " + std::to_string(c.part.replicas) + " --host a:1,", 0), 0u) << cmd;
    EXPECT_NE(cmd.find(" --replicas " + std::to_string(c.part.replicas)), std::string::npos) << cmd;
  }
  std::sort(copies.begin(), copies.end());
  EXPECT_EQ(copies, (std::vector<int>{2, 3, 4}));
  net.subdivisions = 1;  // nothing to share
  for (const Candidate& c : optimize(net, cm, o).best) EXPECT_EQ(c.part.replicas, 0) << c.part.str();
}

// --tail filters: every rank computes its blocks' share of each convolution after the cut,
// the blocks' outputs and input-delta parts are all-gathered, and the parameters after the
// cut are kept and updated where their blocks run, never sent.
TEST(PlannerCostModel, FilterBlocksShareTheTailAndKeepItsWeights) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96, 1);
  const int cut = 8;
  const ClusterModel cm =
      resolve_cluster(synthetic_spec(net, 4, 100, 4096, {}, {{"many_flows", 1}, {"ring", 1}}), net, nullptr);
  Partition root = part(2, 2, "none", cut), filters = root;
  filters.tail_filters = true;
  const Prediction a = predict(net, root, cm), b = predict(net, filters, cm);
  ASSERT_EQ(b.ranks.size(), 4u);
  double fwd_a = 0, fwd_b = 0, bwd_a = 0, bwd_b = 0;
  for (int r = 0; r < 4; ++r) {
    fwd_a += a.ranks[size_t(r)].fwd_s, fwd_b += b.ranks[size_t(r)].fwd_s;
    bwd_a += a.ranks[size_t(r)].bwd_s, bwd_b += b.ranks[size_t(r)].bwd_s;
    // The others compute their blocks after the cut, and hold the maps there.
    if (r > 0) {
      EXPECT_GT(b.ranks[size_t(r)].fwd_s, a.ranks[size_t(r)].fwd_s + 1e-4) << r;
      EXPECT_GT(b.ranks[size_t(r)].maps_mb, a.ranks[size_t(r)].maps_mb) << r;
    }
    // Each keeps a quarter of the weights, gradient and momentum after the cut.
    EXPECT_LT(b.ranks[size_t(r)].filters_mb, a.ranks[size_t(r)].filters_mb) << r;
  }
  EXPECT_LT(b.ranks[0].fwd_s, a.ranks[0].fwd_s);
  // The same work after the cut, shared out, but for what every rank runs whole: the other
  // layers (a max-pool here) and the head (calibrated as one).
  const DeviceModel& m = cm.models[0];
  double extra_fwd = 3 * m.head_fwd_per_sample, extra_bwd = 3 * m.head_bwd_per_sample;
  for (int l = cut; l < net.first_untileable(); ++l) {
    const LayerSpec& s = net.layers[size_t(l)];
    if (splits_into_filter_blocks(s)) continue;
    const LayerModel& lm = m.layers[size_t(l)];
    const double cells = s.out.h * s.out.w;  // batch 1
    extra_fwd += 3 * (lm.fwd.at(cells) + lm.fwd_pointwise.at(cells));
    extra_bwd += 3 * (lm.bwd_pointwise.at(cells) + lm.bwd_data.at(cells) + lm.bwd_weights.at(cells));
  }
  EXPECT_GT(extra_fwd, 3 * m.head_fwd_per_sample);  // there is such a layer
  EXPECT_NEAR(fwd_b, fwd_a + extra_fwd, 1e-9);
  EXPECT_NEAR(bwd_b, bwd_a + extra_bwd, 1e-9);
  EXPECT_GT(b.halo_s, a.halo_s);        // the blocks' all-gathers
  EXPECT_LT(b.weights_s, a.weights_s);  // no weights after the cut cross a link
  EXPECT_NE(filters.str().find("filter blocks after the cut"), std::string::npos);
  root.replicas = 2;
  root.tail_filters = true;
  EXPECT_THROW(predict(net, root, cm), Error);
}

// A layer after the cut that is not split (the [connected] here) runs whole on every rank:
// the root alone applies SGD to it and sends the result to the others.
TEST(PlannerCostModel, FilterBlocksLeaveTheWholeLayersToTheRoot) {
  const NetSpec net = net_at("cfgs/fashion-mnist.cfg", 0, 0, 1);
  const int cut = 4, fc = 5;
  ASSERT_TRUE(net.layers[size_t(fc)].is(kConnectedKind));
  const ClusterModel cm =
      resolve_cluster(synthetic_spec(net, 2, 100, 4096, {}, {{"many_flows", 1}, {"ring", 1}}), net, nullptr);
  Partition filters = part(1, 2, "none", cut);
  filters.tail_filters = true;
  const Prediction b = predict(net, filters, cm);
  ASSERT_EQ(b.ranks.size(), 2u);
  // Both ranks run half of conv 4's filters and all of the connected layer; only the root
  // updates the latter.
  const double sgd = cm.models[0].sgd_per_param * double(net.layers[size_t(fc)].param_count());
  EXPECT_GT(sgd, 0);
  EXPECT_NEAR(b.ranks[0].update_s - b.ranks[1].update_s, sgd, 1e-6 * sgd);
}

TEST(PlannerOptimizer, FilterBlocksAreCandidates) {
  const NetSpec net = net_at("cfgs/yolov2-16.cfg", 96, 96, 1);
  const ClusterModel cm = synthetic_cluster(net, 4, 100);
  SearchOptions o;
  o.top = 1 << 20;  // every candidate
  const SearchResult r = optimize(net, cm, o);
  int filters = 0;
  for (const Candidate& c : r.best) {
    if (!c.part.tail_filters) continue;
    ++filters;
    EXPECT_GT(c.part.ranks(), 1) << c.part.str();
    EXPECT_EQ(c.pred.step_s, predict(net, c.part, cm).step_s) << c.part.str();
    const std::string cmd = command_line("w.cfg", c, RunContext{"", {"a", "b", "c", "d"}});
    EXPECT_NE(cmd.find(" --tail filters"), std::string::npos) << cmd;
  }
  EXPECT_GT(filters, 0);
}

TEST(PlannerOptimizer, CommandLinesFitTheCluster) {
  Candidate c;
  c.part.rows = 2;
  c.part.cols = 2;
  c.part.cut = 4;
  c.part.tiles_per_rank = 1;
  c.part.ranks_per_device = 2;
  RunContext ctx{" --batch 4 --size 96x96", {"pi-a", "pi-b", "pi-c"}};
  EXPECT_EQ(command_line("w.cfg", c, ctx),
            "mpirun -np 4 --host pi-a:2,pi-b:2 build/tiletrain train --cfg w.cfg --batch 4 --size 96x96 --grid 2x2 "
            "--groups none --cut 4 --tiles-per-rank 1 --tail root --steps 100");
  ctx.hosts = {"dev0", "dev1"};
  EXPECT_EQ(
      command_line("w.cfg", c, ctx).rfind("cluster/edge.sh run --ranks-per-device 2 -- train --cfg w.cfg --batch 4", 0),
      0u);
  ctx.hosts = {"here"};
  c.part.ranks_per_device = 4;
  EXPECT_EQ(command_line("w.cfg", c, ctx).rfind("mpirun -np 4 build/tiletrain train --cfg w.cfg --batch 4", 0), 0u);
}

}  // namespace
}  // namespace tt
