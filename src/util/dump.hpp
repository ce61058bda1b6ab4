// Named-tensor dump files ("TTDUMP1\n" magic, u32 count, then per tensor: u32 name
// length, name, u32 ndim, u32 dims, float32 data, row-major). Shared with the PyTorch
// fixture generator and the Darknet oracle.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace tt {

struct DumpTensor {
  std::vector<int> dims;
  std::vector<float> data;
};

using Dump = std::map<std::string, DumpTensor>;

Dump read_dump(const std::string& path);
void write_dump(const std::string& path, const Dump& dump);

}  // namespace tt
