#include "comm/mpi_comm.hpp"

#include <climits>

#include "util/error.hpp"

namespace tt {

MpiComm::MpiComm(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, size_t(len));
  requests_.reserve(1024);
}

MpiComm::~MpiComm() { MPI_Finalize(); }

void MpiComm::check(int rc, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("rank ", rank_, ": MPI ", what, " failed: ", std::string(msg, size_t(len)));
}

void MpiComm::allreduce_sum(double* data, size_t n) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "allreduce");
}

void MpiComm::allreduce_sum(float* data, size_t n) {
  // Chunks below INT_MAX elements (MPI counts are int).
  for (size_t off = 0; off < n; off += size_t(INT_MAX / 2)) {
    const int c = int(std::min(n - off, size_t(INT_MAX / 2)));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "allreduce");
  }
}

void MpiComm::isend(const float* data, size_t n, int to, int tag) {
  requests_.emplace_back();
  check(MPI_Isend(data, int(n), MPI_FLOAT, to, tag, MPI_COMM_WORLD, &requests_.back()), "send");
}

void MpiComm::irecv(float* data, size_t n, int from, int tag) {
  requests_.emplace_back();
  check(MPI_Irecv(data, int(n), MPI_FLOAT, from, tag, MPI_COMM_WORLD, &requests_.back()), "receive");
}

void MpiComm::wait_all() {
  if (requests_.empty()) return;
  const int rc = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  requests_.clear();
  check(rc, "wait");
}

void MpiComm::broadcast(double* data, size_t n, int root) {
  check(MPI_Bcast(data, int(n), MPI_DOUBLE, root, MPI_COMM_WORLD), "broadcast");
}

void MpiComm::all_gather_v(float* data, const std::vector<int>& counts, const std::vector<int>& displs) {
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_FLOAT,
                       MPI_COMM_WORLD),
        "allgatherv");
}

void MpiComm::reduce_scatter(const float* data, float* out, const std::vector<int>& counts) {
  check(MPI_Reduce_scatter(data, out, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "reduce-scatter");
}

std::vector<double> MpiComm::all_gather(double v) {
  std::vector<double> out(size_t(size_), 0.);
  check(MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD), "allgather");
  return out;
}

std::vector<std::string> MpiComm::all_hosts() {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all(size_t(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy(host_.begin(), host_.end(), mine.begin());
  check(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                      MPI_COMM_WORLD),
        "allgather");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME);
  return out;
}

void MpiComm::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace tt
