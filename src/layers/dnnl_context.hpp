// One oneDNN CPU engine + stream, a scratchpad shared by every primitive (they run one
// at a time), and the per-layer cache of weights in the formats primitives chose.
#pragma once
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

namespace tt {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

// 64-byte aligned float buffer, zero-filled; the only owner of large tensors.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t floats);
  float* data() const { return p_.get(); }
  size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> p_;
  size_t n_ = 0;
};

class DnnlContext {
 public:
  DnnlContext();
  dnnl::engine eng;
  dnnl::stream strm;

  // Every primitive asks for its scratchpad here at creation; the buffer grows to the
  // largest request before the first step, and `bind` points a primitive at it.
  memory scratchpad(const memory::desc& d);
  void bind_scratchpad(memory& m);
  // Same idea for backward-weights outputs, which are consumed right away.
  memory grad_scratch(const memory::desc& d);
  float* grad_scratch_data() const { return grad_scratch_.data(); }
  void execute(const dnnl::primitive& p, Args& args);
  size_t scratch_bytes() const { return (scratch_.size() + grad_scratch_.size()) * sizeof(float); }

 private:
  Buffer scratch_, grad_scratch_;
};

// Plain (oihw / x) master weights of one layer mirrored into whatever blocked formats
// its primitives chose. `refresh` re-reorders after each update; `slot` registers a format.
class WeightCache {
 public:
  WeightCache(DnnlContext& ctx, const memory::desc& plain) : ctx_(ctx), plain_(plain) {}
  int slot(const memory::desc& d);
  void refresh(const float* plain_weights);
  float* data(int slot) const { return entries_[slot].buf.data(); }
  size_t bytes() const {
    size_t b = 0;
    for (const auto& e : entries_) b += e.buf.size() * sizeof(float);
    return b;
  }

 private:
  struct Entry {
    memory::desc desc;
    Buffer buf;
    dnnl::reorder to_format;
    memory src, dst;
    Args args;  // built once: executing with a fresh argument map would allocate
  };
  DnnlContext& ctx_;
  memory::desc plain_;
  std::vector<Entry> entries_;
};

}  // namespace tt
