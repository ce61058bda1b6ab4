// The hardware that holds tensors, as the engine sees it apart from convolutions (those
// stay inside the convolution op's kernel choice): memory, copies of map regions,
// batch-norm and activation, and the SGD update. The CPU is the one implementation today
// (cpu_device()); another backend (a GPU) is a new implementation of this interface. A
// Buffer knows the device that holds its memory; a TensorView is still a host pointer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "layers/tensor.hpp"
#include "model/net_spec.hpp"

namespace tt {

// One SGD step with momentum and weight decay, Darknet's rule (per parameter i):
// v = momentum·v − g − decay·batch·w; w += rate/batch · v (biases and scales: decay 0).
struct SgdStep {
  float rate = 0, momentum = 0, decay = 0, batch = 1;
};

class Device {
 public:
  virtual ~Device() = default;

  // Memory of `floats` zeros; returned by release().
  virtual float* allocate(size_t floats) = 0;
  virtual void release(float* p, size_t floats) = 0;
  // Gives back the memory of [p, p + n) that this process will overwrite before it reads
  // it (it reads as zeros afterwards).
  virtual void discard(float* p, size_t n) = 0;

  // Map regions (layouts may differ between source and destination).
  virtual void copy_region(const TensorView& src, const TensorView& dst, const Box& region) = 0;
  virtual void add_region(const TensorView& src, const TensorView& dst, const Box& region) = 0;  // dst += src
  // Channel slices (layers/tensor.hpp): dst's [dst_c0, +channels) = or += src's [src_c0, ...).
  virtual void copy_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                             const Box& region) = 0;
  virtual void add_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                            const Box& region) = 0;
  virtual void zero(const TensorView& t) = 0;
  virtual void zero_outside(const TensorView& t, const Box& keep) = 0;
  virtual void compact_region(TensorView& t, const Box& keep) = 0;

  // Batch-norm and activation after a convolution (layers/pointwise.hpp says what each
  // computes); statistics as double-doubles, so that the tiles' parts add up to the same batch
  // statistics as one whole map's.
  virtual void channel_sums(const TensorView& y, const Box& region, double* sum, double* sq) = 0;
  virtual void affine_act_forward(const TensorView& y, const TensorView& z, const Box& region, const float* a,
                                  const float* b, Act act) = 0;
  virtual void act_backward(const TensorView& g, const TensorView& y, const Box& region, const float* a, const float* b,
                            Act act) = 0;
  virtual void act_backward_bn_sums(const TensorView& g, const TensorView& y, const Box& region, const Box& own,
                                    const float* a, const float* b, Act act, const double* mean, const double* rstd,
                                    double* sum_g, double* sum_gx) = 0;
  virtual void bn_backward_apply(const TensorView& g, const TensorView& y, const Box& region, const float* k1,
                                 const float* k2, const float* k3, const float* mean) = 0;

  // The update of parameters [begin, end): w, momentum v, gradient g. False if a weight
  // came out inf or NaN.
  virtual bool sgd(float* w, float* v, const float* g, int64_t begin, int64_t end, const SgdStep& s) = 0;
};

// The host's CPU: memory from the system, the element-wise kernels of layers/.
Device& cpu_device();

// A device's float buffer of zeros: the only owner of large tensors. On the CPU the memory
// is anonymous pages, resident (counted in RSS) only when first written.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t floats, Device& device = cpu_device());
  float* data() const { return p_.get(); }
  size_t size() const { return n_; }
  Device& device() const { return *p_.get_deleter().device; }

 private:
  struct Free {
    Device* device;  // no default member initializers: they would make Free incomplete here
    size_t floats;
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> p_{nullptr, Free{&cpu_device(), 0}};
  size_t n_ = 0;
};

}  // namespace tt
