// The detection losses of YOLOv2 ([region]) and YOLOv3 ([yolo]) on plain NCHW maps, with
// the arithmetic of Darknet's region_layer.c / yolo_layer.c (Debian's libdarknet, pjreddie
// 2018-09-14):
// - forward activates the input (logistic on x, y and objectness; softmax or logistic on
//   the classes) into the output, Darknet's layout [batch][box][coords + 1 + classes][h][w];
// - detector_delta writes Darknet's l.delta (truth - prediction, per entry) and returns its
//   cost Σ delta², split into parts;
// - detector_backward adds dL/d(input) = -(delta) into the input's gradient; for [region]
//   through the logistic's derivative on x, y and objectness, as Darknet's GPU backward
//   does (its CPU backward_region_layer is commented out, so a CPU build of Darknet does
//   not train YOLOv2 at all); [yolo]'s delta already is the logits' gradient.
#pragma once
#include <cstdint>

#include "model/net_spec.hpp"

namespace tt {

struct DetectorLoss {
  double cost = 0;  // Σ delta², Darknet's *l.cost
  double coord = 0, obj = 0, noobj = 0,
         cls = 0;              // its parts: box entries, objectness of matched / other cells, classes
  double iou = 0, recall = 0;  // sums over matched truths (divide by count)
  int count = 0;               // truths matched to a box
  DetectorLoss& operator+=(const DetectorLoss& o);
};

struct DetectorArgs {
  int net_w = 0, net_h = 0;  // the network's input size ([yolo] anchors are in its pixels)
  int64_t seen = 0;  // images seen before this micro-batch, Darknet's *net.seen ([region]'s prior for the first 12800)
};

// Darknet's softmax (blas.c) over n entries `stride` apart, in its float arithmetic.
void darknet_softmax(const float* in, int n, int stride, float* out);

void detector_forward(const LayerSpec& l, const float* in, float* out, int batch);
// `truth`: per sample l.det().truth_floats() floats (x, y, w, h, class per box, normalised; a
// box with x == 0 ends the list, as in Darknet). `delta` gets l.out.size() floats per sample.
DetectorLoss detector_delta(const LayerSpec& l, const DetectorArgs& a, const float* out, const float* truth, int batch,
                            float* delta);
void detector_backward(const LayerSpec& l, const float* out, const float* delta, float* grad_in, int batch);

}  // namespace tt
