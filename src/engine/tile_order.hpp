// Sums over tiles in tile order. Floating-point addition is not associative, so a sum whose
// order follows the processes (an MPI all-reduce, a ring) changes in its last bits with the
// number of processes, and a run resumed on another rank count drifts away from the
// uninterrupted one. Every sum here is a left fold over tiles 0, 1, ..., T-1, whichever
// process holds which tile: 4 processes with one tile each and 2 with two tiles each give
// the same bits. Each process keeps its tiles' contributions apart until the sum.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "layers/dnnl_context.hpp"

namespace tt {

class TileOrder {
 public:
  // tile_rank[t]: the process that holds tile t; max_part: the most floats reduce_scatter will leave on one process.
  TileOrder(Comm& comm, std::vector<int> tile_rank, int64_t max_part);
  int tiles() const { return int(tile_rank_.size()); }
  const std::vector<int>& local() const { return local_; }

  // slots: tiles() rows of `width` values; this process has filled its tiles' rows. Every
  // process gets every row and total[0, width) = row 0 + row 1 + ... in that order.
  void sum(std::vector<double>& slots, int width, double* total);

  // Per-tile float vectors: mine[k] is local()[k]'s, indexed [0, n). Afterwards
  // out[i] = Σ_t tile t's [i], in tile order, for i in this process's part
  // [displs[rank], + counts[rank]) ∩ [0, n); out may be mine[0]. Other parts of out are
  // left as they were. counts/displs partition [0, ≥ n) among the processes.
  void reduce_scatter(const std::vector<float*>& mine, int64_t n, const std::vector<int>& counts,
                      const std::vector<int>& displs, float* out);

  // Bytes held for reduce_scatter's messages (the memory report counts them).
  size_t buffer_bytes() const { return recv_.size() * 4; }

 private:
  Comm& comm_;
  std::vector<int> tile_rank_, local_;
  std::vector<int> by_rank_;                    // sum: the tiles in rank order, as all_gather_v moves their rows
  std::vector<int> slot_counts_, slot_displs_;  // rows per process
  std::vector<double> packed_;
  Buffer recv_;                                 // reduce_scatter: other processes' pieces
  int64_t chunk_ = 0;                           // reduce_scatter: floats per piece and step
};

}  // namespace tt
