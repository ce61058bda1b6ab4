// A tiled residual join ([shortcut]; its `from` map at least as large as its output):
// forward adds its inputs on the forward box (the `from` map sampled at a stride, its first
// min(C) channels) and applies the activation; backward takes the activation's derivative
// from the output on the delta box, then hands that delta to both inputs (the first as the
// input delta backward-data writes, the other added into its producer's side delta on the
// cells it sampled).
#include "engine/tiled_op.hpp"
#include "layers/residual.hpp"

namespace tt {

namespace {

class TiledShortcut final : public TiledOp {
 public:
  TiledShortcut(const TiledOpEnv& env, int l, std::function<TensorView(int)> out_of)
      : env_(env),
        s_(env.net.layers[size_t(l)]),
        pairing_(join_pairing(s_, env.net.layers[size_t(s_.inputs[1])].out)),
        out_of_(std::move(out_of)) {}

  void forward(int /*t*/, int /*part*/, const Box& box, const TileMaps& m) override {
    residual_forward(m.in, m.side[0], m.z, box, s_.activation(), pairing_);
  }

  // Called once per tile and pass, before add_side_delta: the delta becomes dL/d(sum).
  void backward_data(int t, const TensorView& delta, const TensorView& din, const Box& cells) override {
    residual_backward(delta, out_of_(t), delta.box, s_.activation());
    env_.ctx.device.copy_region(delta, din, cells.empty() ? din.box : cells);
  }

  void add_side_delta(int /*t*/, int /*slot*/, const TensorView& delta, const TensorView& dside,
                      const Box& cells) override {
    residual_add_side(delta, dside, cells, pairing_);
  }

  // Its output where backward reads it outside the forward box (activated joins).
  void post_features(const std::vector<Piece>& pieces, int tag0, const TileLinks& links,
                     const std::function<TensorView(int)>& y_of) override {
    links.post(pieces, y_of, y_of, tag0);
  }

 private:
  const TiledOpEnv& env_;
  const LayerSpec& s_;
  JoinPairing pairing_;
  std::function<TensorView(int)> out_of_;
};

}  // namespace

std::unique_ptr<TiledOp> make_tiled_shortcut(const TiledOpEnv& env, int l, std::function<TensorView(int)> out_of) {
  return std::make_unique<TiledShortcut>(env, l, std::move(out_of));
}

}  // namespace tt
