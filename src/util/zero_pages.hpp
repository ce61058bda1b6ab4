// A vector of floats whose zeros cost no memory until written: large blocks are fresh
// anonymous pages from the system (zero, and resident only once written), small ones come
// from calloc; growing it writes a zero only over a value that is not one (reading an
// untouched page maps the kernel's shared zero page, which RSS does not count). So a
// process can hold the whole layout of a net's parameters and fill only the parts it keeps
// (model/params.hpp).
#pragma once
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tt {

template <class T>
struct ZeroPageAllocator {
  static_assert(std::is_trivially_copyable_v<T>);
  using value_type = T;
  static constexpr size_t kPagedBytes = size_t(1) << 20;  // from here on, whole pages

  ZeroPageAllocator() = default;
  template <class U>
  ZeroPageAllocator(const ZeroPageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    void* p = bytes >= kPagedBytes ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                   : std::calloc(n ? n : 1, sizeof(T));
    if (p == MAP_FAILED || p == nullptr) throw std::bad_alloc();
    // Small pages even where transparent huge pages are always on: writing one value must
    // not make 2 MB around it resident.
    if (bytes >= kPagedBytes) madvise(p, bytes, MADV_NOHUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) >= kPagedBytes)
      munmap(p, n * sizeof(T));
    else
      std::free(p);
  }
  // Value-initialisation (resize): the memory is zero already unless an earlier element
  // was there, so only a non-zero value is overwritten.
  template <class U>
  void construct(U* p) {
    static const unsigned char zero[sizeof(U)] = {};
    if (std::memcmp(p, zero, sizeof(U)) != 0) ::new (static_cast<void*>(p)) U();
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }

  friend bool operator==(const ZeroPageAllocator&, const ZeroPageAllocator&) { return true; }
};

using ZeroPageFloats = std::vector<float, ZeroPageAllocator<float>>;

}  // namespace tt
