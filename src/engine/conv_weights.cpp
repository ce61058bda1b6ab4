#include "engine/conv_weights.hpp"

#include <algorithm>

#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {
namespace {

const ConvWeightsLayer& find_layer(const std::vector<ConvWeightsLayer>& layers, int l) {
  for (const ConvWeightsLayer& c : layers)
    if (c.layer == l) return c;
  fail("internal: layer ", l, " is not a convolution of this segment");
}

// Every weight is here: formatted after each update (replicated), or just before each use
// into the shared staging buffers (staged).
class Local final : public ConvWeights {
 public:
  Local(Params& params, std::vector<ConvWeightsLayer> layers, bool staged)
      : params_(params), layers_(std::move(layers)), staged_(staged) {}
  void refresh() override {
    for (const ConvWeightsLayer& c : layers_)
      if (!staged_) c.cache->refresh(master(c.layer));
  }
  void before_use(int l, int uses) override {
    if (staged_) find_layer(layers_, l).cache->refresh(master(l), uses);
  }
  void begin_grad(int) override {}
  float* grad_target(int l, float* tile_grad) override { return tile_grad + params_.slices[size_t(l)].weights; }
  void end_grad(int) override {}
  size_t staging_bytes() const override { return 0; }

 private:
  const float* master(int l) const { return params_.data() + params_.slices[size_t(l)].weights; }
  Params& params_;
  std::vector<ConvWeightsLayer> layers_;
  bool staged_;
};

class Sharded final : public ConvWeights {
 public:
  Sharded(DnnlContext& ctx, Params& params, float* grad, Comm& comm, const ShardPlan& shards, const NetSpec& net,
          std::vector<ConvWeightsLayer> layers, int local_tiles, double* wait, Trace* trace)
      : params_(params),
        grad_(grad),
        comm_(comm),
        shards_(shards),
        layers_(std::move(layers)),
        local_tiles_(local_tiles),
        wait_(wait),
        trace_(trace) {
    plan_chunks(ctx.config.block, net);
  }
  void refresh() override {}
  void before_use(int l, int uses) override;
  void begin_grad(int l) override {
    if (local_tiles_ > 1) std::fill_n(layer_buf_.data(), params_.slices[size_t(l)].n_weights, 0.f);
  }
  // One tile leaves its gradient in the kernel's scratch; several add theirs up in layer_buf_.
  float* grad_target(int, float*) override { return local_tiles_ == 1 ? nullptr : layer_buf_.data(); }
  void end_grad(int l) override;
  size_t staging_bytes() const override { return (layer_buf_.size() + grad_part_.size()) * 4; }

 private:
  struct Chunk {  // output channels [o0, o0 + rows) of a layer's weights
    int o0 = 0, rows = 0;
    int64_t begin = 0;                // its first weight, relative to the layer's
    std::vector<int> counts, displs;  // each process's part of it, relative to begin
  };
  void plan_chunks(int block, const NetSpec& net);
  void span(const char* name, double t0, double t1, int l) const {
    if (trace_ && trace_->on()) trace_->add(name, "weights", Lane::Comm, t0, t1, l);
  }

  Params& params_;
  float* grad_;
  Comm& comm_;
  const ShardPlan& shards_;
  std::vector<ConvWeightsLayer> layers_;
  std::vector<std::vector<Chunk>> chunks_;  // per entry of layers_
  int local_tiles_;
  double* wait_;
  Trace* trace_;
  // The running layer's plain weights (gathered), then, in backward, its weight gradient;
  // this process's part of the summed gradient.
  Buffer layer_buf_, grad_part_;
};

size_t index_of(const std::vector<ConvWeightsLayer>& layers, int l) {
  return size_t(&find_layer(layers, l) - layers.data());
}

// Splits each layer's weights into chunks of whole output channels (multiples of the
// channel block, about kChunkFloats each), which are gathered and formatted one at a time,
// so the plain weights of a whole layer are never held at once. Its gradient goes the same
// way when this process runs one tile; with several, their gradients add up in a whole
// plain layer first.
void Sharded::plan_chunks(int block, const NetSpec& net) {
  constexpr int64_t kChunkFloats = 1 << 18;  // 1 MB
  const int P = comm_.size();
  size_t buf = 0;
  int tmp = 0;
  for (const ConvWeightsLayer& cl : layers_) {
    std::vector<Chunk>& chunks = chunks_.emplace_back();
    const ShardPlan::Layer& sh = shards_.layers[size_t(cl.layer)];
    const int oc = net.layers[size_t(cl.layer)].out.c;
    const int64_t row = sh.n / oc;
    // oneDNN takes a part of a blocked layout only in whole channel blocks: a layer
    // whose channels end in a partial block is gathered whole, as is a grouped layer.
    const bool whole = oc % block || net.layers[size_t(cl.layer)].conv().groups > 1;
    const int step = whole ? oc : int(std::clamp<int64_t>(kChunkFloats / row / block * block, block, oc));
    for (int o0 = 0; o0 < oc; o0 += step) {
      Chunk c;
      c.o0 = o0;
      c.rows = std::min(step, oc - o0);
      c.begin = o0 * row;
      const int64_t end = c.begin + c.rows * row;
      for (int r = 0; r < P; ++r) {  // rank r's part of the layer, within the chunk
        const int64_t lo = std::clamp<int64_t>(sh.displs[size_t(r)], c.begin, end),
                      hi = std::clamp<int64_t>(sh.displs[size_t(r)] + sh.counts[size_t(r)], c.begin, end);
        c.displs.push_back(int(lo - c.begin));
        c.counts.push_back(int(hi - lo));
        tmp = std::max(tmp, int(hi - lo));
      }
      cl.cache->prepare_rows(c.rows);
      if (cl.single_bwd_weights) cl.single_bwd_weights->prepare_grad_rows(c.rows);
      buf = std::max(buf, size_t(c.rows * row));
      chunks.push_back(std::move(c));
    }
    if (local_tiles_ > 1) buf = std::max(buf, size_t(sh.n));
  }
  layer_buf_ = Buffer(buf);
  grad_part_ = Buffer(size_t(tmp));
}

// Gathers layer l's weights from their owners and formats them for `uses`.
void Sharded::before_use(int l, int uses) {
  const size_t k = index_of(layers_, l);
  const ShardPlan::Layer& sh = shards_.layers[size_t(l)];
  float* w = layer_buf_.data();
  const int me = comm_.rank();
  for (const Chunk& c : chunks_[k]) {
    const float* mine = params_.data() + sh.offset + c.begin + c.displs[size_t(me)];
    std::copy(mine, mine + c.counts[size_t(me)], w + c.displs[size_t(me)]);
    const double w0 = now_s();
    comm_.all_gather_v(w, c.counts, c.displs);
    const double w1 = now_s();
    *wait_ += w1 - w0;
    span("weight all-gather", w0, w1, l);
    layers_[k].cache->refresh_rows(w, c.o0, c.rows, uses);
  }
}

// Sums layer l's weight gradient across processes into each owner's part.
void Sharded::end_grad(int l) {
  const size_t k = index_of(layers_, l);
  const ShardPlan::Layer& sh = shards_.layers[size_t(l)];
  const int me = comm_.rank();
  for (const Chunk& c : chunks_[k]) {
    // One tile: its gradient is still in the kernel's layout; several: added up in layer_buf_.
    float* g = local_tiles_ == 1 ? layer_buf_.data() : layer_buf_.data() + c.begin;
    if (local_tiles_ == 1) layers_[k].single_bwd_weights->grad_rows(c.o0, c.rows, g);
    const double w0 = now_s();
    comm_.reduce_scatter(g, c.counts, c.displs, grad_part_.data());
    const double w1 = now_s();
    *wait_ += w1 - w0;
    span("gradient reduce-scatter", w0, w1, l);
    float* mine = grad_ + sh.offset + c.begin + c.displs[size_t(me)];
    for (int j = 0; j < c.counts[size_t(me)]; ++j) mine[j] += g[c.displs[size_t(me)] + j];
  }
}

}  // namespace

std::unique_ptr<ConvWeights> replicated_conv_weights(Params& params, std::vector<ConvWeightsLayer> layers) {
  return std::make_unique<Local>(params, std::move(layers), false);
}

std::unique_ptr<ConvWeights> staged_conv_weights(Params& params, std::vector<ConvWeightsLayer> layers) {
  return std::make_unique<Local>(params, std::move(layers), true);
}

std::unique_ptr<ConvWeights> sharded_conv_weights(DnnlContext& ctx, Params& params, float* grad, Comm& comm,
                                                  const ShardPlan& shards, const NetSpec& net,
                                                  std::vector<ConvWeightsLayer> layers, int local_tiles, double* wait,
                                                  Trace* trace) {
  return std::make_unique<Sharded>(ctx, params, grad, comm, shards, net, std::move(layers), local_tiles, wait, trace);
}

}  // namespace tt
