// Max-pooling on a box with Darknet's padding (window of output i starts at
// i*stride - pad; cells outside the map never win). Forward records the winning input
// cell per output (global row*width + column), so backward works on any sub-box of the
// forward box without a oneDNN workspace.
#pragma once
#include <cstdint>

#include "layers/tensor.hpp"

namespace tt {

// out (box `out.box`) from in (box must contain window_in(out.box)); argmax has out.size() entries.
void maxpool_forward(const TensorView& in, const TensorView& out, int32_t* argmax, const Window& w, int in_w);
// Adds diff_out (box `region` ⊆ out_box) into diff_in at the recorded winners;
// diff_in's box must contain window_in(region). argmax is laid out on `out_box`.
void maxpool_backward(const TensorView& diff_out, const Box& region, const Box& out_box, const int32_t* argmax,
                      const TensorView& diff_in, int in_w);

}  // namespace tt
