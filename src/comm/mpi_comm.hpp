// Comm on Open MPI: shared memory between ranks of one host and TCP between hosts are
// Open MPI's own transports. Errors return codes (MPI_ERRORS_RETURN) and are thrown as
// tt::Error naming the rank; a rank that dies makes mpirun end the others. Every wait
// polls (non-blocking calls only) and watches a Heartbeat: a peer that stays silent for
// longer than the peer timeout (its device, link or process gone) ends the wait with an
// error naming that peer's rank and host, instead of a hang. Beats also say who is waiting
// with no data arriving: when every rank has, for longer than the stall timeout, the
// transport itself is stuck (a TCP connection Open MPI failed to make; a firewall that
// drops TCP but not UDP) and the wait ends with an error too.
#pragma once
#include <mpi.h>

#include <cmath>
#include <memory>
#include <span>

#include "comm/comm.hpp"
#include "comm/heartbeat.hpp"

namespace tt {

struct MpiOptions {
  double peer_timeout_s = 10;   // silence after which a peer counts as lost (0: never)
  double stall_timeout_s = 60;  // every rank waiting with no data arriving: stuck (0: never)
};

// How long a rank waiting for messages polls without pause before it naps between polls:
// none where the host's CPU quota (`quota_cores`, cgroup_cpu_quota_cores) is smaller than
// the threads of its ranks, else 2 ms. Under a quota every poll is CPU time the computing
// ranks of the device then lack in the same period. Without one the scheduler shares the
// cores, and a short poll answers a message sooner than a nap: 2 ranks ran faster polling;
// with more ranks than cores the two ways came out the same.
double busy_poll_window_s(double quota_cores, int ranks_on_host, int threads_per_rank);

class MpiComm final : public Comm {
 public:
  MpiComm(int* argc, char*** argv, const MpiOptions& options);
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return host_; }
  void allreduce_sum(float* data, size_t n) override;
  void isend(const TensorView& t, const Box& box, int to, int tag) override;
  void irecv(const TensorView& t, const Box& box, int from, int tag) override;
  void isend_bytes(const uint8_t* data, const TensorView& shape, const Box& box, int to, int tag) override;
  void irecv_bytes(uint8_t* data, const TensorView& shape, const Box& box, int from, int tag) override;
  void isend_floats(const float* data, size_t n, int to, int tag) override;
  void irecv_floats(float* data, size_t n, int from, int tag) override;
  void wait_all() override;
  void progress() override;
  void isend_deferred(const float* data, size_t n, int to, int tag) override;
  void irecv_deferred(float* data, size_t n, int from, int tag) override;
  void wait_deferred() override;
  void broadcast(double* data, size_t n, int root) override;
  void all_gather_v(float* data, const std::vector<int>& counts, const std::vector<int>& displs) override;
  void all_gather_v(double* data, const std::vector<int>& counts, const std::vector<int>& displs) override;
  void reduce_scatter(float* data, const std::vector<int>& counts, const std::vector<int>& displs, float* tmp) override;
  std::vector<double> all_gather(double v) override;
  std::vector<std::string> all_gather(const std::string& s) override;
  std::vector<std::string> all_hosts() override;
  double busy_poll_s() override;
  // Ends every rank at once (after an error on one of them).
  [[noreturn]] void abort(int code);

 private:
  void check(int rc, const char* what) const;
  void post(bool send, void* data, const TensorView& shape, const Box& box, MPI_Datatype elem, int peer, int tag);
  std::vector<std::string> gather_hosts();
  // Completes reqs[0, n) watching `peers` (every other rank when empty).
  void complete(MPI_Request* reqs, int n, const char* what, std::span<const int> peers);
  void complete(MPI_Request req, const char* what) { complete(&req, 1, what, {}); }
  int rank_ = 0, size_ = 1;
  // Throws once this rank and every other one have waited for longer than the stall
  // timeout with no data arriving (seen at two checks at least 1.5 s apart, so that a
  // peer's beat saying otherwise has had time to come).
  void check_stall(double now, double stalled_s, const char* what);
  MpiOptions options_;
  double all_stalled_since_ = -1;
  double start_limit_s_ = 0;  // while the constructor's first exchanges run: their deadline
  std::string host_;
  std::vector<std::string> hosts_;
  std::vector<MPI_Request> requests_;
  std::vector<int> request_peers_;
  std::vector<MPI_Request> deferred_;
  std::vector<int> deferred_peers_;
  std::unique_ptr<Heartbeat> heartbeat_;
  bool warned_deaf_ = false;       // said once that a peer's beats never arrive
  double quota_cores_ = INFINITY;  // the cgroup's CPU quota in cores (+infinity: none)
  int ranks_on_host_ = 1;
};

}  // namespace tt
