// Darknet classifier data (data/darknet_data.hpp): the .data file with labels= and top=, a
// picture's class from its path, the up-front list check, the augmented samples and the
// loader; then `train --data X.data` on a classifier end to end, on one and on two ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cli_runner.hpp"
#include "data/darknet_data.hpp"
#include "model/net_spec.hpp"
#include "test_util.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;
using cli::Cli;
using cli::Result;
using cli::slurp;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Image random_image(int w, int h, int c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Image im(w, h, c);
  for (auto& v : im.data) v = float(rng() % 256) / 255.f;
  return im;
}

const std::vector<std::string> kLabels = {"cat", "dog", "bird"};

TEST(ClassifierData, ClassIsTheOneLabelInThePath) {
  EXPECT_EQ(class_in_path("train/dog/001.png", kLabels), 1);
  EXPECT_EQ(class_in_path("pics/003_bird.png", kLabels), 2);
  std::string e = error_of([] { class_in_path("pics/004_cow.png", kLabels); });
  EXPECT_NE(e.find("004_cow.png"), std::string::npos) << e;
  EXPECT_NE(e.find("none of the 3 class labels"), std::string::npos) << e;
  e = error_of([] { class_in_path("cat/dog.png", kLabels); });
  EXPECT_NE(e.find("'cat' and 'dog'"), std::string::npos) << e;
  // One class: Darknet's fill_truth takes a path without the label as its absence.
  EXPECT_EQ(class_in_path("x/none.png", {"cat"}), -1);
  EXPECT_EQ(class_in_path("x/cat.png", {"cat"}), 0);
}

TEST(ClassifierData, TopKAsDarknetRanksTies) {
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.4f, 0.05f};
  EXPECT_TRUE(in_top_k(p.data(), 5, 1, 1));   // the first of the two highest
  EXPECT_FALSE(in_top_k(p.data(), 5, 3, 1));  // the tie goes to the lower class
  EXPECT_TRUE(in_top_k(p.data(), 5, 3, 2));
  EXPECT_FALSE(in_top_k(p.data(), 5, 2, 2));
  EXPECT_TRUE(in_top_k(p.data(), 5, 2, 3));
  EXPECT_FALSE(in_top_k(p.data(), 5, 4, 4));
  EXPECT_TRUE(in_top_k(p.data(), 5, 4, 5));
}

// --size keeps the crop sizes' ratio to the width (Darknet's min_ratio, max_ratio).
TEST(ClassifierData, CropSizesFollowTheInputSize) {
  NetSpec net = parse_net("[net]\nwidth=28\nheight=28\nchannels=1\nmin_crop=28\nmax_crop=32\n[avgpool]\n", "c.cfg");
  resize_net(net, 56, 56);
  EXPECT_EQ(net.min_crop, 56);
  EXPECT_EQ(net.max_crop, 64);
  NetSpec plain = parse_net("[net]\nwidth=224\nheight=224\nchannels=3\n[avgpool]\n", "p.cfg");
  resize_net(plain, 112, 112);
  EXPECT_EQ(plain.min_crop, 112);  // the defaults, width and 2 x width
  EXPECT_EQ(plain.max_crop, 224);
}

class ClassifierFiles : public Cli {};

TEST_F(ClassifierFiles, DataFileWithLabelsAndTop) {
  write("labels.txt", "cat\ndog\nbird\n");
  write("train.txt", "a.png\n");
  write("c.data", "classes=3\ntrain=train.txt\nlabels=labels.txt\ntop=2\nbackup=backup/\n");
  const DataConfig d = load_data_config(path("c.data"), DataKind::Classification);
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(d.top, 2);
  EXPECT_EQ(d.class_names, kLabels);
  EXPECT_EQ(d.names_line, 3);
  struct Case {
    std::string text;
    std::vector<std::string> said;
  };
  write("twice.txt", "cat\ndog\ncat\n");
  for (const Case& c : std::vector<Case>{
           {"classes=3\ntrain=train.txt\nnames=labels.txt\n", {"b.data", "no labels= line"}},
           {"classes=3\ntrain=train.txt\nlabels=labels.txt\ntop=4\n", {"b.data:4:", "top=4", "3 classes"}},
           {"classes=3\ntrain=train.txt\nlabels=labels.txt\ntop=x\n", {"b.data:4:", "'x'"}},
           {"classes=3\ntrain=train.txt\nlabels=labels.txt\ntop=0\n", {"b.data:4:", "top must be"}},
           {"classes=3\ntrain=train.txt\nlabels=twice.txt\n", {"twice.txt", "'cat' is given twice"}},
           {"classes=2\ntrain=train.txt\nlabels=labels.txt\n", {"3 class names", "classes=2"}},
           {"classes=3\ntrain=train.txt\nlabels=labels.txt\ntree=9k.tree\n", {"b.data:4:", "tree=", "not supported"}},
           {"classes=3\ntrain=train.txt\nlabels=gone.txt\n", {"b.data:3:", "labels file", "gone.txt"}},
       }) {
    write("b.data", c.text);
    const std::string e = error_of([&] { load_data_config(path("b.data"), DataKind::Classification); });
    for (const std::string& s : c.said) EXPECT_NE(e.find(s), std::string::npos) << "no '" << s << "' in: " << e;
  }
  // A detector's .data still needs names= (labels= is not its key).
  write("d.data", "classes=3\ntrain=train.txt\nlabels=labels.txt\n");
  EXPECT_NE(error_of([&] { load_data_config(path("d.data")); }).find("no names= line"), std::string::npos);
}

TEST_F(ClassifierFiles, ListCheckNamesTheLineOfAPathWithoutItsLabel) {
  fs::create_directories(path("p"));
  save_png(random_image(8, 8, 3, 1), path("p/1_cat.png"));
  save_png(random_image(8, 8, 3, 2), path("p/2_cow.png"));
  write("list.txt", path("p/1_cat.png") + "\n" + path("p/2_cow.png") + "\n");
  const std::string e = error_of([&] { check_list(path("list.txt"), classifier_truth(kLabels), 0, false, {}); });
  EXPECT_NE(e.find("list.txt:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("2_cow.png"), std::string::npos) << e;
  // A bad label is never skipped as a bad picture would be: the data set is wrong.
  EXPECT_NE(error_of([&] { check_list(path("list.txt"), classifier_truth(kLabels), 0, true, {}); }).find("list.txt:2:"),
            std::string::npos);
}

TEST_F(ClassifierFiles, SamplesAreSeededOneHotAndCropped) {
  fs::create_directories(path("p"));
  const Image im = random_image(20, 14, 3, 7);
  save_png(im, path("p/dog.png"));
  ClassifierAugment a{.width = 12,
                      .height = 12,
                      .channels = 3,
                      .angle = 10,
                      .aspect = 1.2f,
                      .min_crop = 12,
                      .max_crop = 18,
                      .center = false,
                      .hue = 0.1f,
                      .saturation = 1.5f,
                      .exposure = 1.5f};
  std::vector<float> x(3 * 12 * 12), y(3), x2(x.size()), y2(3), x3(x.size());
  load_classifier_sample(path("p/dog.png"), kLabels, a, 5, x.data(), y.data());
  load_classifier_sample(path("p/dog.png"), kLabels, a, 5, x2.data(), y2.data());
  load_classifier_sample(path("p/dog.png"), kLabels, a, 6, x3.data(), y2.data());
  EXPECT_EQ(x, x2);  // the same seed, the same sample
  EXPECT_NE(x, x3);
  EXPECT_EQ(y, (std::vector<float>{0, 1, 0}));
  for (float v : x) ASSERT_TRUE(v >= 0 && v <= 1) << v;
  // No augmentation but the scale: a 12x12 picture scaled to 12 is itself, or its mirror
  // (up to the rounding of Darknet's HSV round trip, which runs whatever the distortion).
  save_png(random_image(12, 12, 3, 9), path("p/bird.png"));
  const Image small = load_image(path("p/bird.png"));
  ClassifierAugment plain{.width = 12, .height = 12, .channels = 3, .min_crop = 12, .max_crop = 12};
  int mirrored = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    load_classifier_sample(path("p/bird.png"), kLabels, plain, seed, x.data(), y.data());
    Image flipped = small;
    flip_image(flipped);
    auto near = [](float p, float q) { return std::abs(p - q) <= 1e-6f; };
    const bool same = std::equal(x.begin(), x.end(), small.data.begin(), near);
    const bool flip = std::equal(x.begin(), x.end(), flipped.data.begin(), near);
    ASSERT_TRUE(same || flip) << "seed " << seed;
    mirrored += flip && !same;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 8);
  // Validation: the centred square of the shorter side, resized (Darknet's center_crop_image).
  std::vector<float> v(3 * 14 * 14);
  load_classifier_picture(path("p/dog.png"), 14, 14, 3, v.data());
  const Image loaded = load_image(path("p/dog.png"));
  for (int c = 0; c < 3; ++c)
    for (int yy = 0; yy < 14; ++yy)
      for (int xx = 0; xx < 14; ++xx) ASSERT_EQ(v[size_t((c * 14 + yy) * 14 + xx)], loaded.at(xx + 3, yy, c));
  // One channel: the grey picture, the exposure as on a grey RGB picture.
  std::vector<float> g(12 * 12);
  a.channels = 1;
  load_classifier_sample(path("p/dog.png"), kLabels, a, 5, g.data(), y.data());
  for (float val : g) ASSERT_TRUE(val >= 0 && val <= 1) << val;
}

TEST_F(ClassifierFiles, LoaderGivesTheSameBatchesOnAnyThreadCount) {
  fs::create_directories(path("p"));
  std::vector<std::string> paths;
  for (int i = 0; i < 5; ++i) {
    paths.push_back(path("p/" + std::to_string(i) + "_" + kLabels[size_t(i % 3)] + ".png"));
    save_png(random_image(10 + i, 9, 1, uint64_t(i)), paths.back());
  }
  const ClassifierAugment a{
      .width = 8, .height = 8, .channels = 1, .angle = 5, .min_crop = 8, .max_crop = 10, .exposure = 1.3f};
  auto run = [&](int threads) {
    BatchLoader::Options o;
    o.paths = paths;
    o.sample = classifier_sample(kLabels, a, kDefaultMaxPixels);
    o.image_floats = 64;
    o.truth_floats = 3;
    o.batch = 2;
    o.threads = threads;
    BatchLoader l(o);
    std::vector<float> all, x(2 * 64), y(2 * 3);
    for (int64_t s = 0; s < 6; ++s) {
      l.get(s, x.data(), y.data());
      all.insert(all.end(), x.begin(), x.end());
      all.insert(all.end(), y.begin(), y.end());
    }
    return all;
  };
  EXPECT_EQ(run(1), run(3));
}

// train --data on a classifier's .data: pictures with their class in the path, a tiled run.
class CliClassifier : public Cli {
 protected:
  // n pictures per class under train/ and 2 under valid/, each class its own brightness so
  // that the net can learn something.
  std::string data_set(int n) {
    for (const char* part : {"train", "valid"}) {
      fs::create_directories(path(part));
      std::string list;
      const int count = std::string(part) == "train" ? n : 2;
      for (size_t c = 0; c < kLabels.size(); ++c)
        for (int i = 0; i < count; ++i) {
          Image im = random_image(14 + i % 3, 12, 3, uint64_t(c * 100 + size_t(i)));
          for (float& v : im.data) v = 0.25f * v + 0.3f * float(c);
          const std::string p = std::string(part) + "/" + std::to_string(i) + "_" + kLabels[c] + ".png";
          save_png(im, path(p));
          list += p + "\n";
        }
      write(std::string(part) + ".txt", list);
    }
    write("labels.txt", "cat\ndog\nbird\n");
    return write("c.data", "classes=3\ntrain=train.txt\nvalid=valid.txt\nlabels=labels.txt\n");
  }
  std::string cfg() {
    return write("c.cfg", R"([net]
batch=6
width=12
height=12
channels=3
learning_rate=0.05
momentum=0.9
min_crop=12
max_crop=14
angle=3
hue=.05
saturation=1.2
exposure=1.2

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=linear

[shortcut]
from=-2
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=3
size=1
stride=1
pad=0
activation=linear

[avgpool]

[softmax]
)");
  }
};

TEST_F(CliClassifier, TrainsTiledAndReportsTopK) {
  const std::string data = data_set(4), net = cfg();
  Result r =
      run("train --cfg c.cfg --data c.data --epochs 3 --log-every 1 --grid 2x2 --metrics m.jsonl "
          "--checkpoint ck --save-weights w.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "training c.cfg on c.data: 6 steps of 6 pictures (2 per epoch), grid 2x2");
  EXPECT_CONTAINS(r.out, "held-out accuracy after 2 steps: top-1 ");
  EXPECT_CONTAINS(r.out, "held-out accuracy after 6 steps: top-1 ");
  EXPECT_CONTAINS(r.out, "top-3 100.00% (6 pictures)");  // three classes: always among the top 3
  EXPECT_TRUE(fs::exists(path("w.weights")));
  const std::string metrics = slurp(path("m.jsonl"));
  EXPECT_CONTAINS(metrics, "\"accuracy\":");
  EXPECT_CONTAINS(metrics, "\"top_k\":1.0");
  // Resumed from the checkpoint of step 6 with 2 more steps: the same as 8 straight steps.
  r = run("train --cfg c.cfg --data c.data --steps 8 --grid 2x2 --resume ck --save-weights resumed.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("train --cfg c.cfg --data c.data --steps 8 --grid 2x2 --save-weights straight.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(path("resumed.weights")), slurp(path("straight.weights")));
}

TEST_F(CliClassifier, BadDataIsNamedBeforeTraining) {
  data_set(2);
  cfg();
  // a picture whose path holds no label, then one with two
  write("train.txt", "train/0_cat.png\ntrain/0_dog.png\ntrain/1_cat.png\nvalid/0_cat.png\n");
  fs::copy_file(path("train/0_cat.png"), path("train/0_cow.png"));
  write("valid.txt", "train/0_cow.png\n");
  Result r = run("train --cfg c.cfg --data c.data --steps 1 --save-weights w.weights");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "valid.txt:1:");
  EXPECT_CONTAINS(r.err, "0_cow.png");
  EXPECT_FALSE(fs::exists(path("w.weights")));
  fs::copy_file(path("train/0_cat.png"), path("train/dog_cat.png"));
  write("valid.txt", "train/dog_cat.png\n");
  r = run("train --cfg c.cfg --data c.data --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "'cat' and 'dog'");
  // the net's outputs against classes=
  write("c.data", "classes=2\ntrain=train.txt\nlabels=two.txt\n");
  write("two.txt", "cat\ndog\n");
  r = run("train --cfg c.cfg --data c.data --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "3 outputs");
  EXPECT_CONTAINS(r.err, "c.data:1");
  // a detector's .data (names=) given to a classifier
  write("c.data", "classes=3\ntrain=train.txt\nnames=labels.txt\n");
  r = run("train --cfg c.cfg --data c.data --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "no labels= line");
  // augmentation keys out of range
  std::string bad = slurp(path("c.cfg"));
  write("c.data", "classes=3\ntrain=train.txt\nlabels=labels.txt\n");
  write("c.cfg", bad.replace(bad.find("max_crop=14"), 11, "max_crop=10"));
  r = run("train --cfg c.cfg --data c.data --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "c.cfg:9:");
  EXPECT_CONTAINS(r.err, "max_crop (10) must be from min_crop (12)");
}

}  // namespace
}  // namespace tt
