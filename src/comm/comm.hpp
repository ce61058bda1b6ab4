// What tiles need from each other, as one small interface: sums across processes
// (gradients once per batch, batch-norm statistics per layer) and the process layout.
// LocalComm is the single-process implementation: every tile lives in this process,
// so halo exchange, scatter and gather are plain copies done by the engine.
#pragma once
#include <cstddef>

namespace tt {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce_sum(double* data, size_t n) = 0;
  virtual void allreduce_sum(float* data, size_t n) = 0;
};

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(double*, size_t) override {}
  void allreduce_sum(float*, size_t) override {}
};

}  // namespace tt
