#include "model/class_tree.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace tt {

namespace {

// A device, a pipe or a folder named as a tree or map would be read forever (/dev/zero) or
// not at all: only a regular file is opened.
std::ifstream open_regular(const std::string& path, const char* what, const std::string& cfg_where) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail(cfg_where, ": cannot open the ", what, " '", path,
         "': ", std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream f(path);
  if (!f) fail(cfg_where, ": cannot open the ", what, " '", path, "'");
  return f;
}

}  // namespace

ClassTree read_class_tree(const std::string& path, const std::string& cfg_where) {
  std::ifstream f = open_regular(path, "class tree", cfg_where);
  ClassTree t;
  t.path = path;
  std::string line;
  int last_parent = -1;
  for (int n = 0; std::getline(f, line); ++n) {
    std::istringstream ss(line);
    std::string name;
    std::string parent_text;
    if (!(ss >> name)) fail(path, ":", n + 1, ": an empty line in a class tree (cfg ", cfg_where, ")");
    int parent = -1;  // a line without one is a root, as Darknet's sscanf leaves it
    if (ss >> parent_text) {
      char* end = nullptr;
      const long v = std::strtol(parent_text.c_str(), &end, 10);
      if (*end != '\0' || v < -1 || v >= n)
        fail(path, ":", n + 1, ": parent '", parent_text, "' is not an earlier line (cfg ", cfg_where, ")");
      parent = int(v);
    }
    if (n == 0 || parent != last_parent) {  // a new group (the first line's parent is -1)
      t.group_offset.push_back(n);
      t.group_size.push_back(0);
      last_parent = parent;
    }
    t.parent.push_back(parent);
    t.group.push_back(int(t.group_size.size()) - 1);
    t.child.push_back(-1);
    if (parent >= 0) t.child[size_t(parent)] = t.group.back();
    ++t.group_size.back();
  }
  if (t.empty()) fail(cfg_where, ": the class tree '", path, "' is empty");
  return t;
}

std::vector<int> read_class_map(const std::string& path, int classes, const std::string& cfg_where) {
  std::ifstream f = open_regular(path, "class map", cfg_where);
  std::vector<int> map;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    std::istringstream ss(line);
    long v = -1;
    std::string rest;
    if (!(ss >> v) || (ss >> rest) || v < 0 || v >= classes)
      fail(path, ":", n, ": '", line, "' is not a class number in [0, ", classes, ") (cfg ", cfg_where, ")");
    map.push_back(int(v));
  }
  if (map.empty()) fail(cfg_where, ": the class map '", path, "' is empty");
  return map;
}

}  // namespace tt
