// Reads image classification data in the IDX format of MNIST and Fashion-MNIST (as
// Debian's dataset-fashion-mnist ships it: gzip-compressed, big-endian headers).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tt {

struct ImageSet {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols
  std::vector<uint8_t> labels;  // count
  int classes = 10;
};

// `images` and `labels` may be .gz or plain. Throws naming the file on any mismatch.
ImageSet load_idx(const std::string& images, const std::string& labels);

// Where Debian's dataset-fashion-mnist puts the files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace tt
