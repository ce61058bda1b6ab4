#include "planner/collective_cost.hpp"

#include <algorithm>
#include <cmath>

#include "model/net_spec.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {

// E[max of n independent standard normal draws] (tabulated to 16, then the asymptotic form).
double expected_max_normal(int n) {
  static const double table[] = {0,     0,     0.564, 0.846, 1.029, 1.163, 1.267, 1.352, 1.424,
                                 1.485, 1.539, 1.586, 1.629, 1.668, 1.703, 1.736, 1.766};
  if (n < 17) return table[std::max(n, 0)];
  const double l = std::sqrt(2 * std::log(double(n)));
  return l - (std::log(std::log(double(n))) + std::log(4 * M_PI)) / (2 * l);
}

double reduce_scatter_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes) {
  const int P = int(rank_dev.size());
  double step = 0;
  for (int r = 0; r < P; ++r) {
    const int a = rank_dev[size_t(r)], b = rank_dev[size_t((r + 1) % P)];
    const LinkSpec l = c.link(a, b);
    step = std::max(step, l.latency_s() + bytes / P / l.bytes_per_s() / (a == b ? 1 : c.ring_efficiency));
  }
  return (P - 1) * step;
}

double all_gather_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes) {
  const int P = int(rank_dev.size());
  std::vector<double> dev_t(c.devices.size(), 0);  // bytes from other devices over each device's link
  for (int r = 0; r < P; ++r)
    for (int q = 0; q < P; ++q)
      if (rank_dev[size_t(q)] != rank_dev[size_t(r)])
        dev_t[size_t(rank_dev[size_t(r)])] +=
            bytes / P / c.link(rank_dev[size_t(r)], rank_dev[size_t(q)]).bytes_per_s() / c.many_flows_efficiency;
  double worst = 0;
  for (int r = 0; r < P; ++r) {
    double t = 0, lat = 0;
    for (int q = 0; q < P; ++q) {
      if (q == r) continue;
      const LinkSpec l = c.link(rank_dev[size_t(r)], rank_dev[size_t(q)]);
      lat = std::max(lat, l.latency_s());
      if (rank_dev[size_t(q)] == rank_dev[size_t(r)]) t += bytes / P / l.bytes_per_s();
    }
    worst = std::max(worst, lat + t + dev_t[size_t(rank_dev[size_t(r)])]);
  }
  return worst;
}

namespace {
struct DeviceRanks {
  std::vector<int> count;  // ranks per device
  explicit DeviceRanks(const std::vector<int>& rank_dev) {
    for (int d : rank_dev) {
      if (size_t(d) >= count.size()) count.resize(size_t(d) + 1, 0);
      ++count[size_t(d)];
    }
  }
};
}  // namespace

double device_chain_reduce_time(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                const std::vector<int>& tile_rank, double bytes) {
  const int P = int(rank_dev.size());
  const DeviceRanks dr(rank_dev);
  const size_t D = dr.count.size();
  std::vector<int> run_dev, tiles_on(D, 0);
  for (int r : tile_rank) {
    const int d = rank_dev[size_t(r)];
    ++tiles_on[size_t(d)];
    if (run_dev.empty() || run_dev.back() != d) run_dev.push_back(d);
  }
  std::vector<double> out(D, 0), in(D, 0);
  for (size_t k = 0; k + 1 < run_dev.size(); ++k) {
    out[size_t(run_dev[k])] += bytes;
    in[size_t(run_dev[k + 1])] += bytes;
  }
  const size_t last = size_t(run_dev.back());  // its sums go to the parts' ranks elsewhere
  for (size_t d = 0; d < D; ++d)
    if (d != last) {
      const double owned = bytes * dr.count[d] / P;
      out[last] += owned, in[d] += owned;
    }
  double worst = 0, fill = 0;
  for (size_t d = 0; d < D; ++d) {
    const LinkSpec& sm = c.shared_memory;
    double t = 0;
    for (size_t e = 0; e < D; ++e)
      if (e != d) t = std::max(t, std::max(in[d], out[d]) / c.link(int(d), int(e)).bytes_per_s() / c.ring_efficiency);
    // Each rank adds the device's other ranks' tiles to its share of the parts.
    const double tpr = double(tiles_on[d]) / dr.count[d];
    const double local = bytes / dr.count[d] * (tiles_on[d] - tpr) / sm.bytes_per_s();
    worst = std::max(worst, std::max(t, local));
  }
  for (size_t k = 0; k + 1 < run_dev.size(); ++k) {
    const LinkSpec l = c.link(run_dev[k], run_dev[k + 1]);
    fill += l.latency_s() +
            4. * double(DeviceChain::chunk_floats(int64_t(bytes / P / 4), int(run_dev.size()))) / l.bytes_per_s();
  }
  return worst + fill;
}

double device_share_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes) {
  const int P = int(rank_dev.size());
  const DeviceRanks dr(rank_dev);
  const size_t D = dr.count.size();
  double across = 0, lat = 0, within = 0;
  for (size_t d = 0; d < D; ++d) {
    const double L = dr.count[d];
    const double in = bytes * (P - L) / P, out = bytes * L / P * double(D - 1);
    for (size_t e = 0; e < D; ++e) {
      if (e == d) continue;
      const LinkSpec l = c.link(int(d), int(e));
      across = std::max(across, std::max(in, out) / l.bytes_per_s() / c.many_flows_efficiency);
      lat = std::max(lat, l.latency_s());
    }
    // Round the device: its own ranks' parts, then what came from elsewhere.
    within = std::max(within, bytes * (L - 1) / L / c.shared_memory.bytes_per_s());
  }
  return across + lat + within + 2 * c.shared_memory.latency_s();
}

double shared_memory_collective_rate(int P, double bytes, double latency_s, double all_gather_s,
                                     double reduce_scatter_s) {
  const double moved = bytes * (P - 1) / P;  // into each rank, in either collective
  const double ag = moved / std::max(all_gather_s - latency_s, 1e-9),
               rs = moved / std::max(reduce_scatter_s - (P - 1) * latency_s, 1e-9);
  return (ag + rs) / 2;
}

namespace {

// The slowest link between two ranks (seconds for `bytes`), at an efficiency across devices.
double worst_link(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes, double efficiency) {
  double worst = 0;
  for (size_t r = 0; r < rank_dev.size(); ++r)
    for (size_t q = 0; q < rank_dev.size(); ++q)
      if (q != r) {
        const LinkSpec k = c.link(rank_dev[r], rank_dev[q]);
        worst =
            std::max(worst, k.latency_s() + bytes / k.bytes_per_s() / (rank_dev[r] == rank_dev[q] ? 1 : efficiency));
      }
  return worst;
}

bool across_devices(const std::vector<int>& rank_dev) {
  return std::any_of(rank_dev.begin(), rank_dev.end(), [&](int d) { return d != rank_dev.front(); });
}

}  // namespace

double chunk_gather_time(const ClusterSpec& c, const std::vector<int>& rank_dev, const std::vector<double>& floats,
                         LinkBuckets* buckets, double start) {
  const double P = double(rank_dev.size());
  double chunk = 0, busiest = 0;
  for (double f : floats) chunk += f;
  for (double f : floats) busiest = std::max(busiest, std::max((P - 1) * f, chunk - f));
  const bool across = across_devices(rank_dev);
  double t = worst_link(c, rank_dev, 4 * busiest, c.chunk_gather_efficiency) + (across ? c.chunk_gather_overhead_s : 0);
  if (!buckets || buckets->burst <= 0 || !across) return t;
  // The largest owner's link, when it is the one that limits: what its bucket holds goes
  // at once.
  const size_t o = size_t(std::max_element(floats.begin(), floats.end()) - floats.begin());
  if ((P - 1) * floats[o] < busiest) return t;
  const int d = rank_dev[o];
  const int e = *std::find_if(rank_dev.begin(), rank_dev.end(), [&](int x) { return x != d; });  // across: one exists
  const double rate = c.link(d, e).bytes_per_s(), out = 4 * busiest;
  return t - out / rate / c.chunk_gather_efficiency + buckets->send(d, start, out, rate, c.chunk_gather_efficiency);
}

double LinkBuckets::send(int d, double t, double bytes, double link_rate, double efficiency) {
  const double rate = link_rate * efficiency;
  if (burst <= 0) return bytes / rate;
  double& l = level[size_t(d)];
  // The replay never starts a send on a link before its previous one ended (t >= at).
  const double held = std::min(burst, l + std::max(0., t - at[size_t(d)]) * link_rate);
  const double now = std::min(held, bytes), secs = (bytes - now) / rate;
  l = held - now;
  at[size_t(d)] = std::max(t, at[size_t(d)]) + secs;
  return secs;
}

double burst_from_ping_pong(double latency_s, double bytes_per_s, double largest_bytes, double largest_s) {
  return std::max(0., (latency_s - (largest_s - largest_bytes / bytes_per_s)) * bytes_per_s);
}

std::vector<double> chunk_ring_finish(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                      const std::vector<std::vector<double>>& chunks, std::vector<double> t,
                                      LinkBuckets* buckets) {
  const int P = int(rank_dev.size());
  const int D = *std::max_element(rank_dev.begin(), rank_dev.end()) + 1;
  const bool across = across_devices(rank_dev);
  std::vector<double> up(size_t(D), 0), down(size_t(D), 0);  // when a device's link is next free
  for (const std::vector<double>& floats : chunks) {
    for (int st = 0; st + 1 < P; ++st) {
      std::vector<double> done = t;
      for (int r = 0; r < P; ++r) {
        const int q = (r + 1) % P, a = rank_dev[size_t(r)], b = rank_dev[size_t(q)];
        const LinkSpec k = c.link(a, b);
        const double bytes = 4 * floats[size_t(((r - st - 1) % P + P) % P)];
        double start = std::max(t[size_t(r)], t[size_t(q)]);  // the receiver has posted (rendezvous)
        double end;
        if (a == b) {
          end = start + bytes / k.bytes_per_s();
        } else {
          start = std::max({start, up[size_t(a)], down[size_t(b)]});
          const double eff = c.chunk_reduce_scatter_efficiency;
          end = up[size_t(a)] = down[size_t(b)] =
              start + (buckets ? buckets->send(a, start, bytes, k.bytes_per_s(), eff) : bytes / k.bytes_per_s() / eff);
        }
        end += k.latency_s();
        done[size_t(r)] = std::max(done[size_t(r)], end);  // the send completes once on the wire
        done[size_t(q)] = std::max(done[size_t(q)], end);
      }
      t = std::move(done);
    }
    if (across)
      for (double& x : t) x += c.chunk_reduce_scatter_overhead_s;
  }
  return t;
}

double chunk_reduce_scatter_time(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                 const std::vector<double>& floats, LinkBuckets* buckets) {
  const std::vector<double> t =
      chunk_ring_finish(c, rank_dev, {floats}, std::vector<double>(rank_dev.size(), 0.), buckets);
  return *std::max_element(t.begin(), t.end());
}

double small_allreduce_time(const ClusterSpec& c, const std::vector<int>& rank_dev, double bytes) {
  double worst = 0;
  for (size_t r = 1; r < rank_dev.size(); ++r) {
    const LinkSpec l = c.link(rank_dev[0], rank_dev[r]);
    worst = std::max(worst, l.latency_s() + bytes / l.bytes_per_s());
  }
  return std::ceil(std::log2(double(rank_dev.size()))) * worst;
}

std::vector<std::vector<double>> weight_chunk_parts(const NetSpec& net, int cut, int l, int channel_block, int P) {
  int64_t total = 0, v = 0;
  for (int k = net.first_tiled(); k < cut; ++k)
    if (tiled_traits(net.layers[size_t(k)]).weights) {
      if (k < l) v += net.layers[size_t(k)].weight_count();
      total += net.layers[size_t(k)].weight_count();
    }
  const LayerSpec& s = net.layers[size_t(l)];
  const int64_t n = s.weight_count(), oc = s.out.c, row = n / oc, cb = channel_block;
  const int64_t step = oc % cb ? oc : std::clamp<int64_t>((int64_t(1) << 18) / row / cb * cb, cb, oc);
  std::vector<std::vector<double>> parts;
  for (int64_t o0 = 0; o0 < oc; o0 += step) {
    const int64_t begin = v + o0 * row, end = v + std::min(oc, o0 + step) * row;
    std::vector<double> mine(static_cast<size_t>(P), 0.);
    for (int r = 0; r < P; ++r)
      mine[size_t(r)] =
          double(std::max<int64_t>(0, std::min(end, total * (r + 1) / P) - std::max(begin, total * r / P)));
    parts.push_back(std::move(mine));
  }
  return parts;
}

std::vector<double> point_to_point_finish(const ClusterSpec& c, const std::vector<int>& rank_dev,
                                          const std::vector<PointToPoint>& messages, const std::vector<double>& start) {
  const size_t P = start.size();
  const int D = int(c.devices.size());
  std::vector<double> dev_out(size_t(D), 0), dev_in(size_t(D), 0), shm(P, 0), lat(P, 0), ready = start;
  for (const PointToPoint& m : messages) {
    const int da = rank_dev[size_t(m.from)], db = rank_dev[size_t(m.to)];
    const LinkSpec l = c.link(da, db);
    if (da == db) {
      shm[size_t(m.from)] += m.bytes / l.bytes_per_s();
      shm[size_t(m.to)] += m.bytes / l.bytes_per_s();
    } else {
      dev_out[size_t(da)] += m.bytes / l.bytes_per_s() / c.many_flows_efficiency;
      dev_in[size_t(db)] += m.bytes / l.bytes_per_s() / c.many_flows_efficiency;
    }
    for (int r : {m.from, m.to}) lat[size_t(r)] = std::max(lat[size_t(r)], l.latency_s());
    ready[size_t(m.to)] = std::max(ready[size_t(m.to)], start[size_t(m.from)]);
    ready[size_t(m.from)] = std::max(ready[size_t(m.from)], start[size_t(m.to)]);  // rendezvous: the receiver posts
  }
  std::vector<double> done = start;
  for (size_t r = 0; r < P; ++r) {
    if (lat[r] == 0) continue;
    const int d = rank_dev[r];
    done[r] = std::max(start[r], ready[r] + lat[r] + std::max(dev_out[size_t(d)], dev_in[size_t(d)]) + shm[r]);
  }
  return done;
}

}  // namespace tt
