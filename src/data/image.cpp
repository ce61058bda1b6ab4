#include "data/image.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "util/error.hpp"

// The stb implementations, compiled here from Debian's headers (static: private to this file).
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
// Only the formats training sets come in: JPEG, PNG and BMP. Every other decoder of Debian
// 12's stb is attack surface with no use here, and fuzz_image found bugs in one of them
// within the hour (PNM: a heap over-read converting 16-bit pictures, an int overflow on a
// long header number; docs/fuzzing.md). GIF, TGA, PSD, HDR, PIC and PNM are refused as
// unknown formats.
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>

namespace tt {

namespace {

// Opens a picture for reading; throws naming it when it is missing, not a regular file
// (a folder, a device) or empty.
std::unique_ptr<FILE, int (*)(FILE*)> open_picture(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("cannot read image '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("cannot read image '", path, "': it is a folder, not a picture");
  if (!S_ISREG(st.st_mode)) fail("cannot read image '", path, "': not a regular file");
  if (st.st_size == 0) fail("cannot read image '", path, "': the file is empty (0 bytes)");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot read image '", path, "': ", std::strerror(errno));
  return {f, &std::fclose};
}

// Debian 12's stb_image (git 2022-09-08) trusts a JPEG's tables in two ways that fuzz_image
// found to be memory errors, and this walk refuses both before stb reads the file:
//  - it builds a Huffman table from a DHT segment's 16 code counts without checking that they
//    add up to at most 256, and writes past its tables when they do (CVE-2021-37789);
//  - it decodes a scan with whichever Huffman and quantisation tables the scan and the frame
//    name, defined or not; its decoder state is not zeroed, so an undefined table is what an
//    earlier picture left in that memory, and a Huffman table's offsets index its values[256]
//    anywhere (stb_image.h:2120). The JPEG standard wants every table defined before the scan
//    that uses it; a baseline scan uses its components' DC and AC tables, a progressive DC
//    scan (Ss = 0) the DC tables (its refinements none), a progressive AC scan the AC table.
// The markers are walked as stb walks them (fill bytes 0xFF skipped, bytes up to the next 0xFF
// skipped, segments by their length, entropy-coded data up to a marker that is not a stuffed
// 0xFF00 or a restart), and every table of every DHT is read as stb reads it (while the
// segment's length is positive). Returns what is wrong, or "" for anything else (pictures
// that are not JPEGs included); the file position is kept.
std::string jpeg_tables_problem(FILE* f) {
  const long start = std::ftell(f);
  std::string problem;
  bool huffman[2][4] = {}, quant[4] = {};  // [DC 0 / AC 1][table id], [table id]: defined so far
  std::array<int, 256> quant_of{};         // frame component id -> its quantisation table + 1
  bool progressive = false;
  auto get = [f] { return std::getc(f); };
  auto get8 = [f] { return std::max(0, std::getc(f)); };  // inside a segment stb reads 0 past the end
  int c = get();
  if (c == 0xFF) {
    while (c == 0xFF) c = get();
    while (problem.empty() && c == 0xD8) {  // a JPEG (stb's SOI): one marker per turn
      do c = get();
      while (c != EOF && c != 0xFF);
      while (c == 0xFF) c = get();
      if (c == EOF || c == 0xD9) break;
      if (c == 0x00 || c == 0x01 || (c >= 0xD0 && c <= 0xD8)) {  // no length: stuffing, TEM, RSTn, SOI
        c = 0xD8;
        continue;
      }
      const int marker = c, hi = get(), lo = get();
      if (lo == EOF) break;
      long left = (long(hi) << 8 | lo) - 2;
      if (left < 0) break;  // stb refuses a length below 2
      const long body = std::ftell(f);
      if (marker == 0xC4) {
        while (problem.empty() && left > 0) {  // stb: class/id, 16 counts, the table built, then the values
          const int q = get8();
          int n = 0;
          for (int k = 0; k < 16; ++k) n += get8();
          if (n > 256) problem = "a Huffman table (DHT) with more than 256 codes";
          if ((q >> 4) <= 1 && (q & 15) <= 3) huffman[q >> 4][q & 15] = true;
          std::fseek(f, n, SEEK_CUR);
          left -= 17 + n;
        }
      } else if (marker == 0xDB) {
        while (left > 0) {  // stb: precision/id, then 64 values of 1 or 2 bytes
          const int q = get8();
          if ((q & 15) <= 3) quant[q & 15] = true;
          const int size = (q >> 4) ? 128 : 64;
          std::fseek(f, size, SEEK_CUR);
          left -= 1 + size;
        }
      } else if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) {  // the frames stb decodes
        progressive = marker == 0xC2;
        quant_of.fill(0);
        std::fseek(f, 5, SEEK_CUR);  // precision, height, width
        const int n = get8();
        for (int i = 0; i < n; ++i) {
          const int id = get8();
          get8();  // sampling factors
          const int tq = get8();
          quant_of[id] = tq + 1;
        }
      } else if (marker == 0xDA) {
        const int n = get8();
        std::vector<std::pair<int, int>> comps;  // component id, table selectors
        for (int i = 0; i < n; ++i) {
          const int id = get8(), q = get8();
          comps.emplace_back(id, q);
        }
        const int ss = get8();
        get8();  // Se
        const int ah = get8() >> 4;
        const bool dc = !progressive || (ss == 0 && ah == 0), ac = !progressive || ss > 0;
        for (auto [id, q] : comps) {
          const int tq = quant_of[id] - 1;
          if ((dc && (q >> 4) <= 3 && !huffman[0][q >> 4]) || (ac && (q & 15) <= 3 && !huffman[1][q & 15]))
            problem = "a scan (SOS) uses a Huffman table that no DHT segment before it defined";
          else if (tq >= 0 && tq <= 3 && !quant[tq])
            problem = "a scan (SOS) uses a quantisation table that no DQT segment before it defined";
        }
      }
      if (marker != 0xC4 && marker != 0xDB) std::fseek(f, body + left, SEEK_SET);  // DHT, DQT: read as stb reads them
      c = 0xD8;
    }
  }
  std::fseek(f, start, SEEK_SET);
  return problem;
}

// Debian 12's stb_image grows its buffer for a PNG's image data (IDAT) to whatever a chunk's
// length field says before reading the chunk: a 100-byte file saying 1.3 GB made it allocate
// 2 GB (fuzz_image, finding 12). The chunks are walked as stb walks them (length, type, the
// data, a CRC; up to IEND) and a chunk longer than what is left of the file is refused.
// Returns what is wrong, or "" (pictures that are not PNGs included); the position is kept.
std::string png_chunks_problem(FILE* f) {
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const long start = std::ftell(f);
  std::string problem;
  unsigned char head[8];
  if (std::fread(head, 1, 8, f) == 8 && std::memcmp(head, kSignature, 8) == 0 && std::fseek(f, 0, SEEK_END) == 0) {
    const long end = std::ftell(f);
    long at = start + 8;
    while (problem.empty() && at + 8 <= end) {
      std::fseek(f, at, SEEK_SET);
      if (std::fread(head, 1, 8, f) != 8) break;
      const uint32_t length = uint32_t(head[0]) << 24 | uint32_t(head[1]) << 16 | uint32_t(head[2]) << 8 | head[3];
      const std::string type(reinterpret_cast<const char*>(head + 4), 4);
      const long left = end - (at + 8);
      if (int64_t(length) + 4 > left)  // its data and CRC
        problem = "a chunk (" + type + ") says " + std::to_string(length) + " bytes, but the file has " +
                  std::to_string(std::max(0L, left - 4)) + " left";
      if (type == "IEND") break;
      at += 8 + int64_t(length) + 4;
    }
  }
  std::fseek(f, start, SEEK_SET);
  return problem;
}

// The header of an open picture (the file position is kept), checked against the limit.
ImageInfo header_of(FILE* f, const std::string& path, int64_t max_pixels) {
  ImageInfo i;
  if (const std::string problem = jpeg_tables_problem(f); !problem.empty())
    fail("cannot read image '", path, "': a corrupt JPEG: ", problem);
  if (const std::string problem = png_chunks_problem(f); !problem.empty())
    fail("cannot read image '", path, "': a corrupt PNG: ", problem);
  if (!stbi_info_from_file(f, &i.w, &i.h, &i.c))
    fail("cannot read image '", path, "': ", stbi_failure_reason(), " (not a picture stb can read?)");
  if (i.w < 1 || i.h < 1) fail("cannot read image '", path, "': its header says ", i.w, "x", i.h, " pixels");
  if (max_pixels > 0 && i.pixels() > max_pixels)
    fail("image '", path, "' is ", i.w, "x", i.h, " = ", i.pixels(), " pixels, more than the limit of ", max_pixels,
         " (--max-pixels): refused before decoding it");
  return i;
}

}  // namespace

ImageInfo image_info(const std::string& path, int64_t max_pixels) {
  const auto f = open_picture(path);
  return header_of(f.get(), path, max_pixels);
}

Image load_image(const std::string& path, int channels, int64_t max_pixels) {
  const auto f = open_picture(path);
  const ImageInfo info = header_of(f.get(), path, max_pixels);
  try {
    int w = 0, h = 0, c = 0;
    unsigned char* px = stbi_load_from_file(f.get(), &w, &h, &c, channels);
    if (!px) {
      const std::string why = stbi_failure_reason();
      if (why == "Out of memory") throw std::bad_alloc();
      fail("cannot read image '", path, "': ", why);
    }
    const std::unique_ptr<unsigned char, void (*)(void*)> hold(px, stbi_image_free);
    Image im(w, h, channels);
    for (int k = 0; k < channels; ++k)  // load_image_stb: interleaved bytes to planar floats
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) im.at(x, y, k) = float(px[k + channels * (x + size_t(w) * y)]) / 255.f;
    return im;
  } catch (const std::bad_alloc&) {
    fail("cannot read image '", path, "': out of memory decoding its ", info.w, "x", info.h,
         " pixels (a lower --max-pixels refuses such pictures before decoding them)");
  }
}

void save_png(const Image& im, const std::string& path) {
  if (im.c != 1 && im.c != 3) fail("save_png: ", im.c, " channels (1 or 3)");
  std::vector<unsigned char> px(size_t(im.w) * im.h * im.c);
  for (int k = 0; k < im.c; ++k)
    for (int y = 0; y < im.h; ++y)
      for (int x = 0; x < im.w; ++x)
        px[size_t(k + im.c * (x + size_t(im.w) * y))] =
            (unsigned char)std::lround(255.f * std::clamp(im.at(x, y, k), 0.f, 1.f));
  // A temporary file of our own (O_EXCL: never one that exists, whoever made it), renamed
  // into place once complete.
  std::string tmp;
  int fd = -1;
  for (int n = 0; fd < 0; ++n) {
    tmp = path;
    tmp.append(".tmp.").append(std::to_string(getpid()));
    if (n) tmp.append(".").append(std::to_string(n));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || n > 100))
      fail("cannot write PNG '", path, "': ", tmp, ": ", std::strerror(errno));
  }
  FILE* f = fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    std::remove(tmp.c_str());
    fail("cannot write PNG '", path, "': ", std::strerror(errno));
  }
  auto put = [](void* ctx, void* data, int size) { std::fwrite(data, 1, size_t(size), static_cast<FILE*>(ctx)); };
  const bool encoded = stbi_write_png_to_func(put, f, im.w, im.h, im.c, px.data(), im.w * im.c) != 0;
  const bool written = !std::ferror(f);
  if (std::fclose(f) != 0 || !encoded || !written) {
    std::remove(tmp.c_str());
    fail("cannot write PNG '", path, "'", encoded ? " (disk full?)" : "");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("cannot write PNG '", path, "': ", std::strerror(e));
  }
}

Image resize_image(const Image& im, int w, int h) {
  if (w < 1 || h < 1 || im.w < 1 || im.h < 1)
    fail("resize_image: ", im.w, "x", im.h, " to ", w, "x", h, " (both sizes must be at least 1x1)");
  Image resized(w, h, im.c), part(w, im.h, im.c);
  // Darknet divides by w - 1 and h - 1. Its column pass never uses w_scale when w is 1 (the
  // one column is the source's last); the row pass here does the same for h = 1 (Darknet
  // computes 0 * inf there and reads outside the picture). Every other size: Darknet's
  // arithmetic, operation for operation.
  const float w_scale = w > 1 ? float(im.w - 1) / float(w - 1) : 0.f;
  const float h_scale = h > 1 ? float(im.h - 1) / float(h - 1) : 0.f;
  for (int k = 0; k < im.c; ++k)
    for (int r = 0; r < im.h; ++r)
      for (int c = 0; c < w; ++c) {
        float val;
        if (c == w - 1 || im.w == 1) {
          val = im.at(im.w - 1, r, k);
        } else {
          const float sx = float(c) * w_scale;
          const int ix = int(sx);
          const float dx = sx - float(ix);
          val = (1 - dx) * im.at(ix, r, k) + dx * im.at(ix + 1, r, k);
        }
        part.at(c, r, k) = val;
      }
  for (int k = 0; k < im.c; ++k)
    for (int r = 0; r < h; ++r) {
      const float sy = h > 1 ? float(r) * h_scale : float(im.h - 1);
      const int iy = int(sy);
      const float dy = sy - float(iy);
      for (int c = 0; c < w; ++c) resized.at(c, r, k) = (1 - dy) * part.at(c, iy, k);
      if (r == h - 1 || im.h == 1) continue;
      for (int c = 0; c < w; ++c) resized.at(c, r, k) += dy * part.at(c, iy + 1, k);
    }
  return resized;
}

Image letterbox_image(const Image& im, int w, int h) {
  int new_w = im.w, new_h = im.h;
  // Darknet's sizes, in 64 bits (a 16-million-pixel-wide picture times the net's side is
  // more than an int holds), at least 1 pixel (a 200x1 picture would otherwise vanish) and
  // at most the box.
  if (float(w) / float(im.w) < float(h) / float(im.h)) {
    new_w = w;
    new_h = int(std::clamp<int64_t>(int64_t(im.h) * w / im.w, 1, h));
  } else {
    new_h = h;
    new_w = int(std::clamp<int64_t>(int64_t(im.w) * h / im.h, 1, w));
  }
  const Image resized = resize_image(im, new_w, new_h);
  Image boxed(w, h, im.c, .5f);
  const int dx = (w - new_w) / 2, dy = (h - new_h) / 2;
  for (int k = 0; k < im.c; ++k)
    for (int y = 0; y < new_h; ++y)
      for (int x = 0; x < new_w; ++x) boxed.at(dx + x, dy + y, k) = resized.at(x, y, k);
  return boxed;
}

static float pixel_extend(const Image& m, int x, int y, int c) {
  if (x < 0 || x >= m.w || y < 0 || y >= m.h) return 0;
  return m.at(x, y, c);
}

void place_image(const Image& im, int w, int h, int dx, int dy, Image& canvas) {
  for (int c = 0; c < im.c; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const float rx = (float(x) / float(w)) * float(im.w), ry = (float(y) / float(h)) * float(im.h);
        const int ix = int(std::floor(rx)), iy = int(std::floor(ry));
        const float fx = rx - float(ix), fy = ry - float(iy);
        const float val =
            (1 - fy) * (1 - fx) * pixel_extend(im, ix, iy, c) + fy * (1 - fx) * pixel_extend(im, ix, iy + 1, c) +
            (1 - fy) * fx * pixel_extend(im, ix + 1, iy, c) + fy * fx * pixel_extend(im, ix + 1, iy + 1, c);
        const int X = x + dx, Y = y + dy;  // Darknet's set_pixel ignores cells outside
        if (X >= 0 && X < canvas.w && Y >= 0 && Y < canvas.h && c < canvas.c) canvas.at(X, Y, c) = val;
      }
}

namespace {
// (int)floorf(v). Outside int's range (and for NaN) C leaves it undefined; Darknet's x86 build
// gets INT_MIN (cvttss2si): all four taps outside the picture. The same here, defined.
int floor_to_int(float v) {
  return v >= -2147483648.f && v < 2147483648.f ? int(std::floor(v)) : std::numeric_limits<int>::min();
}

// Darknet's bilinear_interpolate: float weights, the four taps summed in its order. A tap
// outside the picture adds nothing: get_pixel_extend's 0 times its weight in Darknet's C, and
// libdarknet's -Ofast build skips it outright, so that an infinite or NaN coordinate (s = 0)
// gives 0 there (an infinite weight times 0 would be NaN). The same here.
float bilinear_interpolate(const Image& im, float x, float y, int c) {
  const int ix = floor_to_int(x), iy = floor_to_int(y);
  const float dx = x - float(ix), dy = y - float(iy);
  auto inside = [&](int px, int py) { return px >= 0 && px < im.w && py >= 0 && py < im.h; };
  float val = 0;
  if (inside(ix, iy)) val += (1 - dy) * (1 - dx) * im.at(ix, iy, c);
  if (inside(ix, iy + 1)) val += dy * (1 - dx) * im.at(ix, iy + 1, c);
  if (inside(ix + 1, iy)) val += (1 - dy) * dx * im.at(ix + 1, iy, c);
  if (inside(ix + 1, iy + 1)) val += dy * dx * im.at(ix + 1, iy + 1, c);
  return val;
}
}  // namespace

Image rotate_crop_image(const Image& im, float rad, float s, int w, int h, float dx, float dy, float aspect) {
  if (w < 1 || h < 1) fail("rotate_crop_image: an output of ", w, "x", h, " pixels (at least 1x1)");
  // Darknet: float cx = im.w/2.; cos(rad) and sin(rad) of the float angle in double (C's
  // cos, not C++'s float overload); (x - w/2.)/s*aspect in double, dx/s*aspect and dy/s in
  // float; rx and ry summed in double and stored as float.
  const float cx = float(im.w / 2.), cy = float(im.h / 2.);
  const double cos_r = std::cos(double(rad)), sin_r = std::sin(double(rad));
  const float dx_s = dx / s * aspect, dy_s = dy / s;
  Image rot(w, h, im.c);
  for (int c = 0; c < im.c; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const double u = (x - w / 2.) / double(s) * double(aspect) + double(dx_s);
        const double v = (y - h / 2.) / double(s) + double(dy_s);
        const float rx = float(cos_r * u - sin_r * v + double(cx));
        const float ry = float(sin_r * u + cos_r * v + double(cy));
        rot.at(x, y, c) = bilinear_interpolate(im, rx, ry, c);
      }
  return rot;
}

Image resize_min(const Image& im, int min) {
  if (min < 1 || im.w < 1 || im.h < 1) fail("resize_min: ", im.w, "x", im.h, " to a shorter side of ", min);
  // Darknet's int arithmetic (here in 64 bits: its int overflows for a side times `min`
  // above 2^31), the longer side rounded down.
  int64_t w = im.w, h = im.h;
  if (w < h) {
    h = h * min / w;
    w = min;
  } else {
    w = w * min / h;
    h = min;
  }
  if (w > std::numeric_limits<int>::max() || h > std::numeric_limits<int>::max())
    fail("resize_min: ", im.w, "x", im.h, " to a shorter side of ", min, " is ", w, "x", h, " pixels");
  if (w == im.w && h == im.h) return im;
  return resize_image(im, int(w), int(h));
}

Image crop_image(const Image& im, int dx, int dy, int w, int h) {
  if (w < 1 || h < 1 || im.w < 1 || im.h < 1)
    fail("crop_image: ", w, "x", h, " pixels out of ", im.w, "x", im.h, " (both at least 1x1)");
  Image cropped(w, h, im.c);
  for (int k = 0; k < im.c; ++k)
    for (int j = 0; j < h; ++j)
      for (int i = 0; i < w; ++i) {
        // constrain_int(j + dy, 0, im.h - 1), constrain_int(i + dx, 0, im.w - 1)
        const int r = int(std::clamp<int64_t>(int64_t(j) + dy, 0, im.h - 1));
        const int col = int(std::clamp<int64_t>(int64_t(i) + dx, 0, im.w - 1));
        cropped.at(i, j, k) = im.at(col, r, k);
      }
  return cropped;
}

void distort_image(Image& im, float hue, float sat, float val) {
  if (im.c != 3) fail("distort_image: ", im.c, " channels (3)");
  const size_t n = size_t(im.w) * im.h;
  float* R = im.data.data();
  float* G = R + n;
  float* B = G + n;
  for (size_t i = 0; i < n; ++i) {
    // rgb_to_hsv
    const float r = R[i], g = G[i], b = B[i];
    const float mx = std::max(std::max(r, g), b), mn = std::min(std::min(r, g), b), delta = mx - mn;
    float h = 0, s = 0, v = mx;
    if (mx != 0) {
      s = delta / mx;
      if (r == mx)
        h = (g - b) / delta;
      else if (g == mx)
        h = 2 + (b - r) / delta;
      else
        h = 4 + (r - g) / delta;
      if (h < 0) h += 6;
      h = float(h / 6.);
    }
    // scale_image_channel (saturation, value), hue shift with wrap
    s *= sat;
    v *= val;
    h += hue;
    if (h > 1) h -= 1;
    if (h < 0) h += 1;
    // hsv_to_rgb
    float rr, gg, bb;
    const float H = 6 * h;
    if (s == 0) {
      rr = gg = bb = v;
    } else {
      const int index = int(std::floor(H));
      const float f = H - float(index), p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
      switch (index) {
        case 0:
          rr = v, gg = t, bb = p;
          break;
        case 1:
          rr = q, gg = v, bb = p;
          break;
        case 2:
          rr = p, gg = v, bb = t;
          break;
        case 3:
          rr = p, gg = q, bb = v;
          break;
        case 4:
          rr = t, gg = p, bb = v;
          break;
        default:
          rr = v, gg = p, bb = q;
      }
    }
    R[i] = std::clamp(rr, 0.f, 1.f);  // constrain_image
    G[i] = std::clamp(gg, 0.f, 1.f);
    B[i] = std::clamp(bb, 0.f, 1.f);
  }
}

void flip_image(Image& im) {
  for (int k = 0; k < im.c; ++k)
    for (int y = 0; y < im.h; ++y)
      for (int x = 0; x < im.w / 2; ++x) std::swap(im.at(x, y, k), im.at(im.w - x - 1, y, k));
}

namespace {
void fill(Image& im, int x1, int y1, int x2, int y2, const float rgb[3]) {
  x1 = std::max(x1, 0), y1 = std::max(y1, 0), x2 = std::min(x2, im.w - 1), y2 = std::min(y2, im.h - 1);
  for (int k = 0; k < std::min(im.c, 3); ++k)
    for (int y = y1; y <= y2; ++y)
      for (int x = x1; x <= x2; ++x) im.at(x, y, k) = rgb[k];
}

std::vector<char> c_text(const std::string& text) {
  std::vector<char> s(text.begin(), text.end());
  s.push_back('\0');
  return s;
}
}  // namespace

void fill_rect(Image& im, int x1, int y1, int x2, int y2, float r, float g, float b) {
  const float rgb[3] = {r, g, b};
  fill(im, x1, y1, x2, y2, rgb);
}

void draw_box(Image& im, int x1, int y1, int x2, int y2, int thickness, float r, float g, float b) {
  const float rgb[3] = {r, g, b};
  for (int t = 0; t < thickness; ++t) {
    fill(im, x1 + t, y1 + t, x2 - t, y1 + t, rgb);
    fill(im, x1 + t, y2 - t, x2 - t, y2 - t, rgb);
    fill(im, x1 + t, y1 + t, x1 + t, y2 - t, rgb);
    fill(im, x2 - t, y1 + t, x2 - t, y2 - t, rgb);
  }
}

LabelSize label_size(const std::string& text, int scale) {
  std::vector<char> s = c_text(text);
  return {stb_easy_font_width(s.data()) * scale + 4, stb_easy_font_height(s.data()) * scale + 2};
}

void draw_label(Image& im, int x, int y, const std::string& text, float r, float g, float b, int scale) {
  std::vector<char> s = c_text(text);
  const LabelSize size = label_size(text, scale);
  const float bg[3] = {r, g, b};
  fill(im, x, y, x + size.w - 1, y + size.h - 1, bg);
  // Black or white text, whichever stands out from the background.
  const float ink = 0.299f * r + 0.587f * g + 0.114f * b > 0.5f ? 0.f : 1.f;
  const float fg[3] = {ink, ink, ink};
  std::vector<char> buf(s.size() * 270 * 4);  // vertices: x, y, z floats and 4 colour bytes
  const int quads = stb_easy_font_print(0, 0, s.data(), nullptr, buf.data(), int(buf.size()));
  for (int q = 0; q < quads; ++q) {
    float qx0 = 1e9f, qy0 = 1e9f, qx1 = -1e9f, qy1 = -1e9f;
    for (int v = 0; v < 4; ++v) {
      float p[2];
      std::memcpy(p, buf.data() + (q * 4 + v) * 16, sizeof p);
      qx0 = std::min(qx0, p[0]), qx1 = std::max(qx1, p[0]), qy0 = std::min(qy0, p[1]), qy1 = std::max(qy1, p[1]);
    }
    fill(im, x + 2 + int(qx0 * scale), y + 1 + int(qy0 * scale), x + 1 + int(qx1 * scale), y + int(qy1 * scale), fg);
  }
}

}  // namespace tt
