// A tiled concatenation ([route] whose first input is the layer before): forward copies
// each input's channels into its slice of the output on the forward box; backward hands
// each input its slice of the delta (the first as the input delta backward-data writes,
// the others added into their producers' side deltas).
#include "engine/tiled_op.hpp"

namespace tt {

namespace {

class TiledRoute final : public TiledOp {
 public:
  TiledRoute(const TiledOpEnv& env, int l) : env_(env) {
    int c0 = 0;
    for (int r : env.net.layers[size_t(l)].inputs) {
      const int c = env.net.layers[size_t(r)].out.c;
      slices_.push_back({c0, c});
      c0 += c;
    }
  }

  void forward(int /*t*/, int /*part*/, const Box& box, const TileMaps& m) override {
    Device& dev = env_.ctx.device;
    dev.copy_channels(m.in, 0, m.z, 0, slices_[0].c, box);
    for (size_t k = 1; k < slices_.size(); ++k)
      dev.copy_channels(m.side[k - 1], 0, m.z, slices_[k].c0, slices_[k].c, box);
  }

  void backward_data(int /*t*/, const TensorView& delta, const TensorView& din, const Box& cells) override {
    env_.ctx.device.copy_channels(delta, 0, din, 0, slices_[0].c, cells.empty() ? din.box : cells);
  }

  void add_side_delta(int /*t*/, int slot, const TensorView& delta, const TensorView& dside,
                      const Box& cells) override {
    const Slice& sl = slices_[size_t(slot)];
    env_.ctx.device.add_channels(delta, sl.c0, dside, 0, sl.c, cells);
  }

  // Backward reads no forward values.
  void post_features(const std::vector<Piece>& /*pieces*/, int /*tag0*/, const TileLinks& /*links*/,
                     const std::function<TensorView(int)>& /*y_of*/) override {}

 private:
  struct Slice {
    int c0, c;  // the input's channels in the output
  };
  const TiledOpEnv& env_;
  std::vector<Slice> slices_;  // per input
};

}  // namespace

std::unique_ptr<TiledOp> make_tiled_route(const TiledOpEnv& env, int l) { return std::make_unique<TiledRoute>(env, l); }

}  // namespace tt
