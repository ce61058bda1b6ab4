#include "util/sys.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "util/error.hpp"

namespace tt {

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

int64_t thread_read_bytes() {
  thread_local int64_t own = 0;  // what earlier calls read from /proc: the kernel counts it too
  const int fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* r = std::strstr(buf, "rchar:");
  if (!r) return -1;
  const int64_t total = std::strtoll(r + 6, nullptr, 10) - own;
  own += n;
  return total;
}

double memory_limit_mb() {
  double mb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kb = 0;
    meminfo >> kb;
    meminfo.ignore(64, '\n');
    if (key == "MemTotal:") mb = kb / 1024;
  }
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (ctrl.empty())
      file = "/sys/fs/cgroup" + path + "/memory.max";
    else if ((',' + ctrl + ',').find(",memory,") != std::string::npos)
      file = "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes";
    else
      continue;
    std::ifstream f(file);
    std::string v;
    if (f >> v && v != "max") {
      const double bytes = std::atof(v.c_str());
      if (bytes > 0) mb = std::min(mb, bytes / 1048576);
    }
  }
  return mb;
}

ThreadShare default_threads() {
  ThreadShare t;
  t.cores = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  t.quota = cgroup_cpu_quota_cores();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  t.local = local ? std::max(1, std::atoi(local)) : 1;
  const int usable = std::isfinite(t.quota) ? std::clamp(int(t.quota), 1, t.cores) : t.cores;
  t.threads = std::max(1, usable / t.local);
  return t;
}

void check_can_write(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(dir.c_str(), F_OK) != 0) fail("cannot write '", path, "': folder '", dir, "' does not exist");
  if (access(dir.c_str(), W_OK) != 0) fail("cannot write '", path, "': folder '", dir, "' is not writable");
  struct stat st;
  if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail("cannot write '", path, "': '", dir, "' is not a folder");
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail("cannot write '", path, "': it is a folder");
}

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)),
      tmp_(path_ + ".tmp." + std::to_string(getpid())),
      out_(tmp_, std::ios::binary | std::ios::trunc) {
  if (!out_) fail("cannot open '", tmp_, "' for writing");
}

AtomicFile::~AtomicFile() {
  if (done_) return;
  out_.close();
  std::remove(tmp_.c_str());
}

void AtomicFile::commit() {
  out_.flush();
  if (!out_) fail("write to '", tmp_, "' failed (disk full?)");
  out_.close();
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename '", tmp_, "' to '", path_, "'");
  done_ = true;
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  AtomicFile f(path);
  write(f.out());
  f.commit();
}

namespace {
// Cores a cgroup directory's own quota allows, +infinity if it sets none.
double quota_in(const std::string& dir, bool v2) {
  std::ifstream f(dir + (v2 ? "/cpu.max" : "/cpu.cfs_quota_us"));
  if (!f) return INFINITY;
  if (v2) {  // "max 100000" or "45000 100000"
    std::string quota;
    double period = 0;
    if (!(f >> quota >> period) || quota == "max" || period <= 0) return INFINITY;
    return std::strtod(quota.c_str(), nullptr) / period;
  }
  double quota = -1, period = 0;
  std::ifstream p(dir + "/cpu.cfs_period_us");
  if (!(f >> quota) || quota <= 0 || !(p >> period) || period <= 0) return INFINITY;  // -1: none
  return quota / period;
}
}  // namespace

double cgroup_cpu_quota_cores(const std::string& self_cgroup, const std::string& cgroup_root) {
  std::ifstream f(self_cgroup);
  std::string line;
  double cores = INFINITY;
  while (std::getline(f, line)) {  // "hierarchy:controllers:path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string mount;
    bool v2 = false;
    if (controllers.empty()) {  // v2: the unified hierarchy at the root (hybrid: below "unified")
      v2 = true;
      mount = cgroup_root;
      if (access((mount + "/cgroup.controllers").c_str(), R_OK) != 0) mount = cgroup_root + "/unified";
    } else {
      bool cpu = false;
      for (size_t at = 0; at <= controllers.size();) {
        const size_t end = std::min(controllers.find(',', at), controllers.size());
        cpu = cpu || controllers.compare(at, end - at, "cpu") == 0;
        at = end + 1;
      }
      if (!cpu) continue;
      mount = cgroup_root + "/" + controllers;
      if (access(mount.c_str(), R_OK) != 0) mount = cgroup_root + "/cpu";
    }
    for (;;) {  // this cgroup and every parent: the tightest quota holds
      cores = std::min(cores, quota_in(mount + (path == "/" ? "" : path), v2));
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return cores;
}

void allow_all_cpus() {
  const long conf = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
  cpu_set_t all;
  CPU_ZERO(&all);
  for (long c = 0; c < conf && c < CPU_SETSIZE; ++c) CPU_SET(int(c), &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);  // fails only if the cgroup allows none of them
}

}  // namespace tt
