// From a detector's output to boxes, non-maximum suppression and VOC mAP: pure functions on
// plain data, no engine dependency. Boxes and NMS follow Darknet (pjreddie 61c9d02e, the
// library Debian ships) operation for operation, so the same activated output gives the same
// detections in the same order; tests/test_detections.cpp checks that against libdarknet.
#pragma once
#include <cstdint>
#include <vector>

#include "model/net_spec.hpp"

namespace tt {

// The thresholds Darknet's own programs use (examples/detector.c, src/image.c).
// `darknet detector test` (test_detector): get_network_boxes(thresh, hier, relative=1), then
// do_nms_sort(nms); draw_detections prints/draws every class with prob > thresh.
inline constexpr float kDarknetTestThresh = 0.5f;  // -thresh default (run_detector)
inline constexpr float kDarknetTestHier = 0.5f;    // -hier default (only used by softmax trees)
inline constexpr float kDarknetTestNms = 0.45f;
// `darknet detector valid` (validate_detector, validate_detector_flip): boxes in pixels
// (relative=0) of the original image, every class with prob != 0 written to the results.
inline constexpr float kDarknetValidThresh = 0.005f;
inline constexpr float kDarknetValidNms = 0.45f;
// `darknet detector recall` (validate_detector_recall): do_nms_obj, not do_nms_sort.
inline constexpr float kDarknetRecallThresh = 0.001f;
inline constexpr float kDarknetRecallNms = 0.4f;
inline constexpr float kDarknetRecallIou = 0.5f;
// The usual VOC matching threshold.
inline constexpr float kVocIou = 0.5f;

struct BoxF {
  float x, y, w, h;  // centre and size
};

// Darknet's box_iou (box.c): intersection / (area a + area b - intersection) in float, the
// intersection 0 when the boxes do not overlap. Two boxes of zero area give 0/0 = NaN, as in
// Darknet (a NaN IoU never exceeds a threshold).
float box_iou(const BoxF& a, const BoxF& b);

// The output head of a detector, as parsed from [region] / [yolo] (the engine fills it from
// the cfg). Darknet's parse_region defaults softmax to 0 (every [region] cfg in Darknet's cfg/ sets
// softmax=1); the default here is true, so a parser must set it from the cfg explicitly.
struct DetectionHead {
  bool yolo = false;  // false: [region] (YOLOv2), true: [yolo] (YOLOv3)
  int w = 0, h = 0;   // the layer's grid
  int n = 0;          // boxes per cell (region: num; yolo: mask count)
  int classes = 0, coords = 4;
  bool background = false, softmax = true;  // region options that matter for inference
  std::vector<float> biases;                // anchors (region: 2*num; yolo: 2*total)
  std::vector<int> mask;                    // yolo: which anchors; region: empty
  // region over a class tree (YOLO9000): each box gets the one class that
  // hierarchy_top_prediction picks at tree_thresh (Darknet's -hier), with its objectness.
  const ClassTree* tree = nullptr;
  float tree_thresh = 0.5f;
  // Scored against a data set whose classes map onto the layer's (the [region]'s map=,
  // YOLO9000's coco9k.map): box class j is the layer's class_map[j], its probability the
  // objectness times that class's (along the tree, if any), as Darknet's validation asks
  // get_region_detections with a map (its map from the .data file; Darknet applies one
  // only over a tree, here also without). Else (null) the layer's classes.
  const std::vector<int>* class_map = nullptr;
};

struct Detection {
  BoxF box;
  float objectness = 0;
  std::vector<float> prob;  // one per class, 0 below the threshold or after suppression
  int sort_class = 0;
};

// The head of a [region] or [yolo] layer of a parsed net.
DetectionHead detection_head(const LayerSpec& l);

// Checks a head for consistency (grid, n, coords, anchors, mask) and throws tt::Error if not.
void check_head(const DetectionHead& h);

// Floats of one sample of the head's output: n * (coords + 1 + classes) * h * w.
int64_t head_outputs(const DetectionHead& h);

// Darknet's inference forward of the head (forward_region_layer / forward_yolo_layer, CPU path,
// net.train = 0), in place on ONE sample of the raw input in Darknet's layout
// [n][coords+1+classes][h][w]:
//   region: logistic on x, y; logistic on the objectness unless background; the classes get a
//     softmax over classes+background entries starting at coords+!background (softmax=1), one
//     per group of a class tree, or a logistic (softmax=0). w, h and the mask coefficients (coords > 4) stay raw.
//   yolo: logistic on x, y, objectness and classes; w, h stay raw.
void activate_head(const DetectionHead& h, float* out);

// `out`: ONE sample of the layer's ACTIVATED output in Darknet's layout (what activate_head
// leaves). Appends Darknet's detections exactly as get_region_detections / get_yolo_detections
// followed by correct_region_boxes / correct_yolo_boxes (letterboxing of an img_w x img_h image
// into the net_w x net_h network input) with the given threshold; relative=true gives boxes
// normalised to the image, false in pixels of the image.
//   both: x = (col + tx) / w, y = (row + ty) / h (of the grid); prob[c] = objectness * class
//     prob if that is > thresh, else 0.
//   region: all n*h*w boxes, anchor-major (index a*h*w + cell); box w = exp(tw) * biases[2a] / w
//     (anchors in grid cells); objectness = scale if scale > thresh else 0 (scale = 1 with
//     background); probs only when objectness != 0.
//   yolo: only boxes with objectness > thresh, cell-major (cell, then anchor); box w =
//     exp(tw) * biases[2*mask[a]] / net_w (anchors in network input pixels).
// A network with several heads (YOLOv3): call this per head, in layer order, on the same vector,
// then do_nms_sort once over all of them (Darknet's fill_network_boxes).
// Not covered: softmax trees / hierarchical classes ([region] tree=, map=), Darknet's flip
// averaging (get_*_detections on a batch of 2, validate_detector_flip) and, with coords > 4,
// the mask coefficients (not returned).
void head_detections(const DetectionHead& h, const float* out, int img_w, int img_h, int net_w, int net_h, float thresh,
                     bool relative, std::vector<Detection>& dets);

// YOLOv1's [detection] layer (Darknet's get_detection_detections): ONE sample of the layer's
// output (class scores per cell, then `num` confidences per cell, then `num` boxes per
// cell) gives all side x side x num boxes, appended in cell order: centre (offset + column)
// / side x w, size (squared with sqrt=1) x w, objectness the confidence, prob = confidence x
// class score, 0 unless above thresh. w = h = 1 gives boxes relative to the picture, which
// the network saw resized (not letterboxed).
void yolov1_detections(const DetectionParams& p, const float* out, int w, int h, float thresh,
                       std::vector<Detection>& dets);
// Darknet's YOLOv1 programs (examples/yolo.c): test_yolo suppresses at 0.4, validate_yolo
// keeps boxes above 0.001 and suppresses at 0.5.
inline constexpr float kDarknetYolov1TestNms = 0.4f;
inline constexpr float kDarknetYolov1ValidThresh = 0.001f;
inline constexpr float kDarknetYolov1ValidNms = 0.5f;

// Darknet's do_nms_sort (box.c): detections with objectness 0 are swapped to the back (in
// Darknet's order, which is not stable) and left alone; then for each class k the rest is
// sorted by prob[k], descending (glibc's qsort is a stable merge sort, so ties keep their
// order), and every later box with IoU > nms_thresh (strictly) to a box with prob[k] != 0 gets
// prob[k] = 0. Objectness is never changed; sort_class is k of the last sort. All detections
// stay in the vector (the order after the call is Darknet's order).
void do_nms_sort(std::vector<Detection>& dets, int classes, float nms_thresh);

// ---- Evaluation
struct GroundTruth {
  BoxF box;
  int cls;
  bool difficult = false;
};  // normalised to the image (as Darknet labels)

struct ClassAp {
  int cls;
  double ap;       // NaN for a class without (non-difficult) ground truth
  int positives;   // non-difficult ground-truth boxes of the class
  int detections;  // detections counted for the class (prob[cls] > 0)
};

struct MapResult {
  std::vector<ClassAp> per_class;  // one entry per class, in class order
  double map = 0;                  // mean over the classes with positives > 0 (NaN if none)
};

// VOC mAP, as the VOC devkit (VOCevaldet.m, VOC2010+ AP) computes it:
// per class c, the detections of all images with prob[c] > 0 (Darknet's convention after
// thresholding and NMS) sorted by prob[c], descending; equal confidences keep their order
// (image, then position in the image's vector). Each detection, in that order, takes the
// ground truth of class c in its image with the highest IoU (box_iou; the first on ties):
//   IoU >= iou_thresh, truth not difficult, not yet taken -> true positive, the truth is taken;
//   IoU >= iou_thresh, truth already taken -> false positive (a duplicate), even if another
//     truth also overlaps enough (the devkit does not fall back to the second best);
//   IoU >= iou_thresh, truth difficult -> ignored (neither true nor false positive);
//   otherwise -> false positive.
// AP = area under the monotone precision envelope over all recall points (VOC2010+):
// sum over recall steps of (r_i - r_{i-1}) * max_{j >= i} p_j. A class with no non-difficult
// truth has AP NaN and is left out of the mean; a class with truth but no detection has AP 0.
// Detection and truth boxes must be in the same coordinates (e.g. both normalised).
// Throws tt::Error if the image counts differ, a prob vector does not have `classes` entries
// or a truth class is out of range.
MapResult voc_map(const std::vector<std::vector<Detection>>& dets_per_image,
                  const std::vector<std::vector<GroundTruth>>& truth_per_image, int classes,
                  float iou_thresh = kVocIou);

}  // namespace tt
