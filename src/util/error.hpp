// Error type of the library: every failure is thrown as tt::Error carrying what went
// wrong and where (file:line of a cfg, a byte offset, a rank). Only main() catches it.
#pragma once
#include <stdexcept>
#include <string>

namespace tt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string to_str(const std::string& s) { return s; }
inline std::string to_str(const char* s) { return s; }
inline std::string to_str(char* s) { return s; }  // e.g. strerror()
inline std::string to_str(char c) { return std::string(1, c); }
template <class T>
std::string to_str(const T& v) {
  return std::to_string(v);
}

// Throws tt::Error with the concatenation of the arguments.
template <class... A>
[[noreturn]] void fail(const A&... parts) {
  std::string s;
  ((s += to_str(parts)), ...);
  throw Error(s);
}

}  // namespace tt
