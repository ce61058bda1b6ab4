// Shared by the fuzz targets: the project's readers take file paths, so each input is
// written to files in a folder of this process's own (under /dev/shm when it exists,
// else the temporary folder), removed when the process exits normally.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace fuzz {

class Scratch {
 public:
  Scratch() {
    namespace fs = std::filesystem;
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir_ = (base / ("tiletrain-fuzz-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  // Writes `bytes` to DIR/name (folders created) and returns the path.
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::filesystem::path p = std::filesystem::path(dir_) / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", p.c_str());
      std::abort();
    }
    return p.string();
  }
  // Empties the folder (for targets that lay out several files per input).
  void clear() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) std::filesystem::remove_all(e.path(), ec);
  }

 private:
  std::string dir_;
};

inline const Scratch& scratch() {
  static const Scratch s;
  return s;
}

// The parts of an input that holds several files, separated by kSeparator (in each
// target's dictionary); missing parts are empty.
inline constexpr std::string_view kSeparator = "\n#--tiletrain-fuzz-split--#\n";
inline std::vector<std::string_view> split(std::string_view in, size_t parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < parts) {
    const size_t at = in.find(kSeparator);
    if (at == std::string_view::npos) break;
    out.push_back(in.substr(0, at));
    in.remove_prefix(at + kSeparator.size());
  }
  out.push_back(in);
  out.resize(parts);
  return out;
}

}  // namespace fuzz
