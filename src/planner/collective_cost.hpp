// What the collectives the engine runs cost on a cluster's links (cluster.hpp): the
// update's reduce-scatter and all-gather, and the --low-memory weight chunks' gathers and
// ring reduce-scatters, at the cluster's calibrated efficiencies.
#pragma once
#include <vector>

#include "engine/device_chain.hpp"
#include "planner/cluster.hpp"

namespace tt {

// E[max of n independent standard normal draws]: how far behind the slowest of n ranks is,
// in units of their compute's spread, at a synchronisation.
double expected_max_normal(int n);

// The update's collectives over ranks on devices rank_dev[r], `bytes` in all, at the
// cluster's calibrated efficiencies: the ring reduce-scatter (P-1 steps of a part to the
// next rank) and the linear all-gather (every rank's part to every other rank).
double reduce_scatter_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes);
double all_gather_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes);
// Several ranks on a device and several devices (DeviceChain::useful, engine/device_chain.hpp): the tiled
// layers' `bytes` of gradient summed as a pipelined chain over the runs of consecutive
// tiles on one device (tile_rank[t]: tile t's rank), each run boundary crossing once with
// the whole vector, each device's tiles gathered by its ranks over shared memory; and
// after SGD `bytes` of weights from every rank's part to one rank per device, then round
// each device.
double device_chain_reduce_time(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                const std::vector<int>& tile_rank, double bytes);
double device_share_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes);
// The rate (bytes/s) of the shared memory that P ranks on one host, `latency_s` apart, got
// in an all-gather that took `all_gather_s` and a ring reduce-scatter that took
// `reduce_scatter_s`, of `bytes` each: the two formulas above solved for the rate, averaged.
double shared_memory_collective_rate(int P, double bytes, double latency_s, double all_gather_s,
                                     double reduce_scatter_s);
// A small all-reduce (the gradients --low-memory does not shard) over ranks on devices
// rank_dev[r]: recursive doubling, log2(P) rounds of the slowest link from rank 0.
double small_allreduce_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes);
// Each device link's token bucket (ClusterSpec::burst_bytes) as a step goes on: what it
// holds at time `at`, refilled at the link's rate up to the burst. Empty: no bursts.
struct LinkBuckets {
  double burst = 0;
  std::vector<double> level, at;  // per device
  LinkBuckets() = default;
  explicit LinkBuckets(const ClusterSpec& c)
      : burst(c.burst_bytes), level(c.devices.size(), burst), at(c.devices.size(), 0.) {}
  // Seconds device d's link (`link_rate` bytes/s) takes to send `bytes` from time t at
  // `efficiency` of its rate: what the bucket holds goes at once, the rest at that rate,
  // which keeps the bucket empty; it refills at the link's rate from the end of the send.
  double send(int d, double t, double bytes, double link_rate, double efficiency = 1);
};
// The burst of a link from its ping-pong (calibrate): the line through the largest
// message's one-way time at the measured rate starts that many bytes' time below the
// latency (the smallest message's time). 0 if it does not; a link without a bucket gives
// about the smallest message's size.
double burst_from_ping_pong(double latency_s, double bytes_per_s, double largest_bytes, double largest_s);
// --low-memory moves tiled layer l's weights (layers before `cut`) in chunks of whole output
// channels, about 1 MB each (Segment::plan_chunks), each chunk split among the ranks that
// own parts of it (shards are contiguous runs of all the tiled convolutions' weights,
// make_shard_plan). Per chunk: the floats each of P ranks owns.
std::vector<std::vector<double>> weight_chunk_parts(const NetSpec& net, int cut, int l, int channel_block, int P);
// One --low-memory weight chunk, `floats[r]` of it owned by rank r: all-gathered (a rank's
// link carries (P-1) x its part out and the rest in) and ring reduce-scatter (step s: rank
// r passes part r-s-1 on), at the cluster's chunk efficiencies and call costs. The
// gather starting at `start` with `buckets`: what the largest owner's link holds goes at
// once, and the bucket follows.
double chunk_gather_time(const ClusterSpec& c, const std::vector<int>& rank_dev, const std::vector<double>& floats,
                         LinkBuckets* buckets = nullptr, double start = 0);
double chunk_reduce_scatter_time(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                 const std::vector<double>& floats, LinkBuckets* buckets = nullptr);
// Chunks `chunks[k][r]` (floats of chunk k rank r owns) reduce-scattered round the ring one
// after another (MpiComm::reduce_scatter, engine/conv_weights.hpp), the ranks starting
// at `start[r]`: when each rank is done. Each step's message goes once the receiver has
// posted for it (rendezvous), through both devices' links in turn, and its sender is done
// with the step when it is on the wire, so a rank moves on to the next chunk while the
// ring's later steps of this one are still running elsewhere. `buckets` (may be null):
// the sending links' bursts, followed.
std::vector<double> chunk_ring_finish(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                      const std::vector<std::vector<double>>& chunks, std::vector<double> start,
                                      LinkBuckets* buckets = nullptr);

// Messages between ranks (halos), posted together by ranks that got there at `start[r]`:
// when each rank is done. Each rank waits for its partners (rendezvous), then for its own
// traffic: its device's link in the busier direction (both ways at once, at the many-flows
// efficiency), shared memory for partners on its device, and one latency.
struct PointToPoint {
  int from, to;  // ranks
  double bytes;
};
std::vector<double> point_to_point_finish(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                          const std::vector<PointToPoint>& messages, const std::vector<double>& start);

}  // namespace tt
