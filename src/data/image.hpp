// Images as Darknet holds them: planar float, data[c*h*w + y*w + x], values in [0, 1];
// decoding and encoding through Debian's stb headers (libstb-dev, as Darknet itself), and
// Darknet's resize, letterbox and placement arithmetic (image.c), operation for operation.
#pragma once
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

// JPEG, PNG, BMP, ... with `channels` channels (3: RGB). Throws naming the file and stb's reason.
Image load_image(const std::string& path, int channels = 3);
// PNG, written to a temporary file and renamed (no half-written picture). Throws naming the path.
void save_png(const Image& im, const std::string& path);

Image resize_image(const Image& im, int w, int h);     // Darknet's two-pass bilinear resize
Image letterbox_image(const Image& im, int w, int h);  // aspect kept, centred on 0.5 grey
// Darknet's place_image: `im` scaled bilinearly to w x h at (dx, dy) of `canvas` (clipped).
void place_image(const Image& im, int w, int h, int dx, int dy, Image& canvas);
// Darknet's distort_image: hue shift, saturation and exposure scales in HSV, clamped to [0, 1].
void distort_image(Image& im, float hue, float sat, float val);
void flip_image(Image& im);  // left-right

// Drawing, for detections: a rectangle `thickness` pixels wide and a text label on a filled
// background (stb_easy_font's glyphs), both clipped to the image.
void draw_box(Image& im, int x1, int y1, int x2, int y2, int thickness, float r, float g, float b);
void draw_label(Image& im, int x, int y, const std::string& text, float r, float g, float b);

}  // namespace tt
