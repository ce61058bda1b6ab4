// Max-pooling on a box with Darknet's padding (window of output i starts at
// i*stride - pad; cells outside the map never win). Forward records the winner per
// output as one byte (its position in the window, row-major; kNoWinner for a window
// entirely outside the map), so backward works on any sub-box of the forward box
// without a oneDNN workspace, at a quarter of the memory of a full index.
#pragma once
#include <cstdint>

#include "layers/tensor.hpp"
#include "model/net_spec.hpp"

namespace tt {

constexpr uint8_t kNoWinner = 255;

// Pools act(a[c]·x + b[c]) of its input x instead of x: a convolution's batch-norm and
// activation applied on the fly, with the bits affine_act_forward gives (an act with a
// vector form only: not Logistic).
struct PoolInputAct {
  const float* a;
  const float* b;
  Act act;
};

// The outputs `region` ⊆ out.box of out from in (whose box must contain window_in(region));
// argmax is laid out on `argmax_box` ⊇ out.box (a byte per output element).
void maxpool_forward(const TensorView& in, const TensorView& out, const Box& region, uint8_t* argmax,
                     const Box& argmax_box, const Window& w, const PoolInputAct* pre = nullptr);
// Writes diff_in on `cells` (its whole box if empty): each cell the sum of the gradients
// (diff_out on `region` ⊆ out_box) of the outputs it won, zero where it won none; the other
// cells of diff_in are left as they are. argmax is laid out on `out_box`.
void maxpool_backward(const TensorView& diff_out, const Box& region, const Box& out_box, const uint8_t* argmax,
                      const TensorView& diff_in, const Window& w, const Box& cells = {});

// Copies the winners of `region` between two arrays laid out on src_box and dst_box, for
// maps shaped like `shape` (its n, c and cb).
void copy_winners(const uint8_t* src, const Box& src_box, uint8_t* dst, const Box& dst_box, const TensorView& shape,
                  const Box& region);

}  // namespace tt
