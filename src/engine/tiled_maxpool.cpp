// A tiled max-pool: its winners per tile (one byte per output cell of the tile's held
// box, maxpool.hpp), so backward needs no forward values but them.
#include <cstdint>

#include "engine/tiled_op.hpp"
#include "layers/maxpool.hpp"

namespace tt {

namespace {

class TiledMaxPool final : public TiledOp {
 public:
  TiledMaxPool(const TiledOpEnv& env, int l, int out_cb, const ConvPointwise* pre, Act pre_act)
      : env_(env), s_(env.net.layers[size_t(l)]), out_cb_(out_cb), pre_(pre), pre_act_(pre_act) {
    winners_.resize(size_t(env.plan.tiles_count()));
    for (int t : env.local)
      winners_[size_t(t)].assign(env.mem.tiles[size_t(t)].layers[size_t(l - env.plan.first)].argmax_bytes, kNoWinner);
  }

  void forward(int t, int /*part*/, const Box& box, const TileMaps& m) override {
    const Box& held = env_.plan.at(t, s_.index).held;
    if (pre_) {
      const PoolInputAct pre{pre_->a(), pre_->b(), pre_act_};
      maxpool_forward(m.in, m.z, box, winners_[size_t(t)].data(), held, s_.window(), &pre);
    } else {
      maxpool_forward(m.in, m.z, box, winners_[size_t(t)].data(), held, s_.window());
    }
  }

  void backward_data(int t, const TensorView& delta, const TensorView& din, const Box& cells) override {
    const TileLayer& x = env_.plan.at(t, s_.index);
    maxpool_backward(delta, x.delta, x.held, winners_[size_t(t)].data(), din, s_.window(), cells);
  }

  void post_features(const std::vector<Piece>& pieces, int tag0, const TileLinks& links,
                     const std::function<TensorView(int)>& /*y_of*/) override {
    links.post_bytes(
        pieces, [&](int t) { return winners_[size_t(t)].data(); },
        [&](int t) {
          return TensorView{nullptr, env_.batch, s_.out.c, out_cb_, env_.plan.at(t, s_.index).held};
        },
        tag0);
  }

  size_t held_bytes(int t) const override { return winners_[size_t(t)].size(); }

 private:
  const TiledOpEnv& env_;
  const LayerSpec& s_;
  const int out_cb_;
  const ConvPointwise* pre_;
  const Act pre_act_;
  std::vector<std::vector<uint8_t>> winners_;  // [tile]: laid out on its held box
};

}  // namespace

std::unique_ptr<TiledOp> make_tiled_maxpool(const TiledOpEnv& env, int l, int out_cb, const ConvPointwise* pre,
                                            Act pre_act) {
  return std::make_unique<TiledMaxPool>(env, l, out_cb, pre, pre_act);
}

}  // namespace tt
