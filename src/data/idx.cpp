#include "data/idx.hpp"

#include <zlib.h>

#include "util/error.hpp"

namespace tt {

namespace {
std::vector<uint8_t> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) fail("cannot open '", path, "' (for Fashion-MNIST: apt-get install dataset-fashion-mnist)");
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.insert(data.end(), buf, buf + n);
  const bool err = n < 0;
  gzclose(f);
  if (err) fail("'", path, "': corrupt gzip data");
  return data;
}

uint32_t be32(const std::vector<uint8_t>& d, size_t off) {
  return uint32_t(d[off]) << 24 | uint32_t(d[off + 1]) << 16 | uint32_t(d[off + 2]) << 8 | d[off + 3];
}
}  // namespace

ImageSet load_idx(const std::string& images, const std::string& labels) {
  ImageSet s;
  std::vector<uint8_t> im = read_all(images), lb = read_all(labels);
  if (im.size() < 16 || be32(im, 0) != 0x00000803) fail("'", images, "' is not an IDX image file (magic 0x803)");
  if (lb.size() < 8 || be32(lb, 0) != 0x00000801) fail("'", labels, "' is not an IDX label file (magic 0x801)");
  s.count = int(be32(im, 4));
  s.rows = int(be32(im, 8));
  s.cols = int(be32(im, 12));
  const size_t want = 16 + size_t(s.count) * s.rows * s.cols;
  if (im.size() != want) fail("'", images, "': expected ", want, " bytes for ", s.count, " images, got ", im.size());
  if (int(be32(lb, 4)) != s.count || lb.size() != 8 + size_t(s.count))
    fail("'", labels, "': ", be32(lb, 4), " labels for ", s.count, " images");
  s.pixels.assign(im.begin() + 16, im.end());
  s.labels.assign(lb.begin() + 8, lb.end());
  for (uint8_t l : s.labels)
    if (l >= s.classes) fail("'", labels, "': label ", int(l), " out of range");
  return s;
}

}  // namespace tt
