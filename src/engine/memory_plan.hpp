// The memory plan of a Segment: for every tile this process runs, which buffers exist,
// how large they are and what each layer's maps live in, forward and backward. It depends
// only on the net, the Plan, the batch, the layouts, `recompute`, `need_input_delta` and
// which tiles are local: no allocation, no oneDNN. Read by the Segment, which allocates
// and wires its buffers from it (its forward and backward read the same decisions), and
// by a cost model, which predicts each rank's memory from it without allocating.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/net_spec.hpp"
#include "tiling/plan.hpp"

namespace tt {

// Where one map (input, convolution output y, layer output z) of a layer of a tile lives.
enum class MapStore : uint8_t {
  None,        // no such map (y of a max-pool)
  Own,         // a buffer of its own, kept from forward to backward
  PrevOutput,  // in: the previous layer's z itself (it holds exactly the cells needed)
  Y,           // z: the convolution output itself (no batch-norm/activation)
  NextInput,   // z: the next layer's input buffer (a group start: the halo exchange completes it)
  Transient,   // z: delta buffer `home`, dead before backward; y when recomputed: z's
               // buffer in forward (batch-norm/activation in place), BackwardStep::y in backward
};

struct LayerMemory {  // one layer i = l - first of one tile
  MapStore in = MapStore::Own, y = MapStore::None, z = MapStore::Transient;
  bool recompute = false;         // y is not kept but recomputed in backward
  bool weights_on_delta = false;  // backward-weights on the delta box (weights_on_delta_box)
  int home = -1;                  // a transient z: the delta buffer (0 or 1) that holds it
  size_t in_floats = 0;           // box `in` of the input map
  size_t out_floats = 0;          // box `fwd` of the output map (z; y too unless held is larger)
  size_t y_floats = 0;            // box `held` of y (the feature exchange fills it outside fwd)
  size_t argmax_bytes = 0;        // max-pool winners, one byte per output cell of `held`
  // Per input slot k >= 1 (a residual join's other inputs), index k - 1: the floats of a
  // buffer of its own on box in[k], filled by the halo exchange when the edge crosses
  // groups; 0 when it reads the producer's output in place.
  std::vector<size_t> side_in_floats;
  // The layer's output is read by a side edge (Plan::side_edge): the part of its delta the
  // far consumers produce, summed on box `delta` before its own backward.
  size_t side_delta_floats = 0;
  // At a group start whose halo comes from far tiles: the forward box split into the
  // interior computed while the halo is in flight, then the border strips (overlap_parts).
  std::vector<Box> parts;
};

struct BackwardStep {        // one layer of one tile in backward: the delta buffer (0 or 1) that holds
  int out = 0;               // dL/d(output) on its delta box, when the layer's backward starts
  int y = -1;                // the recomputed convolution output (-1: kept from forward)
  int in = 1;                // dL/d(input) as backward-data writes it, on in_box
  Box in_box;                // bwd_data_box
  bool keep_in_box = false;  // used on in_box as it is; else copied into `out` on delta_in
  int halo = -1;             // at a group start: dL/d(output of the layer before), exchanged
  // A max-pool at a group start writes its owned input cells straight into the halo buffer
  // (halo == in), which the exchange then completes: no copy of the tile's own cells.
  bool into_halo = false;
};

struct TileMemoryPlan {             // one tile's buffers; empty for a tile another process runs
  std::vector<LayerMemory> layers;  // per layer i = l - first
  std::vector<BackwardStep> bwd;    // per layer: which delta buffer holds what
  size_t buf[2] = {0, 0};           // floats of the two delta buffers (also forward scratch)
  size_t map_bytes() const;         // own buffers (in, y, z kept) + max-pool winners
  size_t delta_bytes() const;       // the two delta buffers + the side deltas
};

struct SegmentMemoryPlan {
  std::vector<int> in_cb, out_cb;     // per layer: layouts of its input and output maps
  std::vector<TileMemoryPlan> tiles;  // per tile of the Plan
  size_t crop_floats = 0;             // the crop buffer for backward-weights, shared by local tiles
  size_t stage_floats = 0;            // a part's input crop and output (overlap), shared likewise
  // What Segment::memory_use() reports as maps and deltas (the crop buffer counts as deltas).
  size_t maps_bytes = 0, deltas_bytes = 0;
};

// `in_cb`: layout of the segment's input map (1 = plain NCHW, or `block`); `block`: the
// channel block of every convolution output (ctx.config.block); `local_tiles`: the tiles
// this process runs, ascending; `far[t]`: tile t's halo pieces are worth overlapping with
// compute (empty: none are).
SegmentMemoryPlan plan_segment_memory(const NetSpec& net, const Plan& plan, int batch, int in_cb, int block,
                                      bool recompute, bool need_input_delta, const std::vector<int>& local_tiles,
                                      const std::vector<bool>& far = {});

// The decisions the plan is made of, which forward and backward follow too:

// Layer l's input is the previous layer's output itself: it holds exactly the cells
// needed (and, at a group start, no neighbour contributes).
bool input_aliases(const NetSpec& net, const Plan& plan, int t, int l);
// At a group start l + 1 the next input is a buffer of its own that the halo exchange
// completes: layer l's batch-norm/activation write straight into it (no copy of own cells).
bool output_into_next_input(const NetSpec& net, const Plan& plan, int t, int l);
// Layer l + 1 reads layer l's output of tile t in place (input_aliases) and needs it in
// backward: that output is kept from forward to backward.
bool next_reads_in_place(const NetSpec& net, const Plan& plan, int t, int l);
// With recomputation on, convolution l of tile t keeps no output for backward: its z is
// transient (y shares its buffer, batch-norm/activation in place), and no neighbour's values
// complete y after forward (then it is kept).
bool recomputed(const NetSpec& net, const Plan& plan, int t, int l);
// Some tile of the plan recomputes convolution l (whichever process runs it).
bool recomputed_on_any_tile(const NetSpec& net, const Plan& plan, int l);
// Backward-weights can run on the whole delta box (outside the owned cells zeroed).
bool weights_on_delta_box(const NetSpec& net, const Plan& plan, int t, int l);
// No local tile needs a neighbour's delta at group start l (a 1x1 grid).
bool bwd_exchange_local(const Plan& plan, int l, const std::vector<int>& local_tiles);
// The box backward-data of layer l writes on tile t: for a convolution only the cells of
// the input delta the tile needs (delta_in, within reach of its delta box), not every
// cell its delta box reaches (window_in), which would compute a halo's partial sums only
// to throw them away; for max-pool window_in.
Box bwd_data_box(const NetSpec& net, const Plan& plan, int t, int l);
// The input delta of layer l on tile t is used on the box backward-data writes (`in`,
// bwd_data_box).
bool keep_in_box(const Plan& plan, int t, int l, const Box& in, const std::vector<int>& local_tiles);
// Tile t's forward box at group start l as [interior, border strips...]: the interior
// needs only the tile's own cells of the previous output, so it is computed while the
// halo from far tiles (far[from]) is in flight. Empty when nothing comes from a far tile
// or no output can be computed without the halo.
std::vector<Box> overlap_parts(const NetSpec& net, const Plan& plan, int t, int l, const std::vector<bool>& far);

}  // namespace tt
