#include "engine/device_chain.hpp"

#include <algorithm>

#include "engine/tile_order.hpp"
#include "util/error.hpp"

namespace tt {

namespace {
// Floats per chunk of a part: the chain's first link idles for one chunk per run before
// it (the pipeline filling), so a part goes in at least four chunks per run; but chunks
// large enough that a step's latency and call costs are paid rarely.
constexpr int64_t kMaxChunkFloats = int64_t(1) << 16, kMinChunkFloats = int64_t(1) << 12;
}  // namespace

bool DeviceChain::useful(const std::vector<int>& device) {
  if (device.empty()) return false;
  const int D = *std::max_element(device.begin(), device.end()) + 1;
  return D > 1 && int(device.size()) > D;
}

int64_t DeviceChain::chunk_floats(int64_t longest, int runs) {
  const int64_t c = std::clamp((longest + 4 * runs - 1) / (4 * runs), kMinChunkFloats, kMaxChunkFloats);
  return std::max<int64_t>(1, std::min(c, longest));
}

DeviceChain::DeviceChain(Comm& comm, std::vector<int> tile_rank, std::vector<int> device,
                         const std::vector<int>& counts, const std::vector<int>& displs, int64_t tiled)
    : comm_(comm),
      tile_rank_(std::move(tile_rank)),
      device_(std::move(device)),
      counts_(counts),
      displs_(displs),
      tiled_(tiled) {
  const int P = comm.size(), me = comm.rank(), T = int(tile_rank_.size());
  if (int(device_.size()) != P || int(counts_.size()) != P || int(displs_.size()) != P)
    fail("internal: a device chain over ", P, " processes given ", device_.size(), " devices");
  for (int r = 0; r < P; ++r) {
    const int d = device_[size_t(r)];
    if (d < 0 || d > r) fail("internal: process ", r, " on device ", d, " (devices are numbered as first seen)");
    if (size_t(d) == device_ranks_.size()) device_ranks_.emplace_back();
    device_ranks_[size_t(d)].push_back(r);
  }
  local_of_tile_.assign(size_t(T), -1);
  for (int t = 0, k = 0; t < T; ++t) {
    const int r = tile_rank_[size_t(t)];
    if (r < 0 || r >= P) fail("internal: tile ", t, " on process ", r, " of ", P);
    if (r == me) local_of_tile_[size_t(t)] = k++;
    if (runs_.empty() || runs_.back().device != device_[size_t(r)]) runs_.push_back({device_[size_t(r)], {}});
    runs_.back().tiles.push_back(t);
  }
  int64_t longest = 0;
  for (int j = 0; j < P; ++j) longest = std::max(longest, tiled_part(j).second - tiled_part(j).first);
  const int R = int(runs_.size());
  chunk_ = chunk_floats(longest, R);

  // This process's jobs and their chunk buffers.
  job_of_.assign(size_t(P * R), -1);
  int64_t floats = 0;
  for (int j = 0; j < P; ++j) {
    if (tiled_part(j).first == tiled_part(j).second) continue;
    for (int k = 0; k < R; ++k) {
      if (handler(j, k) != me) continue;
      Job job{j, k, nullptr, {}, nullptr};
      const bool to_owner = k == R - 1 && j == me;  // folds straight into out
      for (int t : runs_[size_t(k)].tiles)
        if (tile_rank_[size_t(t)] != me) job.remote.push_back(nullptr);
      floats += chunk_ * (int64_t(k > 0) + int64_t(job.remote.size()) + int64_t(!to_owner));
      job_of_[size_t(j * R + k)] = int(jobs_.size());
      jobs_.push_back(std::move(job));
    }
  }
  buf_ = Buffer(size_t(floats));
  float* p = buf_.data();
  for (Job& job : jobs_) {
    if (job.run > 0) job.prefix = p, p += chunk_;
    for (float*& r : job.remote) r = p, p += chunk_;
    if (!(job.run == R - 1 && job.part == me)) job.out = p, p += chunk_;
  }
}

std::pair<int64_t, int64_t> DeviceChain::tiled_part(int part) const {
  const int64_t b = std::min<int64_t>(displs_[size_t(part)], tiled_);
  return {b, std::min<int64_t>(int64_t(displs_[size_t(part)]) + counts_[size_t(part)], tiled_)};
}

int64_t DeviceChain::chunk_len(int part, int64_t c) const {
  const auto [b, e] = tiled_part(part);
  return std::min(chunk_, e - b - c * chunk_);
}

// On the part's own device its process; elsewhere the device's processes take the parts
// in turn.
int DeviceChain::handler(int part, int run) const {
  const int d = runs_[size_t(run)].device;
  if (device_[size_t(part)] == d) return part;
  const std::vector<int>& ranks = device_ranks_[size_t(d)];
  return ranks[size_t(part) % ranks.size()];
}

// Step s folds chunk s - k of every part at run k; what it needs was posted the step
// before. Messages between two processes with one tag match in the order posted (MPI's
// non-overtaking rule), so the chunks of a part need no tags of their own.
void DeviceChain::post_inputs(int64_t step, const std::vector<float*>& mine) {
  const int P = comm_.size(), me = comm_.rank(), R = int(runs_.size());
  for (int j = 0; j < P; ++j) {
    const int64_t n = chunks(j);
    for (int k = 0; k < R; ++k) {
      const int64_t c = step - k;
      if (c < 0 || c >= n) continue;
      const int h = handler(j, k);
      const size_t len = size_t(chunk_len(j, c));
      const int64_t at = tiled_part(j).first + c * chunk_;
      if (h != me) {
        for (int t : runs_[size_t(k)].tiles)
          if (tile_rank_[size_t(t)] == me) comm_.isend_floats(mine[size_t(local_of_tile_[size_t(t)])] + at, len, h, t);
        continue;
      }
      const Job& job = jobs_[size_t(job_of_[size_t(j * R + k)])];
      if (k > 0) comm_.irecv_floats(job.prefix, len, handler(j, k - 1), tag(kPrefix));
      size_t i = 0;
      for (int t : runs_[size_t(k)].tiles)
        if (tile_rank_[size_t(t)] != me) comm_.irecv_floats(job.remote[i++], len, tile_rank_[size_t(t)], t);
    }
  }
}

void DeviceChain::reduce(const std::vector<float*>& mine, float* out) {
  const int P = comm_.size(), me = comm_.rank(), R = int(runs_.size());
  int64_t most = 0;
  for (int j = 0; j < P; ++j) most = std::max(most, chunks(j));
  const int last = R - 1;
  const int64_t steps = most + last;
  post_inputs(0, mine);
  comm_.wait_all();
  std::vector<const float*> src;
  for (int64_t s = 0; s < steps; ++s) {
    for (const Job& job : jobs_) {
      const int64_t c = s - job.run;
      if (c < 0 || c >= chunks(job.part)) continue;
      const int64_t at = tiled_part(job.part).first + c * chunk_, len = chunk_len(job.part, c);
      src.clear();
      if (job.run > 0) src.push_back(job.prefix);
      size_t i = 0;
      for (int t : runs_[size_t(job.run)].tiles)
        src.push_back(tile_rank_[size_t(t)] == me ? mine[size_t(local_of_tile_[size_t(t)])] + at : job.remote[i++]);
      float* dst = job.out ? job.out : out + at;
      TileOrder::fold(src, len, dst);
      if (job.run < last)
        comm_.isend_floats(dst, size_t(len), handler(job.part, job.run + 1), tag(kPrefix));
      else if (job.part != me)
        comm_.isend_floats(dst, size_t(len), job.part, tag(kDeliver));
    }
    // This process's own part, summed by a process of the last device.
    const int64_t c = s - last;
    if (c >= 0 && c < chunks(me) && handler(me, last) != me)
      comm_.irecv_floats(out + tiled_part(me).first + c * chunk_, size_t(chunk_len(me, c)), handler(me, last),
                         tag(kDeliver));
    post_inputs(s + 1, mine);
    comm_.wait_all();
  }
}

// Each part crosses to every other device once, to the process of that device that takes
// the part in turn, then goes round that device's processes.
void DeviceChain::share(float* v) {
  const int P = comm_.size(), me = comm_.rank(), mine_d = device_[size_t(me)];
  const int tag = this->tag(kShare);
  auto receiver = [&](int part, int d) {
    const std::vector<int>& ranks = device_ranks_[size_t(d)];
    return device_[size_t(part)] == d ? part : ranks[size_t(part) % ranks.size()];
  };
  for (int stage = 0; stage < 2; ++stage) {
    for (int j = 0; j < P; ++j) {
      float* part = v + displs_[size_t(j)];
      const size_t len = size_t(counts_[size_t(j)]);
      if (len == 0) continue;
      const int own_d = device_[size_t(j)];
      if (stage == 0) {  // from its process to one process per device, and round its own device
        if (me == j) {
          for (size_t d = 0; d < device_ranks_.size(); ++d)
            if (int(d) != own_d) comm_.isend_floats(part, len, receiver(j, int(d)), tag);
          for (int q : device_ranks_[size_t(own_d)])
            if (q != me) comm_.isend_floats(part, len, q, tag);
        } else if (mine_d == own_d || receiver(j, mine_d) == me) {
          comm_.irecv_floats(part, len, j, tag);
        }
      } else if (mine_d != own_d) {  // round the other devices
        const int from = receiver(j, mine_d);
        if (from == me) {
          for (int q : device_ranks_[size_t(mine_d)])
            if (q != me) comm_.isend_floats(part, len, q, tag);
        } else {
          comm_.irecv_floats(part, len, from, tag);
        }
      }
    }
    comm_.wait_all();
  }
}

}  // namespace tt
