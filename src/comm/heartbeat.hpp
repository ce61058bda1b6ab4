// A failure detector beside MPI: every process sends a small UDP datagram to every other
// process twice a second from a thread of its own, and remembers when it last heard from
// each. A process that computes slowly (a throttled device) still beats; one whose device,
// link or process is gone falls silent. MPI alone cannot tell the two apart: Open MPI's
// TCP transport waits minutes for a peer behind a dead link.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tt {

// Where a process listens for beats: its UDP port and its IPv4 addresses.
struct BeatAddress {
  static constexpr int kMaxAddrs = 8;
  uint16_t port = 0;
  int32_t n = 0;
  uint32_t addrs[kMaxAddrs] = {};  // network byte order, non-loopback first
  char host[64] = {};
};

class Heartbeat {
 public:
  // Opens the socket; `local()` is what the other processes need to know.
  Heartbeat(int rank, int size, uint64_t job);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  const BeatAddress& local() const { return local_; }
  // Starts beating to every peer (after the addresses were exchanged).
  void start(const std::vector<BeatAddress>& all);
  // Seconds since the last beat from `peer`; -1 if none ever came (UDP blocked between
  // the two: then silence says nothing).
  double silent_for(int peer) const;
  // The caller's thread says it has been waiting on communication with no data arriving
  // since `since_ns` (clock_ns()), or 0: not waiting, or data came. Beats carry it, so
  // that every process can tell when all of them wait at once with nothing arriving: a
  // stuck transport, not a slow peer.
  void set_stalled_since(int64_t since_ns) { stalled_since_ns_ = since_ns; }
  // Seconds `peer` has waited with no data arriving, as its last beat said; -1 if it was
  // not waiting (or never beat).
  double stalled_for(int peer) const;
  static int64_t clock_ns();

 private:
  void run();
  int rank_, size_;
  uint64_t job_;
  int fd_ = -1;
  BeatAddress local_;
  std::vector<BeatAddress> peers_;
  std::unique_ptr<std::atomic<int64_t>[]> last_ns_;
  std::unique_ptr<std::atomic<int64_t>[]> peer_stalled_since_ns_;  // on this clock; 0: not stalled
  std::atomic<int64_t> stalled_since_ns_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tt
