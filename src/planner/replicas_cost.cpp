// The cost model of data-parallel partitions (Partition::replicas; the engine's side is
// TrainOptions::replicas and MicroBatchSync): every process runs its micro-batches as one
// process alone on its device would, which is the replay of the partition inside one
// process (cost_model.cpp) on a cluster of that device alone, once per micro-batch. The
// root first hands the other processes their micro-batches over its link; the update sums
// the micro-batches' gradients as MicroBatchSync does (every process sends every other one
// its part of each of its micro-batches' gradients: an all-to-all like the tiles' sum),
// applies SGD to its part and all-gathers the weights.
#include <algorithm>

#include "planner/collective_cost.hpp"
#include "planner/cost_model.hpp"
#include "util/error.hpp"

namespace tt {

namespace {
constexpr double kMB = 1048576.0;

ClusterModel device_alone(const ClusterModel& cm, int d) {
  ClusterModel one = cm;
  one.spec.devices = {cm.spec.devices[size_t(d)]};
  one.spec.pairs.clear();
  one.models = {cm.models[size_t(d)]};
  one.slowdown = {cm.slowdown[size_t(d)]};
  one.capacity = {cm.capacity[size_t(d)]};
  return one;
}
}  // namespace

Prediction predict_replicas(const NetSpec& net, const Partition& p, const ClusterModel& cm) {
  const int P = p.replicas, S = net.subdivisions, D = int(cm.spec.devices.size());
  if (P > D) fail(P, " data-parallel copies run on a device each; the cluster has ", D);
  if (p.ranks_per_device != 1) fail("data-parallel copies are priced one process per device");
  if (p.low_memory) fail("--low-memory shards one copy over its processes; a data-parallel copy is whole");
  if (S < P)
    fail(P, " data-parallel copies need at least as many micro-batches; a batch of ", net.batch, " has ", S,
         " (--subdivisions)");
  NetSpec one = net;  // one micro-batch, as each copy runs it
  one.batch = net.micro_batch();
  one.subdivisions = 1;
  Partition inside = p;
  inside.replicas = 0;
  inside.tiles_per_rank = p.rows * p.cols;
  const int cut = resolve_cut(net, p.cut, p.rows, p.cols);
  const double n = double(net.param_count()), tiled = double(net.param_count(0, cut));
  auto first = [&](int r) { return int(int64_t(S) * r / P); };
  std::vector<int> rank_dev(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) rank_dev[size_t(r)] = r;

  Prediction out;
  const double in_bytes = 4. * one.batch * net.input().size();
  double root_link = 0;  // the root's link, busy with the micro-batches it hands out
  double end = 0;
  int most = 0;
  for (int r = 0; r < P; ++r) {
    const int K = first(r + 1) - first(r);
    most = std::max(most, K);
    const Prediction q = predict(one, inside, device_alone(cm, rank_dev[size_t(r)]));
    RankPrediction a = q.ranks[0];
    a.device = rank_dev[size_t(r)];
    double arrive = 0;
    if (r > 0) {
      const LinkSpec l = cm.spec.link(0, rank_dev[size_t(r)]);
      root_link += K * in_bytes / l.bytes_per_s();
      arrive = l.latency_s() + root_link;
    }
    a.fwd_s *= K;
    a.bwd_s *= K;
    a.halo_s *= K;
    a.io_s = a.io_s * K + arrive;
    a.weights_s = a.update_s = 0;
    a.step_s = arrive + K * (q.step_s - q.update_s);
    // One process keeps weights, gradient and momentum (3n); a copy keeps the weights, the
    // working gradient, one gradient per further micro-batch, the momentum of its part, and
    // TileOrder's receive chunks for the others' micro-batches; with several tiles and
    // micro-batches, a gradient per further tile (Segment::tile_grads()).
    const double part = std::ceil(n / P), chunk = std::min(std::max(65536., std::floor(4194304. / S)), part);
    const double floats = (K - 1 + 1. / P - 1) * n + chunk * (S - K) + (inside.tiles_per_rank - 1) * tiled;
    a.filters_mb += floats * 4 / kMB;
    a.peak_rss_mb += floats * 4 / kMB;
    out.cells_computed = q.cells_computed;
    out.ranks.push_back(a);
    end = std::max(end, a.step_s);
  }
  // The losses and batch-norm statistics gathered (small), the sum in micro-batch order,
  // SGD on each part, the weights all-gathered, and every copy's kernels reloaded.
  double latency = 0;
  for (int r = 1; r < P; ++r) latency = std::max(latency, cm.spec.link(0, r).latency_s());
  const double sum = 2 * latency + all_gather_time(cm.spec, rank_dev, 4. * most * n);
  const double share = all_gather_time(cm.spec, rank_dev, 4. * n);
  double sgd = 0, reload = 0;
  for (int r = 0; r < P; ++r) {
    const double s = cm.slowdown[size_t(rank_dev[size_t(r)])];
    sgd = std::max(sgd, cm.models[size_t(rank_dev[size_t(r)])].sgd_per_param * n / P * s);
    reload = std::max(reload, cm.models[size_t(rank_dev[size_t(r)])].reload_s * s);
  }
  out.step_s = end + sum + sgd + share + reload;
  for (RankPrediction& a : out.ranks) {
    a.weights_s = end - a.step_s + sum + share;  // bench times the wait for the slowest with the sum
    a.update_s = sgd + reload;
    a.step_s = out.step_s;
  }
  out.summarize(cm.spec);
  return out;
}

}  // namespace tt
