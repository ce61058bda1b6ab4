#include "engine/tile_order.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "util/error.hpp"

namespace tt {

namespace {
// reduce_scatter moves its parts in chunks of this many floats per tile, so its buffers
// stay near 16 MB however large the net.
int64_t chunk_floats(int tiles) { return std::max<int64_t>(int64_t(1) << 16, (int64_t(1) << 22) / tiles); }
}  // namespace

TileOrder::TileOrder(Comm& comm, std::vector<int> tile_rank, int64_t max_part)
    : comm_(comm), tile_rank_(std::move(tile_rank)) {
  const int T = tiles();
  int ranks = comm.size();
  for (int t = 0; t < T; ++t) {
    if (tile_rank_[size_t(t)] < 0) fail("internal: tile ", t, " on rank ", tile_rank_[size_t(t)]);
    if (tile_rank_[size_t(t)] == comm.rank()) local_.push_back(t);
    ranks = std::max(ranks, tile_rank_[size_t(t)] + 1);
  }
  slot_counts_.assign(size_t(ranks), 0);
  for (int r = 0; r < ranks; ++r)
    for (int t = 0; t < T; ++t)
      if (tile_rank_[size_t(t)] == r) by_rank_.push_back(t), ++slot_counts_[size_t(r)];
  slot_displs_.assign(size_t(ranks), 0);
  for (int r = 1; r < ranks; ++r) slot_displs_[size_t(r)] = slot_displs_[size_t(r - 1)] + slot_counts_[size_t(r - 1)];
  const int64_t chunk = std::min(chunk_floats(T), max_part);
  if (chunk > 0 && T > 1) {
    recv_ = Buffer(size_t(chunk * (T - int64_t(local_.size()))));
    chunk_ = chunk;
  }
}

void TileOrder::sum(std::vector<double>& slots, int width, double* total) {
  const int T = tiles();
  const size_t w = size_t(width);
  if (comm_.size() > 1) {  // every process's rows, gathered in rank order, then put in tile order
    std::vector<int> counts(slot_counts_), displs(slot_displs_);
    counts.resize(size_t(comm_.size())), displs.resize(size_t(comm_.size()));
    for (size_t r = 0; r < counts.size(); ++r) counts[r] *= width, displs[r] *= width;
    packed_.resize(size_t(T) * w);
    for (size_t k = 0; k < by_rank_.size(); ++k)
      if (tile_rank_[size_t(by_rank_[k])] == comm_.rank())
        std::copy_n(slots.begin() + std::ptrdiff_t(size_t(by_rank_[k]) * w), w,
                    packed_.begin() + std::ptrdiff_t(k * w));
    comm_.all_gather_v(packed_.data(), counts, displs);
    for (size_t k = 0; k < by_rank_.size(); ++k)
      std::copy_n(packed_.begin() + std::ptrdiff_t(k * w), w, slots.begin() + std::ptrdiff_t(size_t(by_rank_[k]) * w));
  }
  std::copy(slots.begin(), slots.begin() + width, total);
  for (int t = 1; t < T; ++t)
    for (size_t i = 0; i < w; ++i) total[i] += slots[size_t(t) * w + i];
}

void TileOrder::reduce_scatter(const std::vector<float*>& mine, int64_t n, const std::vector<int>& counts,
                               const std::vector<int>& displs, float* out) {
  const int T = tiles(), P = comm_.size(), me = comm_.rank();
  if (mine.size() != local_.size()) fail("internal: ", mine.size(), " tile gradients for ", local_.size(), " tiles");
  if (T == 1) {
    if (out != mine[0]) std::copy(mine[0], mine[0] + n, out);
    return;
  }
  auto part = [&](int r) {  // rank r's part of [0, n)
    const int64_t b = P == 1 ? 0 : std::min<int64_t>(displs[size_t(r)], n);
    const int64_t e = P == 1 ? n : std::min<int64_t>(int64_t(displs[size_t(r)]) + counts[size_t(r)], n);
    return std::pair{b, e};
  };
  int64_t longest = 0;
  for (int r = 0; r < P; ++r) longest = std::max(longest, part(r).second - part(r).first);
  const int64_t chunk = chunk_;
  if (longest > 0 && chunk == 0) fail("internal: tile-order buffers were sized for no gradient");
  // All processes step through the chunks together; each step is one complete exchange.
  for (int64_t c0 = 0; c0 < longest; c0 += chunk) {
    for (int r = 0; r < P; ++r) {
      if (r == me) continue;
      const auto [b, e] = part(r);
      const int64_t from = b + c0, len = std::min(chunk, e - from);
      if (len <= 0) continue;
      for (size_t k = 0; k < local_.size(); ++k) comm_.isend_floats(mine[k] + from, size_t(len), r, local_[k]);
    }
    const auto [b, e] = part(me);
    const int64_t from = b + c0, len = std::min(chunk, e - from);
    std::vector<const float*> src(static_cast<size_t>(T));
    if (len > 0) {
      float* slot = recv_.data();
      for (int t = 0, k = 0; t < T; ++t) {
        if (tile_rank_[size_t(t)] == me) {
          src[size_t(t)] = mine[size_t(k++)] + from;
          continue;
        }
        comm_.irecv_floats(slot, size_t(len), tile_rank_[size_t(t)], t);
        src[size_t(t)] = slot;
        slot += chunk;
      }
    }
    comm_.wait_all();
    if (len <= 0) continue;
    fold(src, len, out + from);
  }
}

void TileOrder::enable_pieces(int64_t n, const std::vector<int>& counts, const std::vector<int>& displs) {
  const int P = comm_.size(), me = comm_.rank();
  parts_.clear();
  for (int r = 0; r < P; ++r)
    parts_.emplace_back(std::min<int64_t>(displs[size_t(r)], n),
                        std::min<int64_t>(int64_t(displs[size_t(r)]) + counts[size_t(r)], n));
  std::tie(part_b_, part_e_) = parts_[size_t(me)];
  piece_recv_ = Buffer(size_t((part_e_ - part_b_) * (tiles() - int64_t(local_.size()))));
}

void TileOrder::begin_pieces(const std::vector<float*>& mine, float* out) {
  if (mine.size() != local_.size()) fail("internal: ", mine.size(), " tile gradients for ", local_.size(), " tiles");
  if (parts_.empty()) fail("internal: pieces of a tile-order sum were not enabled");
  piece_mine_ = mine;
  piece_out_ = out;
}

void TileOrder::post_piece(int64_t b, int64_t e) {
  const int P = comm_.size(), me = comm_.rank();
  for (int r = 0; r < P; ++r) {
    const int64_t x = std::max(b, parts_[size_t(r)].first), y = std::min(e, parts_[size_t(r)].second);
    if (x >= y) continue;
    if (r != me) {
      for (size_t k = 0; k < local_.size(); ++k) queue_send(piece_mine_[k] + x, y - x, r, local_[k]);
      continue;
    }
    float* row = piece_recv_.data() + (x - part_b_);
    for (int t = 0; t < tiles(); ++t) {
      if (tile_rank_[size_t(t)] == me) continue;
      post_recv(row, y - x, tile_rank_[size_t(t)], t);
      row += part_e_ - part_b_;
    }
  }
}

namespace {
// Open MPI's TCP transport sends messages up to 64 KB (btl_tcp_eager_limit, with its
// header) at once; longer ones wait for the receiver to answer, i.e. to call MPI.
constexpr int64_t kEagerFloats = 16000;
}  // namespace

void TileOrder::queue_send(const float* data, int64_t n, int to, int tag) {
  for (int64_t i = 0; i < n; i += kEagerFloats) queued_.push_back({data + i, std::min(kEagerFloats, n - i), to, tag});
}

void TileOrder::post_recv(float* data, int64_t n, int from, int tag) {
  for (int64_t i = 0; i < n; i += kEagerFloats)
    comm_.irecv_deferred(data + i, size_t(std::min(kEagerFloats, n - i)), from, tag);
}

bool TileOrder::release(int64_t n) {
  int64_t sent = 0;
  for (; next_send_ < queued_.size() && sent < n; ++next_send_) {
    const Send& m = queued_[next_send_];
    comm_.isend_deferred(m.data, size_t(m.n), m.to, m.tag);
    sent += m.n;
  }
  return sent > 0;
}

void TileOrder::end_pieces() {
  release(INT64_MAX);
  queued_.clear();
  next_send_ = 0;
  comm_.wait_deferred();
  const int T = tiles(), me = comm_.rank();
  std::vector<const float*> src(static_cast<size_t>(T));
  const float* row = piece_recv_.data();
  for (int t = 0, k = 0; t < T; ++t) {
    if (tile_rank_[size_t(t)] == me) {
      src[size_t(t)] = piece_mine_[size_t(k++)] + part_b_;
    } else {
      src[size_t(t)] = row;
      row += part_e_ - part_b_;
    }
  }
  fold(src, part_e_ - part_b_, piece_out_ + part_b_);
  piece_mine_.clear();
  piece_out_ = nullptr;
}

// The left fold, a cache-sized block at a time: each block of every tile's piece is read
// before the block of out (which may be one of them) is written.
void TileOrder::fold(const std::vector<const float*>& src, int64_t len, float* out) {
  const size_t T = src.size();
  constexpr int64_t kBlock = 2048;
  float acc[kBlock];
  for (int64_t i0 = 0; i0 < len; i0 += kBlock) {
    const int64_t m = std::min(kBlock, len - i0);
    std::copy(src[0] + i0, src[0] + i0 + m, acc);
    for (size_t t = 1; t < T; ++t) {
      const float* s = src[t] + i0;
      for (int64_t i = 0; i < m; ++i) acc[i] += s[i];
    }
    std::copy(acc, acc + m, out + i0);
  }
}

}  // namespace tt
