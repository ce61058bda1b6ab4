#include "layers/detector.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "detect/detections.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {

DetectorLoss& DetectorLoss::operator+=(const DetectorLoss& o) {
  cost += o.cost;
  coord += o.coord;
  obj += o.obj;
  noobj += o.noobj;
  cls += o.cls;
  iou += o.iou;
  recall += o.recall;
  count += o.count;
  return *this;
}

void darknet_softmax(const float* in, int n, int stride, float* out) {
  float largest = -FLT_MAX, sum = 0;
  for (int i = 0; i < n; ++i) largest = std::max(largest, in[i * stride]);
  for (int i = 0; i < n; ++i) {
    const float e = float(std::exp(double(in[i * stride] - largest)));
    sum += e;
    out[i * stride] = e;
  }
  for (int i = 0; i < n; ++i) out[i * stride] /= sum;
}

namespace {

// Darknet's float arithmetic, operation for operation (box.c, activations.h, blas.c).
using Box = BoxF;
float iou(const Box& a, const Box& b) { return box_iou(a, b); }

float logistic(float x) { return float(1. / (1. + std::exp(double(-x)))); }

// One layer's view of a micro-batch in Darknet's terms.
struct Geometry {
  int w, h, n, classes, coords;
  int64_t outputs;
  Geometry(const LayerSpec& l)
      : w(l.out.w),
        h(l.out.h),
        n(l.det().boxes_per_cell(l.is(kYoloKind))),
        classes(l.det().classes),
        coords(l.det().coords),
        outputs(l.out.size()) {}
  int64_t entry(int b, int box, int loc, int e) const {
    return b * outputs + int64_t(box) * w * h * (coords + classes + 1) + int64_t(e) * w * h + loc;
  }
};

Box truth_box(const float* t) { return {t[0], t[1], t[2], t[3]}; }

// get_region_box (anchors in cells) and get_yolo_box (anchors in input pixels).
Box predicted(const float* x, const float* anchor, int64_t index, int i, int j, int lw, int lh, double aw_div,
              double ah_div, int stride) {
  Box b;
  b.x = (i + x[index]) / float(lw);
  b.y = (j + x[index + stride]) / float(lh);
  b.w = float(std::exp(double(x[index + 2 * stride])) * anchor[0] / aw_div);
  b.h = float(std::exp(double(x[index + 3 * stride])) * anchor[1] / ah_div);
  return b;
}

float delta_box(const Box& truth, const float* x, const float* anchor, int64_t index, int i, int j, int lw, int lh,
                double aw_div, double ah_div, float* delta, float scale, int stride) {
  const Box pred = predicted(x, anchor, index, i, j, lw, lh, aw_div, ah_div, stride);
  const float v = iou(pred, truth);
  const float tx = truth.x * lw - i, ty = truth.y * lh - j;
  const float tw = float(std::log(double(truth.w * float(aw_div)) / anchor[0]));
  const float th = float(std::log(double(truth.h * float(ah_div)) / anchor[1]));
  delta[index] = scale * (tx - x[index]);
  delta[index + stride] = scale * (ty - x[index + stride]);
  delta[index + 2 * stride] = scale * (tw - x[index + 2 * stride]);
  delta[index + 3 * stride] = scale * (th - x[index + 3 * stride]);
  return v;
}

// The truth of a sample that best overlaps `pred` (Darknet's loops over at most max_boxes
// truths, the list ending at x == 0): its index and IoU (0, 0 if none overlaps).
std::pair<int, float> best_truth(const Box& pred, const float* tb, int max_boxes) {
  float best_iou = 0;
  int best_t = 0;
  for (int t = 0; t < max_boxes; ++t) {
    const Box tr = truth_box(tb + t * 5);
    if (!tr.x) break;
    const float v = iou(pred, tr);
    if (v > best_iou) {
      best_iou = v;
      best_t = t;
    }
  }
  return {best_t, best_iou};
}

// The anchor whose shape (`shape_of(n)`, centred with the truth) best overlaps the truth's.
template <class F>
int best_anchor(const Box& tr, int count, F shape_of) {
  const Box shift{0, 0, tr.w, tr.h};
  float best_iou = 0;
  int best_n = 0;
  for (int n = 0; n < count; ++n) {
    Box p = shape_of(n);
    p.x = p.y = 0;
    const float v = iou(p, shift);
    if (v > best_iou) {
      best_iou = v;
      best_n = n;
    }
  }
  return best_n;
}

// A truth's cell; Darknet's int cast can reach w for x == 1, which it would index out of
// the map: clamped to the last cell.
int cell(float v, int n) { return std::min(int(v * n), n - 1); }

// delta_region_class over a class tree: along the class's path to its root, every class of
// each group on the way learns 0, the path's own class 1.
void tree_class_delta(const ClassTree& tree, const float* out, float* delta, int64_t index, int cls, float scale,
                      int stride) {
  for (int c = cls; c >= 0; c = tree.parent[size_t(c)]) {
    const int grp = tree.group[size_t(c)];
    const int offset = tree.group_offset[size_t(grp)];
    for (int i = 0; i < tree.group_size[size_t(grp)]; ++i) {
      const int64_t k = index + int64_t(stride) * (offset + i);
      delta[k] = scale * (0 - out[k]);
    }
    delta[index + int64_t(stride) * c] = scale * (1 - out[index + int64_t(stride) * c]);
  }
}

// A picture whose truth is a class only (YOLO9000's ImageNet pictures: Darknet marks them
// with x and y above 100000, and only its first 30 truths are looked at): every box learns
// "no object", the box most sure of the class (objectness x its tree probability) learns the
// class, and the rest of the loss is skipped for the picture. (Darknet also sets that box's
// objectness delta toward 0.3, then to 0.) Returns whether it was such a picture.
bool class_only_truth(const LayerSpec& l, const float* out, const float* tb, int b, float* delta) {
  const DetectorSpec& d = l.det();
  const Geometry g(l);
  const int wh = g.w * g.h;
  for (int t = 0; t < 30; ++t) {
    const Box tr = truth_box(tb + t * 5);
    if (!tr.x) break;
    if (!(tr.x > 100000 && tr.y > 100000)) continue;
    const int cls = int(tb[t * 5 + 4]);  // a tree class itself (Darknet maps none here)
    if (cls < 0 || cls >= d.classes)
      fail("[region] layer ", l.index, ": a class-only truth of class ", cls, ", outside [0, ", d.classes, ")");
    float maxp = 0;
    int max_box = 0, max_loc = 0;
    for (int n = 0; n < g.n; ++n)
      for (int loc = 0; loc < wh; ++loc) {
        const int64_t obj_index = g.entry(b, n, loc, g.coords);
        const float scale = out[obj_index];
        delta[obj_index] = d.noobject_scale * (0 - out[obj_index]);
        float p = 1;  // get_hierarchy_probability
        for (int c = cls; c >= 0; c = d.tree.parent[size_t(c)]) p = p * out[g.entry(b, n, loc, g.coords + 1 + c)];
        p = scale * p;
        if (p > maxp) {
          maxp = p;
          max_box = n;
          max_loc = loc;
        }
      }
    tree_class_delta(d.tree, out, delta, g.entry(b, max_box, max_loc, g.coords + 1), cls, d.class_scale, wh);
    delta[g.entry(b, max_box, max_loc, g.coords)] = 0;
    return true;
  }
  return false;
}

DetectorLoss region_delta(const LayerSpec& l, const DetectorArgs& a, const float* out, const float* truth, int batch,
                          float* delta, std::vector<char>& matched) {
  const DetectorSpec& d = l.det();
  const Geometry g(l);
  const int wh = g.w * g.h;
  const float* anchors = d.anchors.data();
  DetectorLoss loss;
  for (int b = 0; b < batch; ++b) {
    const float* tb = truth + int64_t(b) * d.truth_floats();
    if (!d.tree.empty() && class_only_truth(l, out, tb, b, delta)) continue;
    for (int j = 0; j < g.h; ++j)
      for (int i = 0; i < g.w; ++i)
        for (int n = 0; n < g.n; ++n) {
          const int loc = j * g.w + i;
          const int64_t box_index = g.entry(b, n, loc, 0);
          const Box pred = predicted(out, anchors + 2 * n, box_index, i, j, g.w, g.h, g.w, g.h, wh);
          const float best_iou = best_truth(pred, tb, d.max_boxes).second;
          const int64_t obj_index = g.entry(b, n, loc, g.coords);
          delta[obj_index] = d.noobject_scale * (0 - out[obj_index]);
          if (best_iou > d.thresh) delta[obj_index] = 0;
          if (a.seen < 12800) {  // pull every box towards its anchor at the cell's centre early on
            const Box prior{(i + .5f) / g.w, (j + .5f) / g.h, anchors[2 * n] / g.w, anchors[2 * n + 1] / g.h};
            delta_box(prior, out, anchors + 2 * n, box_index, i, j, g.w, g.h, g.w, g.h, delta, .01f, wh);
          }
        }
    for (int t = 0; t < d.max_boxes; ++t) {
      const Box tr = truth_box(tb + t * 5);
      if (!tr.x) break;
      const int i = cell(tr.x, g.w), j = cell(tr.y, g.h), loc = j * g.w + i;
      const int best_n = best_anchor(tr, g.n, [&](int n) {
        Box p = predicted(out, anchors + 2 * n, g.entry(b, n, loc, 0), i, j, g.w, g.h, g.w, g.h, wh);
        if (d.bias_match) p = {0, 0, anchors[2 * n] / g.w, anchors[2 * n + 1] / g.h};
        return p;
      });
      const int64_t box_index = g.entry(b, best_n, loc, 0);
      const float v = delta_box(tr, out, anchors + 2 * best_n, box_index, i, j, g.w, g.h, g.w, g.h, delta,
                                d.coord_scale * (2 - tr.w * tr.h), wh);
      if (v > .5f) loss.recall += 1;
      loss.iou += v;
      const int64_t obj_index = g.entry(b, best_n, loc, g.coords);
      delta[obj_index] = d.object_scale * ((d.rescore ? v : 1.f) - out[obj_index]);
      matched[size_t(obj_index)] = 1;
      const int truth_cls = int(tb[t * 5 + 4]);
      if (truth_cls < 0 || truth_cls >= d.truth_classes())
        fail("[region] layer ", l.index, ": a truth of class ", truth_cls, ", outside [0, ", d.truth_classes(), ")");
      const int cls = d.map.empty() ? truth_cls : d.map[size_t(truth_cls)];
      const int64_t class_index = g.entry(b, best_n, loc, g.coords + 1);
      if (!d.tree.empty()) {
        tree_class_delta(d.tree, out, delta, class_index, cls, d.class_scale, wh);
      } else if (delta[class_index] != 0 && !d.softmax) {  // delta_region_class with tag = !softmax
        delta[class_index + int64_t(wh) * cls] = d.class_scale * (1 - out[class_index + int64_t(wh) * cls]);
      } else {
        for (int c = 0; c < g.classes; ++c)
          delta[class_index + int64_t(wh) * c] =
              d.class_scale * ((c == cls ? 1.f : 0.f) - out[class_index + int64_t(wh) * c]);
      }
      ++loss.count;
    }
  }
  return loss;
}

DetectorLoss yolo_delta(const LayerSpec& l, const DetectorArgs& a, const float* out, const float* truth, int batch,
                        float* delta, std::vector<char>& matched) {
  const DetectorSpec& d = l.det();
  const Geometry g(l);
  const int wh = g.w * g.h;
  const float* anchors = d.anchors.data();
  auto class_delta = [&](int64_t index, int cls) {  // delta_yolo_class
    if (delta[index] != 0) {
      delta[index + int64_t(wh) * cls] = 1 - out[index + int64_t(wh) * cls];
      return;
    }
    for (int c = 0; c < g.classes; ++c)
      delta[index + int64_t(wh) * c] = (c == cls ? 1.f : 0.f) - out[index + int64_t(wh) * c];
  };
  DetectorLoss loss;
  for (int b = 0; b < batch; ++b) {
    const float* tb = truth + int64_t(b) * d.truth_floats();
    for (int j = 0; j < g.h; ++j)
      for (int i = 0; i < g.w; ++i)
        for (int n = 0; n < g.n; ++n) {
          const int loc = j * g.w + i;
          const float* anchor = anchors + 2 * d.mask[size_t(n)];
          const int64_t box_index = g.entry(b, n, loc, 0);
          const Box pred = predicted(out, anchor, box_index, i, j, g.w, g.h, a.net_w, a.net_h, wh);
          const auto [best_t, best_iou] = best_truth(pred, tb, d.max_boxes);
          const int64_t obj_index = g.entry(b, n, loc, 4);
          delta[obj_index] = 0 - out[obj_index];
          if (best_iou > d.ignore_thresh) delta[obj_index] = 0;
          if (best_iou > d.truth_thresh) {
            delta[obj_index] = 1 - out[obj_index];
            matched[size_t(obj_index)] = 1;
            class_delta(g.entry(b, n, loc, 5), int(tb[best_t * 5 + 4]));
            const Box tr = truth_box(tb + best_t * 5);
            delta_box(tr, out, anchor, box_index, i, j, g.w, g.h, a.net_w, a.net_h, delta, 2 - tr.w * tr.h, wh);
          }
        }
    for (int t = 0; t < d.max_boxes; ++t) {
      const Box tr = truth_box(tb + t * 5);
      if (!tr.x) break;
      const int i = cell(tr.x, g.w), j = cell(tr.y, g.h), loc = j * g.w + i;
      const int best_n = best_anchor(tr, d.num, [&](int n) {
        return Box{0, 0, anchors[2 * n] / float(a.net_w), anchors[2 * n + 1] / float(a.net_h)};
      });
      const auto m = std::find(d.mask.begin(), d.mask.end(), best_n);
      if (m == d.mask.end()) continue;  // another [yolo] layer predicts this anchor
      const int mask_n = int(m - d.mask.begin());
      const int64_t box_index = g.entry(b, mask_n, loc, 0);
      const float v = delta_box(tr, out, anchors + 2 * best_n, box_index, i, j, g.w, g.h, a.net_w, a.net_h, delta,
                                2 - tr.w * tr.h, wh);
      const int64_t obj_index = g.entry(b, mask_n, loc, 4);
      delta[obj_index] = 1 - out[obj_index];
      matched[size_t(obj_index)] = 1;
      class_delta(g.entry(b, mask_n, loc, 5), int(tb[t * 5 + 4]));
      ++loss.count;
      if (v > .5f) loss.recall += 1;
      loss.iou += v;
    }
  }
  return loss;
}

}  // namespace

void detector_forward(const LayerSpec& l, const float* in, float* out, int batch) {
  const Geometry g(l);
  const int wh = g.w * g.h;
  std::copy_n(in, batch * g.outputs, out);
  const bool yolo = l.is(kYoloKind);
  for (int b = 0; b < batch; ++b)
    for (int n = 0; n < g.n; ++n) {
      float* xy = out + g.entry(b, n, 0, 0);
      for (int i = 0; i < 2 * wh; ++i) xy[i] = logistic(xy[i]);
      float* obj = out + g.entry(b, n, 0, g.coords);
      const ClassTree& tree = l.det().tree;
      const bool softmax = !yolo && (l.det().softmax || !tree.empty());
      const int logistic_entries = softmax ? 1 : 1 + g.classes;
      for (int i = 0; i < logistic_entries * wh; ++i) obj[i] = logistic(obj[i]);
      if (!yolo && !tree.empty()) {
        // A softmax per group of the tree, as Darknet's GPU forward (softmax_tree). Its CPU
        // forward starts each group coords + 1 + offset floats into the box instead of
        // that many planes: the same on a 1x1 grid, its x/y planes on any larger one.
        for (size_t k = 0; k < tree.group_size.size(); ++k)
          for (int loc = 0; loc < wh; ++loc) {
            const int64_t at = g.entry(b, n, loc, g.coords + 1 + tree.group_offset[k]);
            darknet_softmax(in + at, tree.group_size[k], wh, out + at);
          }
      } else if (softmax) {  // over the classes of each cell, Darknet's softmax_cpu
        for (int loc = 0; loc < wh; ++loc)
          darknet_softmax(in + g.entry(b, n, loc, g.coords + 1), g.classes, wh, out + g.entry(b, n, loc, g.coords + 1));
      }
    }
}

DetectorLoss detector_delta(const LayerSpec& l, const DetectorArgs& a, const float* out, const float* truth, int batch,
                            float* delta) {
  const Geometry g(l);
  const int64_t total = batch * g.outputs;
  std::fill_n(delta, total, 0.f);
  std::vector<char> matched(size_t(total), 0);
  DetectorLoss loss = l.is(kYoloKind) ? yolo_delta(l, a, out, truth, batch, delta, matched)
                                      : region_delta(l, a, out, truth, batch, delta, matched);
  const int wh = g.w * g.h;
  for (int64_t k = 0; k < total; ++k) {
    const double d2 = double(delta[k]) * delta[k];
    const int e = int((k % g.outputs) / wh % (g.coords + 1 + g.classes));
    if (e < g.coords)
      loss.coord += d2;
    else if (e == g.coords)
      (matched[size_t(k)] ? loss.obj : loss.noobj) += d2;
    else
      loss.cls += d2;
  }
  // Darknet: pow(mag_array(delta), 2), a float sum of squares, its float square root, squared.
  float sum = 0;
  for (int64_t k = 0; k < total; ++k) sum += delta[k] * delta[k];
  loss.cost = std::pow(double(float(std::sqrt(sum))), 2);
  return loss;
}

void detector_backward(const LayerSpec& l, const float* out, const float* delta, float* grad_in, int batch) {
  const Geometry g(l);
  const int wh = g.w * g.h;
  const int64_t total = batch * g.outputs;
  if (l.is(kYoloKind)) {
    for (int64_t k = 0; k < total; ++k) grad_in[k] -= delta[k];
    return;
  }
  for (int64_t k = 0; k < total; ++k) {
    const int e = int((k % g.outputs) / wh % (g.coords + 1 + g.classes));
    // Darknet's GPU backward applies the logistic gradient to x, y and objectness only
    // (with softmax=0 the classes go through a logistic in forward but not in backward).
    const bool darknet_gradient = e < 2 || e == g.coords;
    grad_in[k] -= darknet_gradient ? delta[k] * ((1 - out[k]) * out[k]) : delta[k];
  }
}

}  // namespace tt
