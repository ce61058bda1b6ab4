#include "engine/gradient_sync.hpp"

#include <algorithm>
#include <climits>

#include "util/error.hpp"

namespace tt {

namespace {

using Range = GradientSync::Range;

// All-gathers the parts of v (process p's: counts[p] floats from displs[p]) as far as they
// lie in r.
void all_gather_within(Comm& comm, float* v, const std::vector<int>& counts, const std::vector<int>& displs, Range r) {
  if (comm.size() == 1 || r.first >= r.second) return;
  std::vector<int> c(counts.size()), d(counts.size());
  for (size_t p = 0; p < counts.size(); ++p) {
    const int64_t b = std::clamp<int64_t>(displs[p], r.first, r.second);
    const int64_t e = std::clamp<int64_t>(int64_t(displs[p]) + counts[p], r.first, r.second);
    d[p] = int(b - r.first);
    c[p] = int(e - b);
  }
  comm.all_gather_v(v + r.first, c, d);
}

// Each process's ranges clipped to r.
std::vector<std::vector<Range>> within(const std::vector<std::vector<Range>>& ranges, Range r) {
  std::vector<std::vector<Range>> out(ranges.size());
  for (size_t p = 0; p < ranges.size(); ++p)
    for (const auto& [b, e] : ranges[p])
      if (std::max(b, r.first) < std::min(e, r.second)) out[p].push_back({std::max(b, r.first), std::min(e, r.second)});
  return out;
}

// Each process's ranges, straight from where it keeps them to where the root keeps them:
// no packing, so a layer's gather costs the root nothing beyond the layer, and the other
// processes nothing at all.
void gather_ranges_to_root(Comm& comm, float* v, const std::vector<std::vector<Range>>& owned) {
  if (comm.size() == 1) return;
  const int me = comm.rank();
  for (size_t p = 0; p < owned.size(); ++p) {
    if (int(p) == kRoot || (me != kRoot && int(p) != me)) continue;
    for (const auto& [b, e] : owned[p])
      if (me == kRoot)
        comm.irecv_floats(v + b, size_t(e - b), int(p), 0);
      else
        comm.isend_floats(v + b, size_t(e - b), kRoot, 0);
  }
  comm.wait_all();
}

// The parts counts/displs give each process, as ranges.
std::vector<std::vector<Range>> parts(const std::vector<int>& counts, const std::vector<int>& displs) {
  std::vector<std::vector<Range>> out(counts.size());
  for (size_t p = 0; p < counts.size(); ++p) out[p] = {{displs[p], int64_t(displs[p]) + counts[p]}};
  return out;
}

}  // namespace

// A bucket goes once this many floats are ready: large enough that a link's latency is paid
// a few times per step, small enough that the first bucket leaves early in backward.
std::pair<int64_t, int64_t> Buckets::report(int64_t begin, int64_t end) {
  if (begin >= end) return {0, 0};
  if (end > bucket_end_) fail("internal: gradients [", begin, ", ", end, ") reported final after they were sent");
  if (!in_order_ || end != lo_) {
    in_order_ = false;
    return {0, 0};
  }
  lo_ = begin;
  if (bucket_end_ - lo_ < kBucketFloats) return {0, 0};
  const std::pair<int64_t, int64_t> r{lo_, bucket_end_};
  bucket_end_ = lo_;
  return r;
}

TileOrderSync::TileOrderSync(Comm& comm, Segment& tiled, const std::vector<int>& tile_rank, int64_t params,
                             bool overlap, float* grad, const std::vector<int>& device)
    : comm_(comm), tiled_(tiled), n_(params), overlap_(overlap && comm.size() > 1), grad_(grad) {
  const int P = comm.size();
  if (P > 1) {
    if (params / P >= INT_MAX) fail("the net has too many parameters for one MPI message per process");
    for (int r = 0; r < P; ++r) {
      displs_.push_back(int(params * r / P));
      counts_.push_back(int(params * (r + 1) / P) - displs_.back());
    }
    if (!overlap_) ring_tmp_ = Buffer(size_t(*std::max_element(counts_.begin(), counts_.end())));
    updated_ = {{displs_[size_t(comm.rank())], displs_[size_t(comm.rank())] + int64_t(counts_[size_t(comm.rank())])}};
  } else {
    updated_ = {{0, params}};
  }
  const int64_t E = tiled.tile_grad_end();
  int64_t max_part = P == 1 ? E : 0;
  for (size_t r = 0; r < counts_.size(); ++r)
    max_part = std::max<int64_t>(
        max_part, std::min<int64_t>(displs_[r] + int64_t(counts_[r]), E) - std::min<int64_t>(displs_[r], E));
  const bool chain = !overlap_ && DeviceChain::useful(device);
  // Buckets: pieces, not chunks; a chain: its own buffers.
  order_ = std::make_unique<TileOrder>(comm, tile_rank, overlap_ || chain ? 0 : max_part);
  if (overlap_) order_->enable_pieces(E, counts_, displs_);
  if (chain) chain_ = std::make_unique<DeviceChain>(comm, tile_rank, device, counts_, displs_, E);
}

bool TileOrderSync::link_free() { return buckets_.open() && order_->release(Buckets::kBucketFloats); }

void TileOrderSync::ready(int64_t begin, int64_t end) {
  if (!overlap_) return;
  if (!buckets_.open()) {
    order_->begin_pieces(tiled_.tile_grads(), grad_);
    buckets_.start(n_);
  }
  const auto [b, e] = buckets_.report(begin, end);
  if (b < e) post(b, e);
}

// The tiled layers' part of [begin, end) tile by tile; the rest (after the cut: the root's
// gradient, zero elsewhere) straight from the root to each part's process, which is the
// sum in any order.
void TileOrderSync::post(int64_t begin, int64_t end) {
  const int64_t E = tiled_.tile_grad_end();
  if (begin < E) order_->post_piece(begin, std::min(end, E));
  const int me = comm_.rank();
  for (int r = 0; r < comm_.size(); ++r) {
    const int64_t b = std::max({begin, E, int64_t(displs_[size_t(r)])});
    const int64_t e = std::min(end, int64_t(displs_[size_t(r)]) + counts_[size_t(r)]);
    if (b >= e || r == kRoot) continue;
    if (me == kRoot) order_->queue_send(grad_ + b, e - b, r, order_->tiles());
    if (me == r) order_->post_recv(grad_ + b, e - b, kRoot, order_->tiles());
  }
}

// The tiled layers' gradients tile by tile in tile order; the layers after the cut (only
// the root's are not zero, so any order gives the same bits) round a ring.
void TileOrderSync::reduce(float* grad) {
  const int64_t E = tiled_.tile_grad_end();
  if (overlap_ && !buckets_.open()) ready(0, 0);  // nothing was reported: all of it now, still as pieces
  if (buckets_.open()) {
    if (grad != grad_) fail("internal: the gradient moved during the step");
    if (const int64_t rest = buckets_.finish(); rest > 0) post(0, rest);  // what was not posted yet
    order_->end_pieces();
    return;
  }
  if (comm_.size() == 1 && tiled_.tile_grads().size() == 1) return;  // the tiles added into grad in tile order
  if (chain_)
    chain_->reduce(tiled_.tile_grads(), grad);
  else
    order_->reduce_scatter(tiled_.tile_grads(), E, counts_, displs_, grad);
  if (comm_.size() == 1 || E >= n_) return;  // (--tail filters: the tail is not this object's)
  std::vector<int> counts(counts_.size()), displs(counts_.size());
  for (size_t r = 0; r < counts.size(); ++r) {
    const int64_t b = std::max<int64_t>(displs_[r], E), e = displs_[r] + int64_t(counts_[r]);
    displs[r] = int(b - E);
    counts[r] = int(std::max<int64_t>(e - b, 0));
  }
  comm_.reduce_scatter(grad + E, counts, displs, ring_tmp_.data());
}

void TileOrderSync::zero(float* grad) {
  std::fill(grad, grad + n_, 0.f);
  tiled_.zero_tile_grads();
}

void TileOrderSync::share_weights(float* weights) {
  if (chain_)
    chain_->share(weights);
  else
    gather(weights, {0, n_});
}

void TileOrderSync::gather(float* v, Range r) { all_gather_within(comm_, v, counts_, displs_, r); }

void TileOrderSync::gather_to_root(float* v, Range r) {
  gather_ranges_to_root(comm_, v, within(parts(counts_, displs_), r));
}

// Weights and gradient whole, momentum only in the updated part (its other pages are never
// written); the gradients of this process's tiles after the first, and the sum's buffers.
double TileOrderSync::kept_floats() const {
  const double n = double(n_);
  double kept = comm_.size() == 1 ? 3 * n : 2 * n + double(updated_[0].second - updated_[0].first);
  kept += double(tiled_.tile_grads().size() - 1) * double(tiled_.tile_grad_end()) + order_->buffer_bytes() / 4.;
  if (chain_) kept += double(chain_->buffer_bytes()) / 4.;
  return kept;
}

MicroBatchSync::MicroBatchSync(Comm& comm, Segment& tiled, std::vector<int> owner, int64_t params, float* grad,
                               bool overlap)
    : comm_(comm),
      tiled_(tiled),
      owner_(std::move(owner)),
      n_(params),
      grad_(grad),
      overlap_(overlap && comm.size() > 1) {
  if (overlap_ && tiled.tile_grads().size() > 1)
    fail(
        "--overlap on sends each layer's gradients while backward runs; a copy tiled into several tiles adds "
        "them up after backward: use --overlap off or one tile per copy");
  const int P = comm.size();
  if (params / P >= INT_MAX) fail("the net has too many parameters for one MPI message per process");
  for (int r = 0; r < P; ++r) {
    displs_.push_back(int(params * r / P));
    counts_.push_back(int(params * (r + 1) / P) - displs_.back());
  }
  const int me = comm.rank();
  updated_ = {{displs_[size_t(me)], displs_[size_t(me)] + int64_t(counts_[size_t(me)])}};
  // Buckets: the other micro-batches' values of this process's part arrive whole, not in chunks.
  order_ = std::make_unique<TileOrder>(comm, owner_, overlap_ ? 0 : *std::max_element(counts_.begin(), counts_.end()));
  if (overlap_) order_->enable_pieces(params, counts_, displs_);
  // The last micro-batch's gradient stays in the working one until the update.
  for (size_t k = 1; k < order_->local().size(); ++k) kept_.emplace_back(size_t(params));
  captured_ = 0;
}

void MicroBatchSync::capture(int m) {
  const auto& local = order_->local();
  if (captured_ >= local.size() || local[captured_] != m)
    fail("internal: micro-batch ", m, " captured out of this process's order");
  const std::vector<float*> tiles = tiled_.tile_grads();
  const int64_t E = tiled_.tile_grad_end();
  if (captured_ + 1 == local.size()) {
    // The last stays where it is, its tiles added up in place (with one tile nothing to do:
    // buckets may be on their way out of it).
    if (tiles.size() > 1) TileOrder::fold(std::vector<const float*>(tiles.begin(), tiles.end()), E, grad_);
  } else {
    float* to = kept_[captured_].data();
    TileOrder::fold(std::vector<const float*>(tiles.begin(), tiles.end()), E, to);
    std::copy(grad_ + E, grad_ + n_, to + E);
    std::fill(grad_, grad_ + n_, 0.f);
  }
  tiled_.zero_tile_grads();
  ++captured_;
}

std::vector<const float*> MicroBatchSync::captured() const {
  std::vector<const float*> v;
  for (size_t k = 0; k < captured_; ++k) v.push_back(k < kept_.size() ? kept_[k].data() : grad_);
  return v;
}

void MicroBatchSync::local_sum(std::vector<float>& out) const {
  out.assign(size_t(n_), 0.f);
  const std::vector<const float*> src = captured();
  if (!src.empty()) TileOrder::fold(src, n_, out.data());
}

std::vector<float*> MicroBatchSync::mine() const {
  std::vector<float*> v;
  for (const Buffer& b : kept_) v.push_back(b.data());
  v.push_back(grad_);
  return v;
}

// Reports come during the last micro-batch here (the earlier ones are final), each layer's
// range once backward is done with it, from the end of the parameters down.
void MicroBatchSync::ready(int64_t begin, int64_t end) {
  if (!overlap_) return;
  if (!buckets_.open()) {
    order_->begin_pieces(mine(), grad_);
    buckets_.start(n_);
  }
  const auto [b, e] = buckets_.report(begin, end);
  if (b < e) order_->post_piece(b, e);
}

// No halos share the link with copies' buckets: every bucket queued goes at once.
bool MicroBatchSync::link_free() { return buckets_.open() && order_->release(INT64_MAX); }

void MicroBatchSync::reduce(float* grad) {
  if (grad != grad_) fail("internal: the gradient moved during the step");
  if (captured_ != order_->local().size())
    fail("internal: micro-batch ", order_->local()[captured_], " was not run before the update");
  if (overlap_ && !buckets_.open()) ready(0, 0);  // nothing was reported: all of it now, still as pieces
  if (buckets_.open()) {
    if (const int64_t rest = buckets_.finish(); rest > 0) order_->post_piece(0, rest);  // not posted yet
    order_->end_pieces();
    return;
  }
  order_->reduce_scatter(mine(), n_, counts_, displs_, grad);
}

void MicroBatchSync::zero(float* grad) {
  std::fill(grad, grad + n_, 0.f);
  captured_ = 0;
}

void MicroBatchSync::gather(float* v, Range r) { all_gather_within(comm_, v, counts_, displs_, r); }

void MicroBatchSync::gather_to_root(float* v, Range r) {
  gather_ranges_to_root(comm_, v, within(parts(counts_, displs_), r));
}

// Weights and the working gradient whole, one gradient per micro-batch here but the last,
// the momentum only in the updated part; the sum's buffers.
double MicroBatchSync::kept_floats() const {
  return double(n_) * double(2 + kept_.size()) + double(updated_[0].second - updated_[0].first) +
         double(order_->buffer_bytes()) / 4.;
}

ShardedSync::ShardedSync(Comm& comm, const ShardPlan& shards) : comm_(comm), shards_(shards) {
  updated_ = shards.replicated;
  updated_.insert(updated_.end(), shards.owned.begin(), shards.owned.end());
  std::sort(updated_.begin(), updated_.end());
  packed_.assign(size_t(ShardPlan::total(shards.replicated)), 0.f);
}

void ShardedSync::reduce(float* grad) {
  float* r = packed_.data();
  for (const auto& [b, e] : shards_.replicated) r = std::copy(grad + b, grad + e, r);
  comm_.allreduce_sum(packed_.data(), packed_.size());
  r = packed_.data();
  for (const auto& [b, e] : shards_.replicated) {
    std::copy(r, r + (e - b), grad + b);
    r += e - b;
  }
}

void ShardedSync::zero(float* grad) {
  for (const auto& [b, e] : updated_) std::fill(grad + b, grad + e, 0.f);
}

void ShardedSync::gather(float* v, Range r) {
  for (const ShardPlan::Layer& L : shards_.layers)
    if (L.n > 0 && L.offset >= r.first && L.offset < r.second) {
      if (L.offset + L.n > r.second) fail("internal: a gather's range splits a sharded layer");
      comm_.all_gather_v(v + L.offset, L.counts, L.displs);
    }
}

double ShardedSync::kept_floats() const { return 3. * double(ShardPlan::total(updated_)); }

FilterBlocksSync::FilterBlocksSync(Comm& comm, std::unique_ptr<GradientSync> head, int64_t tail_begin, int64_t n,
                                   std::vector<std::vector<Range>> blocks)
    : comm_(comm), head_(std::move(head)), tail_begin_(tail_begin), n_(n), owned_(std::move(blocks)) {
  // The root's: what no block holds.
  std::vector<Range> taken;
  for (const auto& rs : owned_) taken.insert(taken.end(), rs.begin(), rs.end());
  std::sort(taken.begin(), taken.end());
  int64_t at = tail_begin;
  for (const Range& r : taken) {
    if (r.first < at) fail("internal: filter blocks overlap");
    if (r.first > at) rest_.push_back({at, r.first});
    at = r.second;
  }
  if (at < n) rest_.push_back({at, n});
  owned_[kRoot].insert(owned_[kRoot].end(), rest_.begin(), rest_.end());
  for (auto& rs : owned_) std::sort(rs.begin(), rs.end());
  updated_ = head_->updated();
  updated_.insert(updated_.end(), owned_[size_t(comm.rank())].begin(), owned_[size_t(comm.rank())].end());
  std::sort(updated_.begin(), updated_.end());
}

void FilterBlocksSync::ready(int64_t begin, int64_t end) {
  end = std::min(end, tail_begin_);
  if (begin < end) head_->ready(begin, end);
}

// Only the pages this process keeps (the others' blocks may have been handed back).
void FilterBlocksSync::zero(float* grad) {
  head_->zero(grad);
  for (const auto& rs : {owned_[size_t(comm_.rank())], rest_})
    for (const auto& [b, e] : rs) std::fill(grad + b, grad + e, 0.f);
}

// After the update: the root's part of the tail to every process (they all run those
// layers); the blocks stay where they run.
void FilterBlocksSync::share_weights(float* weights) {
  head_->share_weights(weights);
  std::vector<std::vector<Range>> root_only(owned_.size());
  root_only[kRoot] = rest_;
  gather_owned(weights, root_only, {0, n_});
}

void FilterBlocksSync::gather(float* v, Range r) {
  head_->gather(v, {r.first, std::min(r.second, tail_begin_)});
  gather_owned(v, owned_, r);
}

void FilterBlocksSync::gather_to_root(float* v, Range r) {
  head_->gather_to_root(v, {r.first, std::min(r.second, tail_begin_)});
  gather_ranges_to_root(comm_, v, within(owned_, r));
}

void FilterBlocksSync::gather_weights(float* weights, Range r) {
  head_->gather_weights(weights, {r.first, std::min(r.second, tail_begin_)});
  gather_ranges_to_root(comm_, weights, within(owned_, r));
}

void FilterBlocksSync::gather_owned(float* v, const std::vector<std::vector<Range>>& all, Range r) {
  if (comm_.size() == 1) return;
  const std::vector<std::vector<Range>> owned = within(all, r);
  std::vector<int> counts, displs;
  int64_t total = 0;
  for (const auto& rs : owned) {
    displs.push_back(int(total));
    total += ShardPlan::total(rs);
    if (total > INT_MAX) fail("the net has too many parameters after the cut for one message per process");
    counts.push_back(int(total - displs.back()));
  }
  std::vector<float> packed(static_cast<size_t>(total));
  for (size_t p = 0; p < owned.size(); ++p) {
    int64_t at = displs[p];
    for (const auto& [b, e] : owned[p]) {
      if (int(p) == comm_.rank()) std::copy(v + b, v + e, packed.begin() + at);
      at += e - b;
    }
  }
  comm_.all_gather_v(packed.data(), counts, displs);
  for (size_t p = 0; p < owned.size(); ++p) {
    int64_t at = displs[p];
    for (const auto& [b, e] : owned[p]) {
      std::copy(packed.begin() + at, packed.begin() + at + (e - b), v + b);
      at += e - b;
    }
  }
}

// The head's; after the cut, weights, gradient and momentum of this process's blocks and of
// the layers every process runs.
double FilterBlocksSync::kept_floats() const {
  const double rest = comm_.rank() == kRoot ? 0 : double(ShardPlan::total(rest_));
  return head_->kept_floats() + 3. * (double(ShardPlan::total(owned_[size_t(comm_.rank())])) + rest);
}

}  // namespace tt
