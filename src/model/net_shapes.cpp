// A net's shapes: every layer's input and output resolved from the input size and
// validated against its layer and against what a device can hold.
#include <algorithm>
#include <string>

#include "model/net_limits.hpp"
#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {
namespace net_detail {
void resolve_shapes(NetSpec& net) {
  if (net.height > kMaxDim || net.width > kMaxDim || net.channels > kMaxChannels)
    fail(net.path, ": input ", net.channels, "x", net.height, "x", net.width,
         " is larger than a device can hold (at most ", kMaxDim, " rows and columns, ", kMaxChannels, " channels)");
  Shape cur = net.input();
  int64_t params = 0;
  for (auto& l : net.layers) {
    if (!l.inputs.empty()) cur = net.layers[size_t(l.inputs[0])].out;
    const ShapeCheck check(net, l);
    l.in = cur;
    l.kind->shape(net, l, check);
    // Weights: computed in floating point (filters x channels x size^2 can pass 2^63).
    const double weights =
        l.is(kConvKind) ? double(l.conv().filters) * (l.in.c / l.conv().groups) * l.window().size * l.window().size
        : l.is(kConnectedKind) ? double(l.connected().outputs) * double(l.in.size())
        : l.is(kLocalKind)
            ? double(l.local().filters) * l.in.c * l.local().win.size * l.local().win.size * double(l.out.h) * l.out.w
            : 0;
    if (weights > double(kMaxElements))
      fail(check.where(), ": ", num_text(weights), " weights, more than a device can hold (at most ", kMaxElements,
           " per layer)");
    params += l.param_count();
    if (params > kMaxElements)
      fail(check.where(), ": the net has ", params, " parameters up to here, more than a device can hold (at most ",
           kMaxElements, ")");
    cur = l.out;
  }
}

}  // namespace net_detail

void resize_net(NetSpec& net, int height, int width) {
  if (height <= 0 || width <= 0) fail("input size must be positive, got ", height, "x", width);
  using net_detail::kMaxDim;
  if (height > kMaxDim || width > kMaxDim)
    fail("input size ", height, "x", width, " is larger than a device can hold (at most ", kMaxDim, "x", kMaxDim, ")");
  // The classifier crop's sizes keep their ratio to the width (Darknet's min_ratio, max_ratio).
  const double ratio = double(width) / net.width;
  net.min_crop = std::max(1, int(net.min_crop * ratio));
  net.max_crop = std::max(net.min_crop, int(net.max_crop * ratio));
  net.height = height;
  net.width = width;
  net_detail::resolve_shapes(net);
}

}  // namespace tt
