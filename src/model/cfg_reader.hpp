// Reading one .cfg section's keys, each checked with its file and line: what the parser
// (cfg_parse.cpp) and every op kind's parse function (op_kind.hpp) read options with.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/net_spec.hpp"
#include "util/error.hpp"

namespace tt {

struct CfgSection {
  std::string name;
  int line = 0;
  // key -> (value, line); `used` tracks which keys a layer consumed.
  std::map<std::string, std::pair<std::string, int>> kv;
  std::set<std::string> used;
};

inline std::string cfg_trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

class CfgReader {
 public:
  CfgReader(const std::string& file, CfgSection& s) : file_(file), s_(s) {}

  std::string where(int line) const { return file_ + ":" + std::to_string(line); }

  bool has(const std::string& k) const { return s_.kv.count(k) > 0; }

  std::string str(const std::string& k, const std::string& def) {
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) return def;
    s_.used.insert(k);
    return it->second.first;
  }

  double num(const std::string& k, double def, bool required = false) {
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) {
      if (required) fail(where(s_.line), ": [", s_.name, "] needs '", k, "='");
      return def;
    }
    s_.used.insert(k);
    return parse_number(it->second.first, k, it->second.second);
  }

  int integer(const std::string& k, int def, bool required = false) {
    double v = num(k, def, required);
    if (v != std::floor(v)) fail(where(line_of(k)), ": '", k, "' must be a whole number, got '", text_of(k), "'");
    if (std::fabs(v) > 1e9) fail(where(line_of(k)), ": '", k, "' is out of range: ", text_of(k));
    return int(v);
  }

  // A whole number k > 0 and at most hi (what a device can hold, or the engine): integer(),
  // positive() and at_most() in one.
  int count(const std::string& k, int def, int64_t hi, const char* what, bool required = false) {
    const int v = integer(k, def, required);
    positive(k, v);
    at_most(k, v, hi, what);
    return v;
  }

  // Throws naming the key's line when v > hi (what a device can hold, or the engine).
  void at_most(const std::string& k, int64_t v, int64_t hi, const char* what) const {
    if (v > hi) fail(where(line_of(k)), ": '", k, "' = ", v, " is larger than ", hi, " (", what, ")");
  }

  // A comma-separated list of numbers ("1, 2,3"; one trailing comma is tolerated, as
  // Darknet's parser does). An empty value or an empty entry is an error naming the line.
  std::vector<double> list(const std::string& k) {
    std::vector<double> out;
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) return out;
    s_.used.insert(k);
    const std::string& text = it->second.first;
    const int line = it->second.second;
    if (cfg_trim(text).empty()) fail(where(line), ": '", k, "' has no value (it takes a comma-separated list)");
    std::vector<std::string> items(1);
    for (char ch : text)
      if (ch == ',')
        items.emplace_back();
      else
        items.back() += ch;
    if (items.size() > 1 && cfg_trim(items.back()).empty()) items.pop_back();
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item = cfg_trim(items[i]);
      if (item.empty()) fail(where(line), ": '", k, "' has an empty entry (number ", i + 1, ") in '", text, "'");
      out.push_back(parse_number(item, k, line));
    }
    return out;
  }

  int line_of(const std::string& k) const {
    auto it = s_.kv.find(k);
    return it == s_.kv.end() ? s_.line : it->second.second;
  }

  void positive(const std::string& k, double v) {
    if (!(v > 0))
      fail(where(line_of(k)), ": '", k, "' must be > 0, got ", s_.kv.count(k) ? text_of(k) : std::to_string(v));
  }

  std::string text_of(const std::string& k) const {
    auto it = s_.kv.find(k);
    return it == s_.kv.end() ? "" : it->second.first;
  }

  // Every key the layer did not consume is an error, except Darknet keys that only
  // concern data augmentation or inference and are documented as ignored.
  void reject_unused(const std::set<std::string>& ignored) {
    for (const auto& [k, v] : s_.kv)
      if (!s_.used.count(k) && !ignored.count(k)) fail(where(v.second), ": unknown key '", k, "' in [", s_.name, "]");
  }

  // An activation key (Darknet's default for most layers: logistic).
  Act act(const std::string& k, const char* def = "logistic") {
    const std::string a = str(k, def);
    if (a == "leaky") return Act::Leaky;
    if (a == "relu") return Act::Relu;
    if (a == "linear") return Act::Linear;
    if (a == "logistic") return Act::Logistic;
    if (a == "ramp") return Act::Ramp;
    fail(where(line_of(k)), ": unsupported activation '", a, "' (leaky, relu, linear, logistic, ramp)");
  }

  // The section's own line and name (for messages about the section as a whole).
  int line() const { return s_.line; }
  const std::string& section() const { return s_.name; }
  const std::string& file() const { return file_; }

 private:
  double parse_number(const std::string& text, const std::string& k, int line) const {
    if (text.empty()) fail(where(line), ": '", k, "' has no value");
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v)) fail(where(line), ": '", k, "' is not a number: '", text, "'");
    if (std::fabs(v) > FLT_MAX) fail(where(line), ": '", k, "' is out of range: ", text);
    return v;
  }

  std::string file_;
  CfgSection& s_;
};

}  // namespace tt
