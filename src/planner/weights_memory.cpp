#include "planner/weights_memory.hpp"

#include <algorithm>
#include <cmath>

#include "model/op_kind.hpp"

namespace tt {

double kernel_copies_mb(const NetSpec& net, const DeviceModel& m, bool staged, double runs_with) {
  if (!staged) return m.weight_copies_mb * runs_with;
  double all = 0, largest = 0;
  for (const LayerSpec& l : net.layers)
    if (l.is(kConvKind)) {
      all += double(l.weight_count());
      largest = std::max(largest, double(l.weight_count()));
    }
  return all > 0 ? m.weight_copies_mb * largest / all : 0;
}

double tile_order_floats(const NetSpec& net, const Partition& p, int T, int P, double tiled) {
  if (p.low_memory || T == 1 || (P == 1 && net.subdivisions == 1)) return 0;  // Segment::tile_grads()
  const double E = tiled;
  const double part = P == 1 ? E : std::ceil(double(net.param_count()) / P);
  const double chunk = std::min(std::max(65536., std::floor(4194304. / T)), std::min(part, E));
  const bool buckets = P > 1 && p.overlap == Overlap::On;
  return (p.tiles_per_rank - 1) * E + (buckets ? std::min(part, E) : chunk) * (T - p.tiles_per_rank);
}

}  // namespace tt
