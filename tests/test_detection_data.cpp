// Detection data (data/image.hpp, data/darknet_data.hpp): decoding, Darknet's resize and
// letterbox against libdarknet's own (tests/oracle: darknet_forward --image), the label and
// .data formats with every bad input named by file and line, the augmentation (boxes follow
// the picture, reproducible from the seed) and the loader (the same bytes whatever its
// threads, and when a run resumes at a later step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>

#include "data/darknet_data.hpp"
#include "test_util.hpp"
#include "util/dump.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

class DetectionData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tt_detection_data_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "images");
    fs::create_directories(dir_ / "labels");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  void write(const std::string& n, const std::string& text) const { std::ofstream(path(n)) << text; }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

Image random_image(int w, int h, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Image im(w, h, 3);
  for (auto& v : im.data) v = float(rng() % 256) / 255.f;
  return im;
}

TEST_F(DetectionData, PngRoundTripsAndBadFilesAreNamed) {
  const Image im = random_image(13, 7, 1);
  save_png(im, path("a.png"));
  const Image back = load_image(path("a.png"));
  ASSERT_EQ(back.w, 13);
  ASSERT_EQ(back.h, 7);
  EXPECT_EQ(back.data, im.data);
  write("bad.jpg", "not a picture at all");
  EXPECT_NE(error_of([&] { load_image(path("bad.jpg")); }).find("bad.jpg"), std::string::npos);
  // a truncated PNG
  std::ifstream in(path("a.png"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(path("cut.png"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(error_of([&] { load_image(path("cut.png")); }).find("cut.png"), std::string::npos);
}

// resize_image and letterbox_image against Darknet's, on a PNG (the same pixels for both
// decoders), down and up, odd sizes, both aspect cases.
TEST_F(DetectionData, ResizeAndLetterboxMatchDarknet) {
  if (std::string(DARKNET_FORWARD).empty()) GTEST_SKIP() << "darknet_forward not built (libdarknet missing)";
  const Image im = random_image(37, 23, 2);
  save_png(im, path("in.png"));
  for (auto [w, h] : {std::pair{16, 16}, {50, 31}, {64, 96}, {19, 40}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    const std::string cmd = std::string("'") + DARKNET_FORWARD + "' --image '" + path("in.png") + "' " +
                            std::to_string(w) + " " + std::to_string(h) + " '" + dir_.string() + "' >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const Image loaded = load_image(path("in.png"));
    EXPECT_EQ(read_dump(path("loaded.bin")).at("output").data, loaded.data);
    const std::vector<float> rs = read_dump(path("resized.bin")).at("output").data;
    const std::vector<float> lb = read_dump(path("letterboxed.bin")).at("output").data;
    const Image ours_rs = resize_image(loaded, w, h), ours_lb = letterbox_image(loaded, w, h);
    ASSERT_EQ(rs.size(), ours_rs.data.size());
    EXPECT_LE(test::rel_diff(ours_rs.data.data(), rs.data(), rs.size()), 1e-6);
    EXPECT_LE(test::rel_diff(ours_lb.data.data(), lb.data(), lb.size()), 1e-6);
  }
}

TEST_F(DetectionData, LabelErrorsNameFileAndLine) {
  auto err = [&](const std::string& text) {
    write("labels/x.txt", text);
    return error_of([&] { read_labels(path("labels/x.txt"), 3); });
  };
  const std::string at2 = path("labels/x.txt") + ":2:";
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2\n").find(at2), std::string::npos);
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n").find(at2 + " class 3"), std::string::npos);
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n1 1.5 0.5 0.2 0.2\n").find("outside [0, 1]"), std::string::npos);
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0 0.2\n").find("zero width"), std::string::npos);
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n1 0.5 abc 0.2 0.2\n").find("'abc' is not a number"), std::string::npos);
  EXPECT_NE(err("0 0.5 0.5 0.2 0.2\n-1 0.5 0.5 0.2 0.2\n").find(at2), std::string::npos);
  EXPECT_NE(error_of([&] { read_labels(path("labels/none.txt"), 3); }).find("none.txt"), std::string::npos);
  write("labels/ok.txt", "2 0.25 0.75 0.5 0.1\n\n1 1 1 1 1\n");
  const std::vector<TruthBox> b = read_labels(path("labels/ok.txt"), 3);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].cls, 2);
  EXPECT_FLOAT_EQ(b[0].y, 0.75f);
  EXPECT_EQ(label_path("/d/images/train/a.jpg"), "/d/labels/train/a.txt");
  EXPECT_EQ(label_path("/voc/JPEGImages/b.png"), "/voc/labels/b.txt");
}

TEST_F(DetectionData, DataFileAndListErrors) {
  write("n.names", "a\nb\n");
  write("list.txt", "\n");
  write("good.data", "classes= 2\ntrain = list.txt\nnames = n.names\nbackup = b/\n");
  const DataConfig d = load_data_config(path("good.data"));  // relative to the .data file's folder
  EXPECT_EQ(d.classes, 2);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(error_of([&] { read_list(d.train); }).find("is empty"), std::string::npos);
  write("three.data", "classes=3\ntrain=list.txt\nnames=n.names\n");
  EXPECT_NE(error_of([&] { load_data_config(path("three.data")); }).find("2 class names"), std::string::npos);
  write("bad.data", "classes=2\ntrain list.txt\n");
  EXPECT_NE(error_of([&] { load_data_config(path("bad.data")); }).find(path("bad.data") + ":2:"), std::string::npos);
  write("nocls.data", "train=list.txt\nnames=n.names\n");
  EXPECT_NE(error_of([&] { load_data_config(path("nocls.data")); }).find("no classes="), std::string::npos);
}

// A picture with one solid red rectangle and its label; after augmentation (no colour
// change), the truth box must cover the red pixels and little else, for many seeds
// (flipped or not).
TEST_F(DetectionData, AugmentedBoxesFollowThePicture) {
  Image im(60, 40, 3, 0.2f);
  for (int y = 10; y < 30; ++y)
    for (int x = 30; x < 50; ++x) {
      im.at(x, y, 0) = 1.f;
      im.at(x, y, 1) = im.at(x, y, 2) = 0.f;
    }
  save_png(im, path("images/r.png"));
  write("labels/r.txt", "1 0.666667 0.5 0.333333 0.5\n");
  Augment a{.width = 48, .height = 48, .jitter = 0.3f, .hue = 0, .saturation = 1, .exposure = 1, .flip = true};
  std::vector<float> img(3 * 48 * 48), truth(5 * 4), again(img.size());
  int flips = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    load_detection_sample(path("images/r.png"), 2, a, seed, 4, img.data(), truth.data());
    std::vector<float> t2(truth.size());
    load_detection_sample(path("images/r.png"), 2, a, seed, 4, again.data(), t2.data());
    EXPECT_EQ(img, again);
    EXPECT_EQ(truth, t2);
    EXPECT_EQ(truth[4], 1.f);
    EXPECT_EQ(truth[5], 0.f) << "one box only";
    const float x0 = (truth[0] - truth[2] / 2) * 48, x1 = (truth[0] + truth[2] / 2) * 48;
    const float y0 = (truth[1] - truth[3] / 2) * 48, y1 = (truth[1] + truth[3] / 2) * 48;
    int in = 0, in_red = 0, out_red = 0;
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 48; ++x) {
        const bool red = img[size_t(y * 48 + x)] > 0.7f && img[size_t(48 * 48 + y * 48 + x)] < 0.3f;
        const bool inside = x + 0.5f > x0 && x + 0.5f < x1 && y + 0.5f > y0 && y + 0.5f < y1;
        in += inside;
        in_red += inside && red;
        out_red += !inside && red;
      }
    EXPECT_GT(in_red, 0.8 * in) << "box [" << x0 << ", " << x1 << "] x [" << y0 << ", " << y1 << "]";
    EXPECT_LE(out_red, 0.1 * in_red + 2);
    flips += truth[0] < 0.5f;  // the rectangle is right of centre unless flipped
  }
  EXPECT_GT(flips, 2);
  EXPECT_LT(flips, 18);
  std::vector<float> other(img.size());
  load_detection_sample(path("images/r.png"), 2, a, 1, 4, img.data(), truth.data());
  load_detection_sample(path("images/r.png"), 2, a, 2, 4, other.data(), truth.data());
  EXPECT_NE(img, other);
}

// YOLOv1's region data (load_data_region): the crop moves and scales the boxes with it.
TEST_F(DetectionData, RegionSampleBoxesFollowTheCrop) {
  Image im(60, 40, 3, 0.2f);
  for (int y = 10; y < 30; ++y)
    for (int x = 30; x < 50; ++x) {
      im.at(x, y, 0) = 1.f;
      im.at(x, y, 1) = im.at(x, y, 2) = 0.f;
    }
  save_png(im, path("images/v1.png"));
  // the red box, and one at (0, 0) that correct_boxes sends away
  write("labels/v1.txt", "0 0 0 0.1 0.1\n1 0.666667 0.5 0.333333 0.5\n");
  const Augment a{.width = 32, .height = 32, .jitter = 0.2f, .hue = 0, .saturation = 1, .exposure = 1, .flip = true};
  std::vector<float> img(3 * 32 * 32), truth(5 * 3), again(img.size()), t2(truth.size());
  int flips = 0, moved = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    load_region_sample(path("images/v1.png"), 2, a, seed, 3, img.data(), truth.data());
    load_region_sample(path("images/v1.png"), 2, a, seed, 3, again.data(), t2.data());
    EXPECT_EQ(img, again);
    EXPECT_EQ(truth, t2);
    EXPECT_EQ(truth[4], 1.f);
    EXPECT_EQ(truth[5], 0.f) << "the box at (0, 0) is left out";
    const float x0 = (truth[0] - truth[2] / 2) * 32, x1 = (truth[0] + truth[2] / 2) * 32;
    const float y0 = (truth[1] - truth[3] / 2) * 32, y1 = (truth[1] + truth[3] / 2) * 32;
    int in = 0, in_red = 0, out_red = 0;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const bool red = img[size_t(y * 32 + x)] > 0.7f && img[size_t(32 * 32 + y * 32 + x)] < 0.3f;
        const bool inside = x + 0.5f > x0 && x + 0.5f < x1 && y + 0.5f > y0 && y + 0.5f < y1;
        in += inside;
        in_red += inside && red;
        out_red += !inside && red;
      }
    EXPECT_GT(in_red, 0.75 * in) << "box [" << x0 << ", " << x1 << "] x [" << y0 << ", " << y1 << "]";
    EXPECT_LE(out_red, 0.15 * in_red + 4);
    flips += truth[0] < 0.5f;  // the rectangle is right of centre unless flipped
    moved += std::abs(truth[2] - 0.333333f) > 1e-3f;
  }
  EXPECT_GT(flips, 2);
  EXPECT_LT(flips, 18);
  EXPECT_GT(moved, 10) << "the crop's jitter changes the box's width";
}

TEST_F(DetectionData, LoaderIsDeterministicAcrossThreadsAndResumes) {
  std::vector<std::string> paths;
  for (int i = 0; i < 7; ++i) {
    const std::string p = path("images/p" + std::to_string(i) + ".png");
    save_png(random_image(20 + i, 16, uint64_t(i)), p);
    write("labels/p" + std::to_string(i) + ".txt", std::to_string(i % 2) + " 0.5 0.5 0.3 0.4\n");
    paths.push_back(p);
  }
  auto run = [&](int threads, int64_t from, int64_t to) {
    BatchLoader::Options o;
    o.paths = paths;
    const Augment a{.width = 16, .height = 16, .jitter = 0.2f, .hue = 0.1f, .saturation = 1.5f, .exposure = 1.5f};
    o.sample = detection_sample(2, a, 2, kDefaultMaxPixels);
    o.image_floats = 3 * 16 * 16;
    o.truth_floats = 2 * 5;
    o.batch = 3;
    o.seed = 9;
    o.threads = threads;
    BatchLoader l(o);
    std::vector<float> all;
    std::vector<float> img(3 * 3 * 16 * 16), tr(3 * 10);
    for (int64_t s = from; s < to; ++s) {
      l.get(s, img.data(), tr.data());
      all.insert(all.end(), img.begin(), img.end());
      all.insert(all.end(), tr.begin(), tr.end());
    }
    return all;
  };
  const std::vector<float> a = run(1, 0, 10), b = run(3, 0, 10), c = run(2, 5, 10);
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::vector<float>(a.begin() + std::ptrdiff_t(a.size() / 2), a.end()), c);
}

TEST_F(DetectionData, LoaderSkipsOrStopsOnABadPicture) {
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    const std::string p = path("images/q" + std::to_string(i) + ".png");
    if (i == 1)
      write("images/q1.png", "garbage");
    else
      save_png(random_image(16, 16, uint64_t(i)), p);
    write("labels/q" + std::to_string(i) + ".txt", "0 0.5 0.5 0.3 0.4\n");
    paths.push_back(p);
  }
  BatchLoader::Options o;
  o.paths = paths;
  o.sample = detection_sample(1, Augment{.width = 16, .height = 16}, 30, kDefaultMaxPixels);
  o.image_floats = 3 * 16 * 16;
  o.truth_floats = 30 * 5;
  o.batch = 3;
  std::vector<float> img(3 * 3 * 16 * 16), tr(3 * 150);
  {
    BatchLoader l(o);
    const std::string e = error_of([&] { l.get(0, img.data(), tr.data()); });
    EXPECT_NE(e.find("q1.png"), std::string::npos) << e;
  }
  // Warnings come from the loader's thread, also for batches it prepares ahead.
  std::mutex m;
  std::vector<std::string> warnings;
  o.skip_bad_images = true;
  o.warn = [&](const std::string& w) {
    std::lock_guard<std::mutex> lk(m);
    warnings.push_back(w);
  };
  {
    BatchLoader l(o);
    l.get(0, img.data(), tr.data());
  }
  ASSERT_GE(warnings.size(), 1u);
  for (const std::string& w : warnings) EXPECT_NE(w.find("q1.png"), std::string::npos) << w;
}

}  // namespace
}  // namespace tt
