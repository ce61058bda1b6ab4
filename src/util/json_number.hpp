// Whole numbers read from JSON files tiletrain takes from outside (checkpoints, device
// models). nlohmann's get<int>() of a number the type cannot hold (2.9e62, or 1e30 in an
// int) is undefined behaviour, not an exception: these check the kind and range first.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "util/error.hpp"

namespace tt {

// A whole number in [lo, hi]; else a tt::Error naming `what` and the value found.
inline int64_t json_whole(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= uint64_t(hi) && int64_t(u) >= lo) return int64_t(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= lo && i <= hi) return i;
  }
  fail(what, " must be a whole number from ", lo, " to ", hi, ", got ", v.dump());
}

// Any whole number from 0 to 2^64 - 1 (a seed).
inline uint64_t json_unsigned(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  fail(what, " must be a whole number from 0 to 18446744073709551615, got ", v.dump());
}

}  // namespace tt
