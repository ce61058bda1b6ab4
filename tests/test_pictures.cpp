// Pictures for people (issue 32): plan --draw's partition, detect's pictures scaled up with
// boxes and labels sized to them, detect --montage.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "cli_runner.hpp"
#include "data/image.hpp"
#include "detect/detection_picture.hpp"
#include "model/net_spec.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "tiling/plan_picture.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;
using cli::Result;

bool same(const Image& im, int x, int y, const Rgb& c) {
  return std::fabs(im.at(x, y, 0) - c.r) < 1.5f / 255 && std::fabs(im.at(x, y, 1) - c.g) < 1.5f / 255 &&
         std::fabs(im.at(x, y, 2) - c.b) < 1.5f / 255;
}

class Pictures : public cli::Cli {};

// yolov2-16 at 416 x 416 on a 2x2 grid in 4 groups: 5 panels (the 4 group starts' input maps
// and the last output), 4 to a row.
TEST_F(Pictures, PlanDrawShowsTilesAndHalos) {
  const std::string cfg = test::source_dir() + "/cfgs/yolov2-16.cfg";
  const Result r = run("plan --cfg '" + cfg + "' --grid 2x2 --groups 0,4,8,12 --draw grid.png");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "wrote grid.png (5 panels");
  const Image im = load_image(path("grid.png"));
  ASSERT_EQ(im.w, 4 * kPanelW);
  ASSERT_EQ(im.h, kHeaderH + 2 * kPanelH);

  const NetSpec net = load_net(cfg);
  const Plan p = make_plan(net, 2, 2, 0, 16, {0, 4, 8, 12});
  // A cell's middle pixel in panel `i` of a map whose longer side has `side` cells.
  const auto pixel = [&](int i, int side, int cy, int cx, int& x, int& y) {
    const auto px = [&](int c) { return int(int64_t(c) * kMapPx / side); };
    x = (i % 4) * kPanelW + kMapLeft + (px(cx) + px(cx + 1)) / 2;
    y = kHeaderH + (i / 4) * kPanelH + kMapTop + (px(cy) + px(cy + 1)) / 2;
  };
  // The last panel: layer 15's 26 x 26 output, each tile's owned cells in its fill, no halo.
  const int side = net.layers[15].out.w;
  ASSERT_EQ(side, 26);
  for (int t = 0; t < 4; ++t) {
    const Box& own = p.at(t, 15).own;
    int x, y;
    pixel(4, side, own.y0 + own.h() / 4, own.x0 + own.w() / 4, x, y);
    EXPECT_TRUE(same(im, x, y, tile_fill(t))) << "tile " << t << " at " << x << "," << y;
  }
  // The second panel: layer 4's input (104 x 104). Tile 0 reads 4 columns of tile 1's cells
  // (the plan's numbers): its stripes are there, and not deep inside tile 1.
  const Box& reads = p.at(0, 4).in[0];
  const Box& own0 = p.at(0, 3).own;
  ASSERT_EQ(reads.x1 - own0.x1, 4);
  int stripes_near = 0, stripes_far = 0;
  for (int cy = 10; cy < 40; ++cy) {
    for (int cx = own0.x1; cx < reads.x1; ++cx) {
      int x, y;
      pixel(1, 104, cy, cx, x, y);
      for (int dx = -1; dx <= 1; ++dx) stripes_near += same(im, x + dx, y, tile_colour(0));
    }
    int x, y;
    pixel(1, 104, cy, 80, x, y);
    for (int dx = -1; dx <= 1; ++dx) stripes_far += same(im, x + dx, y, tile_colour(0));
  }
  EXPECT_GT(stripes_near, 10);
  EXPECT_EQ(stripes_far, 0);
}

TEST_F(Pictures, PlanDrawRefusesABadPathBeforeTheWork) {
  const std::string cfg = test::source_dir() + "/cfgs/yolov2-16.cfg";
  Result r = run("plan --cfg '" + cfg + "' --grid 2x2 --draw nowhere/grid.png");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "nowhere/grid.png");
  EXPECT_EQ(r.out, "");  // nothing planned or printed
  fs::create_directories(path("folder.png"));
  r = run("plan --cfg '" + cfg + "' --grid 2x2 --draw folder.png");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "folder.png");
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find("grid"), std::string::npos) << e.path();
}

TEST(DetectionPicture, ScaledWithBoxAndLabelAbove) {
  const Image plain(100, 60, 3, 0.5f);
  // 60 pixels high: scaled 8 times (480); a box in the middle and one at the top.
  const Image im =
      detection_picture(plain, {{10, 20, 50, 40, "a 90%", 1.f, 0.f, 0.f}, {60, 0, 90, 30, "b 50%", 0.f, 0.f, 1.f}});
  ASSERT_EQ(picture_scale(100, 60), 8);
  ASSERT_EQ(im.w, 800);
  ASSERT_EQ(im.h, 480);
  const Rgb red{1, 0, 0}, blue{0, 0, 1}, grey{.5f, .5f, .5f};
  EXPECT_TRUE(same(im, 10 * 8, 30 * 8, red));       // the left edge
  EXPECT_TRUE(same(im, 10 * 8 + 2, 30 * 8, red));   // 480 / 160 = 3 pixels thick
  EXPECT_TRUE(same(im, 10 * 8 + 3, 30 * 8, grey));  // not thicker
  EXPECT_TRUE(same(im, 30 * 8, 30 * 8, grey));      // inside
  // The labels' backgrounds (their last column has no glyph): above the first box, and inside
  // the second, under its top edge (3 pixels), since it touches the picture's top.
  const LabelSize a = label_size("a 90%", 2), b = label_size("b 50%", 2);
  EXPECT_TRUE(same(im, 10 * 8 + a.w - 1, 20 * 8 - a.h / 2, red));
  EXPECT_TRUE(same(im, 10 * 8 + a.w + 1, 20 * 8 - a.h / 2, grey));
  EXPECT_TRUE(same(im, 60 * 8 + b.w - 1, 3 + b.h / 2, blue));
  EXPECT_TRUE(same(im, 60 * 8 + b.w - 1, 3 + b.h + 1, grey));
  // A large picture is kept as it is.
  EXPECT_EQ(detection_picture(Image(640, 480, 3), {}).w, 640);
  // A thin one is scaled no further than kMaxLongSide.
  EXPECT_EQ(picture_scale(200, 1), kMaxLongSide / 200);
}

// detect --out and --montage on the tiny detector, freshly initialised weights.
TEST_F(Pictures, DetectPicturesAndMontage) {
  write("tiny.cfg",
        "[net]\nbatch=2\nwidth=32\nheight=32\nchannels=3\n"
        "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
        "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
        "[region]\nanchors=1,1, 2,2\nclasses=2\nnum=2\ncoords=4\nsoftmax=1\n");
  const NetSpec net = load_net(path("tiny.cfg"));
  Params params(net);
  init_params(params, net, 7);
  save_weights(params, net, path("w.weights"));
  save_png(Image(100, 60, 3, 0.3f), path("a.png"));
  save_png(Image(640, 500, 3, 0.6f), path("b.png"));
  save_png(Image(30, 30, 3, 0.9f), path("c.png"));
  Result r =
      run("detect --cfg tiny.cfg --weights w.weights --thresh 0.0001 --out pics --montage all.png a.png b.png "
          "c.png");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "wrote pics/a.png (800x480)");
  EXPECT_CONTAINS(r.out, "wrote all.png: 3 picture(s) in 2 column(s)");
  EXPECT_EQ(load_image(path("pics/a.png")).w, 800);
  EXPECT_EQ(load_image(path("pics/b.png")).w, 640);  // large enough already
  EXPECT_EQ(load_image(path("pics/c.png")).h, 480);
  const Image m = load_image(path("all.png"));
  EXPECT_EQ(m.w, 2 * kCellW);
  EXPECT_EQ(m.h, 2 * kCellH);
  // the fourth cell stays white; the first shows a.png's grey (letterboxed in its cell)
  EXPECT_TRUE(same(m, kCellW + kCellW / 2, kCellH + kCellW / 2, Rgb{1, 1, 1}));
  EXPECT_FALSE(same(m, kCellW / 2, kCellW / 2, Rgb{1, 1, 1}));
  // --montage that cannot be written, or that is an input picture: refused before any work
  r = run("detect --cfg tiny.cfg --weights w.weights --montage nowhere/all.png a.png");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "nowhere/all.png");
  EXPECT_EQ(r.out, "");
  r = run("detect --cfg tiny.cfg --weights w.weights --montage a.png a.png");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--montage 'a.png' is one of the pictures");
  EXPECT_EQ(load_image(path("a.png")).w, 100);
}

}  // namespace
}  // namespace tt
