// Comm on Open MPI: shared memory between ranks of one host and TCP between hosts are
// Open MPI's own transports. Errors return codes (MPI_ERRORS_RETURN) and are thrown as
// tt::Error naming the rank; a rank that dies makes mpirun end the others.
#pragma once
#include <mpi.h>

#include "comm/comm.hpp"

namespace tt {

class MpiComm final : public Comm {
 public:
  MpiComm(int* argc, char*** argv);
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return host_; }
  void allreduce_sum(double* data, size_t n) override;
  void allreduce_sum(float* data, size_t n) override;
  void isend(const TensorView& t, const Box& box, int to, int tag) override;
  void irecv(const TensorView& t, const Box& box, int from, int tag) override;
  void wait_all() override;
  void broadcast(double* data, size_t n, int root) override;
  void all_gather_v(float* data, const std::vector<int>& counts, const std::vector<int>& displs) override;
  void reduce_scatter(float* data, const std::vector<int>& counts, const std::vector<int>& displs, float* tmp) override;
  std::vector<double> all_gather(double v) override;
  std::vector<std::string> all_hosts() override;
  // Ends every rank at once (after an error on one of them).
  [[noreturn]] void abort(int code);

 private:
  void check(int rc, const char* what) const;
  int rank_ = 0, size_ = 1;
  std::string host_;
  std::vector<MPI_Request> requests_;
};

}  // namespace tt
