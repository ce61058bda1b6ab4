// Which op runs each layer type: one line per op.
#include <algorithm>
#include <iterator>

#include "ops/op.hpp"
#include "util/error.hpp"

namespace tt {

using OpFactory = std::unique_ptr<Op> (*)(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_route_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_reorg_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_upsample_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_detector_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_avgpool_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_connected_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_dropout_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_softmax_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_cost_op(const NetSpec&, const LayerSpec&);

namespace {

struct Registration {
  LayerType type;
  OpFactory make;
};

constexpr Registration kOps[] = {
    {LayerType::Route, make_route_op},       {LayerType::Reorg, make_reorg_op},
    {LayerType::Upsample, make_upsample_op}, {LayerType::Region, make_detector_op},
    {LayerType::Yolo, make_detector_op},     {LayerType::AvgPool, make_avgpool_op},
    {LayerType::Connected, make_connected_op}, {LayerType::Dropout, make_dropout_op},
    {LayerType::Softmax, make_softmax_op},   {LayerType::Cost, make_cost_op},
};

const Registration* find(LayerType t) {
  const auto it = std::find_if(std::begin(kOps), std::end(kOps), [t](const Registration& r) { return r.type == t; });
  return it == std::end(kOps) ? nullptr : it;
}

}  // namespace

bool has_op(LayerType t) { return find(t) != nullptr; }

std::unique_ptr<Op> make_op(const NetSpec& net, const LayerSpec& s) {
  const Registration* r = find(s.type);
  if (!r) fail("internal: [", layer_type_name(s.type), "] layer ", s.index, " has no op (it runs in a tiled segment)");
  return r->make(net, s);
}

}  // namespace tt
