// The tile-order sum and the weight share with one copy per device, for several processes
// on each device (the paper's one per core) sharing that device's link.
//
// TileOrder sends every process's tiles' values of every part to the part's process, so a
// device with four processes puts each gradient float on its link three times or more. A
// left fold over tiles cannot be cut into per-device sums and merged (addition is not
// associative), but it can be extended: here it runs as a chain over the devices in tile
// order. For each part of the flat vector (one per process, as TileOrder's), a process of
// the first device folds its device's tiles, passes the running sum to a process of the
// next device, which adds that device's tiles, and so on; the last one sends the sum to the
// part's process. Every part moves in chunks, so the devices work on different chunks at
// once (a pipeline) and each device's link carries about one copy of the gradient. Inside a
// device the tiles' values move between processes over shared memory. The same bits as
// TileOrder: the same fold, in the same order, of the same values.
//
// After SGD, each process's part of the weights goes once to every other device, to one of
// its processes, which passes it on to the others there.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "device/device.hpp"

namespace tt {

class DeviceChain {
 public:
  // Whether the chain saves link traffic: several devices, one of them with several processes.
  static bool useful(const std::vector<int>& device);
  // Floats per message of a part of `longest` floats over `runs` runs of devices.
  static int64_t chunk_floats(int64_t longest, int runs);
  // device[r]: rank r's device, numbered from 0; tile_rank[t]: tile t's process; counts and
  // displs: every process's part of the flat vector [0, n) (TileOrderSync's); tiled: the
  // tiles' gradients cover [0, tiled).
  DeviceChain(Comm& comm, std::vector<int> tile_rank, std::vector<int> device, const std::vector<int>& counts,
              const std::vector<int>& displs, int64_t tiled);
  // mine[k]: this process's k-th tile's gradient, [0, tiled). Afterwards out holds, on this
  // process's part ∩ [0, tiled), the sum over tiles in tile order; out may be mine[0].
  void reduce(const std::vector<float*>& mine, float* out);
  // v whole on every process from every process's part.
  void share(float* v);
  size_t buffer_bytes() const { return buf_.size() * 4; }

 private:
  struct Run {  // consecutive tiles on one device
    int device;
    std::vector<int> tiles;
  };
  struct Job {  // this process adds run k's tiles to part j's running sum
    int part, run;
    float* prefix;               // the sum so far (run > 0), one chunk
    std::vector<float*> remote;  // the run's tiles held by other processes, one chunk each
    float* out;                  // the sum with this run's tiles, one chunk
  };
  int handler(int part, int run) const;  // the process that adds run `run`'s tiles to part `part`
  int64_t chunk_len(int part, int64_t c) const;
  int64_t chunks(int part) const { return (tiled_part(part).second - tiled_part(part).first + chunk_ - 1) / chunk_; }
  std::pair<int64_t, int64_t> tiled_part(int part) const;
  void post_inputs(int64_t step, const std::vector<float*>& mine);  // the messages the folds at `step` need
  // Tags: a tile's values carry the tile's index, the other messages a kind above every
  // tile's. Messages of one tag between two processes (several parts, chunks, steps) match
  // in the order both post them (MPI's non-overtaking rule), and both run the same loops.
  enum Kind { kPrefix, kDeliver, kShare };
  int tag(Kind kind) const { return int(tile_rank_.size()) + int(kind); }

  Comm& comm_;
  std::vector<int> tile_rank_, device_;
  std::vector<std::vector<int>> device_ranks_;  // per device, its processes in rank order
  std::vector<int> counts_, displs_;
  int64_t tiled_;
  std::vector<Run> runs_;
  std::vector<Job> jobs_;           // this process's
  std::vector<int> job_of_;         // [part * runs + run]: its index in jobs_, or -1
  std::vector<int> local_of_tile_;  // tile t's index among this process's tiles, or -1
  int64_t chunk_ = 1;
  Buffer buf_;
};

}  // namespace tt
