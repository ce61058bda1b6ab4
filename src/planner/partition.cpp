#include "planner/partition.hpp"

#include <cstdio>

namespace tt {

std::string Partition::groups_str() const {
  // A group per tiled layer (they start at group_starts[0]: 1 after a [crop]).
  if (group_starts.empty() || int(group_starts.size()) == cut - group_starts[0]) return "none";
  if (group_starts.size() == 1) return "all";
  std::string s;
  for (int g : group_starts) {
    if (!s.empty()) s += ',';
    s += std::to_string(g);
  }
  return s;
}

std::string Partition::str() const {
  return "grid " + std::to_string(rows) + "x" + std::to_string(cols) + ", groups " + groups_str() + ", cut " +
         std::to_string(cut) + ", " + std::to_string(tiles_per_rank) + " tile(s)/rank, " +
         std::to_string(ranks_per_device) + " rank(s)/device" + (low_memory ? ", low memory" : "") +
         (split.rows.empty() && split.cols.empty() ? "" : ", split" + split_flags()) +
         (features == BackwardFeatures::Exchange ? ", backward features exchanged" : "") +
         (overlap != Overlap::Auto ? std::string(", overlap ") + overlap_name(overlap) : "") +
         (replicas > 0 ? ", data parallel over " + std::to_string(replicas) + " copies" : "") +
         (tail_filters ? ", filter blocks after the cut" : "");
}

std::string Partition::flags() const {
  return std::string(low_memory ? " --low-memory" : "") + split_flags() +
         (features == BackwardFeatures::Exchange ? " --backward-features exchange" : "") +
         (overlap != Overlap::Auto ? std::string(" --overlap ") + overlap_name(overlap) : "") +
         (replicas > 0 ? " --replicas " + std::to_string(replicas) : "") +
         // Said either way: the command line's default (--tail auto) may pick the other one.
         (tail_filters   ? " --tail filters"
          : replicas > 0 ? ""
                         : " --tail root");
}

std::string Partition::split_flags() const {
  auto list = [](const std::vector<double>& w) {
    std::string s;
    for (double v : w) {
      char b[32];
      std::snprintf(b, sizeof b, "%.3g", v);
      if (!s.empty()) s += ',';
      s += b;
    }
    return s;
  };
  std::string f;
  if (!split.rows.empty()) f += " --row-weights " + list(split.rows);
  if (!split.cols.empty()) f += " --col-weights " + list(split.cols);
  return f;
}

}  // namespace tt
