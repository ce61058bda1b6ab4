// A tiled convolution: a kernel per distinct tile geometry (conv.hpp picks oneDNN's, the
// own or OpenBLAS), forward on forward boxes and overlap parts, backward-data on the box
// the memory plan gives, backward-weights over each tile's owned output box.
#include <algorithm>
#include <cmath>

#include "engine/tiled_op.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

class TiledConv final : public TiledOp {
 public:
  TiledConv(const TiledOpEnv& env, int l, int in_cb, int out_cb, WeightCache& weights)
      : env_(env), s_(env.net.layers[size_t(l)]), i_(l - env.plan.first), in_cb_(in_cb), out_cb_(out_cb) {
    const int T = env.plan.tiles_count();
    fwd_.assign(size_t(T), nullptr);
    bwd_data_.assign(size_t(T), nullptr);
    bwd_weights_.assign(size_t(T), nullptr);
    parts_.assign(size_t(T), {});
    // One kernel per distinct geometry, with the union of the passes it serves.
    std::vector<std::pair<ConvGeom, int>> want;
    auto geom = [&](const Box& out, const Box& in) {
      ConvGeom g = conv_geom_on(env.batch, s_.in.c, s_.out.c, s_.window(), out, in, out_cb, in_cb,
                                !s_.batch_normalize(), s_.conv().groups);
      g.choose_oc = s_.conv().kernel_filters;
      return g;
    };
    auto whole = [&](const Box& out) { return window_in(out, s_.window(), s_.in.h, s_.in.w); };
    auto request = [&](const Box& out, int kind, const Box& in) {
      const ConvGeom g = geom(out, in);
      for (auto& w : want)
        if (w.first == g) {
          w.second |= kind;
          return;
        }
      want.push_back({g, kind});
    };
    const bool input_delta = l > env.plan.first || env.need_input_delta;
    for (int t : env.local) {
      const TileLayer& x = env.plan.at(t, l);
      const LayerMemory& m = layer_memory(t);
      request(x.fwd, ConvKernel::kFwd, whole(x.fwd));
      for (const Box& part : m.parts) request(part, ConvKernel::kFwd, whole(part));
      const Box bw = m.weights_on_delta ? x.delta : x.own;
      request(bw, ConvKernel::kBwdWeights, whole(bw));
      if (input_delta) request(x.delta, ConvKernel::kBwdData, env.mem.tiles[size_t(t)].bwd[size_t(i_)].in_box);
    }
    for (auto& [g, kinds] : want)
      kernels_.push_back(std::make_unique<ConvKernel>(env.ctx, weights, g, kinds, env.tiled));
    auto find = [&](const Box& out, const Box& in) -> ConvKernel* {
      const ConvGeom g = geom(out, in);
      for (auto& k : kernels_)
        if (k->geom() == g) return k.get();
      return nullptr;
    };
    for (int t : env.local) {
      const TileLayer& x = env.plan.at(t, l);
      const LayerMemory& m = layer_memory(t);
      fwd_[size_t(t)] = find(x.fwd, whole(x.fwd));
      for (const Box& part : m.parts) parts_[size_t(t)].push_back(find(part, whole(part)));
      const Box bw = m.weights_on_delta ? x.delta : x.own;
      bwd_weights_[size_t(t)] = find(bw, whole(bw));
      if (input_delta) bwd_data_[size_t(t)] = find(x.delta, env.mem.tiles[size_t(t)].bwd[size_t(i_)].in_box);
    }
  }

  ConvKernel* weights_kernel(int t) const { return bwd_weights_[size_t(t)]; }

  // The whole forward box, or one of its overlap parts, which runs on a dense crop of its
  // input window into a dense output, then moves into y.
  void forward(int t, int part, const Box& box, const TileMaps& m) override {
    const TileLayer& x = env_.plan.at(t, s_.index);
    if (part >= 0) {
      const Box src = window_in(box, s_.window(), s_.in.h, s_.in.w);
      const TensorView crop{env_.stage->data(), env_.batch, s_.in.c, in_cb_, src};
      env_.ctx.device.copy_region(m.in, crop, src);
      const TensorView out{env_.stage->data() + crop.size(), env_.batch, s_.out.c, out_cb_, box};
      parts_[size_t(t)][size_t(part)]->forward(crop.data, bias(), out.data);
      env_.ctx.device.copy_region(out, m.y, box);
    } else if (!(m.y.box == x.fwd)) {
      // y is held on a larger box than forward computes (the feature exchange fills the
      // rest): the kernel writes its dense output into z's buffer, then it moves into y.
      fwd_[size_t(t)]->forward(m.in.data, bias(), m.z.data);
      env_.ctx.device.copy_region(TensorView{m.z.data, env_.batch, s_.out.c, out_cb_, x.fwd}, m.y, x.fwd);
    } else {
      fwd_[size_t(t)]->forward(m.in.data, bias(), m.y.data);
    }
  }

  // The convolution again, dense over the forward box into `dst` (backward's recomputation).
  void recompute(int t, const TensorView& in, float* dst) { fwd_[size_t(t)]->forward(in.data, bias(), dst); }

  void backward_data(int t, const TensorView& delta, const TensorView& din, const Box& cells) override {
    if (!cells.empty() && !(cells == din.box)) fail("internal: a convolution's input delta is written whole");
    bwd_data_[size_t(t)]->backward_data(delta.data, din.data);
  }

  void backward_weights(int t, const TensorView& delta, const TensorView& in, float* grad_w, float* grad_b,
                        bool add_once) override {
    const TileLayer& x = env_.plan.at(t, s_.index);
    ConvKernel& k = *bwd_weights_[size_t(t)];
    if (layer_memory(t).weights_on_delta) {
      // The delta is no longer needed outside the owned box: zero it there and take the
      // weight gradient over the whole delta box, with no crops.
      if (!(delta.box == x.own)) env_.ctx.device.zero_outside(delta, x.own);
      add_grad_scale(in, delta, x.own);
      k.backward_weights(in.data, delta.data, grad_w, grad_b, add_once);
      return;
    }
    // Over the owned box: its input window cropped out of a larger input buffer, and the
    // owned delta moved to the front of its buffer (in place: the delta is not read again).
    const Box src_box = window_in(x.own, s_.window(), s_.in.h, s_.in.w);
    TensorView src = in;
    if (!(in.box == src_box)) {
      src = TensorView{env_.crop->data(), env_.batch, s_.in.c, in_cb_, src_box};
      env_.ctx.device.copy_region(in, src, src_box);
    }
    TensorView owned_delta = delta;
    if (!(delta.box == x.own)) env_.ctx.device.compact_region(owned_delta, x.own);
    owned_delta.box = x.own;
    add_grad_scale(src, owned_delta, x.own);
    k.backward_weights(src.data, owned_delta.data, grad_w, grad_b, add_once);
  }

  void post_features(const std::vector<Piece>& pieces, int tag0, const TileLinks& links,
                     const std::function<TensorView(int)>& y_of) override {
    links.post(pieces, y_of, y_of, tag0);
  }

  void kernel_uses(std::vector<KernelUse>& uses) const override {
    for (const auto& k : kernels_)
      for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
        KernelUse u{s_.index, p, k->impl_name(p)};
        if (!u.impl.empty() && std::find(uses.begin(), uses.end(), u) == uses.end()) uses.push_back(u);
      }
  }

 private:
  const LayerMemory& layer_memory(int t) const { return env_.mem.tiles[size_t(t)].layers[size_t(i_)]; }
  const float* bias() const {
    return s_.batch_normalize() ? nullptr : env_.params.data() + env_.params.slices[size_t(s_.index)].biases;
  }

  // verify's scales of the weight and bias gradients from one tile (engine/grad_scale.hpp):
  // the weight gradient sums products of `src` and `delta` over the cells of `own`, so by
  // Cauchy-Schwarz the sum of their magnitudes is at most sqrt(window cells) ||src|| ||delta||;
  // the bias gradient (without batch-norm) sums `delta` itself there: per channel at most
  // sqrt(own cells x samples) ||delta_c||, i.e. sqrt(cells) ||delta|| over the layer. `delta`
  // is zero outside `own` and in the block padding.
  void add_grad_scale(const TensorView& src, const TensorView& delta, const Box& own) const {
    if (!env_.grad_scales) return;
    auto sum_sq = [](const TensorView& v) {
      double s = 0;
      for (int64_t k = 0; k < v.size(); ++k) s += double(v.data[k]) * v.data[k];
      return s;
    };
    const double dd = sum_sq(delta);
    GradScale& g = (*env_.grad_scales)[size_t(s_.index)];
    g.weights += std::sqrt(double(s_.window().size) * s_.window().size * sum_sq(src) * dd);
    if (!s_.batch_normalize()) g.biases += std::sqrt(double(delta.n) * double(own.area()) * dd);
  }

  const TiledOpEnv& env_;
  const LayerSpec& s_;
  const int i_, in_cb_, out_cb_;
  std::vector<std::unique_ptr<ConvKernel>> kernels_;
  std::vector<ConvKernel*> fwd_, bwd_data_, bwd_weights_;  // [tile]
  std::vector<std::vector<ConvKernel*>> parts_;            // [tile][overlap part]
};

}  // namespace

std::unique_ptr<TiledOp> make_tiled_conv(const TiledOpEnv& env, int l, int in_cb, int out_cb, WeightCache& weights) {
  return std::make_unique<TiledConv>(env, l, in_cb, out_cb, weights);
}

ConvKernel* tiled_conv_weights_kernel(TiledOp& conv, int t) { return static_cast<TiledConv&>(conv).weights_kernel(t); }

void tiled_conv_recompute(TiledOp& conv, int t, const TensorView& in, float* dst) {
  static_cast<TiledConv&>(conv).recompute(t, in, dst);
}

}  // namespace tt
