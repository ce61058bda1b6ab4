// Detections, NMS and VOC mAP (src/detect). Boxes and NMS are compared with Darknet itself:
// tests/oracle/darknet_detections runs Debian's libdarknet (parse_network_cfg on a cfg holding
// just the head, network_predict, get_network_boxes, do_nms_sort, box_iou) and returns the
// head's activated output with the detections; tiletrain's functions get the same activated
// output and must give the same detections in the same order. The cfg is [net] + [region] or
// [yolo]; the network input size Darknet needs for [yolo] anchors and for the letterbox
// correction is set by the driver (net->w/h after the forward pass, see darknet_detections.c);
// one case instead builds it in the cfg, a [maxpool] size=1 stride=32 in front of the head, so
// the override is shown to stand for a real stride-32 network. mAP is checked on hand-computed
// cases and against a brute force written differently (precision integrated at every recall
// level) on random data.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "detect/detections.hpp"
#include "model/net_spec.hpp"
#include "ops/op.hpp"
#include "test_util.hpp"
#include "util/dump.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

const std::string kDriver = DARKNET_DETECTIONS;

// "%.9g": a float printed so that Darknet's atof/strtof reads back the same float.
std::string fstr(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", double(v));
  return b;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

class DetectionsOracleBase {
 protected:
  // Empty if the driver is usable, else why not (the caller skips or fails).
  static std::string driver_missing() {
    if (kDriver.empty()) return "darknet_detections not built: libdarknet missing (apt-get install darknet)";
    return "";
  }
  void make_dir(const std::string& tag) {
    dir_ = fs::temp_directory_path() / ("tt_detections_" + std::to_string(getpid()) + "_" + tag);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void remove_dir() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  // Runs the driver; returns its exit status and fills `err` with its stderr.
  int run(const std::vector<std::string>& args, std::string& err) const {
    std::string cmd = "'" + kDriver + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " >/dev/null 2>'" + path("stderr") + "'";
    const int status = std::system(cmd.c_str());
    std::ifstream e(path("stderr"));
    err.assign(std::istreambuf_iterator<char>(e), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  fs::path dir_;
};

// Rows [N, 5 + classes] (x y w h objectness probs) <-> detections.
std::vector<Detection> rows_to_dets(const DumpTensor& t, int classes) {
  std::vector<Detection> d;
  const size_t k = size_t(5 + classes);
  for (size_t i = 0; i * k < t.data.size(); ++i) {
    const float* r = t.data.data() + i * k;
    Detection det;
    det.box = {r[0], r[1], r[2], r[3]};
    det.objectness = r[4];
    det.prob.assign(r + 5, r + k);
    d.push_back(det);
  }
  return d;
}

DumpTensor dets_to_rows(const std::vector<Detection>& dets, int classes) {
  DumpTensor t;
  t.dims = {int(dets.size()), 5 + classes};
  for (const auto& d : dets) {
    t.data.insert(t.data.end(), {d.box.x, d.box.y, d.box.w, d.box.h, d.objectness});
    t.data.insert(t.data.end(), d.prob.begin(), d.prob.end());
  }
  return t;
}

struct Diff {
  double box_rel = 0, prob_abs = 0;
};

// Same detections in the same order: boxes to box_tol (relative to max(1, |value|), pixel
// coordinates run to 640), objectness and probs to prob_tol (absolute).
Diff expect_same_dets(const std::vector<Detection>& got, const DumpTensor& ref, int classes, double box_tol,
                      double prob_tol, const std::string& what) {
  Diff d;
  EXPECT_EQ(ref.dims.size(), 2u) << what;
  if (ref.dims.size() != 2) return d;
  EXPECT_EQ(ref.dims[1], 5 + classes) << what;
  EXPECT_EQ(got.size(), size_t(ref.dims[0])) << what << ": number of detections";
  if (got.size() != size_t(ref.dims[0]) || ref.dims[1] != 5 + classes) return d;
  const std::vector<Detection> want = rows_to_dets(ref, classes);
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g[4] = {got[i].box.x, got[i].box.y, got[i].box.w, got[i].box.h};
    const float w[4] = {want[i].box.x, want[i].box.y, want[i].box.w, want[i].box.h};
    double box = 0, prob = std::fabs(double(got[i].objectness) - want[i].objectness);
    for (int k = 0; k < 4; ++k)
      box = std::max(box, std::fabs(double(g[k]) - w[k]) / std::max(1., std::fabs(double(w[k]))));
    for (int c = 0; c < classes; ++c)
      prob = std::max(prob, std::fabs(double(got[i].prob[size_t(c)]) - want[i].prob[size_t(c)]));
    d.box_rel = std::max(d.box_rel, box);
    d.prob_abs = std::max(d.prob_abs, prob);
    if ((box > box_tol || prob > prob_tol) && reported++ < 5) {
      std::ostringstream s;
      s << what << ": detection " << i << " differs: got (" << g[0] << ", " << g[1] << ", " << g[2] << ", " << g[3]
        << ") obj " << got[i].objectness << ", Darknet (" << w[0] << ", " << w[1] << ", " << w[2] << ", " << w[3]
        << ") obj " << want[i].objectness << "; box rel " << box << ", prob " << prob;
      ADD_FAILURE() << s.str();
    }
  }
  return d;
}

// ---------------------------------------------------------------- box_iou

BoxF corners(float x0, float y0, float x1, float y1) { return {(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0}; }

TEST(DetectionsBoxIou, HandCases) {
  const BoxF a{0.5f, 0.5f, 0.4f, 0.2f};
  EXPECT_EQ(box_iou(a, a), 1.f);
  EXPECT_EQ(box_iou(corners(0, 0, 1, 1), corners(2, 2, 3, 3)), 0.f);         // apart
  EXPECT_EQ(box_iou(corners(0, 0, 1, 1), corners(1, 0, 2, 1)), 0.f);         // touching
  EXPECT_EQ(box_iou(corners(0, 0, 1, 1), corners(0, 0, 0.5f, 1)), 0.5f);     // contained, half
  EXPECT_EQ(box_iou(corners(0, 0, 2, 1), corners(1, 0, 3, 1)), 1.f / 3.f);   // half overlap
  EXPECT_EQ(box_iou(corners(0, 0, 2, 2), corners(1, 1, 3, 3)), 1.f / 7.f);   // corner
  EXPECT_EQ(box_iou(corners(0, 0, 1, 1), BoxF{0.5f, 0.5f, 0.f, 0.f}), 0.f);  // a point
  EXPECT_TRUE(std::isnan(box_iou(BoxF{0, 0, 0, 0}, BoxF{0, 0, 0, 0})));      // 0/0 as Darknet
  EXPECT_EQ(box_iou(corners(0, 0, 1, 1), corners(0.25f, 0.25f, 0.75f, 0.75f)), 0.25f);
}

class DetectionsOracle : public ::testing::Test, public DetectionsOracleBase {
 protected:
  void SetUp() override {
    if (const std::string why = driver_missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(fs::exists(kDriver)) << kDriver << " is configured but not built";
    make_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { remove_dir(); }
};

// box_iou against libdarknet's on random and on grid-aligned pairs (exact IoUs such as 1/3, 1/2):
// the same float operations, so the same bits.
TEST_F(DetectionsOracle, BoxIouMatchesDarknet) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> pos(0.f, 1.f), size(0.f, 0.6f);
  std::uniform_int_distribution<int> q(0, 8);
  DumpTensor t;
  const int n = 4000;
  t.dims = {n, 8};
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 2; ++k) {
      if (i % 2) {
        t.data.insert(t.data.end(), {pos(rng), pos(rng), size(rng), size(rng)});
      } else {
        t.data.insert(t.data.end(), {q(rng) / 8.f, q(rng) / 8.f, (1 + q(rng)) / 16.f, (1 + q(rng)) / 16.f});
      }
    }
  }
  // a few degenerate pairs: a point inside a box, two points (0/0), one box twice
  const float extra[][8] = {
      {.5f, .5f, 0, 0, .5f, .5f, .2f, .2f}, {.1f, .1f, 0, 0, .1f, .1f, 0, 0}, {.3f, .4f, .2f, .1f, .3f, .4f, .2f, .1f}};
  for (const auto& e : extra) t.data.insert(t.data.end(), e, e + 8);
  t.dims[0] += 3;
  write_dump(path("boxes.bin"), {{"boxes", t}});
  std::string err;
  ASSERT_EQ(run({"iou", path("boxes.bin"), path("iou.bin")}, err), 0) << err;
  const Dump out = read_dump(path("iou.bin"));
  const DumpTensor& ref = out.at("iou");
  ASSERT_EQ(ref.data.size(), size_t(t.dims[0]));
  int differ = 0, overlapping = 0;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const float* r = t.data.data() + 8 * i;
    const float got = box_iou({r[0], r[1], r[2], r[3]}, {r[4], r[5], r[6], r[7]});
    overlapping += got > 0;
    if (!same_float(got, ref.data[i]) && differ++ < 5)
      ADD_FAILURE() << "pair " << i << ": " << got << " vs Darknet " << ref.data[i];
  }
  EXPECT_EQ(differ, 0);
  EXPECT_GT(overlapping, n / 10) << "too few overlapping pairs to test anything";
}

// ---------------------------------------------------------------- NMS by hand

Detection det(BoxF b, float obj, std::vector<float> prob) {
  Detection d;
  d.box = b;
  d.objectness = obj;
  d.prob = std::move(prob);
  return d;
}

TEST(DetectionsNms, SuppressionIsStrictlyAboveTheThreshold) {
  // IoU exactly 1/2 (a box and its left half).
  const BoxF big = corners(0, 0, 1, 1), half = corners(0, 0, 0.5f, 1);
  ASSERT_EQ(box_iou(big, half), 0.5f);
  std::vector<Detection> d = {det(half, .9f, {.6f}), det(big, .9f, {.8f})};
  do_nms_sort(d, 1, 0.5f);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].prob[0], .8f);  // sorted by prob, kept
  EXPECT_EQ(d[1].prob[0], .6f);  // IoU == threshold: kept
  EXPECT_EQ(d[0].sort_class, 0);
  std::vector<Detection> e = {det(half, .9f, {.6f}), det(big, .9f, {.8f})};
  do_nms_sort(e, 1, 0.49f);
  EXPECT_EQ(e[0].prob[0], .8f);
  EXPECT_EQ(e[1].prob[0], 0.f);     // suppressed
  EXPECT_EQ(e[1].objectness, .9f);  // objectness is left alone
}

TEST(DetectionsNms, ClassesAreIndependent) {
  const BoxF b = corners(0.1f, 0.1f, 0.5f, 0.5f);
  std::vector<Detection> d = {det(b, .9f, {.9f, 0.f}), det(b, .8f, {0.f, .7f}), det(b, .7f, {.5f, .6f})};
  do_nms_sort(d, 2, 0.45f);
  // After the last sort (class 1): .7 first, then .6 (suppressed for class 1), then 0.
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].prob, (std::vector<float>{0.f, .7f}));
  EXPECT_EQ(d[1].prob, (std::vector<float>{0.f, 0.f}));  // class 0 lost to .9, class 1 to .7
  EXPECT_EQ(d[2].prob, (std::vector<float>{.9f, 0.f}));
  for (const auto& x : d) EXPECT_EQ(x.sort_class, 1);
}

TEST(DetectionsNms, ObjectnessZeroIsIgnoredAndMovedBack) {
  const BoxF b = corners(0.2f, 0.2f, 0.6f, 0.6f);
  // z1, z2 have objectness 0 (and, artificially, a high prob): they neither suppress nor get
  // suppressed nor sorted; Darknet swaps them to the back one by one: [z1 a z2 c] -> [c a z2 z1].
  std::vector<Detection> d = {det(b, 0.f, {.99f}), det(b, .8f, {.5f}), det(b, 0.f, {.98f}), det(b, .7f, {.6f})};
  do_nms_sort(d, 1, 0.45f);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].prob[0], .6f);
  EXPECT_EQ(d[1].prob[0], 0.f);  // a lost to c
  EXPECT_EQ(d[2].prob[0], .98f);
  EXPECT_EQ(d[3].prob[0], .99f);
  EXPECT_EQ(d[2].sort_class, 0);  // never touched
}

TEST(DetectionsNms, SuppressedBoxStillSuppressesButZeroProbDoesNot) {
  // a > b > c by prob; IoU(a,b) and IoU(b,c) above, IoU(a,c) below the threshold. Darknet
  // skips a box whose prob is already 0, so b (suppressed by a) does not suppress c.
  std::vector<Detection> d = {det(corners(0, 0, 2, 1), .9f, {.9f}), det(corners(1, 0, 3, 1), .9f, {.8f}),
                              det(corners(2, 0, 4, 1), .9f, {.7f})};
  do_nms_sort(d, 1, 0.3f);
  EXPECT_EQ(d[0].prob[0], .9f);
  EXPECT_EQ(d[1].prob[0], 0.f);
  EXPECT_EQ(d[2].prob[0], .7f);
}

TEST(DetectionsNms, TiesKeepTheirOrder) {
  std::vector<Detection> d;
  for (int i = 0; i < 6; ++i) d.push_back(det(corners(float(2 * i), 0, float(2 * i + 1), 1), .5f, {.5f, float(i)}));
  do_nms_sort(d, 2, 0.45f);
  // the class-1 sort (the last) is by i, descending; the class-0 sort before kept the order
  for (int i = 0; i < 6; ++i) EXPECT_EQ(d[size_t(i)].prob[1], float(5 - i));
  std::vector<Detection> e;
  for (int i = 0; i < 6; ++i) e.push_back(det(corners(float(2 * i), 0, float(2 * i + 1), 1), .5f, {.5f}));
  do_nms_sort(e, 1, 0.45f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(e[size_t(i)].box.x, float(2 * i) + 0.5f) << "equal probs must keep order";
}

TEST(DetectionsNms, RejectsWrongClassCount) {
  std::vector<Detection> d = {det(corners(0, 0, 1, 1), .5f, {.5f})};
  EXPECT_THROW(do_nms_sort(d, 2, 0.45f), Error);
}

// ---------------------------------------------------------------- NMS against Darknet

// Random detections with many ties (quantized probs), exact IoUs at the threshold (boxes on a
// 1/8 grid) and objectness-0 entries; every value must come back in the same place, bit for bit.
// YOLOv1's [detection]: the layer's forward (softmax over each cell's classes) through our
// op, then every box get_network_boxes gives (relative, as test_yolo asks; in pixels, as
// validate_yolo does), and do_nms_sort at test_yolo's 0.4, against libdarknet.
TEST_F(DetectionsOracle, Yolov1MatchesDarknet) {
  for (const bool sqrt : {true, false}) {
    SCOPED_TRACE(sqrt ? "sqrt=1" : "sqrt=0");
    const int side = 5, num = 2, classes = 3;
    const int inputs = side * side * (classes + num * 5);
    const std::string cfg = "[net]\ninputs=" + std::to_string(inputs) +
                            "\n[detection]\nclasses=" + std::to_string(classes) +
                            "\ncoords=4\nside=" + std::to_string(side) + "\nnum=" + std::to_string(num) +
                            "\nsoftmax=1\nsqrt=" + (sqrt ? "1" : "0") + "\n";
    std::ofstream(path("v1.cfg")) << cfg;
    // Class scores spread wide, confidences in (0, 1) and beyond, box offsets and sizes
    // around their useful ranges.
    std::mt19937_64 rng(sqrt ? 11 : 12);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> raw(static_cast<size_t>(inputs));
    const int conf0 = side * side * classes, box0 = side * side * (classes + num);
    for (int i = 0; i < inputs; ++i)
      raw[size_t(i)] = i < conf0 ? 3.f * nd(rng) : i < box0 ? 0.5f + 0.4f * nd(rng) : 0.5f + 0.3f * nd(rng);
    write_dump(path("input.bin"), {{"input", {{1, inputs}, raw}}});
    struct Setting {
      int w, h;
      float thresh;
    };
    const std::vector<Setting> settings = {{1, 1, 0.2f}, {1, 1, kDarknetYolov1ValidThresh}, {640, 480, 0.2f}};
    std::vector<std::string> args = {
        "head", path("v1.cfg"), path("input.bin"), path("out.bin"), fstr(kDarknetYolov1TestNms), "0", "0"};
    for (const Setting& st : settings)
      args.insert(args.end(), {std::to_string(st.w), std::to_string(st.h), fstr(st.thresh), "0"});
    std::string err;
    ASSERT_EQ(run(args, err), 0) << err;
    const Dump ref = read_dump(path("out.bin"));
    // Our op's forward of the same values.
    // (tiletrain's [net] needs a shape: the same values as inputs x 1 x 1)
    const NetSpec net =
        parse_net("[net]\nwidth=1\nheight=1\nchannels=" + cfg.substr(cfg.find("inputs=") + 7), "v1.cfg");
    const std::unique_ptr<Op> op = make_op(net, net.layers.back());
    std::vector<float> ours(static_cast<size_t>(inputs));
    OpTensors t;
    t.in = {raw.data()};
    t.out = ours.data();
    op->forward(OpStep{.batch = 1, .training = false}, t);
    const DumpTensor& act = ref.at("activated");
    ASSERT_EQ(act.data.size(), ours.size());
    double act_diff = 0;
    for (size_t i = 0; i < ours.size(); ++i) act_diff = std::max(act_diff, double(std::fabs(ours[i] - act.data[i])));
    EXPECT_LE(act_diff, 1e-6) << "the [detection] op's forward vs Darknet's";
    int with_probs = 0, suppressed = 0;
    for (size_t s = 0; s < settings.size(); ++s) {
      const Setting& st = settings[s];
      SCOPED_TRACE("setting " + std::to_string(s));
      std::vector<Detection> dets;
      yolov1_detections(net.layers.back().detection(), act.data.data(), st.w, st.h, st.thresh, dets);
      expect_same_dets(dets, ref.at("raw/" + std::to_string(s)), classes, 1e-6, 1e-7, "raw");
      for (const auto& x : dets) with_probs += std::any_of(x.prob.begin(), x.prob.end(), [](float p) { return p > 0; });
      int before = 0, after = 0;
      for (const auto& x : dets)
        before += int(std::count_if(x.prob.begin(), x.prob.end(), [](float p) { return p > 0; }));
      do_nms_sort(dets, classes, kDarknetYolov1TestNms);
      for (const auto& x : dets)
        after += int(std::count_if(x.prob.begin(), x.prob.end(), [](float p) { return p > 0; }));
      suppressed += before - after;
      expect_same_dets(dets, ref.at("nms/" + std::to_string(s)), classes, 1e-6, 1e-7, "after NMS");
    }
    EXPECT_GT(with_probs, 0) << "no box above any threshold: the comparison would prove little";
    EXPECT_GT(suppressed, 0) << "NMS suppressed nothing: the comparison would prove little";
  }
}

// YOLO9000's head: each box's one class from the tree (hierarchy_predictions, then
// hierarchy_top_prediction at -hier 0.5) with its objectness, against libdarknet on a 1x1
// grid with one box (where its CPU forward of a tree is right; see darknet_detections.c).
// Many random heads: the tree walk takes every turn (a leaf, a stop below the threshold at
// the roots and further down).
TEST_F(DetectionsOracle, TreeClassesMatchDarknet) {
  const std::string tree = test::source_dir() + "/tests/fixtures/class_tree/tree.txt";
  const std::string cfg =
      "[net]\nwidth=1\nheight=1\nchannels=14\n[region]\nanchors=1.5,2\nnum=1\nclasses=9\n"
      "coords=4\nsoftmax=1\ntree=" +
      tree + "\n";
  std::ofstream(path("tree.cfg")) << cfg;
  const NetSpec net = parse_net(cfg, "tree.cfg");
  DetectionHead head = detection_head(net.layers.back());
  ASSERT_NE(head.tree, nullptr);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::set<int> classes_seen;
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<float> raw(14);
    for (float& v : raw) v = (trial % 3 + 1) * nd(rng);
    write_dump(path("input.bin"), {{"input", {{1, 14, 1, 1}, raw}}});
    std::string err;
    ASSERT_EQ(run({"head", path("tree.cfg"), path("input.bin"), path("out.bin"), fstr(kDarknetTestNms), "0", "0", "1",
                   "1", fstr(0.05f), "1"},
                  err),
              0)
        << err;
    const Dump ref = read_dump(path("out.bin"));
    std::vector<float> ours = raw;
    activate_head(head, ours.data());
    const DumpTensor& act = ref.at("activated");
    ASSERT_EQ(act.data.size(), ours.size());
    for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], act.data[i], 1e-6) << "activated " << i;
    std::vector<Detection> dets;
    head_detections(head, act.data.data(), 1, 1, 1, 1, 0.05f, true, dets);
    expect_same_dets(dets, ref.at("raw/0"), 9, 1e-6, 1e-7, "tree detections");
    for (const Detection& d : dets)
      for (int c = 0; c < 9; ++c)
        if (d.prob[size_t(c)] > 0) classes_seen.insert(c);
  }
  EXPECT_GE(classes_seen.size(), 3u) << "the walk ended in too few classes to prove much";
}

TEST_F(DetectionsOracle, NmsMatchesDarknet) {
  int suppressed = 0, zero_obj = 0;
  for (int seed = 0; seed < 6; ++seed) {
    std::mt19937_64 rng(uint64_t(100 + seed));
    const int classes = seed % 2 ? 3 : 1;
    const int n = seed < 4 ? 60 : 300;
    const bool quantized = seed < 4;
    const float thresh = seed % 3 == 0 ? 0.5f : seed % 3 == 1 ? kDarknetTestNms : 1.f / 3.f;
    std::uniform_int_distribution<int> q8(0, 8), q4(1, 4), q3(0, 3);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    std::vector<Detection> dets;
    for (int i = 0; i < n; ++i) {
      Detection d;
      if (quantized) {
        d.box = {q8(rng) / 8.f, q8(rng) / 8.f, q4(rng) / 8.f, q4(rng) / 8.f};
        d.objectness = u(rng) < 0.2f ? 0.f : q4(rng) / 4.f;
        for (int c = 0; c < classes; ++c) d.prob.push_back(q3(rng) / 4.f);
      } else {
        d.box = {u(rng), u(rng), 0.05f + 0.3f * u(rng), 0.05f + 0.3f * u(rng)};
        d.objectness = u(rng) < 0.1f ? 0.f : u(rng);
        for (int c = 0; c < classes; ++c) d.prob.push_back(u(rng) < 0.3f ? 0.f : u(rng));
      }
      zero_obj += d.objectness == 0;
      dets.push_back(d);
    }
    const std::string in = path("dets" + std::to_string(seed) + ".bin"),
                      out = path("nms" + std::to_string(seed) + ".bin");
    write_dump(in, {{"dets", dets_to_rows(dets, classes)}});
    std::string err;
    ASSERT_EQ(run({"nms", in, out, std::to_string(classes), fstr(thresh)}, err), 0) << err;
    const Dump ref = read_dump(out);
    std::vector<Detection> got = dets;
    do_nms_sort(got, classes, thresh);
    const std::vector<float> want = ref.at("nms").data;
    const DumpTensor mine = dets_to_rows(got, classes);
    ASSERT_EQ(mine.data.size(), want.size());
    int differ = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (!same_float(mine.data[i], want[i]) && differ++ < 5)
        ADD_FAILURE() << "seed " << seed << ": value " << i << " (detection " << i / size_t(5 + classes) << ") is "
                      << mine.data[i] << ", Darknet " << want[i];
    EXPECT_EQ(differ, 0) << "seed " << seed;
    const std::vector<float>& sc = ref.at("sort_class").data;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(float(got[i].sort_class), sc[i]) << "seed " << seed << " det " << i;
    for (size_t i = 0; i < got.size(); ++i)
      for (int c = 0; c < classes; ++c) suppressed += got[i].prob[size_t(c)] == 0 && dets[i].prob[size_t(c)] != 0;
  }
  EXPECT_GT(zero_obj, 0);
  EXPECT_GT(suppressed, 0);
}

// ---------------------------------------------------------------- heads against Darknet

enum class NetSize {
  Override,  // the driver sets net->w/h to net_w x net_h (a backbone of that input size)
  Grid,      // no backbone: the network input is the head's grid (Darknet's [net] size)
  Maxpool,   // a real stride in the cfg: [maxpool] size=1 stride=s, [net] = grid * s
};

struct HeadCase {
  std::string name;
  bool yolo = false;
  int w = 0, h = 0, classes = 0, coords = 4;
  bool background = false, softmax = true;
  std::vector<float> anchors = {};
  std::vector<int> mask = {};  // yolo
  NetSize net = NetSize::Override;
  int net_w = 0, net_h = 0;  // Override
  int stride = 0;            // Maxpool
  std::vector<std::pair<int, int>> images;
};

void PrintTo(const HeadCase& c, std::ostream* os) { *os << c.name; }

const std::vector<float> kVocAnchors = {1.08f, 1.19f, 3.42f, 4.41f, 6.63f, 11.38f, 9.42f, 5.11f, 16.62f, 10.52f};
const std::vector<float> kCocoAnchors = {10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326};

std::vector<HeadCase> head_cases() {
  using P = std::vector<std::pair<int, int>>;
  const P wide_tall = {{640, 480}, {300, 500}}, three = {{640, 480}, {300, 500}, {416, 416}};
  // clang-format off
  return {
    {.name = "region_voc_13x13", .w = 13, .h = 13, .classes = 20, .anchors = kVocAnchors,
     .net_w = 416, .net_h = 416, .images = three},
    {.name = "region_odd_7x5_logistic_1class", .w = 7, .h = 5, .classes = 1, .softmax = false,
     .anchors = {1.5f, 2.f, 3.f, 1.f, 0.7f, 0.9f}, .net_w = 224, .net_h = 160, .images = wide_tall},
    {.name = "region_background_5x9", .w = 5, .h = 9, .classes = 3, .background = true,
     .anchors = {1.f, 1.f, 2.5f, 3.f}, .net = NetSize::Grid, .images = wide_tall},
    {.name = "region_coords6_4x3", .w = 4, .h = 3, .classes = 2, .coords = 6, .anchors = {2.f, 1.f, 1.f, 2.f},
     .net_w = 128, .net_h = 96, .images = P{{640, 480}}},
    {.name = "yolo_coco_13x13", .yolo = true, .w = 13, .h = 13, .classes = 20, .anchors = kCocoAnchors,
     .mask = {6, 7, 8}, .net_w = 416, .net_h = 416, .images = three},
    {.name = "yolo_odd_11x7_1class", .yolo = true, .w = 11, .h = 7, .classes = 1,
     .anchors = {10, 14, 23, 27, 37, 58}, .mask = {0, 1}, .net_w = 352, .net_h = 224, .images = wide_tall},
    {.name = "yolo_grid_net_9x9", .yolo = true, .w = 9, .h = 9, .classes = 3,
     .anchors = {1.f, 1.5f, 2.f, 3.f, 3.5f, 2.5f}, .mask = {2, 0, 1}, .net = NetSize::Grid, .images = wide_tall},
    {.name = "yolo_maxpool_stride32_5x3", .yolo = true, .w = 5, .h = 3, .classes = 20, .anchors = kCocoAnchors,
     .mask = {3, 4, 5}, .net = NetSize::Maxpool, .stride = 32, .images = wide_tall},
  };
  // clang-format on
}

DetectionHead head_of(const HeadCase& c) {
  DetectionHead h;
  h.yolo = c.yolo;
  h.w = c.w;
  h.h = c.h;
  h.n = c.yolo ? int(c.mask.size()) : int(c.anchors.size() / 2);
  h.classes = c.classes;
  h.coords = c.coords;
  h.background = c.background;
  h.softmax = c.softmax;
  h.biases = c.anchors;
  if (c.yolo) h.mask = c.mask;
  return h;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string head_cfg(const HeadCase& c, int channels) {
  const int stride = c.net == NetSize::Maxpool ? c.stride : 1;
  std::ostringstream s;
  s << "[net]\nbatch=1\nsubdivisions=1\nwidth=" << c.w * stride << "\nheight=" << c.h * stride
    << "\nchannels=" << channels << "\n";
  if (c.net == NetSize::Maxpool) s << "[maxpool]\nsize=1\nstride=" << stride << "\n";
  std::vector<std::string> anchors;
  for (float a : c.anchors) anchors.push_back(fstr(a));
  if (c.yolo) {
    std::vector<std::string> mask;
    for (int m : c.mask) mask.push_back(std::to_string(m));
    s << "[yolo]\nmask=" << join(mask) << "\nanchors=" << join(anchors) << "\nclasses=" << c.classes
      << "\nnum=" << c.anchors.size() / 2 << "\n";
  } else {
    s << "[region]\nanchors=" << join(anchors) << "\nclasses=" << c.classes << "\ncoords=" << c.coords
      << "\nnum=" << c.anchors.size() / 2 << "\nsoftmax=" << c.softmax << "\nbackground=" << c.background << "\n";
  }
  return s.str();
}

class DetectionsHeadOracle : public ::testing::TestWithParam<HeadCase>, public DetectionsOracleBase {
 protected:
  void SetUp() override {
    if (const std::string why = driver_missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(fs::exists(kDriver)) << kDriver << " is configured but not built";
    make_dir(GetParam().name);
  }
  void TearDown() override { remove_dir(); }
};

TEST_P(DetectionsHeadOracle, MatchesDarknet) {
  const HeadCase& c = GetParam();
  const DetectionHead head = head_of(c);
  const int per_box = c.coords + 1 + c.classes, channels = head.n * per_box;
  const int64_t hw = int64_t(c.w) * c.h;
  ASSERT_EQ(head_outputs(head), channels * hw);

  // Raw head input: spreads that give boxes of all sizes, confident and unsure classes.
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> raw(size_t(channels * hw));
  for (int a = 0; a < head.n; ++a)
    for (int e = 0; e < per_box; ++e) {
      const float sigma = e < 2 ? 2.f : e < 4 ? 0.7f : e < c.coords ? 1.f : e == c.coords ? 2.f : 3.f;
      for (int64_t i = 0; i < hw; ++i) raw[size_t((a * per_box + e) * hw + i)] = sigma * nd(rng);
    }
  int net_w = c.net_w, net_h = c.net_h;
  std::vector<float> input = raw;
  if (c.net == NetSize::Grid) {
    net_w = c.w;
    net_h = c.h;
  } else if (c.net == NetSize::Maxpool) {
    // The head's values at every stride-th pixel, noise in between (the maxpool keeps
    // only the first pixel of each window).
    const int s = c.stride;
    net_w = c.w * s;
    net_h = c.h * s;
    input.assign(size_t(channels) * net_w * net_h, 0.f);
    for (auto& v : input) v = 5.f * nd(rng);
    for (int ch = 0; ch < channels; ++ch)
      for (int y = 0; y < c.h; ++y)
        for (int x = 0; x < c.w; ++x)
          input[(size_t(ch) * net_h + size_t(y * s)) * net_w + size_t(x * s)] = raw[size_t((ch * c.h + y) * c.w + x)];
  }
  {
    std::ofstream f(path("head.cfg"));
    f << head_cfg(c, channels);
  }
  const int in_h = c.net == NetSize::Maxpool ? net_h : c.h, in_w = c.net == NetSize::Maxpool ? net_w : c.w;
  write_dump(path("input.bin"), {{"input", {{1, channels, in_h, in_w}, input}}});

  // Our activation of the raw values (checked once against Darknet's).
  std::vector<float> ours_act = raw;
  activate_head(head, ours_act.data());

  // One driver run for all settings: every image size, Darknet's test and valid thresholds,
  // relative boxes and pixels.
  struct Setting {
    int img_w, img_h;
    float thresh;
    int relative;
  };
  std::vector<Setting> settings;
  for (auto [img_w, img_h] : c.images)
    for (float thresh : {kDarknetValidThresh, kDarknetTestThresh})
      for (int relative : {1, 0}) settings.push_back({img_w, img_h, thresh, relative});
  std::vector<std::string> args = {"head", path("head.cfg"), path("input.bin"), path("out.bin"), fstr(kDarknetTestNms)};
  if (c.net == NetSize::Override) {
    args.insert(args.end(), {std::to_string(net_w), std::to_string(net_h)});
  } else {
    args.insert(args.end(), {"0", "0"});
  }
  for (const Setting& st : settings)
    args.insert(args.end(),
                {std::to_string(st.img_w), std::to_string(st.img_h), fstr(st.thresh), std::to_string(st.relative)});
  std::string err;
  ASSERT_EQ(run(args, err), 0) << err;
  const Dump ref = read_dump(path("out.bin"));
  const DumpTensor& act = ref.at("activated");
  ASSERT_EQ(act.dims, (std::vector<int>{channels, c.h, c.w}));
  double act_diff = 0;
  for (size_t i = 0; i < act.data.size(); ++i)
    act_diff = std::max(act_diff, double(std::fabs(ours_act[i] - act.data[i])));

  Diff worst;
  int with_probs = 0, suppressed = 0;
  for (size_t s = 0; s < settings.size(); ++s) {
    const Setting& st = settings[s];
    const std::string what = c.name + " image " + std::to_string(st.img_w) + "x" + std::to_string(st.img_h) +
                             " thresh " + fstr(st.thresh) + " relative " + std::to_string(st.relative);
    SCOPED_TRACE(what);
    const std::string tag = "/" + std::to_string(s);
    // Darknet's activated output -> our detections -> our NMS.
    std::vector<Detection> dets;
    dets.push_back(det({9, 9, 9, 9}, 1, std::vector<float>(size_t(c.classes), 1.f)));  // appends, keeps
    head_detections(head, act.data.data(), st.img_w, st.img_h, net_w, net_h, st.thresh, st.relative, dets);
    ASSERT_EQ(dets.front().box.x, 9.f);
    dets.erase(dets.begin());
    const Diff d1 = expect_same_dets(dets, ref.at("raw" + tag), c.classes, 1e-5, 1e-6, what + " (before NMS)");
    for (const auto& x : dets) with_probs += std::any_of(x.prob.begin(), x.prob.end(), [](float p) { return p > 0; });
    const std::vector<Detection> before = dets;
    do_nms_sort(dets, c.classes, kDarknetTestNms);
    const Diff d2 = expect_same_dets(dets, ref.at("nms" + tag), c.classes, 1e-5, 1e-6, what + " (after NMS)");
    const std::vector<float>& sc = ref.at("sort_class" + tag).data;
    ASSERT_EQ(sc.size(), dets.size());
    for (size_t i = 0; i < dets.size(); ++i) ASSERT_EQ(float(dets[i].sort_class), sc[i]) << "detection " << i;
    int positive_before = 0, positive_after = 0;
    for (size_t i = 0; i < dets.size(); ++i)
      for (int k = 0; k < c.classes; ++k) {
        positive_before += before[i].prob[size_t(k)] > 0;
        positive_after += dets[i].prob[size_t(k)] > 0;
      }
    suppressed += positive_before - positive_after;
    worst.box_rel = std::max({worst.box_rel, d1.box_rel, d2.box_rel});
    worst.prob_abs = std::max({worst.prob_abs, d1.prob_abs, d2.prob_abs});
  }
  EXPECT_LE(act_diff, 1e-6) << "activate_head vs Darknet's forward";
  EXPECT_GT(with_probs, 0) << "no detection above any threshold: the comparison would prove little";
  EXPECT_GT(suppressed, 0) << "NMS suppressed nothing: the comparison would prove little";
  std::cout << "[ " << c.name << " ] " << settings.size() << " settings: activation max |diff| " << act_diff
            << ", box max rel diff " << worst.box_rel << ", prob max |diff| " << worst.prob_abs << ", " << with_probs
            << " boxes with a class, " << suppressed << " class probs suppressed\n";
}

INSTANTIATE_TEST_SUITE_P(, DetectionsHeadOracle, ::testing::ValuesIn(head_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(DetectionsHead, RejectsInconsistentHeads) {
  DetectionHead y;
  y.yolo = true;
  y.w = y.h = 3;
  y.n = 2;
  y.classes = 1;
  y.biases = {1, 1, 2, 2};
  y.mask = {0, 1};
  EXPECT_NO_THROW(check_head(y));
  y.mask = {0, 2};
  EXPECT_THROW(check_head(y), Error);  // anchor 2 of 2
  y.mask = {0};
  EXPECT_THROW(check_head(y), Error);  // n != mask count
  DetectionHead r;
  r.w = r.h = 3;
  r.n = 2;
  r.classes = 1;
  r.biases = {1, 1, 2, 2};
  EXPECT_NO_THROW(check_head(r));
  r.biases.pop_back();
  EXPECT_THROW(check_head(r), Error);
  r.biases.push_back(2);
  r.coords = 3;
  EXPECT_THROW(check_head(r), Error);
  r.coords = 4;
  std::vector<Detection> d;
  std::vector<float> out(size_t(head_outputs(r)), 0.5f);
  EXPECT_THROW(head_detections(r, out.data(), 0, 10, 32, 32, .5f, true, d), Error);
}

// A single box worked by hand: [region] cell (col 2, row 1) of a 4x3 grid, anchor 1; [yolo] the
// same cell with anchors in input pixels; no letterbox (image shape = net shape).
TEST(DetectionsHead, OneBoxByHand) {
  for (bool yolo : {false, true}) {
    DetectionHead h;
    h.yolo = yolo;
    h.w = 4;
    h.h = 3;
    h.n = 2;
    h.classes = 2;
    h.biases = yolo ? std::vector<float>{8, 8, 16, 24, 4, 4} : std::vector<float>{1, 1, 2, 3};
    if (yolo) h.mask = {2, 1};
    std::vector<float> out(size_t(head_outputs(h)), 0.f);
    const int hw = 12, cell = 1 * 4 + 2, per = 4 + 1 + 2, a = 1;
    auto at = [&](int e) -> float& { return out[size_t((a * per + e) * hw + cell)]; };
    at(0) = 0.5f;           // x in the cell
    at(1) = 0.25f;          // y
    at(2) = std::log(2.f);  // w = 2 * anchor
    at(3) = 0.f;            // h = anchor
    at(4) = 0.8f;           // objectness
    at(5) = 0.5f;           // class 0: 0.4
    at(6) = 0.25f;          // class 1: 0.2 (below .25 -> 0)
    std::vector<Detection> d;
    head_detections(h, out.data(), 64, 48, 64, 48, 0.25f, true, d);
    const Detection* got = nullptr;
    for (const auto& x : d)
      if (x.objectness > 0) {
        ASSERT_EQ(got, nullptr) << "one box only";
        got = &x;
      }
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(d.size(), yolo ? 1u : 24u);
    if (!yolo) {
      EXPECT_EQ(got - d.data(), a * hw + cell) << "region boxes are anchor-major";
    }
    EXPECT_FLOAT_EQ(got->box.x, 2.5f / 4);
    EXPECT_FLOAT_EQ(got->box.y, 1.25f / 3);
    // region: anchor (2, 3) cells -> w = 2*2/4, h = 3/3; yolo: anchor 1 = (16, 24) pixels of 64x48
    EXPECT_FLOAT_EQ(got->box.w, yolo ? 2 * 16.f / 64 : 2 * 2.f / 4);
    EXPECT_FLOAT_EQ(got->box.h, yolo ? 24.f / 48 : 3.f / 3);
    EXPECT_FLOAT_EQ(got->objectness, 0.8f);
    EXPECT_FLOAT_EQ(got->prob[0], 0.4f);
    EXPECT_EQ(got->prob[1], 0.f);
    // In pixels of a 640x480 image letterboxed into 64x48 (same aspect: no bars): x * 640 etc.
    std::vector<Detection> p;
    head_detections(h, out.data(), 640, 480, 64, 48, 0.25f, false, p);
    const Detection& q = p[size_t(got - d.data())];
    EXPECT_NEAR(q.box.x, got->box.x * 640, 1e-3);
    EXPECT_NEAR(q.box.h, got->box.h * 480, 1e-3);
    // Letterboxed 640x240 into 64x48: scaled to 64x24, bars of 12 rows: y' = (y - 12/48) / (24/48).
    std::vector<Detection> l;
    head_detections(h, out.data(), 640, 240, 64, 48, 0.25f, true, l);
    const Detection& b = l[size_t(got - d.data())];
    EXPECT_FLOAT_EQ(b.box.x, got->box.x);
    EXPECT_FLOAT_EQ(b.box.y, (got->box.y - 0.25f) * 2);
    EXPECT_FLOAT_EQ(b.box.h, got->box.h * 2);
  }
}

// Darknet keeps a value only if it is strictly above the threshold: objectness == thresh drops
// a [yolo] box and zeroes a [region] box's objectness; prob == thresh is 0.
TEST(DetectionsHead, ThresholdIsExclusive) {
  for (bool yolo : {false, true}) {
    DetectionHead h;
    h.yolo = yolo;
    h.w = h.h = 1;
    h.n = 2;
    h.classes = 2;
    h.biases = {1, 1, 2, 2};
    if (yolo) h.mask = {0, 1};
    // anchor 0: objectness 0.5 == thresh; anchor 1: objectness 1, classes 0.5 (== thresh) and 0.75
    std::vector<float> out = {0.5f, 0.5f, 0, 0, 0.5f, 1, 1, 0.5f, 0.5f, 0, 0, 1, 0.5f, 0.75f};
    ASSERT_EQ(out.size(), size_t(head_outputs(h)));
    std::vector<Detection> d;
    head_detections(h, out.data(), 10, 10, 10, 10, 0.5f, true, d);
    ASSERT_EQ(d.size(), yolo ? 1u : 2u);
    const Detection& kept = d.back();
    EXPECT_EQ(kept.objectness, 1.f);
    EXPECT_EQ(kept.prob, (std::vector<float>{0.f, 0.75f}));
    if (!yolo) {
      EXPECT_EQ(d[0].objectness, 0.f);
      EXPECT_EQ(d[0].prob, (std::vector<float>{0.f, 0.f}));
    }
  }
}

// Scored in the data set's classes through a class map (YOLO9000's coco9k.map): box class j
// is the layer's class map[j] with objectness x that class's probability, along the tree if
// there is one (each class's probability times its ancestors', from tests/fixtures'
// tree.txt: 7 and 8 under 6 under 1), thresholded like any class.
TEST(DetectionsHead, ClassMapScoresTheDataSetsClasses) {
  const ClassTree tree = read_class_tree(test::source_dir() + "/tests/fixtures/class_tree/tree.txt", "test");
  const std::vector<int> map = {3, 4, 7, 8, 5};
  const std::vector<int> parent = {-1, -1, -1, 0, 0, 1, 1, 6, 6};  // tree.txt
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(0.05f, 1.f);
  for (bool with_tree : {true, false}) {
    DetectionHead h;
    h.w = 2;
    h.h = 1;
    h.n = 1;
    h.classes = 9;
    h.biases = {1, 1};
    h.tree = with_tree ? &tree : nullptr;
    h.class_map = &map;
    std::vector<float> out(size_t(head_outputs(h)));
    for (float& v : out) v = u(rng);
    const float thresh = 0.02f;
    std::vector<Detection> d;
    head_detections(h, out.data(), 10, 10, 10, 10, thresh, true, d);
    ASSERT_EQ(d.size(), 2u);
    int kept = 0;
    for (int cell = 0; cell < 2; ++cell) {
      const float scale = out[size_t(4 * 2 + cell)];
      ASSERT_EQ(d[size_t(cell)].prob.size(), map.size());
      for (size_t j = 0; j < map.size(); ++j) {
        float p = 1;
        for (int c = map[j]; c >= 0; c = with_tree ? parent[size_t(c)] : -1) p *= out[size_t((5 + c) * 2 + cell)];
        const float want = scale * p > thresh ? scale * p : 0;
        EXPECT_FLOAT_EQ(d[size_t(cell)].prob[j], want) << "cell " << cell << " class " << j << " tree " << with_tree;
        kept += want > 0;
      }
    }
    EXPECT_GT(kept, 2) << "too few above the threshold to prove much";
    EXPECT_LT(kept, 10) << "none below the threshold";
    std::vector<int> bad = {3, 9};  // not one of the 9 classes
    h.class_map = &bad;
    EXPECT_THROW(head_detections(h, out.data(), 10, 10, 10, 10, thresh, true, d), Error);
  }
}

// ---------------------------------------------------------------- mAP by hand

Detection pred(BoxF b, std::vector<float> prob) { return det(b, 1.f, std::move(prob)); }

const BoxF A = corners(0.1f, 0.1f, 0.3f, 0.3f), B = corners(0.5f, 0.5f, 0.9f, 0.8f),
           C = corners(0.6f, 0.1f, 0.8f, 0.2f), D = corners(0.1f, 0.6f, 0.3f, 0.9f),
           Far = corners(0.4f, 0.0f, 0.45f, 0.05f);

TEST(DetectionsMap, PerfectDetectionsGiveOne) {
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0}, {B, 1}}, {{C, 1}}, {{D, 0}, {A, 1}}};
  const std::vector<std::vector<Detection>> dets = {
      {pred(A, {.9f, 0}), pred(B, {0, .3f})}, {pred(C, {0, .7f})}, {pred(D, {.2f, 0}), pred(A, {0, .5f})}};
  const MapResult r = voc_map(dets, truth, 2);
  ASSERT_EQ(r.per_class.size(), 2u);
  EXPECT_DOUBLE_EQ(r.per_class[0].ap, 1.0);
  EXPECT_DOUBLE_EQ(r.per_class[1].ap, 1.0);
  EXPECT_EQ(r.per_class[0].positives, 2);
  EXPECT_EQ(r.per_class[1].positives, 3);
  EXPECT_EQ(r.per_class[1].detections, 3);
  EXPECT_DOUBLE_EQ(r.map, 1.0);
}

TEST(DetectionsMap, FalsePositiveRankedFirst) {
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0}, {B, 0}}};
  // FP (p 0, r 0), TP (1/2, 1/2), TP (2/3, 1): envelope 2/3 on (0, 1] -> AP 2/3.
  EXPECT_DOUBLE_EQ(voc_map({{pred(Far, {.9f}), pred(A, {.8f}), pred(B, {.7f})}}, truth, 1).map, 2.0 / 3);
  // TP (1, 1/2), FP (1/2, 1/2), TP (2/3, 1): 1/2 * 1 + 1/2 * 2/3 = 5/6.
  EXPECT_DOUBLE_EQ(voc_map({{pred(A, {.9f}), pred(Far, {.8f}), pred(B, {.7f})}}, truth, 1).map, 5.0 / 6);
}

TEST(DetectionsMap, MissedBoxes) {
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0}, {B, 0}}, {{C, 0}, {D, 0}}};
  // two of four found, then a false positive: recall stops at 1/2 with precision 1.
  const MapResult r = voc_map({{pred(A, {.9f}), pred(Far, {.1f})}, {pred(D, {.8f})}}, truth, 1);
  EXPECT_DOUBLE_EQ(r.map, 0.5);
  EXPECT_EQ(r.per_class[0].positives, 4);
  EXPECT_EQ(r.per_class[0].detections, 3);
  // no detection at all: AP 0 (the class has truth, so it counts)
  EXPECT_DOUBLE_EQ(voc_map({{}, {}}, truth, 1).map, 0.0);
}

TEST(DetectionsMap, DuplicatesAreFalsePositives) {
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0}, {B, 0}}};
  // A .9 (TP), A again .8 (FP), B .7 (TP): 1/2 + 1/2 * 2/3.
  EXPECT_DOUBLE_EQ(voc_map({{pred(A, {.9f}), pred(A, {.8f}), pred(B, {.7f})}}, truth, 1).map, 5.0 / 6);
  // The devkit takes the best-overlapping truth even when it is taken: a second box on A is
  // a duplicate although it also overlaps E (IoU 0.78) which is still free.
  const BoxF a = {0.5f, 0.5f, 0.4f, 0.4f}, e = {0.55f, 0.5f, 0.4f, 0.4f};
  ASSERT_GT(box_iou(a, e), 0.7f);
  const MapResult r = voc_map({{pred(a, {.9f}), pred(a, {.8f})}}, {{{a, 0}, {e, 0}}}, 1);
  EXPECT_DOUBLE_EQ(r.map, 0.5);
}

TEST(DetectionsMap, ClassWithoutTruthIsLeftOut) {
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0}, {B, 1}}};
  const MapResult r = voc_map({{pred(A, {.9f, 0, .5f}), pred(Far, {0, .8f, .4f}), pred(B, {0, .7f, 0})}}, truth, 3);
  ASSERT_EQ(r.per_class.size(), 3u);
  EXPECT_DOUBLE_EQ(r.per_class[0].ap, 1.0);
  EXPECT_DOUBLE_EQ(r.per_class[1].ap, 0.5);  // FP first, then TP: precision 1/2 at recall 1
  EXPECT_TRUE(std::isnan(r.per_class[2].ap));
  EXPECT_EQ(r.per_class[2].positives, 0);
  EXPECT_EQ(r.per_class[2].detections, 2);
  EXPECT_DOUBLE_EQ(r.map, 0.75);  // (1 + 0.5) / 2, class 2 not in the mean
  EXPECT_TRUE(std::isnan(voc_map({{pred(A, {.9f})}}, {{}}, 1).map)) << "no truth at all: no mean";
}

TEST(DetectionsMap, DifficultTruthIsIgnored) {
  // A detection on a difficult box is neither true nor false; difficult boxes are no positives.
  const std::vector<std::vector<GroundTruth>> truth = {{{A, 0, true}, {B, 0}}};
  const MapResult r = voc_map({{pred(A, {.95f}), pred(B, {.5f})}}, truth, 1);
  EXPECT_EQ(r.per_class[0].positives, 1);
  EXPECT_DOUBLE_EQ(r.map, 1.0);
  // only difficult truth: left out like a class without truth
  EXPECT_TRUE(std::isnan(voc_map({{pred(A, {.95f})}}, {{{A, 0, true}}}, 1).per_class[0].ap));
}

TEST(DetectionsMap, ThresholdIsInclusiveAndImagesAreSeparate) {
  const BoxF big = corners(0, 0, 1, 1), half = corners(0, 0, 0.5f, 1);
  ASSERT_EQ(box_iou(big, half), 0.5f);
  EXPECT_DOUBLE_EQ(voc_map({{pred(half, {.9f})}}, {{{big, 0}}}, 1, 0.5f).map, 1.0);
  EXPECT_DOUBLE_EQ(voc_map({{pred(half, {.9f})}}, {{{big, 0}}}, 1, 0.51f).map, 0.0);
  // a perfect box in the wrong image does not match; prob 0 is no detection
  const MapResult r = voc_map({{pred(B, {.9f})}, {pred(A, {0.f})}}, {{{A, 0}}, {{B, 0}}}, 1);
  EXPECT_DOUBLE_EQ(r.map, 0.0);
  EXPECT_EQ(r.per_class[0].detections, 1);
}

TEST(DetectionsMap, EqualConfidencesKeepImageOrder) {
  // FP in image 0 and TP in image 1 with the same confidence: the FP ranks first.
  const std::vector<std::vector<GroundTruth>> truth = {{}, {{A, 0}}};
  EXPECT_DOUBLE_EQ(voc_map({{pred(Far, {.5f})}, {pred(A, {.5f})}}, truth, 1).map, 0.5);
  EXPECT_DOUBLE_EQ(voc_map({{pred(A, {.5f})}, {pred(Far, {.5f})}}, {{{A, 0}}, {}}, 1).map, 1.0);
}

TEST(DetectionsMap, RejectsInconsistentInput) {
  EXPECT_THROW(voc_map({{}}, {}, 1), Error);
  EXPECT_THROW(voc_map({{pred(A, {.5f, .5f})}}, {{}}, 1), Error);
  EXPECT_THROW(voc_map({{}}, {{{A, 1}}}, 1), Error);
  EXPECT_THROW(voc_map({{}}, {{}}, 1, 0.f), Error);
}

// ---------------------------------------------------------------- mAP against a brute force

// AP written differently: a (confidence desc, image, index) tuple sort, matching with
// max_element over an IoU table, and the area as the mean over recall levels k/positives
// (k = 1..positives) of the best precision reached at a recall >= k/positives.
std::vector<double> brute_force_ap(const std::vector<std::vector<Detection>>& dets,
                                   const std::vector<std::vector<GroundTruth>>& truth, int classes, float thr) {
  std::vector<double> ap;
  for (int c = 0; c < classes; ++c) {
    std::vector<std::tuple<float, int, int>> order;  // (-conf, image, index)
    int positives = 0;
    for (int im = 0; im < int(dets.size()); ++im) {
      for (int i = 0; i < int(dets[size_t(im)].size()); ++i)
        if (dets[size_t(im)][size_t(i)].prob[size_t(c)] > 0)
          order.emplace_back(-dets[size_t(im)][size_t(i)].prob[size_t(c)], im, i);
      for (const auto& t : truth[size_t(im)]) positives += t.cls == c && !t.difficult;
    }
    if (positives == 0) {
      ap.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    std::sort(order.begin(), order.end());
    std::set<std::pair<int, int>> used;      // (image, truth index)
    std::vector<std::pair<int, int>> curve;  // (true positives, ranked so far) after each counted detection
    int tp = 0, counted = 0;
    for (const auto& [negconf, im, i] : order) {
      std::vector<int> idx;
      std::vector<float> ious;
      for (int t = 0; t < int(truth[size_t(im)].size()); ++t)
        if (truth[size_t(im)][size_t(t)].cls == c) {
          idx.push_back(t);
          ious.push_back(box_iou(dets[size_t(im)][size_t(i)].box, truth[size_t(im)][size_t(t)].box));
        }
      bool is_tp = false;
      if (!ious.empty()) {
        const size_t k = size_t(std::max_element(ious.begin(), ious.end()) - ious.begin());
        if (ious[k] >= thr) {
          const int t = idx[k];
          if (truth[size_t(im)][size_t(t)].difficult) continue;
          is_tp = used.insert({im, t}).second;
        }
      }
      tp += is_tp;
      ++counted;
      curve.emplace_back(tp, counted);
    }
    double sum = 0;
    for (int k = 1; k <= positives; ++k) {
      double best = 0;
      for (const auto& [t, n] : curve)
        if (t >= k) best = std::max(best, double(t) / n);
      sum += best;
    }
    ap.push_back(sum / positives);
  }
  return ap;
}

TEST(DetectionsMap, MatchesBruteForceOnRandomData) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(uint64_t(1000 + seed));
    std::uniform_real_distribution<float> u(0.f, 1.f);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int classes = 1 + seed % 4, images = 3 + seed % 9;
    std::vector<std::vector<GroundTruth>> truth(static_cast<size_t>(images));
    std::vector<std::vector<Detection>> dets(static_cast<size_t>(images));
    auto conf = [&]() { return seed % 2 ? std::round(u(rng) * 10) / 10 : u(rng); };  // ties on odd seeds
    for (int im = 0; im < images; ++im) {
      const int nt = int(u(rng) * 6);
      for (int t = 0; t < nt; ++t) {
        const BoxF b{0.1f + 0.8f * u(rng), 0.1f + 0.8f * u(rng), 0.05f + 0.3f * u(rng), 0.05f + 0.3f * u(rng)};
        truth[size_t(im)].push_back({b, int(u(rng) * classes) % classes, u(rng) < 0.1f});
        // 0..2 noisy detections of it, sometimes with the wrong class too
        for (int k = int(u(rng) * 3); k > 0; --k) {
          Detection d = pred(
              {b.x + 0.03f * nd(rng), b.y + 0.03f * nd(rng), b.w * (1 + 0.2f * nd(rng)), b.h * (1 + 0.2f * nd(rng))},
              std::vector<float>(size_t(classes), 0.f));
          d.prob[size_t(truth[size_t(im)].back().cls)] = conf();
          if (u(rng) < 0.3f) d.prob[size_t(int(u(rng) * classes) % classes)] = conf();
          dets[size_t(im)].push_back(d);
        }
      }
      for (int k = int(u(rng) * 4); k > 0; --k) {  // clutter
        Detection d = pred({u(rng), u(rng), 0.05f + 0.3f * u(rng), 0.05f + 0.3f * u(rng)},
                           std::vector<float>(size_t(classes), 0.f));
        d.prob[size_t(int(u(rng) * classes) % classes)] = conf();
        dets[size_t(im)].push_back(d);
      }
      std::shuffle(dets[size_t(im)].begin(), dets[size_t(im)].end(), rng);
    }
    for (float thr : {0.5f, 0.3f, 0.7f}) {
      const MapResult r = voc_map(dets, truth, classes, thr);
      const std::vector<double> want = brute_force_ap(dets, truth, classes, thr);
      double sum = 0;
      int n = 0;
      for (int c = 0; c < classes; ++c) {
        const double got = r.per_class[size_t(c)].ap;
        if (std::isnan(want[size_t(c)])) {
          EXPECT_TRUE(std::isnan(got)) << "seed " << seed << " class " << c;
          continue;
        }
        EXPECT_NEAR(got, want[size_t(c)], 1e-12) << "seed " << seed << " class " << c << " IoU " << thr;
        sum += want[size_t(c)];
        ++n;
      }
      if (n) {
        EXPECT_NEAR(r.map, sum / n, 1e-12) << "seed " << seed;
      }
    }
  }
}

}  // namespace
}  // namespace tt
