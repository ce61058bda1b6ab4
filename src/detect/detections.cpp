// Darknet's detection arithmetic (region_layer.c, yolo_layer.c, box.c), written with the same
// float/double steps as the C source: float where Darknet computes in float, double where a C
// double constant or exp() promotes. Compiled with -ffp-contract=off (no fused multiply-add)
// so that no step is rounded differently.
#include "detect/detections.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

float overlap(float x1, float w1, float x2, float w2) {
  const float l1 = x1 - w1 / 2;
  const float l2 = x2 - w2 / 2;
  const float left = l1 > l2 ? l1 : l2;
  const float r1 = x1 + w1 / 2;
  const float r2 = x2 + w2 / 2;
  const float right = r1 < r2 ? r1 : r2;
  return right - left;
}

float box_intersection(const BoxF& a, const BoxF& b) {
  const float w = overlap(a.x, a.w, b.x, b.w);
  const float h = overlap(a.y, a.h, b.y, b.h);
  if (w < 0 || h < 0) return 0;
  return w * h;
}

// activate(x, LOGISTIC): 1./(1. + exp(-x)) in double, stored as float.
float logistic(float x) { return float(1. / (1. + std::exp(double(-x)))); }

void logistic_array(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = logistic(x[i]);
}

// blas.c softmax() with temp = 1: n entries `stride` apart.
void softmax_strided(float* x, int n, int64_t stride) {
  float largest = -FLT_MAX;
  for (int i = 0; i < n; ++i)
    if (x[i * stride] > largest) largest = x[i * stride];
  float sum = 0;
  for (int i = 0; i < n; ++i) {
    const float e = float(std::exp(double(x[i * stride] - largest)));
    sum += e;
    x[i * stride] = e;
  }
  for (int i = 0; i < n; ++i) x[i * stride] /= sum;
}

// Darknet's entry_index for batch 0: anchor a, cell (row-major), entry e of the box vector.
int64_t entry(const DetectionHead& h, int a, int cell, int e) {
  const int64_t hw = int64_t(h.w) * h.h;
  return a * hw * (h.coords + 1 + h.classes) + e * hw + cell;
}

// correct_region_boxes / correct_yolo_boxes (identical code): undo the letterbox of an
// img_w x img_h image into net_w x net_h (the image scaled to new_w x new_h, centred).
void correct_boxes(Detection* dets, size_t count, int img_w, int img_h, int net_w, int net_h, bool relative) {
  int new_w = 0, new_h = 0;
  if (float(net_w) / float(img_w) < float(net_h) / float(img_h)) {
    new_w = net_w;
    new_h = (img_h * net_w) / img_w;
  } else {
    new_h = net_h;
    new_w = (img_w * net_h) / img_h;
  }
  for (size_t i = 0; i < count; ++i) {
    BoxF b = dets[i].box;
    b.x = float((double(b.x) - double(net_w - new_w) / 2. / double(net_w)) / double(float(new_w) / float(net_w)));
    b.y = float((double(b.y) - double(net_h - new_h) / 2. / double(net_h)) / double(float(new_h) / float(net_h)));
    b.w *= float(net_w) / float(new_w);
    b.h *= float(net_h) / float(new_h);
    if (!relative) {
      b.x *= float(img_w);
      b.w *= float(img_w);
      b.y *= float(img_h);
      b.h *= float(img_h);
    }
    dets[i].box = b;
  }
}

}  // namespace

float box_iou(const BoxF& a, const BoxF& b) {
  const float i = box_intersection(a, b);
  const float u = a.w * a.h + b.w * b.h - i;
  return i / u;
}

DetectionHead detection_head(const LayerSpec& l) {
  if (!l.detector()) fail("layer ", l.index, " ([", l.type_name(), "]) is not a detection head");
  const bool yolo = l.is(kYoloKind);
  return DetectionHead{.yolo = yolo,
                       .w = l.out.w,
                       .h = l.out.h,
                       .n = l.det().boxes_per_cell(yolo),
                       .classes = l.det().classes,
                       .coords = l.det().coords,
                       .background = l.det().background,
                       .softmax = l.det().softmax,
                       .biases = l.det().anchors,
                       .mask = yolo ? l.det().mask : std::vector<int>{},
                       .tree = l.det().tree.empty() ? nullptr : &l.det().tree};
}

void check_head(const DetectionHead& h) {
  const char* kind = h.yolo ? "[yolo]" : "[region]";
  if (h.w < 1 || h.h < 1) fail(kind, " head: grid ", h.w, "x", h.h, " is empty");
  if (h.n < 1) fail(kind, " head: ", h.n, " boxes per cell (need at least 1)");
  if (h.classes < 1) fail(kind, " head: ", h.classes, " classes (need at least 1)");
  if (h.yolo) {
    if (h.coords != 4) fail("[yolo] head: coords=", h.coords, " (Darknet's [yolo] has exactly 4)");
    if (h.biases.size() < 2 || h.biases.size() % 2)
      fail("[yolo] head: ", h.biases.size(), " anchor values (need w,h pairs)");
    if (h.mask.size() != size_t(h.n))
      fail("[yolo] head: mask has ", h.mask.size(), " entries but n=", h.n, " (n is the mask count)");
    for (int m : h.mask)
      if (m < 0 || size_t(m) >= h.biases.size() / 2)
        fail("[yolo] head: mask entry ", m, " is not one of the ", h.biases.size() / 2, " anchors");
  } else {
    if (h.coords < 4) fail("[region] head: coords=", h.coords, " (need at least 4)");
    if (h.biases.size() != size_t(2 * h.n))
      fail("[region] head: ", h.biases.size(), " anchor values for num=", h.n, " (need ", 2 * h.n, ")");
    if (!h.mask.empty()) fail("[region] head: has a mask (only [yolo] heads select anchors)");
  }
  if (h.class_map)
    for (int c : *h.class_map)
      if (h.yolo || c < 0 || c >= h.classes)
        fail(kind, " head: class map entry ", c, " is not one of its ", h.classes, " classes");
}

int64_t head_outputs(const DetectionHead& h) { return int64_t(h.w) * h.h * h.n * (h.coords + 1 + h.classes); }

void activate_head(const DetectionHead& h, float* out) {
  check_head(h);
  const int64_t hw = int64_t(h.w) * h.h;
  for (int a = 0; a < h.n; ++a) {
    logistic_array(out + entry(h, a, 0, 0), 2 * hw);
    if (h.yolo) {
      logistic_array(out + entry(h, a, 0, 4), (1 + h.classes) * hw);
      continue;
    }
    if (!h.background) logistic_array(out + entry(h, a, 0, h.coords), hw);
    if (!h.softmax) logistic_array(out + entry(h, a, 0, h.coords + 1), h.classes * hw);
  }
  if (h.yolo || !h.softmax) return;
  if (h.tree) {  // a softmax per group of the tree (Darknet's GPU softmax_tree)
    for (int a = 0; a < h.n; ++a)
      for (int64_t cell = 0; cell < hw; ++cell)
        for (size_t g = 0; g < h.tree->group_size.size(); ++g)
          softmax_strided(out + entry(h, a, int(cell), h.coords + 1 + h.tree->group_offset[g]), h.tree->group_size[g],
                          hw);
    return;
  }
  // softmax_cpu(input + entry(0, 0, coords + !background), classes + background, batch*n,
  // inputs/n, w*h groups 1 apart, stride w*h): per anchor and cell, over the classes (and
  // the background in the objectness slot).
  for (int a = 0; a < h.n; ++a)
    for (int64_t cell = 0; cell < hw; ++cell)
      softmax_strided(out + entry(h, a, int(cell), h.coords + !h.background), h.classes + h.background, hw);
}

namespace {

// hierarchy_predictions: each class's probability times its parent's (parents first), on a
// copy of one box's classes `stride` apart.
std::vector<float> tree_probabilities(const ClassTree& tree, const float* classes, int stride) {
  std::vector<float> p(size_t(tree.size()));
  for (int j = 0; j < tree.size(); ++j) {
    p[size_t(j)] = classes[int64_t(j) * stride];
    const int parent = tree.parent[size_t(j)];
    if (parent >= 0) p[size_t(j)] *= p[size_t(parent)];
  }
  return p;
}

// hierarchy_top_prediction: from the roots down, the most probable class of each group
// while the path's probability stays above thresh; a leaf, or where it falls below, the last
// class taken (at the roots: the best one).
int tree_top_class(const ClassTree& tree, const float* classes, int stride, float thresh) {
  const std::vector<float> p = tree_probabilities(tree, classes, stride);
  float path = 1;
  for (int group = 0;;) {
    float max = 0;
    int max_i = 0;
    for (int i = 0; i < tree.group_size[size_t(group)]; ++i) {
      const int index = i + tree.group_offset[size_t(group)];
      if (p[size_t(index)] > max) {
        max_i = index;
        max = p[size_t(index)];
      }
    }
    if (path * max > thresh) {
      path = path * max;
      group = tree.child[size_t(max_i)];
      if (group < 0) return max_i;
    } else if (group == 0) {
      return max_i;
    } else {
      return tree.parent[size_t(tree.group_offset[size_t(group)])];
    }
  }
}

}  // namespace

void head_detections(const DetectionHead& h, const float* out, int img_w, int img_h, int net_w, int net_h, float thresh,
                     bool relative, std::vector<Detection>& dets) {
  check_head(h);
  if (img_w < 1 || img_h < 1) fail("head_detections: image size ", img_w, "x", img_h, " is empty");
  if (net_w < 1 || net_h < 1) fail("head_detections: network input size ", net_w, "x", net_h, " is empty");
  const int hw = h.w * h.h;
  const size_t first = dets.size();
  if (!h.yolo) {
    // get_region_detections: every box, at index a*w*h + cell.
    dets.resize(first + size_t(hw) * h.n);
    Detection* d = dets.data() + first;
    for (int cell = 0; cell < hw; ++cell) {
      const int row = cell / h.w, col = cell % h.w;
      for (int a = 0; a < h.n; ++a) {
        Detection& det = d[a * hw + cell];
        det.prob.assign(size_t(h.classes), 0.f);
        const float scale = h.background ? 1.f : out[entry(h, a, cell, h.coords)];
        const int64_t bi = entry(h, a, cell, 0);
        // get_region_box: anchors in grid cells.
        det.box.x = (float(col) + out[bi]) / float(h.w);
        det.box.y = (float(row) + out[bi + hw]) / float(h.h);
        det.box.w = float(std::exp(double(out[bi + 2 * hw])) * double(h.biases[2 * a]) / double(h.w));
        det.box.h = float(std::exp(double(out[bi + 3 * hw])) * double(h.biases[2 * a + 1]) / double(h.h));
        det.objectness = scale > thresh ? scale : 0;
        const float* cls = out + entry(h, a, cell, h.coords + 1);
        if (h.class_map) {
          det.prob.assign(h.class_map->size(), 0.f);
          std::vector<float> p;
          if (h.tree)
            p = tree_probabilities(*h.tree, cls, hw);
          else
            for (int c = 0; c < h.classes; ++c) p.push_back(cls[int64_t(c) * hw]);
          for (size_t j = 0; j < h.class_map->size(); ++j) {
            const float prob = scale * p[size_t((*h.class_map)[j])];
            det.prob[j] = prob > thresh ? prob : 0;
          }
        } else if (h.tree) {
          const int c = tree_top_class(*h.tree, out + entry(h, a, cell, h.coords + 1), hw, h.tree_thresh);
          det.prob[size_t(c)] = scale > thresh ? scale : 0;
        } else if (det.objectness != 0) {
          for (int c = 0; c < h.classes; ++c) {
            const float prob = scale * out[entry(h, a, cell, h.coords + 1 + c)];
            det.prob[size_t(c)] = prob > thresh ? prob : 0;
          }
        }
      }
    }
  } else {
    // get_yolo_detections: only boxes with objectness > thresh, cell-major.
    for (int cell = 0; cell < hw; ++cell) {
      const int row = cell / h.w, col = cell % h.w;
      for (int a = 0; a < h.n; ++a) {
        const float objectness = out[entry(h, a, cell, 4)];
        if (objectness <= thresh) continue;
        const int64_t bi = entry(h, a, cell, 0);
        const int m = h.mask[size_t(a)];
        Detection det;
        // get_yolo_box: anchors in network input pixels.
        det.box.x = (float(col) + out[bi]) / float(h.w);
        det.box.y = (float(row) + out[bi + hw]) / float(h.h);
        det.box.w = float(std::exp(double(out[bi + 2 * hw])) * double(h.biases[2 * size_t(m)]) / double(net_w));
        det.box.h = float(std::exp(double(out[bi + 3 * hw])) * double(h.biases[2 * size_t(m) + 1]) / double(net_h));
        det.objectness = objectness;
        det.prob.resize(size_t(h.classes));
        for (int c = 0; c < h.classes; ++c) {
          const float prob = objectness * out[entry(h, a, cell, 4 + 1 + c)];
          det.prob[size_t(c)] = prob > thresh ? prob : 0;
        }
        dets.push_back(std::move(det));
      }
    }
  }
  correct_boxes(dets.data() + first, dets.size() - first, img_w, img_h, net_w, net_h, relative);
}

void yolov1_detections(const DetectionParams& p, const float* out, int w, int h, float thresh,
                       std::vector<Detection>& dets) {
  const int cells = p.side * p.side;
  for (int i = 0; i < cells; ++i) {
    const int row = i / p.side, col = i % p.side;
    for (int n = 0; n < p.num; ++n) {
      const float scale = out[int64_t(cells) * p.classes + i * p.num + n];
      const float* b = out + int64_t(cells) * (p.classes + p.num) + (int64_t(i) * p.num + n) * 4;
      Detection d;
      d.box.x = (b[0] + float(col)) / float(p.side) * float(w);
      d.box.y = (b[1] + float(row)) / float(p.side) * float(h);
      d.box.w = float(std::pow(double(b[2]), p.sqrt ? 2.0 : 1.0) * w);
      d.box.h = float(std::pow(double(b[3]), p.sqrt ? 2.0 : 1.0) * h);
      d.objectness = scale;
      d.prob.resize(size_t(p.classes));
      for (int j = 0; j < p.classes; ++j) {
        const float prob = scale * out[int64_t(i) * p.classes + j];
        d.prob[size_t(j)] = prob > thresh ? prob : 0;
      }
      dets.push_back(std::move(d));
    }
  }
}

void do_nms_sort(std::vector<Detection>& dets, int classes, float nms_thresh) {
  if (classes < 0) fail("do_nms_sort: ", classes, " classes");
  for (size_t i = 0; i < dets.size(); ++i)
    if (dets[i].prob.size() != size_t(classes))
      fail("do_nms_sort: detection ", i, " has ", dets[i].prob.size(), " class probabilities, expected ", classes);
  // Objectness 0 to the back: Darknet swaps each with the current last and looks at the
  // swapped-in one again (so their order is not kept).
  int k = int(dets.size()) - 1;
  for (int i = 0; i <= k; ++i) {
    if (dets[size_t(i)].objectness == 0) {
      std::swap(dets[size_t(i)], dets[size_t(k)]);
      --k;
      --i;
    }
  }
  const auto end = dets.begin() + (k + 1);
  for (int c = 0; c < classes; ++c) {
    for (auto it = dets.begin(); it != end; ++it) it->sort_class = c;
    // nms_comparator returns the sign of b.prob[c] - a.prob[c]; glibc's qsort (a merge sort
    // whenever the buffer fits in memory) keeps equal elements in order.
    std::stable_sort(dets.begin(), end,
                     [c](const Detection& a, const Detection& b) { return a.prob[size_t(c)] > b.prob[size_t(c)]; });
    for (auto i = dets.begin(); i != end; ++i) {
      if (i->prob[size_t(c)] == 0) continue;
      const BoxF a = i->box;
      for (auto j = i + 1; j != end; ++j)
        if (box_iou(a, j->box) > nms_thresh) j->prob[size_t(c)] = 0;
    }
  }
}

}  // namespace tt
