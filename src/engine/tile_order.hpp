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

  // The same sums from pieces sent while the caller still computes (the gradients of the
  // layers backward has finished). enable_pieces() once: the other tiles' values of this
  // process's whole part are received at once. Per step: begin_pieces(), then
  // post_piece(b, e) for ranges of [0, n) as they become final (same order on every
  // process, together covering [0, n)): it posts the receives and queues the sends;
  // release(n) posts queued sends of up to n floats (the caller knows when the link is free
  // of other messages); end_pieces() releases the rest, waits, and folds this process's
  // part exactly as reduce_scatter does. Deferred messages (Comm), tagged by tile, each
  // below Open MPI's eager limit so that it crosses while the receiver computes.
  void enable_pieces(int64_t n, const std::vector<int>& counts, const std::vector<int>& displs);
  void begin_pieces(const std::vector<float*>& mine, float* out);
  void post_piece(int64_t b, int64_t e);
  void queue_send(const float* data, int64_t n, int to, int tag);
  void post_recv(float* data, int64_t n, int from, int tag);
  bool release(int64_t n);  // true if it posted any
  void end_pieces();

  // Bytes held for reduce_scatter's messages (the memory report counts them).
  size_t buffer_bytes() const { return (recv_.size() + piece_recv_.size()) * 4; }

  // out = src[0] + src[1] + ..., left to right; out may be one of src.
  static void fold(const std::vector<const float*>& src, int64_t len, float* out);

 private:
  Comm& comm_;
  std::vector<int> tile_rank_, local_;
  std::vector<int> by_rank_;                    // sum: the tiles in rank order, as all_gather_v moves their rows
  std::vector<int> slot_counts_, slot_displs_;  // rows per process
  std::vector<double> packed_;
  Buffer recv_;        // reduce_scatter: other processes' pieces
  int64_t chunk_ = 0;  // reduce_scatter: floats per piece and step
  // Pieces: every process's part of [0, n), this one's [part_b_, part_e_); other tiles' values
  // of it, one row of part_e_ - part_b_ per tile not here, in tile order.
  std::vector<std::pair<int64_t, int64_t>> parts_;
  int64_t part_b_ = 0, part_e_ = 0;
  Buffer piece_recv_;
  std::vector<float*> piece_mine_;
  struct Send {
    const float* data;
    int64_t n;
    int to, tag;
  };
  std::vector<Send> queued_;  // in the order they are to be posted
  size_t next_send_ = 0;
  float* piece_out_ = nullptr;
};

}  // namespace tt
