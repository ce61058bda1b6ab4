#include "engine/schedule.hpp"

#include "engine/memory_plan.hpp"
#include "layers/conv.hpp"
#include "tiling/tiled_traits.hpp"

namespace tt {

const char* step_name(StepKind k) {
  switch (k) {
    case StepKind::ScatterInput:
      return "scatter input";
    case StepKind::PostHalo:
      return "post halo";
    case StepKind::FetchWeights:
      return "fetch weights";
    case StepKind::Forward:
      return "forward";
    case StepKind::Pointwise:
      return "batch-norm/activation";
    case StepKind::ScatterDelta:
      return "scatter delta";
    case StepKind::ExchangeFeatures:
      return "exchange features";
    case StepKind::PointwiseBackward:
      return "batch-norm/activation backward";
    case StepKind::Backward:
      return "backward";
    case StepKind::ReduceGrad:
      return "reduce gradient";
    case StepKind::SumDeltas:
      return "sum deltas";
    case StepKind::BackwardHalo:
      return "backward halo";
    case StepKind::GatherInputDelta:
      return "gather input delta";
  }
  return "?";
}

namespace {

bool features_in_group(const Plan& plan, int end) {
  for (int l = end;; --l) {
    if (!plan.feature_halo[size_t(l - plan.first)].empty()) return true;
    if (plan.group_start(l)) return false;
  }
}

}  // namespace

Schedule compile_schedule(const NetSpec& net, const Plan& plan, const ScheduleOptions& opt) {
  Schedule s;
  const int first = plan.first, last = plan.last;
  auto weights = [&](int l) { return tiled_traits(net.layers[size_t(l)]).weights; };
  auto fetch = [&](std::vector<Step>& v, int l, int uses, int charge) {
    if ((opt.sharded || opt.fetch_weights) && weights(l))
      v.push_back({StepKind::FetchWeights, l, charge, false, false, false, uses});
  };

  std::vector<Step>& f = s.forward;
  f.push_back({StepKind::ScatterInput, -1, first});
  for (int l = first; l < last; ++l) {
    bool halo = false;
    for (int e : plan.node_edges[size_t(l - first)])
      if (plan.crosses_groups(e)) {
        f.push_back({StepKind::PostHalo, l, l, false, false, false, 0, e});
        halo = true;
      }
    fetch(f, l, WeightCache::kForward, l);
    f.push_back({StepKind::Forward, l, l, halo});
    if (has_pointwise(net.layers[size_t(l)])) f.push_back({StepKind::Pointwise, l, l});
  }

  std::vector<Step>& b = s.backward;
  b.push_back({StepKind::ScatterDelta, -1, -1});
  // Activation and batch-norm backward of layer l, charged to layer `charge`.
  auto pointwise_backward = [&](int l, bool owned_only, int charge) {
    // The fetch is a collective: every process makes it when any tile recomputes, whichever
    // tiles it runs itself.
    if (opt.recompute && recomputed_on_any_tile(net, plan, l)) fetch(b, l, WeightCache::kForward, charge);
    b.push_back({StepKind::PointwiseBackward, l, charge, false, owned_only});
  };
  for (int l = last - 1; l >= first; --l) {
    const bool input_delta = l > first || opt.need_input_delta;
    if (l + 1 == plan.group_end(l) && features_in_group(plan, l)) b.push_back({StepKind::ExchangeFeatures, l, l});
    if (has_pointwise(net.layers[size_t(l)]) && !pointwise_before_exchange(net, plan, l))
      pointwise_backward(l, false, l);
    // Backward-data of every tile first: then the delta is free to be reshaped for
    // backward-weights, and (sharded) the staged weights are free to hold its output.
    if (input_delta) fetch(b, l, WeightCache::kBackwardData, l);
    b.push_back({StepKind::Backward, l, l, false, false, input_delta});
    if (opt.sharded && weights(l)) b.push_back({StepKind::ReduceGrad, l, l});
    if (l > first && plan.read_by_side_edge(l - 1)) b.push_back({StepKind::SumDeltas, l - 1, l});
    if (l > first && pointwise_before_exchange(net, plan, l - 1)) pointwise_backward(l - 1, true, l);
    if (l > first && plan.group_start(l)) b.push_back({StepKind::BackwardHalo, l, l});
  }
  if (opt.need_input_delta) b.push_back({StepKind::GatherInputDelta, -1, -1});
  return s;
}

std::string describe(const Step& s, const NetSpec& net, const Plan& plan) {
  std::string d = step_name(s.kind);
  if (s.layer >= 0) d += " layer " + std::to_string(s.layer) + " " + net.layers[size_t(s.layer)].type_name();
  if (s.kind == StepKind::PostHalo)
    d += " (its input from layer " + std::to_string(plan.edges[size_t(s.edge)].from) + ")";
  if (s.halo_in_flight) d += " (waits for the halo; with overlap, interiors first)";
  if (s.owned_only) d += " (owned cells)";
  if (s.kind == StepKind::Backward && s.input_delta) d += " (+input delta)";
  if (s.kind == StepKind::FetchWeights) d += s.uses == WeightCache::kForward ? " for forward" : " for backward-data";
  return d;
}

}  // namespace tt
