// The CPU device: anonymous memory pages, and the element-wise kernels of layers/ (tensor.cpp,
// pointwise.cpp), which vectorise on every instruction set the build targets.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "device/device.hpp"
#include "layers/pointwise.hpp"

namespace tt {
namespace {

class CpuDevice final : public Device {
 public:
  float* allocate(size_t floats) override {
    void* p = mmap(nullptr, bytes_of(floats), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<float*>(p);
  }
  void release(float* p, size_t floats) override { munmap(p, bytes_of(floats)); }
  void discard(float* p, size_t n) override {
    const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t a = (uintptr_t(p) + page - 1) / page * page, b = uintptr_t(p + n) / page * page;
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  }

  void copy_region(const TensorView& src, const TensorView& dst, const Box& region) override {
    tt::copy_region(src, dst, region);
  }
  void zero(const TensorView& t) override { tt::zero(t); }
  void zero_outside(const TensorView& t, const Box& keep) override { tt::zero_outside(t, keep); }
  void add_region(const TensorView& src, const TensorView& dst, const Box& region) override {
    tt::add_region(src, dst, region);
  }
  void copy_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                     const Box& region) override {
    tt::copy_channels(src, src_c0, dst, dst_c0, channels, region);
  }
  void add_channels(const TensorView& src, int src_c0, const TensorView& dst, int dst_c0, int channels,
                    const Box& region) override {
    tt::add_channels(src, src_c0, dst, dst_c0, channels, region);
  }
  void compact_region(TensorView& t, const Box& keep) override { tt::compact_region(t, keep); }

  void channel_sums(const TensorView& y, const Box& region, double* sum, double* sq) override {
    tt::channel_sums(y, region, sum, sq);
  }
  void affine_act_forward(const TensorView& y, const TensorView& z, const Box& region, const float* a, const float* b,
                          Act act) override {
    tt::affine_act_forward(y, z, region, a, b, act);
  }
  void act_backward(const TensorView& g, const TensorView& y, const Box& region, const float* a, const float* b,
                    Act act) override {
    tt::act_backward(g, y, region, a, b, act);
  }
  void act_backward_bn_sums(const TensorView& g, const TensorView& y, const Box& region, const Box& own, const float* a,
                            const float* b, Act act, const double* mean, const double* rstd, double* sum_g,
                            double* sum_gx) override {
    tt::act_backward_bn_sums(g, y, region, own, a, b, act, mean, rstd, sum_g, sum_gx);
  }
  void bn_backward_apply(const TensorView& g, const TensorView& y, const Box& region, const float* k1, const float* k2,
                         const float* k3, const float* mean) override {
    tt::bn_backward_apply(g, y, region, k1, k2, k3, mean);
  }

  // Inf and NaN are tested on the exponent bits as integers, so that the loop vectorises.
  bool sgd(float* w, float* v, const float* g, int64_t begin, int64_t end, const SgdStep& s) override {
    const float m = s.momentum, wd = s.decay, B = s.batch, step = s.rate / s.batch;
    uint32_t bad = 0;
    for (int64_t i = begin; i < end; ++i) {
      v[i] = m * v[i] - g[i] - wd * B * w[i];
      w[i] += step * v[i];
      uint32_t bits;
      std::memcpy(&bits, w + i, 4);
      bad |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
  }

 private:
  static size_t bytes_of(size_t floats) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return std::max(page, (floats * sizeof(float) + page - 1) / page * page);
  }
};

}  // namespace

Device& cpu_device() {
  static CpuDevice cpu;
  return cpu;
}

Buffer::Buffer(size_t floats, Device& device) : p_(device.allocate(floats), Free{&device, floats}), n_(floats) {}

void Buffer::Free::operator()(float* p) const {
  if (p) device->release(p, floats);
}

}  // namespace tt
