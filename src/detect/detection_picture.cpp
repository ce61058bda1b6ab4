#include "detect/detection_picture.hpp"

#include <algorithm>
#include <cmath>

namespace tt {

int picture_scale(int w, int h) {
  const int shorter = std::max(1, std::min(w, h)), longer = std::max(1, std::max(w, h));
  const int reach = (kMinShortSide + shorter - 1) / shorter, room = std::max(1, kMaxLongSide / longer);
  return std::max(1, std::min(reach, room));
}

Image detection_picture(const Image& im, const std::vector<DrawnBox>& boxes) {
  const int k = picture_scale(im.w, im.h);
  Image out = k > 1 ? resize_image(im, im.w * k, im.h * k) : im;
  const int shorter = std::min(out.w, out.h);
  const int thick = std::max(1, shorter / 160), text_scale = std::max(1, shorter / 240);
  // Edges beyond the picture (an untrained head's boxes reach +-1e9) are held just outside
  // it before scaling, so that the products stay in int; drawing clips them anyway.
  std::vector<DrawnBox> held = boxes;
  for (DrawnBox& b : held) {
    b.x1 = std::clamp(b.x1, -1, im.w);
    b.x2 = std::clamp(b.x2, -1, im.w);
    b.y1 = std::clamp(b.y1, -1, im.h);
    b.y2 = std::clamp(b.y2, -1, im.h);
  }
  // Boxes first, labels after: a label is never crossed by another box's line.
  for (const DrawnBox& b : held)
    draw_box(out, b.x1 * k, b.y1 * k, b.x2 * k + k - 1, b.y2 * k + k - 1, thick, b.r, b.g, b.b);
  for (const DrawnBox& b : held) {
    const LabelSize size = label_size(b.label, text_scale);
    const int x = std::max(0, std::min(b.x1 * k, out.w - size.w));
    int y = b.y1 * k - size.h;
    if (y < 0) y = std::max(0, b.y1 * k) + thick;
    draw_label(out, x, y, b.label, b.r, b.g, b.b, text_scale);
  }
  return out;
}

Montage::Montage(int pictures)
    : n_(std::clamp(pictures, 0, kMontageMax)),
      cols_(std::max(1, int(std::ceil(std::sqrt(double(n_)))))),
      canvas_(cols_ * kCellW, std::max(1, (n_ + cols_ - 1) / cols_) * kCellH, 3, 1.f) {}

void Montage::add(int i, const Image& picture, const std::string& name) {
  if (i < 0 || i >= n_) return;
  const int x0 = (i % cols_) * kCellW, y0 = (i / cols_) * kCellH;
  constexpr int kPad = 2, kSide = kCellW - 2 * kPad;
  std::string caption = name;
  if (picture.w > 0) {
    const Image boxed = letterbox_image(picture, kSide, kSide);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < kSide; ++y)
        for (int x = 0; x < kSide; ++x) canvas_.at(x0 + kPad + x, y0 + kPad + y, c) = boxed.at(x, y, c);
  } else {
    fill_rect(canvas_, x0 + kPad, y0 + kPad, x0 + kPad + kSide - 1, y0 + kPad + kSide - 1, .5f, .5f, .5f);
    caption += " (unreadable)";
  }
  // The name, shortened in the middle to fit the cell (the start and the end tell files apart).
  constexpr int kTextScale = 2;
  const std::string whole = caption;
  for (size_t keep = whole.size() - 1; keep > 2 && label_size(caption, kTextScale).w > kCellW - 2 * kPad; --keep)
    caption = whole.substr(0, keep / 2) + ".." + whole.substr(whole.size() - (keep - keep / 2));
  draw_label(canvas_, x0 + kPad, y0 + kCellW + 2, caption, 1.f, 1.f, 1.f, kTextScale);
}

}  // namespace tt
