// Small system helpers: wall clock, peak RSS, atomic file writes.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>

namespace tt {

inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Peak resident set size of this process in MB (getrusage ru_maxrss).
double peak_rss_mb();

// Bytes the calling thread has read with read()/readv() — sockets included, which is how
// Open MPI's TCP transport takes in data — not counting this function's own reads of
// /proc; -1 where the kernel does not say (no /proc/thread-self/io).
int64_t thread_read_bytes();

// Lets the calling thread run on every core its cgroup allows, whatever core the process
// was bound to (mpirun binds each rank to one).
void allow_all_cpus();

// The CPU time this process's cgroup may use, in cores: the smallest CPU quota
// (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us) on the path from its
// cgroup up to the root; +infinity where none is set or none can be read. The two paths
// are parameters for the tests.
double cgroup_cpu_quota_cores(const std::string& self_cgroup = "/proc/self/cgroup",
                              const std::string& cgroup_root = "/sys/fs/cgroup");

// The threads a process should run by default: the cores it may use (online cores, fewer
// under a cgroup CPU quota) shared among the processes mpirun started on this host
// (OMPI_COMM_WORLD_LOCAL_SIZE), at least 1. `cores`, `quota` and `local` describe it.
struct ThreadShare {
  int threads = 1, cores = 1, local = 1;
  double quota = 0;  // cores of the CPU quota; +infinity where none is set
};
ThreadShare default_threads();

// This process's memory limit in MB: its cgroup's (v1 or v2 memory limit), else the
// machine's memory.
double memory_limit_mb();

// Throws unless `path`'s folder exists and is writable: checked before a long run, not
// after it.
void check_can_write(const std::string& path);

// A file written through a temporary one in the same folder and renamed into place by
// commit(), so a crash or error never leaves a partly written file behind: destroyed
// uncommitted, the temporary file is removed. For files written a piece at a time.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();
  std::ostream& out() { return out_; }
  void commit();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool done_ = false;
};

// Writes `path` at once through an AtomicFile.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace tt
