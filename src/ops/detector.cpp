// [region] (YOLOv2) and [yolo] (YOLOv3): the detection losses (layers/detector.hpp).
#include "layers/detector.hpp"

#include "model/cfg_reader.hpp"
#include "model/class_tree.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {
namespace {

class DetectorOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override {
    detector_forward(spec, t.in[0], t.out, st.batch);
  }
  bool is_loss(bool) const override { return true; }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss* parts) const override {
    const DetectorLoss d =
        detector_delta(spec, DetectorArgs{a.net_w, a.net_h, a.seen}, t.out, a.truth, st.batch, t.dout);
    if (parts) *parts += d;
    return d.cost;
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    detector_backward(spec, t.out, t.dout, t.din[0], st.batch);
  }
  // The activations (a logistic or softmax per entry, about 10 FLOPs each); the loss's
  // matching of truths to boxes is not counted.
  OpCost cost() const override { return {10. * spec.out.size(), float_bytes(2. * spec.out.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_detector_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<DetectorOp>(s); }

namespace {
// [region] (YOLOv2) and [yolo] (YOLOv3): Darknet's options and defaults.
void parse_detector(CfgReader& r, LayerSpec& l, bool yolo) {
  using net_detail::num_text;
  DetectorSpec& d = l.params.emplace<DetectorSpec>();
  d.classes = r.count("classes", 20, net_detail::kMaxChannels, "channels a device can hold");
  d.num = r.count("num", 1, net_detail::kMaxDim, "anchors a layer can have");
  d.jitter = float(r.num("jitter", 0.2));
  if (!(d.jitter >= 0 && d.jitter < 1)) fail(r.where(r.line_of("jitter")), ": jitter must be in [0, 1)");
  d.random = r.integer("random", 0) != 0;
  if (yolo && (r.has("map") || r.has("tree")))
    fail(r.where(r.line_of(r.has("map") ? "map" : "tree")), ": class maps and trees are not supported in [yolo]");
  if (!yolo && r.has("tree")) {
    d.tree = read_class_tree(r.str("tree", ""), r.where(r.line_of("tree")));
    if (d.tree.size() != d.classes)
      fail(r.where(r.line_of("tree")), ": the class tree '", d.tree.path, "' has ", d.tree.size(),
           " classes but classes=", d.classes);
  }
  if (!yolo && r.has("map")) d.map = read_class_map(r.str("map", ""), d.classes, r.where(r.line_of("map")));
  if (yolo) {
    d.max_boxes = r.integer("max", 90);
    d.ignore_thresh = float(r.num("ignore_thresh", 0.5));
    d.truth_thresh = float(r.num("truth_thresh", 1));
    if (r.has("mask")) {
      for (double v : r.list("mask")) {
        if (v != std::floor(v) || v < 0 || v >= d.num)
          fail(r.where(r.line_of("mask")), ": mask entry ", num_text(v), " is not an anchor index in [0, ", d.num, ")");
        d.mask.push_back(int(v));
      }
    } else {
      for (int i = 0; i < d.num; ++i) d.mask.push_back(i);
    }
  } else {
    d.coords = r.integer("coords", 4);
    if (d.coords != 4) fail(r.where(r.line_of("coords")), ": coords=", d.coords, " is not supported (4)");
    d.softmax = r.integer("softmax", 0) != 0;
    d.background = r.integer("background", 0) != 0;
    if (d.background) fail(r.where(r.line_of("background")), ": background=1 is not supported");
    r.integer("max", 30);  // read by Darknet, but its [region] always reads 30 truths
    d.max_boxes = 30;
    d.rescore = r.integer("rescore", 0) != 0;
    d.thresh = float(r.num("thresh", 0.5));
    d.coord_scale = float(r.num("coord_scale", 1));
    d.object_scale = float(r.num("object_scale", 1));
    d.noobject_scale = float(r.num("noobject_scale", 1));
    d.class_scale = float(r.num("class_scale", 1));
    d.bias_match = r.integer("bias_match", 0) != 0;
  }
  r.positive("max", d.max_boxes);
  r.at_most("max", d.max_boxes, net_detail::kMaxDim, "truth boxes per picture");
  const std::vector<double> a = r.list("anchors");
  if (r.has("anchors") && a.size() != size_t(2 * d.num))
    fail(r.where(r.line_of("anchors")), ": ", a.size(), " anchor values for num=", d.num, " (needs ", 2 * d.num,
         ": a width and a height per anchor)");
  d.anchors.assign(size_t(2 * d.num), 0.5f);  // Darknet's default bias
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0)) fail(r.where(r.line_of("anchors")), ": anchor values must be > 0, got ", num_text(a[i]));
    d.anchors[i] = float(a[i]);
  }
  // Read by Darknet but without effect on training or inference there either.
  r.reject_unused({"absolute", "log", "sqrt", "classfix", "mask_scale"});
}
void parse_region(CfgReader& r, LayerSpec& l) { parse_detector(r, l, false); }
void parse_yolo(CfgReader& r, LayerSpec& l) { parse_detector(r, l, true); }

// The loss reads its input map as boxes per cell, each coords + 1 + classes channels.
void detector_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const DetectorSpec& d = l.det();
  const int64_t per_box = int64_t(d.coords) + 1 + d.classes;
  const int64_t boxes = d.boxes_per_cell(l.is(kYoloKind));
  if (l.in.c != boxes * per_box)
    fail(check.where(), ": its input has ", l.in.c, " channels but ", boxes, " boxes per cell x (", d.coords,
         " coords + 1 + ", d.classes, " classes) = ", boxes * per_box,
         " are needed (the convolution before it needs filters=", boxes * per_box, ")");
  l.out = l.in;
}
}  // namespace

extern const OpKind kRegionKind{"region", nullptr, parse_region, detector_shape, flops_per_input};
extern const OpKind kYoloKind{"yolo", nullptr, parse_yolo, detector_shape, flops_per_input};

}  // namespace tt
