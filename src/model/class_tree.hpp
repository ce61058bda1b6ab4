// YOLO9000's class hierarchy and class maps, as Darknet reads them (tree.c read_tree,
// utils.c read_map): a tree file has one "name parent" line per class (parent -1 for a
// root, else an earlier line); consecutive lines with the same parent form a group, and a
// softmax runs over each group. A map file has one class number per line.
#pragma once
#include <string>
#include <vector>

namespace tt {

struct ClassTree {
  std::string path;
  std::vector<int> parent, group;             // per class: its parent (-1: none), its group
  std::vector<int> child;                     // per class: the group of its children (-1: a leaf)
  std::vector<int> group_offset, group_size;  // per group: its first class and class count
  int size() const { return int(parent.size()); }
  bool empty() const { return parent.empty(); }
};

// Throws naming the file (and `cfg_where`, the cfg line that names it) when the file cannot
// be read, has an empty line, a parent that is not an earlier line, or no line.
ClassTree read_class_tree(const std::string& path, const std::string& cfg_where);
// Throws likewise for a line that is not a whole number in [0, classes), or no line.
std::vector<int> read_class_map(const std::string& path, int classes, const std::string& cfg_where);

}  // namespace tt
