// Which op types there are: one line per type, its kind (cfg section, options, shape,
// FLOPs: model/op_kind.hpp) and, for a type that runs after the cut, its op.
#include <algorithm>
#include <iterator>

#include "model/op_kind.hpp"
#include "ops/op.hpp"
#include "util/error.hpp"

namespace tt {

using OpFactory = std::unique_ptr<Op> (*)(const NetSpec&, const LayerSpec&);
extern const OpKind kReorgKind, kUpsampleKind, kAvgPoolKind, kDropoutKind;
std::unique_ptr<Op> make_route_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_reorg_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_upsample_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_detector_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_avgpool_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_connected_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_dropout_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_softmax_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_cost_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_shortcut_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_local_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_detection_op(const NetSpec&, const LayerSpec&);
std::unique_ptr<Op> make_crop_op(const NetSpec&, const LayerSpec&);

namespace {

struct Registration {
  const OpKind* kind;
  OpFactory make;  // null: the type runs only tiled (engine/segment.hpp)
};

const Registration kOps[] = {
    {&kConvKind, nullptr},
    {&kMaxPoolKind, nullptr},
    {&kRouteKind, make_route_op},
    {&kReorgKind, make_reorg_op},
    {&kUpsampleKind, make_upsample_op},
    {&kRegionKind, make_detector_op},
    {&kYoloKind, make_detector_op},
    {&kAvgPoolKind, make_avgpool_op},
    {&kConnectedKind, make_connected_op},
    {&kDropoutKind, make_dropout_op},
    {&kSoftmaxKind, make_softmax_op},
    {&kCostKind, make_cost_op},
    {&kShortcutKind, make_shortcut_op},
    {&kLocalKind, make_local_op},
    {&kDetectionKind, make_detection_op},
    {&kCropKind, make_crop_op},
};

const Registration* find(const OpKind* k) {
  const auto it = std::find_if(std::begin(kOps), std::end(kOps), [k](const Registration& r) { return r.kind == k; });
  return it == std::end(kOps) ? nullptr : it;
}

}  // namespace

const OpKind* find_op_kind(const std::string& section) {
  for (const Registration& r : kOps)
    if (section == r.kind->name || (r.kind->alias && section == r.kind->alias)) return r.kind;
  return nullptr;
}

std::vector<const OpKind*> op_kinds() {
  std::vector<const OpKind*> kinds;
  for (const Registration& r : kOps) kinds.push_back(r.kind);
  return kinds;
}

bool has_op(const OpKind& k) {
  const Registration* r = find(&k);
  return r && r->make;
}

std::unique_ptr<Op> make_op(const NetSpec& net, const LayerSpec& s) {
  const Registration* r = find(s.kind);
  if (!r || !r->make)
    fail("internal: [", s.type_name(), "] layer ", s.index, " has no op (it runs in a tiled segment)");
  return r->make(net, s);
}

}  // namespace tt
