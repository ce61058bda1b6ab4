// What tiles need from each other, as one small interface: sums across processes
// (gradients once per batch, batch-norm statistics per layer), non-blocking
// point-to-point messages (halos, scatter and gather at the cut) and the process
// layout. LocalComm is the single-process implementation, where every tile lives in
// this process and the engine moves data by plain copies; MpiComm runs on Open MPI.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "layers/tensor.hpp"

namespace tt {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string host() const = 0;
  virtual void allreduce_sum(float* data, size_t n) = 0;
  // Post messages, then wait for all of them; `tag` tells apart the messages of one
  // exchange (the engine completes each exchange before starting the next). A message
  // is the cells `box` of a map buffer `t`, sent and received in place (no packing
  // buffers; the box lies inside t.box).
  virtual void isend(const TensorView& t, const Box& box, int to, int tag) = 0;
  virtual void irecv(const TensorView& t, const Box& box, int from, int tag) = 0;
  // The same for a byte per cell and channel laid out like `shape` (max-pool winners);
  // shape.data is not read.
  virtual void isend_bytes(const uint8_t* data, const TensorView& shape, const Box& box, int to, int tag) = 0;
  virtual void irecv_bytes(uint8_t* data, const TensorView& shape, const Box& box, int from, int tag) = 0;
  // The same for n plain floats.
  virtual void isend_floats(const float* data, size_t n, int to, int tag) = 0;
  virtual void irecv_floats(float* data, size_t n, int from, int tag) = 0;
  virtual void wait_all() = 0;
  // Lets posted messages move on while the caller computes (MPI progresses them only
  // inside its calls); never blocks.
  virtual void progress() {}
  // Messages of n floats completed apart from the exchanges above, by wait_deferred(): the
  // step's gradients, posted while backward still computes. They never match the messages
  // above; progress() moves them on too.
  virtual void isend_deferred(const float* data, size_t n, int to, int tag) = 0;
  virtual void irecv_deferred(float* data, size_t n, int from, int tag) = 0;
  virtual void wait_deferred() = 0;
  virtual void broadcast(double* data, size_t n, int root) = 0;
  // Sharded weights; rank r's part of `data` is [displs[r], displs[r] + counts[r]).
  // all_gather_v: in place; afterwards every rank holds every part.
  // reduce_scatter: sums `data` across ranks; afterwards rank r's part holds the sum of
  // the parts r (the rest of `data` is overwritten). `tmp` holds max(counts) floats.
  virtual void all_gather_v(float* data, const std::vector<int>& counts, const std::vector<int>& displs) = 0;
  virtual void all_gather_v(double* data, const std::vector<int>& counts, const std::vector<int>& displs) = 0;
  virtual void reduce_scatter(float* data, const std::vector<int>& counts, const std::vector<int>& displs,
                              float* tmp) = 0;
  // Every rank's value, on every rank.
  virtual std::vector<double> all_gather(double v) = 0;
  virtual std::vector<std::string> all_gather(const std::string& s) = 0;
  virtual std::vector<std::string> all_hosts() = 0;
  // How long a rank waiting for messages polls before it naps between polls (0: naps at once).
  virtual double busy_poll_s() { return 0; }
};

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string host() const override;
  void allreduce_sum(float*, size_t) override {}
  void isend(const TensorView&, const Box&, int, int) override;
  void irecv(const TensorView&, const Box&, int, int) override;
  void isend_bytes(const uint8_t*, const TensorView&, const Box&, int, int) override;
  void irecv_bytes(uint8_t*, const TensorView&, const Box&, int, int) override;
  void isend_floats(const float*, size_t, int, int) override;
  void irecv_floats(float*, size_t, int, int) override;
  void wait_all() override {}
  void isend_deferred(const float*, size_t, int, int) override;
  void irecv_deferred(float*, size_t, int, int) override;
  void wait_deferred() override {}
  void broadcast(double*, size_t, int) override {}
  void all_gather_v(float*, const std::vector<int>&, const std::vector<int>&) override {}
  void all_gather_v(double*, const std::vector<int>&, const std::vector<int>&) override {}
  void reduce_scatter(float*, const std::vector<int>&, const std::vector<int>&, float*) override {}
  std::vector<double> all_gather(double v) override { return {v}; }
  std::vector<std::string> all_gather(const std::string& s) override { return {s}; }
  std::vector<std::string> all_hosts() override { return {host()}; }
};

// True when this process was started by mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE).
bool launched_by_mpirun();

}  // namespace tt
