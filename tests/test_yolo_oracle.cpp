// The YOLO layers against Darknet's own library (tests/oracle: darknet_forward --train runs
// one training forward and backward in libdarknet and writes every layer's output, the
// deltas a loss layer computed, the deltas after backward and the costs). Each case builds
// a small net around the layer under test, trains one micro-batch in tiletrain (no update)
// and compares, on the same input and truth:
// - the output of the layer under test and the loss;
// - dL/d(input) of the whole net, which went through the layer's backward (Darknet's delta
//   is -dL/d, so tiletrain's input delta must be minus Darknet's).
// [region]: libdarknet's CPU backward_region_layer is commented out (it passes no delta at
// all); tiletrain follows Darknet's GPU backward, which multiplies x, y and objectness by the
// logistic's derivative. So for [region] the expected input delta is computed here from the
// delta Darknet's forward wrote, with that formula written out independently.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "layers/detector.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "util/dump.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

constexpr double kTol = 1e-4;

struct Case {
  std::string name;
  std::string cfg;
  int64_t seen = 0;
  std::vector<std::pair<int, int>> grids = {{1, 1}, {2, 2}};
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const std::string kNet = "learning_rate=0.001\nmomentum=0.9\ndecay=0.0005\n";

// 3 anchors, 4 classes: 27 channels, on a 7x5 grid (odd, not square).
std::string region_cfg(const std::string& opts) {
  return "[net]\nbatch=2\nwidth=5\nheight=7\nchannels=27\n" + kNet +
         "[maxpool]\nsize=1\nstride=1\n"
         "[region]\nanchors=0.8,1.2, 2.0,1.5, 3.1,3.3\nnum=3\nclasses=4\ncoords=4\n" +
         opts;
}

// 4 anchors in input pixels, this layer predicts anchors 1 and 3: 2 x (5 + 3) = 16
// channels, on a 7x5 grid of a 56x40 input (the max-pool routes deltas to its winners).
std::string yolo_cfg(const std::string& opts) {
  return "[net]\nbatch=2\nwidth=40\nheight=56\nchannels=16\n" + kNet +
         "[maxpool]\nsize=8\nstride=8\n"
         "[yolo]\nanchors=6,9, 12,20, 25,14, 30,40\nnum=4\nmask=1,3\nclasses=3\n" +
         opts;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // YOLOv2's own settings (yolov2.cfg), early (the anchor prior is on) and late.
  const std::string v2 =
      "softmax=1\nrescore=1\nbias_match=1\nobject_scale=5\nnoobject_scale=1\nclass_scale=1\ncoord_scale=1\n"
      "thresh=.6\njitter=.3\nabsolute=1\nrandom=1\n";
  c.push_back({"region_yolov2_early", region_cfg(v2), 0, {{1, 1}}});
  c.push_back({"region_yolov2_late", region_cfg(v2), 20000, {{1, 1}, {2, 2}}});
  // Logistic classes, no rescore, no bias match, other scales and threshold.
  c.push_back({"region_logistic",
               region_cfg("softmax=0\nobject_scale=2\nnoobject_scale=0.5\nclass_scale=1.5\ncoord_scale=2\nthresh=.3\n"),
               13000,
               {{1, 1}}});
  c.push_back({"yolo_v3", yolo_cfg("ignore_thresh=.5\ntruth_thresh=1\njitter=.3\nrandom=1\n"), 0});
  c.push_back({"yolo_truth_thresh", yolo_cfg("ignore_thresh=.2\ntruth_thresh=.3\n"), 0, {{1, 1}}});
  // Route (two inputs and one), reorg, upsample and a downsample, a convolution between
  // them, SSE cost: everything reaches the input delta through every backward.
  c.push_back({"route_reorg_upsample",
               "[net]\nbatch=2\nwidth=8\nheight=12\nchannels=4\n" + kNet +
                   "[maxpool]\nsize=1\nstride=1\n"                                            // 0: 4x12x8
                   "[reorg]\nstride=2\n"                                                      // 1: 16x6x4
                   "[upsample]\nstride=2\n"                                                   // 2: 16x12x8
                   "[route]\nlayers=-1,-3\n"                                                  // 3: 20x12x8
                   "[convolutional]\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n"  // 4
                   "[upsample]\nstride=-2\n"                                                  // 5: 6x6x4 (sums)
                   "[route]\nlayers=-5\n"                                                     // 6: = layer 1, 16x6x4
                   "[reorg]\nstride=2\nreverse=1\n"                                           // 7: 4x12x8
                   "[upsample]\nstride=2\nscale=0.5\n"                                        // 8: 4x24x16
                   "[cost]\ntype=sse\n",
               0,
               {{1, 1}, {2, 2}}});
  // yolov1's locally connected layer, between convolutions: its output, and the input
  // delta through its backward (col2im) and the convolutions'. (The first convolution's
  // workspace keeps libdarknet's, which it sizes too small for [local], inside its buffer.)
  c.push_back({"local",
               "[net]\nbatch=2\nwidth=7\nheight=6\nchannels=3\n" + kNet +
                   "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
                   "[local]\nsize=3\nstride=1\npad=1\nfilters=5\nactivation=leaky\n"
                   "[local]\nsize=2\nstride=2\nfilters=3\nactivation=logistic\n"
                   "[cost]\ntype=sse\n",
               0,
               {{1, 1}, {2, 2}}});
  // strided.cfg's ramp activation, through a convolution's and a connected layer's backward.
  c.push_back({"ramp",
               "[net]\nbatch=2\nwidth=7\nheight=6\nchannels=3\n" + kNet +
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=ramp\n"
                   "[connected]\noutput=5\nactivation=ramp\n"
                   "[cost]\ntype=sse\n",
               0,
               {{1, 1}, {2, 2}}});
  // darknet9000's head: a class tree's softmax (no loss of its own) and the masked cost,
  // which leaves out the truths set to Darknet's SECRET_NUM (here the last two groups).
  c.push_back({"tree_softmax_masked",
               "[net]\nbatch=2\nwidth=5\nheight=4\nchannels=3\n" + kNet +
                   "[convolutional]\nfilters=9\nsize=3\npad=1\nactivation=leaky\n"
                   "[avgpool]\n"
                   "[softmax]\ngroups=1\nnoloss=1\ntree=" +
                   test::source_dir() +
                   "/tests/fixtures/class_tree/tree.txt\n"
                   "[cost]\ntype=masked\n",
               0,
               {{1, 1}, {2, 2}}});
  // YOLO9000's head: classes over a tree (a softmax per group, the class loss along the
  // truth's path), truth classes through a map, and a picture whose one truth is a class
  // only (x, y above 100000). libdarknet's CPU forward of a tree is NaN (its temperature is
  // never set) and reads the wrong planes; darknet_forward sets the temperature, and with one
  // box on a 1x1 grid the planes are right: its GPU semantics, which tiletrain has.
  const std::string tree = test::source_dir() + "/tests/fixtures/class_tree/";
  c.push_back({"region_tree_map",
               "[net]\nbatch=2\nwidth=1\nheight=1\nchannels=14\n" + kNet +
                   "[maxpool]\nsize=1\nstride=1\n"
                   "[region]\nanchors=0.8,1.2\nnum=1\nclasses=9\ncoords=4\nsoftmax=1\n"
                   "rescore=1\nbias_match=1\nobject_scale=5\nthresh=.6\ntree=" +
                   tree + "tree.txt\nmap=" + tree + "map.txt\n",
               20000,
               {{1, 1}}});
  // YOLOv1's loss on a 3x3 grid, 2 boxes per cell, 3 classes: 3^2 x (2 x 5 + 3) = 117 values
  // from a connected layer. yolov1.cfg's settings, then softmax classes and forced boxes.
  const std::string v1_net = "[net]\nbatch=2\nwidth=6\nheight=5\nchannels=3\n" + kNet +
                             "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
                             "[connected]\noutput=117\nactivation=linear\n"
                             "[detection]\nclasses=3\ncoords=4\nside=3\nnum=2\n";
  c.push_back({"detection_yolov1",
               v1_net + "rescore=1\nsoftmax=0\nsqrt=1\njitter=.2\nobject_scale=1\nnoobject_scale=.5\n"
                        "class_scale=1\ncoord_scale=5\n",
               0,
               {{1, 1}, {2, 2}}});
  c.push_back({"detection_softmax_forced",
               v1_net + "softmax=1\nforced=1\nobject_scale=2\nnoobject_scale=.3\nclass_scale=1.5\ncoord_scale=2\n",
               0,
               {{1, 1}}});
  return c;
}

class YoloOracle : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (std::string(DARKNET_FORWARD).empty()) GTEST_SKIP() << "darknet_forward not built (libdarknet missing)";
    dir_ = fs::temp_directory_path() / ("tt_yolo_oracle_" + std::to_string(getpid()) + "_" + GetParam().name);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::vector<float> tensor(const std::string& file) const {
    const Dump d = read_dump(path(file));
    return d.at("output").data;
  }
  fs::path dir_;
};

// Boxes on distinct cells, some sharing a cell's neighbourhood; class ids in range.
std::vector<float> make_truth(const NetSpec& net, int n, std::mt19937_64& rng) {
  std::vector<float> t(size_t(n * net.truth_size()), 0.f);
  if (!net.detector()) {
    std::normal_distribution<float> d(0.f, 0.5f);
    for (auto& v : t) v = d(rng);
    return t;
  }
  int classes = 1;
  for (const auto& l : net.layers)
    if (l.detector())
      classes = l.det().truth_classes();
    else if (l.is(kDetectionKind))
      classes = l.detection().classes;
  std::uniform_real_distribution<float> c(0.03f, 0.97f), s(0.05f, 0.9f);
  for (int b = 0; b < n; ++b)
    for (int k = 0; k < 4 + b; ++k) {
      float* box = t.data() + b * net.truth_size() + k * 5;
      box[0] = c(rng);
      box[1] = c(rng);
      box[2] = s(rng);
      box[3] = s(rng);
      box[4] = float(rng() % uint64_t(classes));
    }
  return t;
}

// Darknet's [detection] reads its truth per cell of its grid (fill_truth_region, written
// out here from data.c): is object, one-hot class, x and y within the cell, w, h; the first
// box of a cell wins.
std::vector<float> cell_truth(const LayerSpec& l, const std::vector<float>& boxes, int n, int64_t per_sample) {
  const DetectionParams& p = l.detection();
  const int per_cell = 5 + p.classes;
  std::vector<float> t(size_t(n) * p.side * p.side * per_cell, 0.f);
  for (int b = 0; b < n; ++b)
    for (int k = 0; k < p.max_boxes; ++k) {
      const float* box = boxes.data() + b * per_sample + 5 * k;
      if (box[0] == 0) break;
      const int col = int(box[0] * p.side), row = int(box[1] * p.side);
      float* cell = t.data() + (size_t(b) * p.side * p.side + size_t(col + row * p.side)) * per_cell;
      if (cell[0] != 0) continue;
      cell[0] = 1;
      cell[1 + int(box[4])] = 1;
      cell[1 + p.classes] = box[0] * p.side - col;
      cell[2 + p.classes] = box[1] * p.side - row;
      cell[3 + p.classes] = box[2];
      cell[4 + p.classes] = box[3];
    }
  return t;
}

TEST_P(YoloOracle, TrainingStepMatchesDarknet) {
  const Case& c = GetParam();
  const std::string cfg = path("net.cfg");
  std::ofstream(cfg) << c.cfg;
  const NetSpec net = load_net(cfg);
  Params params(net);
  test::random_params(params, net, 5);
  save_weights(params, net, path("net.weights"));
  const int n = net.micro_batch();
  std::mt19937_64 rng(99);
  std::vector<float> x(size_t(n * net.input().size()));
  std::normal_distribution<float> d(0.f, 1.5f);
  for (auto& v : x) v = d(rng);
  std::vector<float> truth = make_truth(net, n, rng);
  if (c.name == "tree_softmax_masked")  // classes 5..8: groups without a class of the picture
    for (int b = 0; b < n; ++b)
      for (int k = 5; k < 9; ++k) truth[size_t(b * net.truth_size() + k)] = -1234;
  if (c.name == "region_tree_map") {  // the second picture: a class-only truth first
    truth[size_t(net.truth_size())] = 200000;
    truth[size_t(net.truth_size()) + 1] = 200000;
  }
  const Shape in = net.input();
  write_dump(path("input.bin"), {{"input", {{n, in.c, in.h, in.w}, x}}});
  if (net.layers.back().is(kDetectionKind)) {
    const std::vector<float> cells = cell_truth(net.layers.back(), truth, n, net.truth_size());
    write_dump(path("truth.bin"), {{"truth", {{n, int(cells.size()) / n}, cells}}});
  } else {
    write_dump(path("truth.bin"), {{"truth", {{n, int(net.truth_size())}, truth}}});
  }

  const std::string cmd = std::string("'") + DARKNET_FORWARD + "' --train '" + cfg + "' '" + path("net.weights") +
                          "' '" + path("input.bin") + "' '" + path("truth.bin") + "' - " + std::to_string(c.seen) +
                          " '" + dir_.string() + "' >/dev/null 2>'" + path("stderr") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "darknet_forward --train failed, see " << path("stderr");

  // Darknet's results: the last layer under test (the one before [cost], or the detector).
  const int L = int(net.layers.size());
  const int probe = net.layers.back().is(kCostKind) ? L - 2 : L - 1;
  std::vector<float> ref_out = tensor("output_" + std::to_string(probe) + ".bin");
  // Darknet's masked cost writes SECRET_NUM into its input (the softmax's output) where the
  // truth is masked: checked here, then those entries are left out of the comparison.
  std::vector<size_t> masked;
  for (size_t k = 0; k < truth.size() && net.layers.back().is(kCostKind); ++k)
    if (truth[k] == -1234) {
      EXPECT_EQ(ref_out[k], -1234.f) << "Darknet's masked cost left output " << k;
      masked.push_back(k);
    }
  double ref_cost = 0;
  for (int l = 0; l < L; ++l)
    if (fs::exists(path("cost_" + std::to_string(l) + ".bin")))
      ref_cost += tensor("cost_" + std::to_string(l) + ".bin")[0];
  std::vector<float> ref_din = tensor("input_delta.bin");
  const LayerSpec& last = net.layers.back();
  if (last.is(kRegionKind)) {  // Darknet's GPU backward, through the identity max-pool
    const std::vector<float> delta = tensor("loss_delta_" + std::to_string(L - 1) + ".bin");
    const std::vector<float> out = tensor("output_" + std::to_string(L - 1) + ".bin");
    const int wh = last.out.h * last.out.w, per_box = 5 + last.det().classes;
    for (size_t k = 0; k < delta.size(); ++k) {
      const int entry = int(k / size_t(wh)) % per_box;
      const double g = entry == 0 || entry == 1 || entry == 4 ? double(out[k]) * (1 - out[k]) : 1.;
      ref_din[k] = float(delta[k] * g);
    }
  }
  // The check must be able to fail: Darknet's input delta and output are not trivial.
  double mag = 0;
  for (float v : ref_din) mag = std::max(mag, double(std::fabs(v)));
  ASSERT_GT(mag, 1e-3) << "Darknet's input delta is (nearly) zero: the comparison would prove nothing";

  for (auto [rows, cols] : c.grids) {
    SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols));
    Params p(net);
    load_weights(p, net, path("net.weights"));
    p.seen = c.seen - n;  // the trainer adds this micro-batch, as Darknet does before forward
    TrainOptions opt;
    opt.rows = rows;
    opt.cols = cols;
    opt.need_input_delta = true;
    LocalComm comm;
    Trainer tr(net, p, opt, comm);
    const double loss = tr.forward_backward(x.data(), truth.data());
    const float* got = tr.output_of(probe);
    ASSERT_EQ(ref_out.size(), size_t(n * net.layers[size_t(probe)].out.size()));
    for (size_t k : masked) ref_out[k] = got[k];
    EXPECT_LE(test::rel_diff(got, ref_out.data(), ref_out.size()), kTol) << "output of layer " << probe;
    EXPECT_NEAR(loss, ref_cost, kTol * std::max(1.0, ref_cost)) << "loss";
    std::vector<float> neg(ref_din.size());
    for (size_t i = 0; i < neg.size(); ++i) neg[i] = -ref_din[i];
    EXPECT_LE(test::rel_diff(tr.input_delta(), neg.data(), neg.size()), kTol) << "dL/d(input)";
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, YoloOracle, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// A class-only truth (x, y above 100000) on a 3x2 grid with 2 boxes a cell: the box whose
// objectness times tree probability of the class is highest learns the class along its
// path (cat: its group {cat, dog}, then animal's {animal, plant, thing}), no other box
// learns a class, every box but that one learns "no object", and nothing else is learned.
TEST(RegionTree, ClassOnlyTruthTeachesTheSurestBox) {
  const std::string tree = test::source_dir() + "/tests/fixtures/class_tree/tree.txt";
  const NetSpec net = parse_net(
      "[net]\nwidth=3\nheight=2\nchannels=28\n[region]\nanchors=1,1,2,2\nnum=2\n"
      "classes=9\ncoords=4\nsoftmax=1\nnoobject_scale=0.5\nclass_scale=2\ntree=" +
          tree + "\n",
      "tree.cfg");
  const LayerSpec& l = net.layers.back();
  const int wh = 6, per_box = 14;
  auto at = [&](int n, int loc, int e) { return size_t((n * per_box + e) * wh + loc); };
  std::vector<float> out(size_t(2 * per_box * wh), 0.2f), delta(out.size());
  for (int n = 0; n < 2; ++n)
    for (int loc = 0; loc < wh; ++loc) out[at(n, loc, 4)] = 0.3f + 0.01f * float(n * wh + loc);
  // Box 0 at cell 4: less sure of an object than box 1 at cell 5 (0.46 < 0.6), far surer of
  // cat (0.9 x 0.8 against 0.2 x 0.2).
  out[at(0, 4, 4)] = 0.46f;
  out[at(0, 4, 5 + 0)] = 0.9f;  // animal
  out[at(0, 4, 5 + 3)] = 0.8f;  // cat
  out[at(1, 5, 4)] = 0.6f;
  std::vector<float> truth(size_t(l.det().truth_floats()), 0.f);
  truth[0] = truth[1] = 200000;
  truth[2] = truth[3] = 0.1f;
  truth[4] = 3;  // cat
  detector_delta(l, DetectorArgs{3, 2, 50000}, out.data(), truth.data(), 1, delta.data());
  for (int n = 0; n < 2; ++n)
    for (int loc = 0; loc < wh; ++loc)
      for (int e = 0; e < per_box; ++e) {
        const size_t k = at(n, loc, e);
        float want = 0;
        if (e == 4 && !(n == 0 && loc == 4)) want = 0.5f * (0 - out[k]);
        if (n == 0 && loc == 4 && e >= 5) {
          const int c = e - 5;
          if (c == 3 || c == 0)
            want = 2 * (1 - out[k]);  // the path: cat, animal
          else if (c == 4 || c == 1 || c == 2)
            want = 2 * (0 - out[k]);  // their groups' others
        }
        EXPECT_EQ(delta[k], want) << "box " << n << " cell " << loc << " entry " << e;
      }
}

// Beyond libdarknet's reach (a 1x1 grid, one box): on a 3x2 grid with 2 boxes a cell, each
// group of the tree is a softmax over its classes in every cell of every box (Darknet's GPU
// softmax_tree), written out here; x, y and objectness go through the logistic.
TEST(RegionTree, ForwardIsASoftmaxPerGroupInEveryCell) {
  const std::string tree = test::source_dir() + "/tests/fixtures/class_tree/tree.txt";
  const NetSpec net = parse_net(
      "[net]\nwidth=3\nheight=2\nchannels=28\n[region]\nanchors=1,1,2,2\nnum=2\n"
      "classes=9\ncoords=4\nsoftmax=1\ntree=" +
          tree + "\n",
      "tree.cfg");
  const LayerSpec& l = net.layers.back();
  const int wh = 6, per_box = 14;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> in(size_t(2 * 2 * per_box * wh)), out(in.size());
  for (auto& v : in) v = nd(rng);
  detector_forward(l, in.data(), out.data(), 2);
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {3, 4}, {5, 6}, {7, 8}};  // tree.txt's parents
  for (int b = 0; b < 2; ++b)
    for (int n = 0; n < 2; ++n)
      for (int loc = 0; loc < wh; ++loc) {
        auto at = [&](int e) { return size_t(((b * 2 + n) * per_box + e) * wh + loc); };
        for (int e : {0, 1, 4}) EXPECT_NEAR(out[at(e)], 1 / (1 + std::exp(-in[at(e)])), 1e-6);
        for (int e : {2, 3}) EXPECT_EQ(out[at(e)], in[at(e)]);
        for (const std::vector<int>& g : groups) {
          double sum = 0;
          for (int c : g) sum += std::exp(double(in[at(5 + c)]));
          for (int c : g) EXPECT_NEAR(out[at(5 + c)], std::exp(double(in[at(5 + c)])) / sum, 1e-6) << "class " << c;
        }
      }
}

}  // namespace
}  // namespace tt

#include "data/image.hpp"
#include "detect/detections.hpp"

namespace tt {
namespace {

// The whole inference path against Darknet's test_detector (darknet_forward --detect): the
// same weights and picture (a PNG, so both decoders see the same pixels), letterboxed,
// forward, boxes of every detector layer, NMS: the same detections, boxes within 1e-3.
struct DetCase {
  std::string name, cfg;
};
void PrintTo(const DetCase& c, std::ostream* os) { *os << c.name; }

class DetectOracle : public ::testing::TestWithParam<DetCase> {};

TEST_P(DetectOracle, SameDetectionsAndMapAsDarknet) {
  if (std::string(DARKNET_FORWARD).empty()) GTEST_SKIP() << "darknet_forward not built (libdarknet missing)";
  const auto& [name, cfg_text] = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("tt_detect_oracle_" + std::to_string(getpid()) + "_" + name);
  fs::create_directories(dir);
  const std::string cfg = (dir / "net.cfg").string(), weights = (dir / "net.weights").string();
  std::ofstream(cfg) << cfg_text;
  const NetSpec net = load_net(cfg);
  Params params(net);
  test::random_params(params, net, 11);
  save_weights(params, net, weights);
  std::mt19937_64 rng(5);
  Image pic(83, 61, 3);
  for (float& v : pic.data) v = float(rng() % 256) / 255.f;
  save_png(pic, (dir / "pic.png").string());
  const float thresh = 0.3f;
  const std::string cmd = std::string("'") + DARKNET_FORWARD + "' --detect '" + cfg + "' '" + weights + "' '" +
                          (dir / "pic.png").string() + "' " + std::to_string(thresh) + " '" +
                          (dir / "dets.bin").string() + "' >/dev/null 2>'" + (dir / "stderr").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << (dir / "stderr").string();
  const DumpTensor ref = read_dump((dir / "dets.bin").string()).at("output");

  LocalComm comm;
  TrainOptions opt;
  opt.rows = opt.cols = 2;
  Trainer tr(net, params, opt, comm);
  const Image loaded = load_image((dir / "pic.png").string());
  const Image boxed = letterbox_image(loaded, net.width, net.height);
  tr.predict(boxed.data.data());
  std::vector<Detection> dets;
  int classes = 0;
  for (const LayerSpec& l : net.layers)
    if (l.detector()) {
      head_detections(detection_head(l), tr.output_of(l.index), loaded.w, loaded.h, net.width, net.height, thresh, true,
                      dets);
      classes = l.det().classes;
    }
  do_nms_sort(dets, classes, kDarknetTestNms);
  std::vector<const Detection*> kept;
  for (const Detection& d : dets)
    if (std::any_of(d.prob.begin(), d.prob.end(), [](float p) { return p > 0; })) kept.push_back(&d);
  const int per = 5 + classes;
  ASSERT_EQ(ref.dims.size(), 2u);
  ASSERT_EQ(ref.dims[1], per);
  ASSERT_GT(ref.dims[0], 0) << "Darknet found nothing above " << thresh << ": the comparison would prove little";
  ASSERT_EQ(int(kept.size()), ref.dims[0]);
  for (size_t i = 0; i < kept.size(); ++i) {
    SCOPED_TRACE("detection " + std::to_string(i));
    const float* r = ref.data.data() + i * size_t(per);
    const BoxF& b = kept[i]->box;
    EXPECT_NEAR(b.x, r[0], 1e-3);
    EXPECT_NEAR(b.y, r[1], 1e-3);
    EXPECT_NEAR(b.w, r[2], 1e-3);
    EXPECT_NEAR(b.h, r[3], 1e-3);
    EXPECT_NEAR(kept[i]->objectness, r[4], 1e-3);
    for (int c = 0; c < classes; ++c) EXPECT_NEAR(kept[i]->prob[size_t(c)], r[5 + c], 1e-3) << "class " << c;
  }
  // The same mAP from Darknet's boxes as from ours (pjreddie's Darknet has no mAP command:
  // both go through voc_map). Truth: Darknet's boxes, each moved sideways by 20 to 35 % of
  // its width (IoU 0.67 down to 0.48), so some are found and some are not.
  std::vector<Detection> theirs;
  std::vector<GroundTruth> truth;
  for (int i = 0; i < ref.dims[0]; ++i) {
    const float* r = ref.data.data() + size_t(i) * size_t(per);
    Detection d;
    d.box = {r[0], r[1], r[2], r[3]};
    d.objectness = r[4];
    d.prob.assign(r + 5, r + per);
    theirs.push_back(d);
    const int cls = int(std::max_element(d.prob.begin(), d.prob.end()) - d.prob.begin());
    if (d.prob[size_t(cls)] <= 0 || i % 3 == 2) continue;  // some detections are false positives
    BoxF t = d.box;
    t.x += (0.2f + 0.05f * float(i % 4)) * t.w;
    truth.push_back({t, cls});
  }
  std::vector<Detection> ours;
  for (const Detection* d : kept) ours.push_back(*d);
  const MapResult a = voc_map({ours}, {truth}, classes), b = voc_map({theirs}, {truth}, classes);
  std::printf("%s: mAP@0.5 %.6f from tiletrain's boxes, %.6f from Darknet's (%zu truths)\n", name.c_str(), a.map, b.map,
              truth.size());
  EXPECT_GT(b.map, 0.05) << "too few matches for the comparison to mean much";
  EXPECT_LT(b.map, 0.95);
  EXPECT_NEAR(a.map, b.map, 1e-6);
  for (int c = 0; c < classes; ++c) {
    if (b.per_class[size_t(c)].positives == 0) continue;
    EXPECT_NEAR(a.per_class[size_t(c)].ap, b.per_class[size_t(c)].ap, 1e-6) << "class " << c;
  }
  if (!HasFailure()) fs::remove_all(dir);
}

const std::string kDetNet = "[net]\nbatch=1\nwidth=64\nheight=64\nchannels=3\n";
const std::string kDetBody =
    "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n";

INSTANTIATE_TEST_SUITE_P(
    Nets, DetectOracle,
    ::testing::Values(
        DetCase{"region", kDetNet + kDetBody +
                              "[convolutional]\nfilters=21\nsize=1\nactivation=linear\n"
                              "[region]\nanchors=0.7,0.9, 1.5,1.2, 2.5,2.8\nnum=3\nclasses=2\nsoftmax=1\n"},
        DetCase{"two_yolo", kDetNet + kDetBody +
                                "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
                                "[yolo]\nmask=2,3\nanchors=6,8, 12,10, 20,22, 30,26\nnum=4\nclasses=2\n"
                                "[route]\nlayers=-3\n[upsample]\nstride=2\n"
                                "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
                                "[yolo]\nmask=0,1\nanchors=6,8, 12,10, 20,22, 30,26\nnum=4\nclasses=2\n"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tt
