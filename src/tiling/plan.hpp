// The partition of the tiled nodes [first, last) of the network graph over an R x C grid of
// tiles: for every tile and node its owned, forward and delta boxes, for every tile and
// input edge the boxes it reads and produces deltas on, and per edge the halo pieces
// exchanged where the edge crosses a group boundary. Pure geometry; see docs/tiling.md.
//
// Per tile t and node l (boxes of l's output map unless said otherwise):
//   own      cells t owns: weight gradients and batch-norm sums count only these
//   delta    cells where t needs dL/d(output) in backward (grows towards a group's end)
//   fwd      cells t computes in forward = own ∪ delta ∪ what l's consumers in its group read
//            (computing the delta region too makes every forward value backward needs local),
//            except for a convolution whose consumers are all in later groups: there
//            fwd = own, and backward exchanges the delta after batch-norm/activation instead.
//            With BackwardFeatures::Exchange (the paper's way): own ∪ what the consumers read
//   held     cells of the forward values backward reads (the convolution output y before
//            batch-norm/activation, or the max-pool winners) = fwd ∪ those backward reads:
//            fwd when recomputing; with Exchange, the cells outside fwd come from their owners
// Per tile t, node l and input edge k (boxes of the map that edge reads):
//   in[k]       input cells forward reads = window_in(fwd)
//   delta_in[k] input cells where t produces dL/d(input): the producer's delta when it is in
//               l's group, its own cells otherwise (they are then exchanged)
// A value read by several nodes (a fork) needs its forward boxes to cover what each reads,
// and its delta is the sum of what each consumer produces on it.
#pragma once
#include <string>
#include <vector>

#include "layers/box.hpp"
#include "model/net_spec.hpp"

namespace tt {

struct TileLayer {
  Box own, fwd, delta, held;
  std::vector<Box> in, delta_in;  // per input edge, in the node's input order
};

// The map a node reads: another tiled node's output, or the segment's input (the net's
// input, or the output of the node before `first`), which only node `first` reads.
constexpr int kSegmentInput = -1;

// An input edge of a tiled node: node `to` reads, as its input number `slot`, the output of
// node `from` (or kSegmentInput).
struct PlanEdge {
  int from = kSegmentInput, to = 0, slot = 0;
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
  int first = 0, last = 0;                    // nodes [first, last), in topological order
  std::vector<int> group_starts;              // ascending, group_starts[0] == first
  std::vector<std::vector<TileLayer>> tiles;  // [tile][node - first]
  std::vector<Box> own_input;                 // per tile: owned cells of the segment's input map
  std::vector<PlanEdge> edges;                // the tiled nodes' input edges, by node then slot
  std::vector<std::vector<int>> node_edges;   // [node - first]: its input edges, in slot order
  std::vector<std::vector<int>> consumers;    // [node - first]: the edges reading its output
  // Per edge, non-empty only where the edge crosses a group boundary:
  std::vector<std::vector<Piece>> fwd_halo;  // the producer's output, to fill the reader's `in`
  std::vector<std::vector<Piece>> bwd_halo;  // the reader's input delta on the producer's
                                             // owned cells, to fill the producer's `delta`
  // Per node l, with Exchange: l's y (or max-pool winners), to fill `held` outside `fwd`;
  // exchanged at the start of the backward of l's group.
  std::vector<std::vector<Piece>> feature_halo;

  int tiles_count() const { return rows * cols; }
  bool group_start(int l) const;
  int group_end(int l) const;  // the first node after l's group
  int group_of(int l) const;   // index into group_starts
  const TileLayer& at(int tile, int l) const { return tiles[tile][l - first]; }
  int edge(int l, int slot = 0) const { return node_edges[size_t(l - first)][size_t(slot)]; }
  // Whether edge e carries a value from one group into a later one (halos travel there).
  bool crosses_groups(int e) const;
  // Edge e is not a node's first input read from the node just before it (a chain's edge):
  // a residual join's second input. The engine runs the chains and adds these.
  bool side_edge(int e) const;
  // Node l's output is read by a side edge (it is kept until then; its delta has a part
  // that arrives from far consumers).
  bool read_by_side_edge(int l) const;
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

// Throws when a tile would be empty, a node in range is not spatial or reads a map from
// before the segment other than the segment's input, etc.
Plan make_plan(const NetSpec& net, int rows, int cols, int first, int last, const std::vector<int>& group_starts,
               const TilingOptions& opt = {});

// Node l's batch-norm/activation backward runs on owned cells before the halo exchange:
// a convolution whose consumers are all in later groups computes only its owned cells in
// forward, and the exchange then carries dL/d(pre-activation).
bool pointwise_before_exchange(const NetSpec& net, const Plan& plan, int l);
// Backward reads layer l's forward values on its delta box: max-pool winners, or y of a
// convolution with batch-norm/activation whose backward does not run before the exchange.
bool backward_reads_features(const NetSpec& net, const Plan& plan, int l);

// Default and validated cut: how many leading layers are tiled. The default goes as far as
// the layers can be tiled (NetSpec::max_cut), but stops before maps too small for the grid
// (a rows x cols grid needs that many rows and columns at the last tiled layer): deep
// stages of a residual network at a small input size stay untiled instead of failing.
int resolve_cut(const NetSpec& net, int requested /* -1 = default */, int rows = 1, int cols = 1);

struct PlanStats {
  double flops_untiled = 0, flops_tiled = 0;      // forward FLOPs per sample, summed over tiles
  double halo_bytes_fwd = 0, halo_bytes_bwd = 0;  // per sample, between different tiles
  double halo_bytes_features = 0;                 // y as floats, max-pool winners as bytes
  std::vector<double> tile_bytes;                 // activation + delta memory per tile, per sample
};
PlanStats plan_stats(const NetSpec& net, const Plan& plan);

}  // namespace tt
