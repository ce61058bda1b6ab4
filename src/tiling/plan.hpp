// The partition of a run of spatial layers [first, last) over an R x C grid of tiles:
// for every tile and layer its owned, forward, input and delta boxes, and the halo
// pieces exchanged at group boundaries. Pure geometry; see docs/tiling.md.
//
// Per tile t and layer l (boxes of layer l's output map unless said otherwise):
//   own      cells t owns: weight gradients and batch-norm sums count only these
//   delta    cells where t needs dL/d(output) in backward (grows towards a group's end)
//   fwd      cells t computes in forward = own ∪ delta ∪ what layer l+1 reads
//            (computing the delta region too makes every forward value backward needs local),
//            except for a convolution ending a group before the segment's last layer: there
//            fwd = own, and backward exchanges the delta after batch-norm/activation instead.
//            With BackwardFeatures::Exchange (the paper's way): own ∪ what layer l+1 reads
//   held     cells of the forward values backward reads (the convolution output y before
//            batch-norm/activation, or the max-pool winners) = fwd ∪ those backward reads:
//            fwd when recomputing; with Exchange, the cells outside fwd come from their owners
//   in       input cells forward reads = window_in(fwd) (layer l's input map)
//   delta_in input cells where t produces dL/d(input): delta of l-1 inside a group, own
//            input cells at a group's start (they are then exchanged)
#pragma once
#include <string>
#include <vector>

#include "layers/box.hpp"
#include "model/net_spec.hpp"

namespace tt {

struct TileLayer {
  Box own, fwd, in, delta, delta_in, held;
};

// Cells `box` of a map go from tile `from` (its owned cells) to tile `to`.
struct Piece {
  int from = 0, to = 0;
  Box box;
};

// Where backward finds the forward values it reads on its delta boxes, which grow towards a
// group's end while forward's boxes grow towards its start (docs/tiling.md):
//   Recompute  forward computes them too (redundant compute, no messages)
//   Exchange   forward computes only what forward needs; at the start of each group's
//              backward, the tiles swap the missing values (the paper's way)
enum class BackwardFeatures { Recompute, Exchange };
const char* backward_features_name(BackwardFeatures f);
BackwardFeatures parse_backward_features(const std::string& s);  // throws naming the flag

struct Plan {
  int rows = 1, cols = 1;
  BackwardFeatures features = BackwardFeatures::Recompute;
  int first = 0, last = 0;                    // layers [first, last)
  std::vector<int> group_starts;              // ascending, group_starts[0] == first
  std::vector<std::vector<TileLayer>> tiles;  // [tile][layer - first]
  std::vector<Box> own_input;                 // per tile: owned cells of layer first's input map
  // Per layer l (index l - first), non-empty only at group starts after the first:
  std::vector<std::vector<Piece>> fwd_halo;  // layer l's input map, to fill `in`
  std::vector<std::vector<Piece>> bwd_halo;  // layer l-1's output delta, to fill `delta`
  // Per layer l, with Exchange: layer l's y (or max-pool winners), to fill `held` outside
  // `fwd`; exchanged at the start of the backward of l's group.
  std::vector<std::vector<Piece>> feature_halo;

  int tiles_count() const { return rows * cols; }
  bool group_start(int l) const;
  int group_end(int l) const;  // the first layer after l's group
  const TileLayer& at(int tile, int l) const { return tiles[tile][l - first]; }
};

// Parses "none" (a group per layer), "all" (one group) or "0,4,8" (absolute layer
// indices; the first must be `first`). Throws on anything outside [first, last).
std::vector<int> parse_groups(const std::string& spec, int first, int last);

// How the grid divides the map: a weight per row and per column of tiles (empty: all
// alike). A tile's rows x columns come out proportional to its row's and column's weights
// (rounded, and aligned through the strides like an even split): a device twice as fast
// gets about twice the cells.
struct TileSplit {
  std::vector<double> rows, cols;
};
// "2,1" → {2, 1}; throws naming `what` unless there are `n` positive numbers.
std::vector<double> parse_weights(const std::string& spec, int n, const char* what);

struct TilingOptions {
  TileSplit split;
  BackwardFeatures features = BackwardFeatures::Recompute;
};

// The most tiles a grid may have: far beyond any cluster, far below what would overflow.
constexpr int64_t kMaxTiles = 1 << 16;

// Throws when a tile would be empty, a layer in range is not spatial, etc.
Plan make_plan(const NetSpec& net, int rows, int cols, int first, int last, const std::vector<int>& group_starts,
               const TilingOptions& opt = {});

// Layer l's batch-norm/activation backward runs on owned cells before the halo exchange:
// a convolution ending a group before the segment's last layer computes only its owned
// cells in forward, and the exchange then carries dL/d(pre-activation).
bool pointwise_before_exchange(const NetSpec& net, const Plan& plan, int l);
// Backward reads layer l's forward values on its delta box: max-pool winners, or y of a
// convolution with batch-norm/activation whose backward does not run before the exchange.
bool backward_reads_features(const NetSpec& net, const Plan& plan, int l);

// Default and validated cut: how many leading layers are tiled.
int resolve_cut(const NetSpec& net, int requested /* -1 = default */);

struct PlanStats {
  double flops_untiled = 0, flops_tiled = 0;      // forward FLOPs per sample, summed over tiles
  double halo_bytes_fwd = 0, halo_bytes_bwd = 0;  // per sample, between different tiles
  double halo_bytes_features = 0;                 // y as floats, max-pool winners as bytes
  std::vector<double> tile_bytes;                 // activation + delta memory per tile, per sample
};
PlanStats plan_stats(const NetSpec& net, const Plan& plan);

}  // namespace tt
