// Trainable parameters of a net in one contiguous block (so the gradient reduction is
// one call on one buffer), with a per-layer table of slices, plus batch-norm running
// statistics. Reads and writes Darknet .weights.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/net_spec.hpp"
#include "util/sys.hpp"
#include "util/zero_pages.hpp"

namespace tt {

// Offsets into Params::values (or any buffer of the same layout) for one layer.
struct ParamSlice {
  int64_t biases = -1, scales = -1, weights = -1;  // -1: the layer has none
  int64_t n_out = 0, n_weights = 0;
};

struct Params {
  // All trainable parameters; pages never written (see `unfilled`) hold no memory.
  ZeroPageFloats values;
  std::vector<ParamSlice> slices;                // one per layer
  std::vector<std::vector<float>> rolling_mean;  // per layer, batch-normalized convs only
  std::vector<std::vector<float>> rolling_var;
  int64_t seen = 0;  // images trained on (Darknet's counter)
  // Set when these parameters live in another Params' values (a filter block's, see
  // engine/filter_blocks.hpp): `values` is then empty and the slices are offsets there.
  // (The vector, not its data: that moves if the vector is assigned a new size.)
  ZeroPageFloats* held_by = nullptr;
  // Sorted, disjoint [begin, end) ranges of `values` that init_params and load_weights
  // leave at zero, never writing their pages: the parameters this process will neither
  // run with nor update (Trainer::weights_not_kept), so they never add to its peak memory.
  std::vector<std::pair<int64_t, int64_t>> unfilled;

  float* data() { return held_by ? held_by->data() : values.data(); }
  const float* data() const { return held_by ? held_by->data() : values.data(); }

  explicit Params(const NetSpec& net);
  int64_t size() const { return int64_t(values.size()); }
};

// The parts of [at, at + n) outside `unfilled` (Params::unfilled), as [begin, end) from at.
std::vector<std::pair<int64_t, int64_t>> filled_pieces(const std::vector<std::pair<int64_t, int64_t>>& unfilled,
                                                       int64_t at, int64_t n);

// Darknet-style random init: conv weights N(0, 2/(k*k*c)), connected U(±sqrt(2/in)), local
// U(±sqrt(2/(k*k*c))),
// biases 0, scales 1, running mean 0 and variance 1. Deterministic in `seed`.
void init_params(Params& p, const NetSpec& net, uint64_t seed);
// Throws naming the file and expected vs actual bytes on a short or oversized file.
// Also refuses non-finite values, a negative batch-norm variance or image count.
void load_weights(Params& p, const NetSpec& net, const std::string& path);
// The first of the arrays a .weights file holds that has an inf or NaN, e.g.
// "layer 3 ([convolutional]) weights"; empty if every value is finite.
std::string non_finite_array(const Params& p, const NetSpec& net);
// Written atomically (temporary file + rename); refuses (throws) weights that are not all finite.
void save_weights(const Params& p, const NetSpec& net, const std::string& path);

// A .weights file written a layer at a time, for parameters that are whole one layer at a
// time (gathered from several processes): write() every layer with parameters in order,
// then commit(); until then the file is a temporary one, removed if never committed.
class WeightsWriter {
 public:
  // `what`: the file as messages name it (default: 'path').
  WeightsWriter(const std::string& path, int64_t seen, const std::string& what = "");
  // Layer l's arrays in Darknet's order; refuses (throws) values that are not finite,
  // naming the array.
  void write(const Params& p, const LayerSpec& l);
  // Throws unless every layer with parameters was written, in order.
  void commit(const NetSpec& net);

 private:
  std::string path_, what_;
  AtomicFile file_;
  int next_ = 0;  // layers before this one are written
};

}  // namespace tt
