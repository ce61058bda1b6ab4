// detect's pictures, for people to look at: the picture scaled up until its short side is
// about 480 pixels, boxes and labels sized to it, each label above its box; and detect
// --montage's grid of every picture of a run.
#pragma once
#include <string>
#include <vector>

#include "data/image.hpp"

namespace tt {

// Pictures whose short side is under this are scaled up by a whole factor to reach it...
constexpr int kMinShortSide = 480;
// ...as far as the long side stays within this (a 200 x 1 picture is not made 96000 wide).
constexpr int kMaxLongSide = 4096;
// The whole factor a w x h picture is scaled up by (1: kept as it is).
int picture_scale(int w, int h);

// One box to draw, in the original picture's pixels (corners, inclusive), with its label
// (class name and confidence) and colour.
struct DrawnBox {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  std::string label;
  float r = 0, g = 0, b = 0;
};
// `im` scaled by picture_scale, every box drawn on it (lines about 1/160 of the short side
// thick), then every label above its box (inside the box under its top edge when there is
// no room above, shifted left to stay inside the picture).
Image detection_picture(const Image& im, const std::vector<DrawnBox>& boxes);

// detect --montage: the pictures of a run in a grid of kCellW x kCellH cells, each picture
// letterboxed into the top kCellW x kCellW of its cell with its file name under it; at
// most kMontageMax pictures (the first ones), in ceil(sqrt(n)) columns.
constexpr int kCellW = 256, kCellH = 256 + 24, kMontageMax = 100;
class Montage {
 public:
  explicit Montage(int pictures);  // how many will be added (only the first kMontageMax are)
  // The i-th picture (from 0) and its name; an empty picture draws a grey cell ("unreadable").
  void add(int i, const Image& picture, const std::string& name);
  int columns() const { return cols_; }
  int shown() const { return n_; }
  void save(const std::string& path) const { save_png(canvas_, path); }

 private:
  int n_, cols_;
  Image canvas_;
};

}  // namespace tt
