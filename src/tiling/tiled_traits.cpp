#include "tiling/tiled_traits.hpp"

#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {

namespace {
// Only what differs from TiledTraits' defaults.
constexpr TiledTraits kConv{
    .weights = true, .pre_activation = true, .blocked_output = true, .backward_reads_input = true};
constexpr TiledTraits kMaxPool{.backward_reads_winners = true,
                               .backward_scatters = true,
                               .parts_in_place = true,
                               .reads_pre_activation = true,
                               .feature_bytes = 1};
// A residual join: the sum of its inputs, then an activation whose derivative backward
// takes from the output (none when linear).
constexpr TiledTraits kShortcut{};
constexpr TiledTraits kShortcutActivated{.backward_reads_output = true};
// A concatenation: copies in forward, channel slices of its delta in backward.
constexpr TiledTraits kRoute{};
}  // namespace

const TiledTraits& tiled_traits(const LayerSpec& s) {
  if (s.is(kConvKind)) return kConv;
  if (s.is(kMaxPoolKind)) return kMaxPool;
  if (s.spatial() && s.is(kShortcutKind)) return s.activation() == Act::Linear ? kShortcut : kShortcutActivated;
  if (s.spatial() && s.is(kRouteKind)) return kRoute;
  fail("internal: [", s.type_name(), "] layer ", s.index, " does not run tiled");
}

bool has_pointwise(const LayerSpec& s) {
  return tiled_traits(s).pre_activation && (s.batch_normalize() || s.activation() != Act::Linear);
}

}  // namespace tt
