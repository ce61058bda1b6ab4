// VOC mean average precision over a set of images, following the VOC devkit's VOCevaldet.m
// (greedy matching in confidence order, difficult truth ignored, VOC2010+ all-point AP) with
// Darknet's convention that a detection belongs to class c when prob[c] > 0.
#include <algorithm>
#include <limits>

#include "detect/detections.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

struct Ranked {
  float conf;
  int image;
  int det;
};

// VOC2010+ AP from the true/false positive flags in rank order (ignored detections left out).
double average_precision(const std::vector<char>& tp, int positives) {
  const size_t n = tp.size();
  std::vector<double> rec(n), prec(n);
  int ntp = 0;
  for (size_t i = 0; i < n; ++i) {
    ntp += tp[i];
    rec[i] = double(ntp) / positives;
    prec[i] = double(ntp) / double(i + 1);
  }
  // Monotone envelope: precision at rank i becomes the best precision at any rank >= i.
  for (size_t i = n; i-- > 1;) prec[i - 1] = std::max(prec[i - 1], prec[i]);
  double ap = 0, last_rec = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rec[i] != last_rec) ap += (rec[i] - last_rec) * prec[i];
    last_rec = rec[i];
  }
  return ap;
}

}  // namespace

MapResult voc_map(const std::vector<std::vector<Detection>>& dets_per_image,
                  const std::vector<std::vector<GroundTruth>>& truth_per_image, int classes, float iou_thresh) {
  if (dets_per_image.size() != truth_per_image.size())
    fail("voc_map: detections for ", dets_per_image.size(), " images but ground truth for ", truth_per_image.size());
  if (classes < 1) fail("voc_map: ", classes, " classes");
  if (!(iou_thresh > 0 && iou_thresh <= 1)) fail("voc_map: IoU threshold ", iou_thresh, " is not in (0, 1]");
  const int images = int(dets_per_image.size());
  for (int im = 0; im < images; ++im) {
    for (size_t d = 0; d < dets_per_image[size_t(im)].size(); ++d)
      if (dets_per_image[size_t(im)][d].prob.size() != size_t(classes))
        fail("voc_map: image ", im, " detection ", d, " has ", dets_per_image[size_t(im)][d].prob.size(),
             " class probabilities, expected ", classes);
    for (size_t t = 0; t < truth_per_image[size_t(im)].size(); ++t) {
      const int c = truth_per_image[size_t(im)][t].cls;
      if (c < 0 || c >= classes) fail("voc_map: image ", im, " truth ", t, " has class ", c, " of ", classes);
    }
  }

  MapResult r;
  double sum = 0;
  int counted = 0;
  std::vector<std::vector<char>> taken(dets_per_image.size());
  for (int c = 0; c < classes; ++c) {
    ClassAp ca{c, 0., 0, 0};
    std::vector<Ranked> ranked;
    for (int im = 0; im < images; ++im) {
      const auto& dets = dets_per_image[size_t(im)];
      for (size_t d = 0; d < dets.size(); ++d)
        if (dets[d].prob[size_t(c)] > 0) ranked.push_back({dets[d].prob[size_t(c)], im, int(d)});
      const auto& truth = truth_per_image[size_t(im)];
      taken[size_t(im)].assign(truth.size(), 0);
      for (const GroundTruth& t : truth) ca.positives += t.cls == c && !t.difficult;
    }
    ca.detections = int(ranked.size());
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.conf > b.conf; });

    std::vector<char> tp;  // per counted detection, in rank order: 1 true, 0 false positive
    tp.reserve(ranked.size());
    for (const Ranked& rk : ranked) {
      const BoxF& box = dets_per_image[size_t(rk.image)][size_t(rk.det)].box;
      const auto& truth = truth_per_image[size_t(rk.image)];
      float best = -std::numeric_limits<float>::infinity();
      int best_t = -1;
      for (size_t t = 0; t < truth.size(); ++t) {
        if (truth[t].cls != c) continue;
        const float iou = box_iou(box, truth[t].box);
        if (iou > best) {
          best = iou;
          best_t = int(t);
        }
      }
      if (best_t >= 0 && best >= iou_thresh) {
        if (truth[size_t(best_t)].difficult) continue;  // neither true nor false positive
        char& used = taken[size_t(rk.image)][size_t(best_t)];
        tp.push_back(!used);
        used = 1;
      } else {
        tp.push_back(0);
      }
    }
    if (ca.positives == 0) {
      ca.ap = std::numeric_limits<double>::quiet_NaN();
    } else {
      ca.ap = average_precision(tp, ca.positives);
      sum += ca.ap;
      ++counted;
    }
    r.per_class.push_back(ca);
  }
  r.map = counted ? sum / counted : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace tt
