// The contract every layer after the cut keeps (Caffe's layer, llm.c's `+=`): an op knows
// its layer's inputs and shapes, runs forward and backward on whole plain NCHW maps of one
// micro-batch, *adds* its input gradients (a map read by two ops gets the sum of their
// deltas), says what it keeps from forward for backward, and what it costs. The executor
// (engine/tail.hpp) holds every buffer and never asks which type of layer it runs.
//
// Adding a layer type: write its op and its kind (model/op_kind.hpp: section, options,
// shape, FLOPs) in its own file here, add one line to registry.cpp, and add it to the contract test's table
// (tests/test_ops.cpp), which checks its gradients numerically and that backward adds (docs/layout.md).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "layers/detector.hpp"
#include "model/net_spec.hpp"

namespace tt {

// Per sample.
struct OpCost {
  double flops = 0;  // forward; multiply-adds count 2
  double bytes = 0;  // forward's reads and writes of maps and weights
};

// The micro-batch an op runs on.
struct OpStep {
  int batch = 1;
  bool training = true;
  int64_t step = 0;   // the training step (numbers dropout masks)
  uint64_t seed = 1;  // the run's seed (dropout masks)
};

// Where an op's tensors are; plain [batch][floats per sample] arrays.
struct OpTensors {
  std::vector<const float*> in;  // per input of the layer (NetSpec::inputs_of)
  float* out = nullptr;
  float* saved = nullptr;    // saved_floats() per sample, written by forward, read by backward
  float* scratch = nullptr;  // scratch_floats() per sample, free for the op to use
  // The layer's parameters (model/params.hpp slice), if it has any, and where their
  // gradients are added.
  const float *weights = nullptr, *biases = nullptr;
  float *grad_weights = nullptr, *grad_biases = nullptr;
  // backward only:
  float* dout = nullptr;    // dL/d(output); the op may overwrite it (it is not read afterwards)
  std::vector<float*> din;  // per input: dL/d(input) is added here
};

// What a loss needs besides the op's output.
struct LossArgs {
  const float* truth = nullptr;  // per sample NetSpec::truth_size() floats
  int net_w = 0, net_h = 0;      // the network's input size
  int64_t seen = 0;              // images seen before this micro-batch
  bool last = false;             // the op is the net's last layer
};

class Op {
 public:
  explicit Op(const LayerSpec& s) : spec(s) {}
  virtual ~Op() = default;
  const LayerSpec& spec;

  virtual int64_t saved_floats() const { return 0; }
  virtual int64_t scratch_floats() const { return 0; }
  virtual void forward(const OpStep& step, const OpTensors& t) const = 0;
  virtual void backward(const OpStep& step, const OpTensors& t) const = 0;
  virtual OpCost cost() const = 0;
  // verify (engine/grad_scale.hpp), right after backward on the same tensors: adds to
  // `weights` and `biases` bounds of the sums of magnitudes behind the parameter gradients
  // backward added. Ops without parameters add nothing.
  virtual void add_grad_scales(const OpStep&, const OpTensors&, double& /*weights*/, double& /*biases*/) const {}
  // A loss writes dL/d(output) into `t.dout` (overwriting it) and returns its value; every
  // other op returns false from is_loss. `detector` receives a detection loss's parts.
  virtual bool is_loss(bool /*last*/) const { return false; }
  virtual double loss(const OpStep&, const OpTensors&, const LossArgs&, DetectorLoss* /*detector*/) const { return 0; }
};

// The op of a layer after the cut. Throws for layers that only run tiled (convolution,
// max-pool: engine/segment.hpp).
std::unique_ptr<Op> make_op(const NetSpec& net, const LayerSpec& s);
// Whether make_op has an op for this type.
bool has_op(const OpKind& k);
// Whether a [softmax] runs over the groups of a class tree (ops/softmax.cpp).
bool softmax_over_tree(const LayerSpec& s);

// Bytes of a per-sample float count.
inline double float_bytes(double floats) { return 4 * floats; }

// din[i] += delta[i] for i < n: how backward hands an input its gradient (it adds).
inline void add_delta(float* din, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) din[i] += delta[i];
}

// A loss head whose loss delta already is the gradient with respect to its input (SSE on
// its input; softmax with cross-entropy, as in Darknet): backward passes it through.
class PassThroughLoss : public Op {
 public:
  using Op::Op;
  bool is_loss(bool last) const override { return last; }
  void backward(const OpStep& st, const OpTensors& t) const override {
    add_delta(t.din[0], t.dout, st.batch * spec.in.size());
  }
};

}  // namespace tt
