// [detection]: YOLOv1's loss (Darknet's detection_layer.c). Its input is a flat vector per
// picture: class scores of the side x side cells, then `num` confidences per cell, then
// `num` boxes (x, y, w, h) per cell. Each truth box is assigned to the cell holding its
// centre (Darknet's fill_truth_region, the first box of a cell wins); in a cell with an
// object the predicted box that overlaps it most (or lies closest) learns it, the others
// and every box of an empty cell learn "no object". The delta passes through unchanged.
#include <cmath>
#include <cstring>

#include "detect/detections.hpp"
#include "layers/detector.hpp"
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"
#include "util/hash.hpp"

namespace tt {

namespace {

const DetectionParams& params(const LayerSpec& l) { return l.detection(); }

class DetectionOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override {
    const DetectionParams& p = params(spec);
    const int64_t inputs = spec.in.size(), cells = int64_t(p.side) * p.side;
    std::memcpy(t.out, t.in[0], size_t(st.batch * inputs) * sizeof(float));
    if (p.softmax)
      for (int b = 0; b < st.batch; ++b)
        for (int64_t i = 0; i < cells; ++i) {
          float* c = t.out + b * inputs + i * p.classes;
          darknet_softmax(c, p.classes, 1, c);
        }
  }
  bool is_loss(bool) const override { return true; }

  // Darknet's forward_detection_layer in training, on boxes given as (x, y, w, h, class)
  // lists. Writes dL/d(output) = -delta and returns Darknet's cost, Σ delta².
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss* parts) const override {
    const DetectionParams& p = params(spec);
    const int64_t inputs = spec.in.size(), cells = int64_t(p.side) * p.side;
    const int per_cell = 1 + p.coords + p.classes;
    std::vector<float> truth(static_cast<size_t>(cells * per_cell));
    std::vector<float> delta(static_cast<size_t>(inputs));
    std::vector<char> matched(static_cast<size_t>(inputs));  // the confidences that learn "object"
    DetectorLoss d;
    for (int b = 0; b < st.batch; ++b) {
      cell_truth(a.truth + b * int64_t(p.max_boxes) * 5, truth.data());
      const float* out = t.out + b * inputs;
      std::fill(delta.begin(), delta.end(), 0.f);
      std::fill(matched.begin(), matched.end(), 0);
      for (int64_t i = 0; i < cells; ++i) {
        const float* tr = truth.data() + i * per_cell;
        for (int j = 0; j < p.num; ++j) {
          const int64_t pi = cells * p.classes + i * p.num + j;
          delta[size_t(pi)] = p.noobject_scale * (0 - out[pi]);
        }
        if (tr[0] == 0) continue;
        const int64_t ci = i * p.classes;
        for (int j = 0; j < p.classes; ++j) delta[size_t(ci + j)] = p.class_scale * (tr[1 + j] - out[ci + j]);
        BoxF truth_box{tr[1 + p.classes], tr[2 + p.classes], tr[3 + p.classes], tr[4 + p.classes]};
        truth_box.x /= float(p.side);
        truth_box.y /= float(p.side);
        int best = -1, closest = 0;
        float best_iou = 0, best_rmse = 20, least_rmse = INFINITY;
        for (int j = 0; j < p.num; ++j) {
          const BoxF o = predicted(out, i, j);
          const float iou = box_iou(o, truth_box);
          const float rmse = float(std::sqrt(std::pow(o.x - truth_box.x, 2) + std::pow(o.y - truth_box.y, 2) +
                                             std::pow(o.w - truth_box.w, 2) + std::pow(o.h - truth_box.h, 2)));
          if (rmse < least_rmse) {
            least_rmse = rmse;
            closest = j;
          }
          if (best_iou > 0 || iou > 0) {
            if (iou > best_iou) {
              best_iou = iou;
              best = j;
            }
          } else if (rmse < best_rmse) {
            best_rmse = rmse;
            best = j;
          }
        }
        if (p.forced) best = truth_box.w * truth_box.h < .1 ? 1 : 0;
        if (p.random && a.seen < 64000)  // Darknet draws rand(); here a hash of the run, image count and cell
          best = int(mix(st.seed ^ mix(uint64_t(a.seen) * 131 + uint64_t(b) * 7919 + uint64_t(i))) % uint64_t(p.num));
        // Where no box overlaps and none lies within Darknet's distance of 20, Darknet reads
        // the entry before the cell's boxes (index -1); the closest box learns it here.
        if (best < 0) best = closest;
        const float iou = box_iou(predicted(out, i, best), truth_box);
        const int64_t pi = cells * p.classes + i * p.num + best;
        matched[size_t(pi)] = 1;
        delta[size_t(pi)] = p.rescore ? p.object_scale * (iou - out[pi]) : float(p.object_scale * (1. - out[pi]));
        const int64_t bi = cells * (p.classes + p.num) + (i * p.num + best) * p.coords;
        const float* tb = tr + 1 + p.classes;
        for (int k = 0; k < 4; ++k) delta[size_t(bi + k)] = p.coord_scale * (tb[k] - out[bi + k]);
        if (p.sqrt)
          for (int k = 2; k < 4; ++k)
            delta[size_t(bi + k)] = p.coord_scale * (float(std::sqrt(double(tb[k]))) - out[bi + k]);
        d.iou += iou;
        d.recall += iou > .5f;
        ++d.count;
      }
      float* g = t.dout + b * inputs;
      for (int64_t k = 0; k < inputs; ++k) {
        const double v = delta[size_t(k)];
        g[k] = -delta[size_t(k)];
        const bool is_class = k < cells * p.classes, is_conf = !is_class && k < cells * (p.classes + p.num);
        (is_class ? d.cls : !is_conf ? d.coord : matched[size_t(k)] ? d.obj : d.noobj) += v * v;
      }
    }
    d.cost = d.cls + d.obj + d.noobj + d.coord;
    if (parts) *parts += d;
    return d.cost;
  }

  void backward(const OpStep& st, const OpTensors& t) const override {
    add_delta(t.din[0], t.dout, st.batch * spec.in.size());
  }
  OpCost cost() const override { return {10. * spec.in.size(), float_bytes(2. * spec.in.size())}; }

 private:
  // Cell i's predicted box j in picture units, its w and h squared when the net learns roots.
  BoxF predicted(const float* out, int64_t i, int j) const {
    const DetectionParams& p = params(spec);
    const int64_t cells = int64_t(p.side) * p.side;
    const float* o = out + cells * (p.classes + p.num) + (i * p.num + j) * p.coords;
    BoxF b{o[0] / float(p.side), o[1] / float(p.side), o[2], o[3]};
    if (p.sqrt) {
      b.w = b.w * b.w;
      b.h = b.h * b.h;
    }
    return b;
  }
  // Darknet's fill_truth_region: per cell (is object, one-hot class, x and y within the cell,
  // w, h); boxes narrower or lower than 0.005 are skipped, a box list ends at x == 0.
  void cell_truth(const float* boxes, float* truth) const {
    const DetectionParams& p = params(spec);
    const int per_cell = 1 + p.coords + p.classes;
    std::fill_n(truth, int64_t(p.side) * p.side * per_cell, 0.f);
    for (int k = 0; k < p.max_boxes; ++k) {
      const float* bx = boxes + 5 * k;
      if (bx[0] == 0) break;
      const float w = bx[2], h = bx[3];
      if (w < .005f || h < .005f) continue;
      // A centre on the far edge (x == 1) would index past Darknet's grid: it joins the last cell.
      const int col = std::min(int(bx[0] * float(p.side)), p.side - 1);
      const int row = std::min(int(bx[1] * float(p.side)), p.side - 1);
      float* c = truth + (int64_t(row) * p.side + col) * per_cell;
      if (c[0] != 0) continue;
      c[0] = 1;
      const int id = int(bx[4]);
      if (id >= 0 && id < p.classes) c[1 + id] = 1;
      float* box = c + 1 + p.classes;
      box[0] = bx[0] * float(p.side) - float(col);
      box[1] = bx[1] * float(p.side) - float(row);
      box[2] = w;
      box[3] = h;
    }
  }
};

}  // namespace

std::unique_ptr<Op> make_detection_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<DetectionOp>(s); }

namespace {
void parse_detection(CfgReader& r, LayerSpec& l) {
  DetectionParams& p = l.params.emplace<DetectionParams>();
  p.coords = r.integer("coords", 1);
  if (p.coords != 4) fail(r.where(r.line_of("coords")), ": coords=", p.coords, " is not supported (4: x, y, w, h)");
  p.classes = r.count("classes", 1, net_detail::kMaxChannels, "channels a device can hold");
  p.num = r.count("num", 1, net_detail::kMaxDim, "boxes a cell can have");
  p.side = r.count("side", 7, net_detail::kMaxDim, "the largest map's side");
  p.rescore = r.integer("rescore", 0) != 0;
  p.softmax = r.integer("softmax", 0) != 0;
  p.sqrt = r.integer("sqrt", 0) != 0;
  p.max_boxes = r.integer("max", 90);
  r.positive("max", p.max_boxes);
  r.at_most("max", p.max_boxes, net_detail::kMaxDim, "truth boxes per picture");
  p.coord_scale = float(r.num("coord_scale", 1));
  p.forced = r.integer("forced", 0) != 0;
  if (p.forced && p.num < 2) fail(r.where(r.line_of("forced")), ": forced=1 assigns box 0 or 1: needs num >= 2");
  p.object_scale = float(r.num("object_scale", 1));
  p.noobject_scale = float(r.num("noobject_scale", 1));
  p.class_scale = float(r.num("class_scale", 1));
  p.jitter = float(r.num("jitter", 0.2));
  if (!(p.jitter >= 0 && p.jitter < 1)) fail(r.where(r.line_of("jitter")), ": jitter must be in [0, 1)");
  p.random = r.integer("random", 0) != 0;
  if (r.integer("reorg", 0))
    fail(r.where(r.line_of("reorg")), ": reorg=1 is not supported (Darknet ignores it on CPU)");
  r.reject_unused({});
}

void detection_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const DetectionParams& p = params(l);
  const int64_t need = int64_t(p.side) * p.side * ((1 + p.coords) * int64_t(p.num) + p.classes);
  if (l.in.size() != need)
    fail(check.where(), ": its input has ", l.in.size(),
         " values but side^2 x ((1 + coords) x num + classes) = ", p.side, "^2 x ((1 + ", p.coords, ") x ", p.num,
         " + ", p.classes, ") = ", need, " are needed (the layer before it needs output=", need, ")");
  l.out = l.in;
}
}  // namespace

extern const OpKind kDetectionKind{"detection", nullptr, parse_detection, detection_shape, flops_per_input};

}  // namespace tt
