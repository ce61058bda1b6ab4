// The project's own grouped convolution kernels (Darknet's `groups=`): output channel o
// of group q = o / (oc / groups) reads input channels [q * ic/groups, (q + 1) * ic/groups).
// Depthwise (groups = ic = oc) on blocked maps runs a kernel that works on a whole channel
// block at a time (plain loops the compiler vectorises for the build's CPU); every other
// grouping, and a plain input, runs one output channel at a time.
//
// Maps and padding as in own_conv.hpp: [n][C/cb][h][w][cb] (cb = 1: plain NCHW), padded
// channels of inputs zero, of outputs written as zero. Weights are Darknet's (the
// parameter vector's) plain goihw, except that the depthwise forward and backward-data read
// oneDNN's Goihw{b}g (grouped_weights_tag).
//
// Fixed summation order, as the own kernels: a forward output is Σ over (input channel of
// its group, ky, kx), a backward-data cell Σ over (output channel of its group, ky, kx),
// from +0, one multiplication and one addition after the other, skipping only taps outside
// the box; bias last. A tile therefore computes bit-identical values to the whole map.
// Backward-weights sums each weight over (image, output row, column) in that order, in one
// accumulator, and adds the sum into the gradient once. Threads (OpenMP, the caller's team)
// split whole outputs, so nothing depends on the thread count.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "layers/own_conv.hpp"

namespace tt {

// The weights' dimensions as oneDNN takes them: {oc, ic, k, k}, or for a grouped
// convolution {groups, oc/groups, ic/groups, k, k} (the same floats as Darknet's array).
dnnl::memory::dims conv_weights_dims(int oc, int ic, int k, int groups);
// Darknet's plain layout of them: oihw, or goihw when grouped.
dnnl::memory::desc plain_conv_weights_desc(int oc, int ic, int k, int groups);

// Whether the block-at-a-time depthwise kernel runs this shape.
bool grouped_is_depthwise(const OwnConvShape& s, int groups);
// "own:depthwise" or "own:grouped": which of the two kernels runs.
const char* grouped_kernel_name(const OwnConvShape& s, int groups);
// Weight layout the kernels read for `pass`: Goihw{b}g for depthwise forward and
// backward-data, plain goihw otherwise (backward-weights always writes plain goihw).
dnnl::memory::format_tag grouped_weights_tag(const OwnConvShape& s, int groups, OwnPass pass);

// Throw tt::Error for groups not dividing the channels or an unsupported block.
void grouped_conv_forward(const OwnConvShape& s, int groups, const float* src, const float* w,
                          const float* bias /*may be null*/, float* dst);
// Overwrites all of diff_src (ih x iw, padded channels zero).
void grouped_conv_backward_data(const OwnConvShape& s, int groups, const float* diff_dst, const float* w,
                                float* diff_src);
// diff_w plain goihw: overwritten, or each element added to once with `accumulate`.
// diff_b (oc floats, may be null) is overwritten.
void grouped_conv_backward_weights(const OwnConvShape& s, int groups, const float* src, const float* diff_dst,
                                   float* diff_w, float* diff_b, bool accumulate);

}  // namespace tt
