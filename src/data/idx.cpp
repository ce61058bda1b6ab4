#include "data/idx.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "util/error.hpp"

namespace tt {

namespace {

// An IDX file (gzip-compressed or plain), read no further than its header says it reaches:
// a small .gz that inflates to gigabytes is refused once it passes that size.
class IdxReader {
 public:
  explicit IdxReader(const std::string& path) : path_(path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      fail("cannot open '", path, "': ", std::strerror(errno),
           " (for Fashion-MNIST: apt-get install dataset-fashion-mnist)");
    if (S_ISDIR(st.st_mode)) fail("cannot open '", path, "': it is a folder");
    if (!S_ISREG(st.st_mode)) fail("cannot open '", path, "': not a regular file");
    f_ = gzopen(path.c_str(), "rb");  // reads plain files too
    if (!f_) fail("cannot open '", path, "'");
  }
  ~IdxReader() { gzclose(f_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  // Up to n bytes appended to `out` (which grows with what arrives, not with what the
  // header promises); the count read.
  uint64_t read(std::vector<uint8_t>& out, uint64_t n) {
    uint64_t got = 0;
    while (got < n) {
      const size_t start = out.size();
      const unsigned chunk = unsigned(std::min<uint64_t>(n - got, 1 << 20));
      out.resize(start + chunk);
      const int r = gzread(f_, out.data() + start, chunk);
      if (r < 0) fail("'", path_, "': corrupt gzip data");
      out.resize(start + size_t(r));
      if (r == 0) break;
      got += uint64_t(r);
    }
    return got;
  }
  bool at_end() {
    uint8_t b;
    const int r = gzread(f_, &b, 1);
    if (r < 0) fail("'", path_, "': corrupt gzip data");
    return r == 0;
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

uint32_t be32(const std::vector<uint8_t>& d, size_t off) {
  return uint32_t(d[off]) << 24 | uint32_t(d[off + 1]) << 16 | uint32_t(d[off + 2]) << 8 | d[off + 3];
}

// The header (magic and sizes), then exactly the bytes the sizes say: fewer or more is an
// error naming the file and both counts.
std::vector<uint8_t> read_idx(const std::string& path, uint32_t magic, size_t header, const char* what,
                              const std::function<uint64_t(const std::vector<uint8_t>&)>& body_bytes) {
  IdxReader in(path);
  std::vector<uint8_t> d;
  if (in.read(d, header) < header || be32(d, 0) != magic)
    fail("'", path, "' is not an IDX ", what, " file (magic 0x", magic == 0x803 ? "803" : "801", ")");
  const uint64_t body = body_bytes(d);
  in.read(d, body);
  if (d.size() - header != body || !in.at_end())
    fail("'", path, "': expected ", header + body, " bytes for its header's sizes, got ",
         d.size() - header != body ? std::to_string(d.size()) : "more");
  d.erase(d.begin(), d.begin() + std::ptrdiff_t(header));
  return d;
}

}  // namespace

ImageSet load_idx(const std::string& images, const std::string& labels) {
  ImageSet s;
  s.pixels = read_idx(images, 0x803, 16, "image", [&](const std::vector<uint8_t>& h) {
    const uint32_t count = be32(h, 4), rows = be32(h, 8), cols = be32(h, 12);
    if (count > (1u << 30) || rows < 1 || cols < 1 || rows > 65536 || cols > 65536 ||
        uint64_t(rows) * cols > (1u << 24))
      fail("'", images, "': its header says ", count, " images of ", rows, "x", cols,
           " pixels, outside what this reader takes (at most 2^30 images of at most 2^24 pixels)");
    s.count = int(count);
    s.rows = int(rows);
    s.cols = int(cols);
    return uint64_t(count) * rows * cols;
  });
  s.labels = read_idx(labels, 0x801, 8, "label", [&](const std::vector<uint8_t>& h) {
    if (be32(h, 4) != uint32_t(s.count)) fail("'", labels, "': ", be32(h, 4), " labels for ", s.count, " images");
    return uint64_t(s.count);
  });
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] >= s.classes)
      fail("'", labels, "': label ", int(s.labels[i]), " of image ", i, " is out of range [0, ", s.classes, ")");
  return s;
}

}  // namespace tt
