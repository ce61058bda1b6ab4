// What a rank holds for the weights besides weights, gradient and momentum, for the cost
// model (cost_model.cpp): the kernels' formatted copies and the buffers of the gradient sum
// in tile order.
#pragma once

#include "model/net_spec.hpp"
#include "planner/device_model.hpp"
#include "planner/partition.hpp"

namespace tt {

// The kernels' copies of the weights, from the calibrated copies of the whole net kept
// formatted (DeviceModel::weight_copies_mb): `staged` (formatted just before each use into
// staging buffers every layer shares: Trainer::stage_weights, --low-memory) about the
// largest convolution's share; else the share `runs_with` of the net a rank runs with.
double kernel_copies_mb(const NetSpec& net, const DeviceModel& m, bool staged, double runs_with);

// Not sharded: the gradients of a rank's tiles after the first, and the buffers of the sum
// in tile order (TileOrder: a piece per other rank's tile, in chunks of at most 4 Mi / T
// floats; with gradient buckets, --overlap on, the whole part at once instead), in floats.
// T tiles on P ranks; `tiled`: the parameters of the tiled layers.
double tile_order_floats(const NetSpec& net, const Partition& p, int T, int P, double tiled);

}  // namespace tt
