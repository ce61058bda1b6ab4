// A net's shapes: every layer's input and output resolved from the input size and
// validated against its layer and against what a device can hold.
#include <string>

#include "model/net_limits.hpp"
#include "model/net_spec.hpp"
#include "util/error.hpp"

namespace tt {
namespace net_detail {
namespace {

// Output length of a window op along one axis, Darknet's formulas folded into one:
// out = (in + pad_l + pad_r - size) / stride + 1.
int out_len(int in, int size, int stride, int pad_total) { return (in + pad_total - size) / stride + 1; }

}  // namespace

void resolve_shapes(NetSpec& net) {
  if (net.height > kMaxDim || net.width > kMaxDim || net.channels > kMaxChannels)
    fail(net.path, ": input ", net.channels, "x", net.height, "x", net.width,
         " is larger than a device can hold (at most ", kMaxDim, " rows and columns, ", kMaxChannels, " channels)");
  Shape cur = net.input();
  int64_t params = 0;
  for (auto& l : net.layers) {
    if (l.type == LayerType::Route) cur = net.layers[size_t(l.inputs[0])].out;
    auto where = [&] {
      return net.path + ":" + std::to_string(l.line) + ": [" + layer_type_name(l.type) + "] (layer " +
             std::to_string(l.index) + ")";
    };
    // A shape computed in 64 bits, refused above what a device can hold before it is stored.
    auto checked = [&](int64_t c, int64_t h, int64_t w) {
      if (h > kMaxDim || w > kMaxDim || c > kMaxChannels || c * h * w > kMaxElements)
        fail(where(), ": its output would be ", c, "x", h, "x", w, ", larger than a device can hold (at most ", kMaxDim,
             " rows and columns, ", kMaxChannels, " channels, ", kMaxElements, " values per picture)");
      return Shape{int(c), int(h), int(w)};
    };
    l.in = cur;
    switch (l.type) {
      case LayerType::Conv:
      case LayerType::MaxPool: {
        const Window& win = l.window();
        const int pad_total = l.pad_total();
        int oh = out_len(cur.h, win.size, win.stride, pad_total);
        int ow = out_len(cur.w, win.size, win.stride, pad_total);
        if (cur.h + pad_total < win.size || cur.w + pad_total < win.size || oh < 1 || ow < 1)
          fail(where(), ": input ", cur.h, "x", cur.w, " is too small for a ", win.size, "x", win.size,
               " window (padding ", pad_total, " in total): the input is too small for the net");
        l.out = checked(l.type == LayerType::Conv ? l.conv().filters : cur.c, oh, ow);
        break;
      }
      case LayerType::AvgPool:
        l.out = {cur.c, 1, 1};
        break;
      case LayerType::Connected:
        l.out = {l.connected().outputs, 1, 1};
        break;
      case LayerType::Softmax:
      case LayerType::Dropout:
      case LayerType::Cost:
        l.out = cur;
        break;
      case LayerType::Route: {  // channels concatenated: every input must have the first's height and width
        int64_t c = cur.c;
        for (size_t i = 1; i < l.inputs.size(); ++i) {
          const LayerSpec& r = net.layers[size_t(l.inputs[i])];
          if (r.out.h != cur.h || r.out.w != cur.w)
            fail(where(), ": layer ", r.index, "'s output is ", r.out.h, "x", r.out.w, " but layer ", l.inputs[0],
                 "'s is ", cur.h, "x", cur.w, ": a route concatenates maps of one size");
          c += r.out.c;
        }
        l.out = checked(c, cur.h, cur.w);
        l.in = l.out;
        break;
      }
      case LayerType::Reorg: {
        const int s = l.reorg().stride;
        // Darknet's index order (reorg_cpu) splits the channels into stride^2 parts in both
        // directions: with fewer or a remainder it would divide by zero or leave cells unset.
        if (!l.reorg().reverse && (cur.h % s != 0 || cur.w % s != 0))
          fail(where(), ": a ", cur.h, "x", cur.w, " map does not reorganise by stride ", s,
               " (height and width must be multiples of it)");
        if (int64_t(s) * s > cur.c || cur.c % (s * s) != 0)
          fail(where(), ": [reorg] needs channels divisible by stride^2 = ", int64_t(s) * s, ", got ", cur.c);
        if (l.reorg().reverse) {
          l.out = checked(cur.c / (s * s), int64_t(cur.h) * s, int64_t(cur.w) * s);
        } else {
          l.out = checked(int64_t(cur.c) * s * s, cur.h / s, cur.w / s);
        }
        break;
      }
      case LayerType::Upsample: {
        const UpsampleParams& u = l.upsample();
        if (u.reverse) {
          if (cur.h % u.stride != 0 || cur.w % u.stride != 0)
            fail(where(), ": a ", cur.h, "x", cur.w, " map does not downsample by ", u.stride);
          l.out = {cur.c, cur.h / u.stride, cur.w / u.stride};
        } else {
          l.out = checked(cur.c, int64_t(cur.h) * u.stride, int64_t(cur.w) * u.stride);
        }
        break;
      }
      case LayerType::Region:
      case LayerType::Yolo: {
        const DetectorSpec& d = l.det();
        const int64_t per_box = int64_t(d.coords) + 1 + d.classes;
        const int64_t boxes = d.boxes_per_cell(l.type == LayerType::Yolo);
        if (cur.c != boxes * per_box)
          fail(where(), ": its input has ", cur.c, " channels but ", boxes, " boxes per cell x (", d.coords,
               " coords + 1 + ", d.classes, " classes) = ", boxes * per_box,
               " are needed (the convolution before it needs filters=", boxes * per_box, ")");
        l.out = cur;
        break;
      }
    }
    // Weights: computed in floating point (filters x channels x size^2 can pass 2^63).
    const double weights = l.type == LayerType::Conv
                               ? double(l.conv().filters) * l.in.c * l.window().size * l.window().size
                           : l.type == LayerType::Connected ? double(l.connected().outputs) * double(l.in.size())
                                                            : 0;
    if (weights > double(kMaxElements))
      fail(where(), ": ", num_text(weights), " weights, more than a device can hold (at most ", kMaxElements,
           " per layer)");
    params += l.param_count();
    if (params > kMaxElements)
      fail(where(), ": the net has ", params, " parameters up to here, more than a device can hold (at most ",
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
  net.height = height;
  net.width = width;
  net_detail::resolve_shapes(net);
}

}  // namespace tt
