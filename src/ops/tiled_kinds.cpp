// [convolutional] and [maxpool]: their cfg options, shapes and FLOPs. Their ops run tiled
// (engine/tiled_conv.cpp, engine/tiled_maxpool.cpp; after the cut as a one-tile segment).
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"

namespace tt {
namespace {

using net_detail::kMaxChannels;
using net_detail::kMaxDim;

void parse_conv(CfgReader& r, LayerSpec& l) {
  ConvParams& c = l.params.emplace<ConvParams>();
  c.filters = r.count("filters", 1, kMaxChannels, "channels a device can hold");
  c.win.size = r.count("size", 1, kMaxDim, "a window a device can hold");
  c.win.stride = r.count("stride", 1, kMaxDim, "the largest map's side");
  int padding = r.integer("padding", 0);
  if (r.integer("pad", 0)) padding = c.win.size / 2;
  if (padding < 0 || padding >= c.win.size)
    fail(r.where(r.line_of(r.has("padding") ? "padding" : "pad")), ": impossible padding ", padding, " for size ",
         c.win.size, " (needs 0 <= padding < size)");
  c.win.pad = padding;
  c.pad_total = 2 * padding;
  c.batch_normalize = r.integer("batch_normalize", 0) != 0;
  c.act = r.act("activation");
  c.groups = r.count("groups", 1, kMaxChannels, "channels a device can hold");
  if (c.filters % c.groups)
    fail(r.where(r.line_of("groups")), ": groups=", c.groups, " does not divide filters=", c.filters,
         " (each group computes filters/groups outputs)");
  if (r.integer("binary", 0) || r.integer("xnor", 0))
    fail(r.where(r.line()), ": binary/xnor convolution is not supported");
  r.reject_unused({"flipped", "dot"});
}

void parse_maxpool(CfgReader& r, LayerSpec& l) {
  MaxPoolParams& p = l.params.emplace<MaxPoolParams>();
  p.win.size = r.integer("size", 1);
  r.positive("size", p.win.size);
  if (p.win.size > 15)  // the engine records winners as a byte position in the window
    fail(r.where(r.line_of("size")), ": maxpool size ", p.win.size, " is larger than the supported 15");
  p.win.stride = r.count("stride", 1, kMaxDim, "the largest map's side");
  p.pad_total = r.integer("padding", p.win.size - 1);
  if (p.pad_total < 0 || p.pad_total / 2 >= p.win.size)
    fail(r.where(r.line_of("padding")), ": impossible maxpool padding ", p.pad_total, " for size ", p.win.size);
  p.win.pad = p.pad_total / 2;
  r.reject_unused({});
}

// Output length of a window op along one axis, Darknet's formulas folded into one:
// out = (in + pad_l + pad_r - size) / stride + 1.
int out_len(int in, int size, int stride, int pad_total) { return (in + pad_total - size) / stride + 1; }

void window_shape(LayerSpec& l, const ShapeCheck& check, int channels) {
  const Shape& cur = l.in;
  const Window& win = l.window();
  const int pad_total = l.pad_total();
  const int oh = out_len(cur.h, win.size, win.stride, pad_total);
  const int ow = out_len(cur.w, win.size, win.stride, pad_total);
  if (cur.h + pad_total < win.size || cur.w + pad_total < win.size || oh < 1 || ow < 1)
    fail(check.where(), ": input ", cur.h, "x", cur.w, " is too small for a ", win.size, "x", win.size,
         " window (padding ", pad_total, " in total): the input is too small for the net");
  l.out = check.checked(channels, oh, ow);
}
void conv_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const ConvParams& c = l.conv();
  if (l.in.c % c.groups)
    fail(check.where(), ": groups=", c.groups, " does not divide the ", l.in.c,
         " input channels (each group reads channels/groups of them)");
  window_shape(l, check, c.filters);
}
void maxpool_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) { window_shape(l, check, l.in.c); }

double conv_flops(const LayerSpec& l) {
  return 2.0 * l.out.size() * (l.in.c / l.conv().groups) * l.window().size * l.window().size;
}
double maxpool_flops(const LayerSpec& l) { return double(l.out.size()) * l.window().size * l.window().size; }

}  // namespace

extern const OpKind kConvKind{"convolutional", "conv", parse_conv, conv_shape, conv_flops};
extern const OpKind kMaxPoolKind{"maxpool", "max", parse_maxpool, maxpool_shape, maxpool_flops};

}  // namespace tt
