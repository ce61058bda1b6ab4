// Darknet's classifier augmentation (data/image.hpp: rotate_crop_image, resize_min,
// crop_image) against Darknet itself: tests/oracle/darknet_augment runs Debian's libdarknet
// on the same picture and parameters. Plus checks that need no Darknet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "data/image.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

Image random_image(int w, int h, int c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Image im(w, h, c);
  for (float& v : im.data) v = u(rng);
  return im;
}

// "%.9g": a float that strtof reads back the same.
std::string fstr(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", double(v));
  return b;
}

// The largest |a - b| (NaN against NaN counts as equal, NaN against a number as infinite).
double max_diff(const Image& a, const Image& b) {
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const float x = a.data[i], y = b.data[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    m = std::max(m, std::fabs(double(x) - double(y)));
  }
  return m;
}

// Runs tests/oracle/darknet_augment once for all the jobs queued (libdarknet takes 0.3 s to
// load: it brings in OpenCV and Qt).
class AugmentOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(DARKNET_AUGMENT).empty())
      GTEST_SKIP() << "darknet_augment not built (libdarknet missing: apt-get install darknet)";
    dir_ = fs::temp_directory_path() / ("tt_augment_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Queues Darknet's `op` on `im` with its parameters after IN OUT.
  void add(const Image& im, const std::string& op, const std::vector<std::string>& params) {
    const std::string n = std::to_string(jobs_.size());
    const std::string in = (dir_ / ("in" + n + ".bin")).string(), out = (dir_ / ("out" + n + ".bin")).string();
    std::ofstream f(in, std::ios::binary);
    const int32_t dims[3] = {im.w, im.h, im.c};
    f.write(reinterpret_cast<const char*>(dims), sizeof dims);
    f.write(reinterpret_cast<const char*>(im.data.data()), std::streamsize(im.data.size() * sizeof(float)));
    std::string job = op + "\t" + in + "\t" + out;
    for (const std::string& p : params) job += "\t" + p;
    jobs_.push_back(job);
  }

  // Runs the queued jobs; Darknet's pictures in their order (empty when the run failed).
  std::vector<Image> run() {
    const std::string list = (dir_ / "jobs.txt").string();
    {
      std::ofstream f(list);
      for (const std::string& j : jobs_) f << j << "\n";
    }
    const std::string cmd = std::string("'") + DARKNET_AUGMENT + "' --list '" + list + "' >/dev/null";
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(status, 0) << cmd;
    std::vector<Image> pictures;
    if (status != 0) return pictures;
    for (size_t n = 0; n < jobs_.size(); ++n) {
      std::ifstream f(dir_ / ("out" + std::to_string(n) + ".bin"), std::ios::binary);
      int32_t dims[3] = {0, 0, 0};
      f.read(reinterpret_cast<char*>(dims), sizeof dims);
      Image r(dims[0], dims[1], dims[2]);
      f.read(reinterpret_cast<char*>(r.data.data()), std::streamsize(r.data.size() * sizeof(float)));
      EXPECT_TRUE(f) << "job " << n << ": no picture or a short one (" << jobs_[n] << ")";
      pictures.push_back(std::move(r));
    }
    jobs_.clear();
    return pictures;
  }

  fs::path dir_;
  std::vector<std::string> jobs_;
};

struct RotateCase {
  int in_w, in_h, c;
  float rad, s;
  int w, h;
  float dx, dy, aspect;
};

std::string describe(const RotateCase& k) {
  return std::to_string(k.in_w) + "x" + std::to_string(k.in_h) + "x" + std::to_string(k.c) + " rad " + fstr(k.rad) +
         " s " + fstr(k.s) + " -> " + std::to_string(k.w) + "x" + std::to_string(k.h) + " dx " + fstr(k.dx) + " dy " +
         fstr(k.dy) + " aspect " + fstr(k.aspect);
}

// libdarknet is built with -Ofast, which regroups rotate_crop_image's coordinate arithmetic
// ((x - w/2.)*(aspect*(1/s)) for (x - w/2.)/s*aspect, the sums reordered) and
// bilinear_interpolate's weights ((1 - x) + ix for 1 - (x - ix), the products regrouped);
// tiletrain's build fuses multiply-adds (-march=native). The weights (at most 1, of pixels in
// [0, 1]) then differ by a few float roundings: 1e-6 (8 ulp of 1). The coordinates are
// computed in double and rounded to float, so they differ only when the double lands within
// a few 1e-16 of a float's rounding boundary (about 2^-29 of the time) and then by 1 ulp;
// bilinear interpolation moves by at most that step times the difference of two pixels
// (at most 1): 2 ulp of the largest coordinate the case reaches covers it.
// Measured: at most 2.4e-7 over 3009 random cases (pictures up to 400 pixels a side, s from
// 0.05 to 20), about half of them equal to the bit.
double rotate_tolerance(const RotateCase& k) {
  const double reach = std::max(k.in_w, k.in_h) / 2. + (k.w / 2. + std::fabs(k.dx)) * std::fabs(k.aspect / k.s) +
                       (k.h / 2. + std::fabs(k.dy)) / std::fabs(k.s);
  const float r = float(reach);
  return 1e-6 + 2 * double(std::nextafter(r, INFINITY) - r);
}

// Random parameter sets after the hand-picked ones.
constexpr int kRandomRotateCases = 40;

TEST_F(AugmentOracle, RotateCropImageMatchesDarknet) {
  const float pi = std::numbers::pi_v<float>;
  std::vector<RotateCase> cases{
      {37, 23, 3, 0.f, 1.f, 37, 23, 0.f, 0.f, 1.f},          // the identity
      {37, 23, 3, 0.f, 0.6f, 32, 32, 3.f, -2.f, 1.f},        // s < 1: more of the picture, smaller
      {23, 37, 1, 0.35f, 1.8f, 40, 24, -5.5f, 7.25f, 1.3f},  // s > 1, aspect > 1
      {37, 23, 3, -1.2f, 2.5f, 24, 24, 30.f, -25.f, 0.7f},   // shifted mostly outside
      {31, 31, 1, pi / 2, 1.f, 31, 31, 0.f, 0.f, 1.f},       // a quarter turn
      {20, 13, 3, 3.f, 0.45f, 50, 40, 60.f, 50.f, 1.6f},     // shifted entirely outside
      {64, 48, 3, 0.1f, 1.0001f, 17, 29, 0.5f, 0.5f, 0.9f},  // half-pixel shifts
      {9, 70, 1, -pi, 0.3f, 12, 5, -1.f, 100.f, 0.5f},       // a thin picture, half a turn
      {40, 30, 3, 0.2f, -1.5f, 20, 20, 2.f, 1.f, 1.f},       // s < 0: a point reflection
  };
  std::mt19937 rng(20240611);
  auto ui = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto uf = [&](float a, float b) { return std::uniform_real_distribution<float>(a, b)(rng); };
  for (int n = 0; n < kRandomRotateCases; ++n) {
    RotateCase k;
    k.in_w = ui(3, 60), k.in_h = ui(3, 60), k.c = ui(0, 1) ? 3 : 1;
    k.rad = n % 4 == 0 ? 0.f : uf(-pi, pi);
    k.s = std::exp(uf(std::log(0.3f), std::log(3.f)));
    k.w = ui(1, 48), k.h = ui(1, 48);
    k.dx = uf(-1.2f, 1.2f) * float(k.in_w), k.dy = uf(-1.2f, 1.2f) * float(k.in_h);
    k.aspect = n % 3 == 0 ? 1.f : uf(0.6f, 1.6f);
    cases.push_back(k);
  }
  std::vector<Image> ours;
  for (size_t i = 0; i < cases.size(); ++i) {
    const RotateCase& k = cases[i];
    const Image im = random_image(k.in_w, k.in_h, k.c, uint32_t(100 + i));
    ours.push_back(rotate_crop_image(im, k.rad, k.s, k.w, k.h, k.dx, k.dy, k.aspect));
    add(im, "rotate_crop",
        {fstr(k.rad), fstr(k.s), std::to_string(k.w), std::to_string(k.h), fstr(k.dx), fstr(k.dy), fstr(k.aspect)});
  }
  const std::vector<Image> theirs = run();
  ASSERT_EQ(theirs.size(), cases.size());
  double worst = 0;
  size_t exact = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const RotateCase& k = cases[i];
    SCOPED_TRACE(describe(k));
    ASSERT_EQ(theirs[i].w, k.w);
    ASSERT_EQ(theirs[i].h, k.h);
    ASSERT_EQ(theirs[i].c, k.c);
    const double d = max_diff(ours[i], theirs[i]);
    EXPECT_LE(d, rotate_tolerance(k));
    worst = std::max(worst, d);
    exact += d == 0;
  }
  std::cout << "[ max |tiletrain - darknet| ] rotate_crop_image: " << worst << " (" << exact << " of " << cases.size()
            << " cases equal to the bit)\n";
}

// Darknet divides by s: with s = 0 every coordinate is infinite or NaN, and libdarknet's
// -Ofast build returns 0 for such a sample (its four taps are outside; it skips the weights
// times 0, which IEEE arithmetic would make NaN). tiletrain does the same.
TEST_F(AugmentOracle, RotateCropImageScaleZeroAsDarknet) {
  const Image im = random_image(12, 9, 3, 7);
  const Image ours = rotate_crop_image(im, 0.3f, 0.f, 10, 8, 1.f, 2.f, 1.f);
  add(im, "rotate_crop", {"0.3", "0", "10", "8", "1", "2", "1"});
  const Image ours_rad0 = rotate_crop_image(im, 0.f, 0.f, 10, 8, 0.f, 0.f, 1.3f);
  add(im, "rotate_crop", {"0", "0", "10", "8", "0", "0", "1.3"});
  const std::vector<Image> theirs = run();
  ASSERT_EQ(theirs.size(), 2u);
  EXPECT_EQ(theirs[0].data, ours.data);
  EXPECT_EQ(theirs[1].data, ours_rad0.data);
  EXPECT_EQ(ours.data, std::vector<float>(ours.data.size(), 0.f));
}

// resize_min, then resize_image (tiletrain's own, compared with Darknet's elsewhere): the
// same float operations, apart by a rounding where -Ofast or a fused multiply-add regroups.
TEST_F(AugmentOracle, ResizeMinMatchesDarknet) {
  struct Case {
    int w, h, c, min;
  };
  const std::vector<Case> cases{{37, 23, 3, 16}, {23, 37, 1, 16}, {37, 23, 3, 64},
                                {30, 30, 1, 7},  {41, 17, 3, 17},  // already that size: Darknet returns it
                                {5, 90, 3, 2},   {100, 3, 1, 11}, {3, 100, 1, 250}};
  std::vector<Image> ours;
  for (const Case& k : cases) {
    const Image im = random_image(k.w, k.h, k.c, uint32_t(k.w * 1000 + k.h));
    ours.push_back(resize_min(im, k.min));
    add(im, "resize_min", {std::to_string(k.min)});
  }
  const std::vector<Image> theirs = run();
  ASSERT_EQ(theirs.size(), cases.size());
  double worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    SCOPED_TRACE(std::to_string(k.w) + "x" + std::to_string(k.h) + "x" + std::to_string(k.c) + " min " +
                 std::to_string(k.min));
    ASSERT_EQ(ours[i].w, theirs[i].w);
    ASSERT_EQ(ours[i].h, theirs[i].h);
    ASSERT_EQ(ours[i].c, theirs[i].c);
    EXPECT_EQ(std::min(ours[i].w, ours[i].h), k.min);
    const double d = max_diff(ours[i], theirs[i]);
    EXPECT_LE(d, 1e-6);
    worst = std::max(worst, d);
  }
  std::cout << "[ max |tiletrain - darknet| ] resize_min: " << worst << "\n";
}

// crop_image copies pixels: equal to the bit.
TEST_F(AugmentOracle, CropImageMatchesDarknet) {
  struct Case {
    int w, h, c, dx, dy, cw, ch;
  };
  const std::vector<Case> cases{{37, 23, 3, 5, 4, 20, 10},
                                {37, 23, 1, -6, -3, 16, 16},  // above and left: the edge repeats
                                {37, 23, 3, 30, 20, 16, 16},  // below and right
                                {10, 7, 3, -4, -2, 20, 15},   // larger than the picture
                                {10, 7, 1, 50, -40, 3, 4},    // entirely outside: one corner
                                {1, 1, 3, 0, 0, 4, 3}};
  std::vector<Image> ours;
  for (const Case& k : cases) {
    const Image im = random_image(k.w, k.h, k.c, uint32_t(k.w + k.dx * 7 + 1000));
    ours.push_back(crop_image(im, k.dx, k.dy, k.cw, k.ch));
    add(im, "crop", {std::to_string(k.dx), std::to_string(k.dy), std::to_string(k.cw), std::to_string(k.ch)});
  }
  const std::vector<Image> theirs = run();
  ASSERT_EQ(theirs.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    SCOPED_TRACE(std::to_string(k.w) + "x" + std::to_string(k.h) + " crop " + std::to_string(k.cw) + "x" +
                 std::to_string(k.ch) + " at " + std::to_string(k.dx) + "," + std::to_string(k.dy));
    ASSERT_EQ(theirs[i].w, k.cw);
    ASSERT_EQ(theirs[i].h, k.ch);
    EXPECT_EQ(ours[i].data, theirs[i].data);
  }
}

// Without Darknet: no rotation, scale 1, aspect 1 and no shift returns the picture itself;
// a shift moves it (by a pixel and a half here: each output pixel the mean of four), 0 where
// it leaves the picture; crops copy pixels, outside the
// picture its nearest edge; resize_min's sizes.
TEST(Augment, IdentityShiftAndCrop) {
  const Image im = random_image(13, 8, 3, 1);
  EXPECT_EQ(rotate_crop_image(im, 0.f, 1.f, 13, 8, 0.f, 0.f, 1.f).data, im.data);
  const Image shifted = rotate_crop_image(im, 0.f, 1.f, 6, 5, 4.f, -2.f, 1.f);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 6; ++x) {
        // output (x, y) samples (x - 6/2 + 4 + 13/2, y - 5/2 - 2 + 8/2) = (x + 7.5, y - 0.5)
        const float rx = float(x) + 7.5f, ry = float(y) - 0.5f;
        const int ix = int(std::floor(rx)), iy = int(std::floor(ry));
        auto px = [&](int xx, int yy) { return xx < 13 && yy >= 0 && yy < 8 ? im.at(xx, yy, k) : 0.f; };
        const float want = 0.25f * (px(ix, iy) + px(ix + 1, iy) + px(ix, iy + 1) + px(ix + 1, iy + 1));
        EXPECT_NEAR(shifted.at(x, y, k), want, 1e-6f) << x << "," << y << "," << k;
      }
  const Image inside = crop_image(im, 3, 2, 5, 4);
  ASSERT_EQ(inside.w, 5);
  ASSERT_EQ(inside.h, 4);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x) EXPECT_EQ(inside.at(x, y, k), im.at(x + 3, y + 2, k));
  const Image outside = crop_image(im, -2, 6, 4, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      EXPECT_EQ(outside.at(x, y, 1), im.at(std::max(x - 2, 0), std::min(y + 6, 7), 1)) << x << "," << y;
  const Image r = resize_min(im, 4);  // 13x8: the shorter side 4, the longer 13 * 4 / 8 = 6.5 -> 6
  EXPECT_EQ(r.w, 6);
  EXPECT_EQ(r.h, 4);
  EXPECT_EQ(resize_min(im, 8).data, im.data);
}

}  // namespace
}  // namespace tt
