// Random small networks for the exactness checks: what tests/test_tiled_equivalence.cpp and
// bench/verify_sweep.cpp draw alike. Each keeps its own stack of layers (the sweep's sizes,
// strides and paddings range wider) drawn in its own order, so that a seed keeps giving the
// configuration it gave before; the draws and steps they share are here.
#pragma once
#include <cstdint>
#include <ostream>
#include <random>
#include <string>

#include "model/net_spec.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt::random_net {

// A configuration's draws, all from its own seed: pick(n) is uniform in [0, n).
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return int(rng_() % uint64_t(n)); }

 private:
  std::mt19937_64 rng_;
};

inline const char* activation(Draws& d) {
  static const char* acts[4] = {"leaky", "relu", "linear", "logistic"};
  return acts[d.pick(4)];
}

// The net's last layers, appended to `cfg`: a third of the time a classifier (average pool,
// a connected layer of 2-7 outputs, softmax), else an SSE cost. Returns the classes (0 for
// the SSE cost).
inline int head(Draws& d, std::ostream& cfg) {
  if (d.pick(3) == 0) {
    const int classes = 2 + d.pick(6);
    cfg << "\n[avgpool]\n\n[connected]\noutput=" << classes << "\nactivation=" << activation(d) << "\n\n[softmax]\n";
    return classes;
  }
  cfg << "\n[cost]\ntype=sse\n";
  return 0;
}

// Where the tiled layers of an n-layer stack end and where their groups start.
struct Partition {
  int cut = -1;                 // -1: the default; else 1 .. n-1, layers [cut, n) untiled
  std::string groups = "none";  // "none", "all" or a list of group starts from layer 0
};

inline Partition partition(Draws& d, int n) {
  Partition p;
  p.cut = d.pick(2) ? -1 : 1 + d.pick(n - 1);
  const int tiled = p.cut < 0 ? n : p.cut;
  switch (d.pick(3)) {
    case 0:
      p.groups = "none";
      break;
    case 1:
      p.groups = "all";
      break;
    default:
      p.groups = "0";
      for (int l = 1; l < tiled; ++l)
        if (d.pick(2)) {  // two appends: GCC 12 warns falsely (-Wrestrict) on "," + string
          p.groups += ',';
          p.groups += std::to_string(l);
        }
  }
  return p;
}

// Parses a drawn configuration into `net`; false when the draw cannot run: an input too
// small for the stack, or a grid that leaves a tile empty. Any other refusal throws.
inline bool usable(const std::string& cfg, const std::string& name, int rows, int cols, int cut,
                   const std::string& groups, const TilingOptions& tiling, NetSpec& net) {
  try {
    net = parse_net(cfg, name);
    const int c = resolve_cut(net, cut);
    make_plan(net, rows, cols, 0, c, parse_groups(groups, 0, c), tiling);
  } catch (const Error& e) {
    const std::string why = e.what();
    if (why.find("too small") != std::string::npos || why.find("empty") != std::string::npos) return false;
    throw;
  }
  return true;
}

}  // namespace tt::random_net
