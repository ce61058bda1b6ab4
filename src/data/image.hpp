// Images as Darknet holds them: planar float, data[c*h*w + y*w + x], values in [0, 1];
// decoding and encoding through Debian's stb headers (libstb-dev, as Darknet itself), and
// Darknet's resize, letterbox and placement arithmetic (image.c), operation for operation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tt {

struct Image {
  int w = 0, h = 0, c = 0;
  std::vector<float> data;
  Image() = default;
  Image(int w_, int h_, int c_, float fill = 0.f) : w(w_), h(h_), c(c_), data(size_t(w_) * h_ * c_, fill) {}
  float& at(int x, int y, int ch) { return data[(size_t(ch) * h + y) * w + x]; }
  float at(int x, int y, int ch) const { return data[(size_t(ch) * h + y) * w + x]; }
};

// Pictures larger than this many pixels are refused before they are decoded (--max-pixels):
// 4096 x 4096, 192 MB as planar floats, which a Raspberry Pi holds; a 250 KB PNG can say
// 16000 x 16000 and take 3.8 GB to decode.
constexpr int64_t kDefaultMaxPixels = int64_t(4096) * 4096;

// A picture's size from its header alone (stb's stbi_info: no pixel is decoded).
struct ImageInfo {
  int w = 0, h = 0, c = 0;
  int64_t pixels() const { return int64_t(w) * h; }
};
// Throws naming the file: missing, a folder, empty, not a picture stb reads, or more than
// `max_pixels` pixels (0: no limit).
ImageInfo image_info(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
// JPEG, PNG, BMP, ... with `channels` channels (3: RGB). Reads the header first and refuses a
// picture above `max_pixels` (0: no limit) before decoding it. Throws naming the file and
// the reason (stb's, or out of memory).
Image load_image(const std::string& path, int channels = 3, int64_t max_pixels = kDefaultMaxPixels);
// PNG, written to a new temporary file (never one that exists) and renamed (no half-written
// picture). Throws naming the path.
void save_png(const Image& im, const std::string& path);

// Darknet's two-pass bilinear resize. A 1-pixel side (target or source) takes the source's
// last row/column, as Darknet's column pass does (its row pass divides by zero there).
Image resize_image(const Image& im, int w, int h);
// Aspect kept, centred on 0.5 grey; a side that would round to 0 pixels gets 1.
Image letterbox_image(const Image& im, int w, int h);
// Darknet's place_image: `im` scaled bilinearly to w x h at (dx, dy) of `canvas` (clipped).
void place_image(const Image& im, int w, int h, int dx, int dy, Image& canvas);
// Darknet's distort_image: hue shift, saturation and exposure scales in HSV, clamped to [0, 1].
void distort_image(Image& im, float hue, float sat, float val);
void flip_image(Image& im);  // left-right

// Darknet's classifier augmentation (random_augment_image in data.c's
// load_image_augment_paths; resize_min and crop_image in classifier.c's validate_classifier_*).
// rotate_crop_image: a w x h picture sampled bilinearly from `im` rotated by `rad` about its
// centre, aspect/s source columns per output column and 1/s rows per row (s > 1 enlarges,
// aspect > 1 squeezes horizontally), shifted by (dx, dy) output pixels; samples outside `im` read 0
// (get_pixel_extend). Darknet's arithmetic: coordinates in double (cos and sin of the float
// angle in double), weights in float. s = 0 divides by zero as Darknet does: every coordinate
// is infinite or NaN and the picture all 0 (as libdarknet's -Ofast build has it; its C read
// as IEEE arithmetic would give NaN).
Image rotate_crop_image(const Image& im, float rad, float s, int w, int h, float dx, float dy, float aspect);
// resize_min: the shorter side scaled to `min`, the other by the same factor (rounded down);
// a picture already that size is returned as it is (a copy).
Image resize_min(const Image& im, int min);
// crop_image: the w x h window at (dx, dy); pixels outside `im` repeat its nearest edge pixel
// (constrain_int on the row and column), not 0.
Image crop_image(const Image& im, int dx, int dy, int w, int h);

// Drawing, for detections and plan pictures: a filled rectangle (corners included), a
// rectangle `thickness` pixels wide and a text label on a filled background (stb_easy_font's
// glyphs, about 7 pixels high, times `scale`), all clipped to the image.
void fill_rect(Image& im, int x1, int y1, int x2, int y2, float r, float g, float b);
void draw_box(Image& im, int x1, int y1, int x2, int y2, int thickness, float r, float g, float b);
void draw_label(Image& im, int x, int y, const std::string& text, float r, float g, float b, int scale);
// The width and height in pixels draw_label's label (background included) takes.
struct LabelSize {
  int w = 0, h = 0;
};
LabelSize label_size(const std::string& text, int scale);

}  // namespace tt
