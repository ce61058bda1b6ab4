#include "comm/mpi_comm.hpp"

#include <climits>

#include "util/error.hpp"

namespace tt {

namespace {
constexpr int kReduceScatterTag = 1 << 20;  // above the engine's exchange tags (piece indices)
}  // namespace

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

namespace {
// The cells `box` of t as an MPI datatype over t.data: [n][channel blocks][rows][columns][cb].
MPI_Datatype box_type(const TensorView& t, const Box& box) {
  const int sizes[5] = {t.n, t.cblocks(), t.box.h(), t.box.w(), t.cb};
  const int sub[5] = {t.n, t.cblocks(), box.h(), box.w(), t.cb};
  const int starts[5] = {0, 0, box.y0 - t.box.y0, box.x0 - t.box.x0, 0};
  MPI_Datatype type;
  MPI_Type_create_subarray(5, sizes, sub, starts, MPI_ORDER_C, MPI_FLOAT, &type);
  MPI_Type_commit(&type);
  return type;
}
}  // namespace

// The datatype is freed right away: MPI keeps it until the message completes.
void MpiComm::isend(const TensorView& t, const Box& box, int to, int tag) {
  MPI_Datatype type = box_type(t, box);
  requests_.emplace_back();
  const int rc = MPI_Isend(t.data, 1, type, to, tag, MPI_COMM_WORLD, &requests_.back());
  MPI_Type_free(&type);
  check(rc, "send");
}

void MpiComm::irecv(const TensorView& t, const Box& box, int from, int tag) {
  MPI_Datatype type = box_type(t, box);
  requests_.emplace_back();
  const int rc = MPI_Irecv(t.data, 1, type, from, tag, MPI_COMM_WORLD, &requests_.back());
  MPI_Type_free(&type);
  check(rc, "receive");
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
  check(
      MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD),
      "allgatherv");
}

// A ring, in place: at step s rank r passes its running sum of part (r - s - 1) to rank
// r + 1 and adds what rank r - 1 passes into part (r - s - 2); after P - 1 steps part r
// holds every rank's contribution. Unlike MPI_Reduce_scatter (which allocates buffers
// of the message size per call), it needs only `tmp`, so peak memory stays predictable.
void MpiComm::reduce_scatter(float* data, const std::vector<int>& counts, const std::vector<int>& displs, float* tmp) {
  const int P = size_, next = (rank_ + 1) % P, prev = (rank_ + P - 1) % P;
  for (int s = 0; s + 1 < P; ++s) {
    const int out = ((rank_ - s - 1) % P + P) % P, in = ((rank_ - s - 2) % P + P) % P;
    check(MPI_Sendrecv(data + displs[size_t(out)], counts[size_t(out)], MPI_FLOAT, next, kReduceScatterTag, tmp,
                       counts[size_t(in)], MPI_FLOAT, prev, kReduceScatterTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "reduce-scatter");
    float* d = data + displs[size_t(in)];
    for (int k = 0; k < counts[size_t(in)]; ++k) d[k] += tmp[k];
  }
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
