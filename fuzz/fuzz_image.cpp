// fuzz_image: tt::image_info and tt::load_image (stb, 3 channels, as `detect`, `train --data`
// and the detection loader call them) on an arbitrary file, then what those callers do with
// the picture: letterbox it into a small network input, resize it, place it on a canvas,
// shift its colours and flip it. A tt::Error is the correct answer to a bad picture;
// anything else is a finding. The pixel limit is 2^20 here, not the default 4096^2: a
// 70-byte RLE TGA may say 4000x4000, which the default lets through and ASan takes seconds
// to decode; the refusal is the same code at either limit. scripts/fuzz.sh runs it with
// -malloc_limit_mb/-rss_limit_mb 2048: a picture refused from its header must not be decoded.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "data/image.hpp"
#include "fuzz_util.hpp"
#include "util/error.hpp"

constexpr int64_t kMaxPixels = int64_t(1) << 20;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::scratch().write("picture", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    (void)tt::image_info(path);
    tt::Image im = tt::load_image(path, 3, kMaxPixels);
    const tt::Image boxed = tt::letterbox_image(im, 32, 32);
    const tt::Image sized = tt::resize_image(im, 24, 16);
    tt::Image canvas(32, 32, 3, .5f);
    // load_detection_sample's placement: a size and offset from the picture's aspect ratio
    const float ar = float(im.w) / float(im.h);
    const int nw = ar < 1 ? std::max(1, int(32 * ar)) : 32, nh = ar < 1 ? 32 : std::max(1, int(32 / ar));
    tt::place_image(im, nw, nh, (32 - nw) / 2, (32 - nh) / 2, canvas);
    tt::distort_image(canvas, 0.1f, 1.5f, 0.75f);
    tt::flip_image(canvas);
    volatile float sink = boxed.data[0] + sized.data[0] + canvas.data[0];
    (void)sink;
  } catch (const tt::Error&) {
  }
  return 0;
}
