// One training step of a tiled segment, compiled once into a list of steps: which
// layer's work runs when, where the processes exchange halos, batch-norm sums and
// sharded weights. The Segment executes the list and the planner's cost model prices the
// same list, so the order of work is written down once. The list is the same on every
// process (its collectives must match); what a step does to each tile comes from the
// memory plan (memory_plan.hpp).
#pragma once
#include <string>
#include <vector>

#include "model/net_spec.hpp"
#include "tiling/plan.hpp"

namespace tt {

enum class StepKind : unsigned char {
  ScatterInput,       // the root's whole input map -> every tile's input box
  PostHalo,           // an input edge that crosses groups: the producer's owned cells posted to the
                      // readers' input boxes, not waited for
  FetchWeights,       // sharded weights: the layer's weights all-gathered and formatted for `uses`
  Forward,            // the layer's convolution or max-pool on every tile (halo in flight:
                      // interiors first, then the wait, then the border strips)
  Pointwise,          // batch-norm (its sums over tiles) and activation
  ScatterDelta,       // the root's whole output delta -> every tile's delta box
  ExchangeFeatures,   // group end: forward values the group's backward reads outside forward boxes
  PointwiseBackward,  // activation and batch-norm backward (the convolution recomputed where not kept)
  Backward,           // backward-data into the input delta, then backward-weights (a join: its
                      // other inputs' deltas added into their side deltas)
  SumDeltas,          // a value read by side edges: their part of its delta (exchanged where they
                      // cross groups) added into the delta its next layer produced
  ReduceGrad,         // sharded weights: the layer's weight gradient reduce-scattered
  BackwardHalo,       // group start: the input delta's pieces from neighbours, added
  GatherInputDelta,   // every tile's owned input delta -> the root's whole map
};
const char* step_name(StepKind k);

struct Step {
  StepKind kind;
  int layer = -1;               // the net layer it acts on (-1: none)
  int charge = -1;              // the layer whose time it counts to in the planner's per-layer split
  bool halo_in_flight = false;  // Forward: its input's halo was posted (PostHalo) and is waited for here
  bool owned_only = false;      // PointwiseBackward: on the owned cells only (before a group start's exchange)
  bool input_delta = false;     // Backward: computes the input delta (not for the first layer unless asked)
  int uses = 0;                 // FetchWeights: WeightCache::kForward / kBackwardData
  int edge = -1;                // PostHalo: the plan's edge
};

struct Schedule {
  std::vector<Step> forward, backward;
};

struct ScheduleOptions {
  bool fetch_weights = false;  // weights formatted (sharded: gathered first) just before each use
  bool sharded = false;        // --low-memory: weights fetched before use, gradients reduce-scattered after
  bool recompute = false;         // convolutions whose output is not kept are recomputed in backward
  bool need_input_delta = false;  // backward ends with the input delta gathered at the root
};

Schedule compile_schedule(const NetSpec& net, const Plan& plan, const ScheduleOptions& opt);

// "backward layer 3 (+input delta)", for `plan --schedule` and test messages.
std::string describe(const Step& s, const NetSpec& net, const Plan& plan);

}  // namespace tt
