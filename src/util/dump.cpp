#include "util/dump.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>

#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

static const char kMagic[8] = {'T', 'T', 'D', 'U', 'M', 'P', '1', '\n'};

Dump read_dump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open dump '", path, "'");
  auto rd = [&](void* p, size_t n, const char* what) {
    in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (!in) fail(path, ": truncated while reading ", what);
  };
  char magic[8];
  rd(magic, 8, "magic");
  if (std::memcmp(magic, kMagic, 8) != 0) fail(path, ": not a TTDUMP1 file");
  uint32_t count;
  rd(&count, 4, "count");
  Dump d;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len, ndim;
    rd(&len, 4, "name length");
    if (len > 4096) fail(path, ": bad name length ", len);
    std::string name(len, '\0');
    rd(name.data(), len, "name");
    rd(&ndim, 4, "ndim");
    if (ndim > 8) fail(path, ": tensor '", name, "' has ", ndim, " dims");
    DumpTensor t;
    size_t n = 1;
    for (uint32_t k = 0; k < ndim; ++k) {
      uint32_t v;
      rd(&v, 4, "dims");
      t.dims.push_back(static_cast<int>(v));
      n *= v;
    }
    t.data.resize(n);
    rd(t.data.data(), n * 4, name.c_str());
    d[name] = std::move(t);
  }
  return d;
}

void write_dump(const std::string& path, const Dump& dump) {
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(kMagic, 8);
    uint32_t count = static_cast<uint32_t>(dump.size());
    out.write(reinterpret_cast<const char*>(&count), 4);
    for (const auto& [name, t] : dump) {
      uint32_t len = static_cast<uint32_t>(name.size()), ndim = static_cast<uint32_t>(t.dims.size());
      out.write(reinterpret_cast<const char*>(&len), 4);
      out.write(name.data(), len);
      out.write(reinterpret_cast<const char*>(&ndim), 4);
      for (int v : t.dims) {
        uint32_t u = static_cast<uint32_t>(v);
        out.write(reinterpret_cast<const char*>(&u), 4);
      }
      out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * 4));
    }
  });
}

}  // namespace tt
