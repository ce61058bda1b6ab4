// One oneDNN CPU engine + stream, a scratchpad shared by every primitive (they run one
// at a time), and the per-layer cache of weights in the formats primitives chose.
#pragma once
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "device/device.hpp"
#include "layers/backend.hpp"

namespace tt {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

// A reorder of output channels [o0, o0 + rows) of a weight tensor between two layouts
// (e.g. plain oihw and the one a kernel chose), built once per row count; o0 must be a
// multiple of the layout's channel block unless the rows are the whole tensor (always
// the whole tensor for grouped weights).
class RowsReorder {
 public:
  RowsReorder(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to, int rows);
  int rows() const { return rows_; }
  // Rows [from_o0, +rows) of the tensor at `from` into rows [to_o0, +rows) of the one at
  // `to` (an o0 of 0 with a pointer to just the rows reads or writes them alone).
  void run(dnnl::stream& strm, const float* from, int from_o0, float* to, int to_o0);

 private:
  memory::desc from_, to_;
  int rows_;
  dnnl::reorder reorder_;
  memory src_, dst_;
  std::unordered_map<int, memory> args_;
};

class DnnlContext {
 public:
  // `block`: 0 = oneDNN's preferred channel block on this CPU (see make_kernel_config).
  explicit DnnlContext(KernelPath path = KernelPath::Auto, int block = 0, Device& device = cpu_device());
  Device& device;  // holds the maps; does their element-wise work and the SGD update
  dnnl::engine eng;
  dnnl::stream strm;
  const KernelConfig config;  // kernel path and the channel block of every blocked map

  // Every primitive asks for its scratchpad here at creation; the buffer grows to the
  // largest request before the first step, and `bind` points a primitive at it.
  memory scratchpad(const memory::desc& d);
  void bind_scratchpad(memory& m);
  // The same buffer as work space for the project's own kernels: reserve at creation,
  // read the pointer when running (the buffer may have grown in between).
  void reserve_work(size_t floats);
  float* work() const { return scratch_.data(); }
  // Same idea for backward-weights outputs, which are consumed right away; with
  // staged weights they go into the first staging buffer (the engine runs backward-weights
  // only once a layer's staged weights are no longer read).
  memory grad_scratch(const memory::desc& d);
  float* grad_scratch_data() const { return grad_in_staging_ ? staging(0) : grad_scratch_.data(); }
  void put_grad_scratch_in_staging() { grad_in_staging_ = true; }
  void execute(const dnnl::primitive& p, Args& args);
  size_t scratch_bytes() const { return (scratch_.size() + grad_scratch_.size()) * sizeof(float); }

  // Staged weights (sharded runs): the running layer's weights in the formats its
  // kernels asked for, shared by all layers. Sized before the first step.
  void reserve_staging(size_t k, size_t floats);
  float* staging(size_t k) const { return staging_.at(k).data(); }
  size_t staging_bytes() const;

 private:
  Buffer scratch_, grad_scratch_;
  std::vector<Buffer> staging_;
  bool grad_in_staging_ = false;
};

// Plain (oihw / x) master weights of one layer mirrored into whatever blocked formats
// its primitives chose (a kernel that reads the plain format reads the master weights). `refresh` re-reorders (after
// each update or load, or, staged, just before the layer runs); `slot` registers a format for forward or backward-data.
// Staged, the formatted copies live in the context's staging buffers, shared by all
// layers, instead of one persistent copy per layer and format; forward and
// backward-data never run at once, so their formats share buffers too.
class WeightCache {
 public:
  enum Use { kForward = 1, kBackwardData = 2 };
  // staged: formats live in the context's staging buffers, made before each use; sharded:
  // the plain weights come a chunk of rows at a time (refresh_rows), never whole, so no
  // kernel can read them in place.
  WeightCache(DnnlContext& ctx, const memory::desc& plain, bool staged, bool sharded)
      : ctx_(ctx), plain_(plain), staged_(staged || sharded), sharded_(sharded) {}
  int slot(const memory::desc& d, Use use);
  // The formats serving any of `uses` (all by default) from the plain weights.
  void refresh(const float* plain_weights, int uses = kForward | kBackwardData);
  // Output channels [o0, o0 + rows) only, from plain rows `plain_rows`, into the slots
  // serving any of `uses`; `prepare_rows(rows)` first, once, for each row count used.
  void prepare_rows(int rows);
  void refresh_rows(const float* plain_rows, int o0, int rows, int uses);
  float* data(int slot) const {
    const Entry& e = entries_[size_t(slot)];
    if (e.in_place) return const_cast<float*>(master_);  // kernels only read weights
    return staged_ ? ctx_.staging(e.stage) : e.buf.data();
  }
  size_t bytes() const {
    size_t b = 0;
    for (const auto& e : entries_) b += e.buf.size() * sizeof(float);
    return b;
  }

 private:
  struct Entry {
    memory::desc desc;
    int uses = 0;
    Buffer buf;        // not staged
    size_t stage = 0;  // staged: the staging buffer
    dnnl::reorder to_format;
    int from = -1;  // the entry to_format reads (refreshed before this one), or -1: the plain weights
    memory src, dst;
    Args args;  // built once: executing with a fresh argument map would allocate
    std::vector<RowsReorder> rows;
    bool in_place = false;  // the plain format itself: data() is the master weights
  };
  DnnlContext& ctx_;
  memory::desc plain_;
  bool staged_, sharded_;
  std::vector<Entry> entries_;
  const float* master_ = nullptr;  // the plain weights of the last refresh
};

}  // namespace tt
