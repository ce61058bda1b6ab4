#include "comm/mpi_comm.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <thread>

#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {
constexpr int kReduceScatterTag = 1 << 20;  // above the engine's exchange tags (piece indices)
constexpr int kDeferredTag = 1 << 21;       // deferred messages: above both
}  // namespace

double busy_poll_window_s(double quota_cores, int ranks_on_host, int threads_per_rank) {
  return double(ranks_on_host) * std::max(1, threads_per_rank) <= quota_cores + 1e-9 ? 0.002 : 0.;
}

MpiComm::MpiComm(int* argc, char*** argv, const MpiOptions& options) : options_(options) {
  int provided = 0;  // only this thread calls MPI; the heartbeat thread does not
  // hwloc (Open MPI's view of the machine) would load its plugins for GPUs (OpenGL, OpenCL)
  // and XML topology files, and with them X11, OpenCL and libxml2 with ICU: about 1.5 MB
  // resident in every process for nothing it uses. Kept if the user set the variable.
  setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_xml_libxml", 0);
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, size_t(len));
  requests_.reserve(1024);
  request_peers_.reserve(1024);
  // The first messages between ranks: Open MPI makes its TCP connections now. If one
  // fails, nothing beats yet to tell, so these waits have a deadline of their own.
  start_limit_s_ = options_.stall_timeout_s;
  hosts_ = gather_hosts();
  ranks_on_host_ = int(std::count(hosts_.begin(), hosts_.end(), host_));
  quota_cores_ = cgroup_cpu_quota_cores();
  if (size_ > 1 && (options_.peer_timeout_s > 0 || options_.stall_timeout_s > 0)) {
    // A job number tells this job's beats from any other's.
    uint64_t job = rank_ == 0 ? std::random_device{}() * 0x100000001ull : 0;
    MPI_Request r;
    check(MPI_Ibcast(&job, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &r), "broadcast");
    complete(r, "the start");
    heartbeat_ = std::make_unique<Heartbeat>(rank_, size_, job);
    std::vector<BeatAddress> all(static_cast<size_t>(size_));
    check(MPI_Iallgather(&heartbeat_->local(), sizeof(BeatAddress), MPI_BYTE, all.data(), sizeof(BeatAddress), MPI_BYTE,
                         MPI_COMM_WORLD, &r),
          "allgather");
    complete(r, "the start");
    heartbeat_->start(all);
  }
  start_limit_s_ = 0;
}

MpiComm::~MpiComm() {
  heartbeat_.reset();
  MPI_Finalize();
}

void MpiComm::check(int rc, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("rank ", rank_, ": MPI ", what, " failed: ", std::string(msg, size_t(len)));
}

// Worked out at every wait, not cached: the host's ranks and quota are known only after
// gather_hosts' own waits, and the command sets its thread count after MPI starts.
double MpiComm::busy_poll_s() { return busy_poll_window_s(quota_cores_, ranks_on_host_, omp_get_max_threads()); }

// Polls rather than blocks, so that it can watch the heartbeat. After busy_poll_window_s
// (2 ms, or none under a CPU quota smaller than the host's ranks) it naps 100 us between polls:
// a rank that waits long (for a slower device) leaves the CPU to others, which on a device
// whose CPU is shared or capped (and under a CPU quota) is time the computing ranks need.
void MpiComm::complete(MPI_Request* reqs, int n, const char* what, std::span<const int> peers) {
  const double start = MPI_Wtime();
  double next_check = start + 0.2;
  // Data arriving (bytes Open MPI reads from its sockets) is progress, however slow.
  int64_t read_bytes = heartbeat_ ? thread_read_bytes() : -1;
  double quiet_since = start;
  struct NotWaiting {  // on every way out
    Heartbeat* h;
    ~NotWaiting() {
      if (h) h->set_stalled_since(0);
    }
  } not_waiting{heartbeat_.get()};
  if (heartbeat_ && read_bytes >= 0) heartbeat_->set_stalled_since(Heartbeat::clock_ns());
  all_stalled_since_ = -1;
  const double busy_window_s = busy_poll_s();
  for (;;) {
    int done = 0;
    check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what);
    if (done) return;
    const double now = MPI_Wtime();
    if (now - start >= busy_window_s) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!heartbeat_) {
      if (start_limit_s_ > 0 && now - start > start_limit_s_)
        fail("rank ", rank_, " (", host_, "): the ranks could not exchange their first messages within ",
             int(start_limit_s_), " s (--stall-timeout ", std::to_string(int(start_limit_s_)),
             "): the transport between them is stuck. Look above for an Open MPI warning about a failed TCP "
             "connection; a firewall that drops TCP between the devices does this too");
      continue;
    }
    if (now < next_check) continue;
    next_check = now + 0.2;
    for (int k = 0; k < (peers.empty() ? size_ : int(peers.size())); ++k) {
      const int p = peers.empty() ? k : peers[size_t(k)];
      if (p == rank_) continue;
      const double silent = heartbeat_->silent_for(p);
      if (silent < 0 && now - start > std::max(options_.peer_timeout_s, 10.) && !warned_deaf_) {
        warned_deaf_ = true;
        std::fprintf(stderr,
                     "tiletrain: warning (rank %d on %s): no heartbeat ever came from rank %d on %s (UDP between them "
                     "blocked?): a lost peer will not be noticed, the job may hang instead\n",
                     rank_, host_.c_str(), p, hosts_[size_t(p)].c_str());
      }
      if (options_.peer_timeout_s > 0 && silent > options_.peer_timeout_s)
        fail("rank ", rank_, " (", host_, ") lost rank ", p, " on host ", hosts_[size_t(p)], ": no sign of life for ",
             int(silent), " s (--peer-timeout ", std::to_string(int(options_.peer_timeout_s)), ") while waiting in ",
             what, "; its device, its link or the process is gone");
    }
    if (read_bytes < 0) continue;  // cannot tell data from none
    const int64_t r = thread_read_bytes();
    if (r != read_bytes) {
      read_bytes = r;
      quiet_since = now;
      heartbeat_->set_stalled_since(Heartbeat::clock_ns());
    }
    check_stall(now, now - quiet_since, what);
  }
}

void MpiComm::check_stall(double now, double stalled_s, const char* what) {
  const double limit = options_.stall_timeout_s;
  bool all = limit > 0 && stalled_s > limit;
  for (int p = 0; all && p < size_; ++p) all = p == rank_ || heartbeat_->stalled_for(p) > limit;
  if (!all) {
    all_stalled_since_ = -1;
    return;
  }
  if (all_stalled_since_ < 0) all_stalled_since_ = now;
  if (now - all_stalled_since_ < 1.5) return;
  fail("rank ", rank_, " (", host_, ") and every other rank have waited ", int(stalled_s),
       " s with no data arriving (--stall-timeout ", std::to_string(int(limit)), "), while waiting in ", what,
       ", though all of them are alive: the transport between them is stuck, not slow. Look above for an Open MPI "
       "warning about a failed TCP connection; a firewall that drops TCP but lets UDP through does this too");
}

void MpiComm::allreduce_sum(float* data, size_t n) {
  // Chunks below INT_MAX elements (MPI counts are int).
  for (size_t off = 0; off < n; off += size_t(INT_MAX / 2)) {
    const int c = int(std::min(n - off, size_t(INT_MAX / 2)));
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r), "allreduce");
    complete(r, "a gradient all-reduce");
  }
}

namespace {
// The cells `box` of t as an MPI datatype over t.data: [n][channel blocks][rows][columns][cb]
// of `elem` (floats, or bytes laid out alike).
MPI_Datatype box_type(const TensorView& t, const Box& box, MPI_Datatype elem) {
  const int sizes[5] = {t.n, t.cblocks(), t.box.h(), t.box.w(), t.cb};
  const int sub[5] = {t.n, t.cblocks(), box.h(), box.w(), t.cb};
  const int starts[5] = {0, 0, box.y0 - t.box.y0, box.x0 - t.box.x0, 0};
  MPI_Datatype type;
  MPI_Type_create_subarray(5, sizes, sub, starts, MPI_ORDER_C, elem, &type);
  MPI_Type_commit(&type);
  return type;
}
}  // namespace

// One message of `box` of a map laid out like `shape`, at `data`. The datatype is freed
// right away: MPI keeps it until the message completes.
void MpiComm::post(bool send, void* data, const TensorView& shape, const Box& box, MPI_Datatype elem, int peer,
                   int tag) {
  MPI_Datatype type = box_type(shape, box, elem);
  requests_.emplace_back();
  const int rc = send ? MPI_Isend(data, 1, type, peer, tag, MPI_COMM_WORLD, &requests_.back())
                      : MPI_Irecv(data, 1, type, peer, tag, MPI_COMM_WORLD, &requests_.back());
  request_peers_.push_back(peer);
  MPI_Type_free(&type);
  check(rc, send ? "send" : "receive");
}

void MpiComm::isend(const TensorView& t, const Box& box, int to, int tag) {
  post(true, t.data, t, box, MPI_FLOAT, to, tag);
}

void MpiComm::irecv(const TensorView& t, const Box& box, int from, int tag) {
  post(false, t.data, t, box, MPI_FLOAT, from, tag);
}

void MpiComm::isend_bytes(const uint8_t* data, const TensorView& shape, const Box& box, int to, int tag) {
  post(true, const_cast<uint8_t*>(data), shape, box, MPI_BYTE, to, tag);  // MPI_Isend only reads it
}

void MpiComm::irecv_bytes(uint8_t* data, const TensorView& shape, const Box& box, int from, int tag) {
  post(false, data, shape, box, MPI_BYTE, from, tag);
}

void MpiComm::isend_floats(const float* data, size_t n, int to, int tag) {
  if (n > size_t(INT_MAX)) fail("internal: message of ", n, " floats");
  requests_.emplace_back();
  request_peers_.push_back(to);
  check(MPI_Isend(data, int(n), MPI_FLOAT, to, tag, MPI_COMM_WORLD, &requests_.back()), "send");
}

void MpiComm::irecv_floats(float* data, size_t n, int from, int tag) {
  if (n > size_t(INT_MAX)) fail("internal: message of ", n, " floats");
  requests_.emplace_back();
  request_peers_.push_back(from);
  check(MPI_Irecv(data, int(n), MPI_FLOAT, from, tag, MPI_COMM_WORLD, &requests_.back()), "receive");
}

void MpiComm::wait_all() {
  if (requests_.empty()) return;
  complete(requests_.data(), int(requests_.size()), "a halo exchange or a transfer at or after the cut", request_peers_);
  requests_.clear();
  request_peers_.clear();
}

void MpiComm::progress() {
  int done = 0;
  if (!requests_.empty())
    check(MPI_Testall(int(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), "progress");
  if (!deferred_.empty())
    check(MPI_Testall(int(deferred_.size()), deferred_.data(), &done, MPI_STATUSES_IGNORE), "progress");
}

void MpiComm::isend_deferred(const float* data, size_t n, int to, int tag) {
  if (n > size_t(INT_MAX) || tag < 0 || tag >= kDeferredTag)
    fail("internal: deferred message of ", n, " floats, tag ", tag);
  deferred_.emplace_back();
  deferred_peers_.push_back(to);
  check(MPI_Isend(data, int(n), MPI_FLOAT, to, kDeferredTag + tag, MPI_COMM_WORLD, &deferred_.back()), "send");
}

void MpiComm::irecv_deferred(float* data, size_t n, int from, int tag) {
  if (n > size_t(INT_MAX) || tag < 0 || tag >= kDeferredTag)
    fail("internal: deferred message of ", n, " floats, tag ", tag);
  deferred_.emplace_back();
  deferred_peers_.push_back(from);
  check(MPI_Irecv(data, int(n), MPI_FLOAT, from, kDeferredTag + tag, MPI_COMM_WORLD, &deferred_.back()), "receive");
}

void MpiComm::wait_deferred() {
  if (deferred_.empty()) return;
  complete(deferred_.data(), int(deferred_.size()), "the gradient exchange", deferred_peers_);
  deferred_.clear();
  deferred_peers_.clear();
}

void MpiComm::broadcast(double* data, size_t n, int root) {
  MPI_Request r;
  check(MPI_Ibcast(data, int(n), MPI_DOUBLE, root, MPI_COMM_WORLD, &r), "broadcast");
  complete(r, "a broadcast");
}

void MpiComm::all_gather_v(float* data, const std::vector<int>& counts, const std::vector<int>& displs) {
  MPI_Request r;
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_FLOAT,
                        MPI_COMM_WORLD, &r),
        "allgatherv");
  complete(r, "an all-gather (the weights, or with --tail filters the maps after the cut)");
}

void MpiComm::all_gather_v(double* data, const std::vector<int>& counts, const std::vector<int>& displs) {
  MPI_Request r;
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_DOUBLE,
                        MPI_COMM_WORLD, &r),
        "allgatherv");
  complete(r, "a batch-norm all-gather");
}

// A ring, in place: at step s rank r passes its running sum of part (r - s - 1) to rank
// r + 1 and adds what rank r - 1 passes into part (r - s - 2); after P - 1 steps part r
// holds every rank's contribution. Unlike MPI_Reduce_scatter (which allocates buffers
// of the message size per call), it needs only `tmp`, so peak memory stays predictable.
void MpiComm::reduce_scatter(float* data, const std::vector<int>& counts, const std::vector<int>& displs, float* tmp) {
  const int P = size_, next = (rank_ + 1) % P, prev = (rank_ + P - 1) % P;
  for (int s = 0; s + 1 < P; ++s) {
    const int out = ((rank_ - s - 1) % P + P) % P, in = ((rank_ - s - 2) % P + P) % P;
    MPI_Request r[2];
    check(MPI_Isend(data + displs[size_t(out)], counts[size_t(out)], MPI_FLOAT, next, kReduceScatterTag, MPI_COMM_WORLD,
                    &r[0]),
          "reduce-scatter");
    check(MPI_Irecv(tmp, counts[size_t(in)], MPI_FLOAT, prev, kReduceScatterTag, MPI_COMM_WORLD, &r[1]),
          "reduce-scatter");
    const int peers[2] = {next, prev};
    complete(r, 2, "the gradient reduce-scatter", peers);
    float* d = data + displs[size_t(in)];
    for (int k = 0; k < counts[size_t(in)]; ++k) d[k] += tmp[k];
  }
}

std::vector<double> MpiComm::all_gather(double v) {
  std::vector<double> out(size_t(size_), 0.);
  MPI_Request r;
  check(MPI_Iallgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD, &r), "allgather");
  complete(r, "an all-gather");
  return out;
}

std::vector<std::string> MpiComm::all_gather(const std::string& s) {
  const std::vector<double> lengths = all_gather(double(s.size()));
  std::vector<int> counts, displs;
  int total = 0;
  for (double n : lengths) {
    if (n > double(INT_MAX - total)) fail("an all-gather of more than 2 GB of text");
    displs.push_back(total);
    counts.push_back(int(n));
    total += int(n);
  }
  std::vector<char> all(size_t(std::max(total, 1)));
  MPI_Request r;
  check(MPI_Iallgatherv(s.data(), int(s.size()), MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR,
                        MPI_COMM_WORLD, &r),
        "allgatherv");
  complete(r, "an all-gather of text");
  std::vector<std::string> out;
  for (int k = 0; k < size_; ++k) out.emplace_back(all.data() + displs[size_t(k)], size_t(counts[size_t(k)]));
  return out;
}

std::vector<std::string> MpiComm::gather_hosts() {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all(size_t(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy(host_.begin(), host_.end(), mine.begin());
  MPI_Request req;
  check(MPI_Iallgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                       MPI_COMM_WORLD, &req),
        "allgather");
  complete(req, "the start");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME);
  return out;
}

std::vector<std::string> MpiComm::all_hosts() { return hosts_; }

void MpiComm::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace tt
