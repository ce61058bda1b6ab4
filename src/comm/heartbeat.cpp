#include "comm/heartbeat.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/error.hpp"

namespace tt {

namespace {
constexpr auto kPeriod = std::chrono::milliseconds(500);

struct Beat {
  uint64_t job;
  int32_t from, to;
  int64_t stalled_ms;  // how long the sender has waited with no data arriving; -1: it has not
};
}  // namespace

int64_t Heartbeat::clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Heartbeat::Heartbeat(int rank, int size, uint64_t job)
    : rank_(rank),
      size_(size),
      job_(job),
      last_ns_(new std::atomic<int64_t>[size_t(size)]),
      peer_stalled_since_ns_(new std::atomic<int64_t>[size_t(size)]) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("rank ", rank, ": heartbeat socket: ", std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail("rank ", rank, ": heartbeat socket: ", std::string(std::strerror(errno)));
  local_.port = ntohs(a.sin_port);
  gethostname(local_.host, sizeof local_.host - 1);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i && local_.n < BeatAddress::kMaxAddrs; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      const uint32_t ip = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      if (ntohl(ip) >> 24 != 127) local_.addrs[local_.n++] = ip;
    }
    freeifaddrs(list);
  }
}

Heartbeat::~Heartbeat() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::start(const std::vector<BeatAddress>& all) {
  peers_ = all;
  for (int p = 0; p < size_; ++p) last_ns_[size_t(p)] = peer_stalled_since_ns_[size_t(p)] = 0;  // never heard
  thread_ = std::thread([this] { run(); });
}

double Heartbeat::silent_for(int peer) const {
  const int64_t last = last_ns_[size_t(peer)];
  return last == 0 ? -1 : double(clock_ns() - last) * 1e-9;
}

double Heartbeat::stalled_for(int peer) const {
  const int64_t since = peer_stalled_since_ns_[size_t(peer)];
  return since == 0 ? -1 : double(clock_ns() - since) * 1e-9;
}

// Beats to every address of every peer (loopback too when the peer shares this host
// name: same machine), then listens until the next period.
void Heartbeat::run() {
  while (!stop_) {
    const auto next = std::chrono::steady_clock::now() + kPeriod;
    const int64_t since = stalled_since_ns_;
    const int64_t stalled_ms = since == 0 ? -1 : (clock_ns() - since) / 1000000;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const BeatAddress& b = peers_[size_t(p)];
      const Beat beat{job_, rank_, p, stalled_ms};
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(b.port);
      for (int k = 0; k <= b.n; ++k) {
        if (k == b.n && std::strncmp(b.host, local_.host, sizeof b.host) != 0) break;
        to.sin_addr.s_addr = k < b.n ? b.addrs[k] : htonl(INADDR_LOOPBACK);
        ::sendto(fd_, &beat, sizeof beat, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
      }
    }
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
      if (left.count() <= 0 || stop_) break;
      pollfd pf{fd_, POLLIN, 0};
      if (::poll(&pf, 1, int(left.count())) <= 0) continue;
      Beat in{};
      while (::recv(fd_, &in, sizeof in, MSG_DONTWAIT) == ssize_t(sizeof in))
        if (in.job == job_ && in.to == rank_ && in.from >= 0 && in.from < size_) {
          const int64_t now = clock_ns();
          last_ns_[size_t(in.from)] = now;
          peer_stalled_since_ns_[size_t(in.from)] = in.stalled_ms < 0 ? 0 : std::max<int64_t>(1, now - in.stalled_ms * 1000000);
        }
    }
  }
}

}  // namespace tt
