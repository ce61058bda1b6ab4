#include "util/sys.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "util/error.hpp"

namespace tt {

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

void check_can_write(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(dir.c_str(), F_OK) != 0) fail("cannot write '", path, "': folder '", dir, "' does not exist");
  if (access(dir.c_str(), W_OK) != 0) fail("cannot write '", path, "': folder '", dir, "' is not writable");
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot open '", tmp, "' for writing");
    try {
      write(out);
      out.flush();
      if (!out) fail("write to '", tmp, "' failed (disk full?)");
    } catch (...) {
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot rename '", tmp, "' to '", path, "'");
  }
}

}  // namespace tt
