#include <unistd.h>

#include <cstdlib>

#include "comm/comm.hpp"
#include "util/error.hpp"

namespace tt {

std::string LocalComm::host() const {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

void LocalComm::isend(const TensorView&, const Box&, int to, int) {
  fail("internal: message to rank ", to, " in a single process");
}
void LocalComm::irecv(const TensorView&, const Box&, int from, int) {
  fail("internal: message from rank ", from, " in a single process");
}

void LocalComm::isend_bytes(const uint8_t*, const TensorView&, const Box&, int to, int) {
  fail("internal: message to rank ", to, " in a single process");
}
void LocalComm::irecv_bytes(uint8_t*, const TensorView&, const Box&, int from, int) {
  fail("internal: message from rank ", from, " in a single process");
}

void LocalComm::isend_floats(const float*, size_t, int to, int) {
  fail("internal: message to rank ", to, " in a single process");
}
void LocalComm::irecv_floats(float*, size_t, int from, int) {
  fail("internal: message from rank ", from, " in a single process");
}

void LocalComm::isend_deferred(const float*, size_t, int to, int) {
  fail("internal: message to rank ", to, " in a single process");
}
void LocalComm::irecv_deferred(float*, size_t, int from, int) {
  fail("internal: message from rank ", from, " in a single process");
}

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

}  // namespace tt
