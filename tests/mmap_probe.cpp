// See mmap_probe.hpp. The only definitions of mmap and munmap in the test binary: the
// dynamic linker binds every library's calls to them too. They forward to the system calls.
#include "mmap_probe.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

// The executable's code: [__executable_start, etext) (GNU ld's default linker script).
extern "C" char __executable_start[], etext[];

namespace {
std::atomic<long> g_calls{0};
std::atomic<bool> g_recording{false};
std::mutex g_mutex;
std::vector<tt::test::Mapping>* g_list = nullptr;  // under g_mutex; never freed (used until exit)

bool from_this_executable(const void* return_address) {
  const auto a = reinterpret_cast<uintptr_t>(return_address);
  return a >= reinterpret_cast<uintptr_t>(__executable_start) && a < reinterpret_cast<uintptr_t>(etext);
}
}  // namespace

extern "C" void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  void* p = reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
  if (g_recording.load(std::memory_order_relaxed) && p != MAP_FAILED && (flags & MAP_ANONYMOUS) &&
      from_this_executable(__builtin_return_address(0))) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    // Small pages only, so that resident_bytes sees which pages were touched (a huge page
    // would make 2 MB resident at the first touch).
    syscall(SYS_madvise, p, len, MADV_NOHUGEPAGE);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_list) g_list = new std::vector<tt::test::Mapping>;
    g_list->push_back({reinterpret_cast<uintptr_t>(p), (len + page - 1) / page * page, false});
  }
  return p;
}

extern "C" int munmap(void* addr, size_t len) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_list)
      for (tt::test::Mapping& m : *g_list)
        if (m.addr == reinterpret_cast<uintptr_t>(addr) && !m.unmapped) m.unmapped = true;
  }
  return int(syscall(SYS_munmap, addr, len));
}

namespace tt::test {

long mmap_calls() { return g_calls.load(); }

void start_recording() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_list) g_list = new std::vector<Mapping>;
  g_list->clear();
  g_recording = true;
}

void stop_recording() { g_recording = false; }

std::vector<Mapping> recorded() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_list ? *g_list : std::vector<Mapping>{};
}

size_t page_bytes() { return size_t(sysconf(_SC_PAGESIZE)); }

size_t resident_bytes(const Mapping& m) {
  const size_t page = page_bytes(), pages = m.bytes / page;
  std::vector<unsigned char> in(pages);
  if (mincore(reinterpret_cast<void*>(m.addr), m.bytes, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char v : in) n += v & 1;
  return n * page;
}

}  // namespace tt::test
