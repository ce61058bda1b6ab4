// A wire with latency for cluster/edge.sh, whose kernel has no netem: it carries Ethernet
// frames between a device's veth end (an AF_PACKET socket) and a tap port of the switch's
// bridge, holding each frame for a one-way delay (half the link's round trip) plus jitter.
//
//   edge_delay_line --wire IFACE --tap TAP --delay-us D [--jitter-us J] [--seed S]
//
// Runs inside the switch namespace, where IFACE is the device's veth end (not in the bridge)
// and TAP a persistent tap device (vnet_hdr) that is. Frames travel with their virtio-net
// headers on both sides, so large TCP segments (GSO) and unfinished checksums cross as they
// are: one read and one write per 64 KB segment instead of per 1.5 KB frame. The link's rate
// limits stay with tc tbf on the veths. Jitter is drawn uniformly from [-J, J] per frame, but
// a frame never leaves before the one ahead of it in its direction (TCP reorders badly; real
// links keep order). A frame that finds 64 MB queued in its direction is dropped, as a router
// drops; so is one the veth's queue refuses (ENOBUFS) or that meets a link that is down.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;  // SIGTERM/SIGINT: say what was dropped, then exit

struct Options {
  std::string wire, tap;
  int64_t delay_ns = -1, jitter_ns = 0;
  uint64_t seed = 1;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "edge_delay_line: %s\nusage: edge_delay_line --wire IFACE --tap TAP --delay-us D [--jitter-us J] "
               "[--seed S]\n",
               why);
  std::exit(2);
}

int64_t microseconds(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= 0) || v > 10e6)
    usage((std::string(flag) + " takes microseconds, 0 to 10000000 (got '" + text + "')").c_str());
  return int64_t(v * 1e3);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("no value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--wire")
      o.wire = v;
    else if (a == "--tap")
      o.tap = v;
    else if (a == "--delay-us")
      o.delay_ns = microseconds("--delay-us", v);
    else if (a == "--jitter-us")
      o.jitter_ns = microseconds("--jitter-us", v);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 10);
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.wire.empty() || o.tap.empty() || o.delay_ns < 0) usage("--wire, --tap and --delay-us are required");
  if (o.wire.size() >= IFNAMSIZ || o.tap.size() >= IFNAMSIZ) usage("interface names are at most 15 characters");
  return o;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

int open_wire(const std::string& name) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) fail("socket(AF_PACKET)");
  const int on = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &on, sizeof on)) fail("PACKET_VNET_HDR on " + name);
  // Frames this socket sends out of the veth would otherwise come back to it.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &on, sizeof on)) fail("PACKET_IGNORE_OUTGOING");
  const int buf = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf)) fail("SO_RCVBUFFORCE");
  // The kernel's arrival time of each frame: a frame's delay counts from there, not from
  // when this process got round to reading it (on an idle VM, 0.1-0.2 ms later).
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on)) fail("SO_TIMESTAMPNS");
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(ETH_P_ALL);
  at.sll_ifindex = int(if_nametoindex(name.c_str()));
  if (at.sll_ifindex == 0) fail("no interface " + name);
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at)) fail("bind to " + name);
  return fd;
}

int open_tap(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail("/dev/net/tun");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl(fd, TUNSETIFF, &ifr)) fail("TUNSETIFF " + name);
  // Let the bridge hand over large segments with their checksums unfinished, as it does to a veth.
  if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)) fail("TUNSETOFFLOAD " + name);
  return fd;
}

// Room for a GSO segment (64 KB on a veth, more with BIG TCP), its headers and the vnet
// header; a longer frame is dropped whole rather than passed on cut.
constexpr size_t kMaxFrame = size_t(256) << 10;
constexpr size_t kMaxQueued = size_t(64) << 20;

struct Frame {
  int64_t due_ns;
  size_t at, len;  // its bytes in the line's ring: virtio-net header + Ethernet frame
};

// One direction of the wire. Its frames leave in the order they came (due times never
// decrease), so they wait in a ring of bytes and queueing one allocates nothing.
struct Line {
  Line(int from_fd, int to_fd)
      : from(from_fd), to(to_fd), ring(new unsigned char[kMaxQueued]) {}  // pages touched as used
  int from, to;
  std::deque<Frame> queue;
  std::unique_ptr<unsigned char[]> ring;
  size_t head = 0, tail = 0;  // the oldest queued frame's start; the end of the newest
  int64_t last_due_ns = 0;
  uint64_t dropped = 0;
  bool blocked = false;  // `to` said EAGAIN: wait until it takes more

  static constexpr size_t kFull = SIZE_MAX;
  // Where n more bytes go: after the newest frame, or at the start when the end is too
  // short; the tail never reaches the head from behind (full and empty would look alike).
  size_t place(size_t n) {
    if (queue.empty()) head = tail = 0;
    if (tail >= head) return kMaxQueued - tail >= n ? tail : head > n ? 0 : kFull;
    return head - tail > n ? tail : kFull;
  }
  void pop() {
    queue.pop_front();
    if (queue.empty())
      head = tail = 0;
    else
      head = queue.front().at;
  }
};

class Wire {
 public:
  explicit Wire(const Options& o) : o_(o), rng_(o.seed) {}

  // Reads the frames waiting on `l.from` (at most 256, so that a busy direction cannot keep
  // the other's due frames waiting) and queues them with their departure times.
  void take(Line& l) {
    for (int frames = 0; frames < 256; ++frames) {
      int64_t arrived = -1;
      const ssize_t n = l.from == wire_ ? receive(arrived) : read(l.from, buf_.data(), buf_.size());
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        if (errno == ENETDOWN) continue;  // the link went down: the socket says so once
        fail("read");
      }
      if (n == 0) return;
      const size_t at = size_t(n) > buf_.size() ? Line::kFull : l.place(size_t(n));
      if (at == Line::kFull) {
        ++l.dropped;
        continue;
      }
      // A tap gives no arrival time: its frames count from now (never earlier, so that no
      // frame leaves before its round trip). A stepped wall clock cannot move an arrival by
      // more than 2 ms.
      const int64_t t = now_ns();
      int64_t due = (arrived >= 0 ? std::clamp<int64_t>(arrived, t - 2000000, t) : t) + o_.delay_ns;
      if (o_.jitter_ns > 0) due += std::uniform_int_distribution<int64_t>(-o_.jitter_ns, o_.jitter_ns)(rng_);
      due = std::max(due, l.last_due_ns);
      l.last_due_ns = due;
      std::memcpy(l.ring.get() + at, buf_.data(), size_t(n));
      l.tail = at + size_t(n);
      l.queue.push_back({due, at, size_t(n)});
    }
  }

  // One frame from the wire into buf_, and its arrival time on CLOCK_MONOTONIC (-1 if none).
  // MSG_TRUNC: the frame's full length even when it did not fit.
  ssize_t receive(int64_t& arrived) {
    iovec io{buf_.data(), buf_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(wire_, &m, MSG_TRUNC);
    arrived = -1;
    if (n < 0) return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec at{}, real{};
        std::memcpy(&at, CMSG_DATA(c), sizeof at);
        clock_gettime(CLOCK_REALTIME, &real);
        const int64_t real_ns = int64_t(real.tv_sec) * 1000000000 + real.tv_nsec;
        arrived = now_ns() - (real_ns - (int64_t(at.tv_sec) * 1000000000 + at.tv_nsec));
      }
    return n;
  }

  // Sends every frame whose time has come.
  void give(Line& l) {
    l.blocked = false;
    const int64_t t = now_ns();
    while (!l.queue.empty() && l.queue.front().due_ns <= t) {
      const Frame& f = l.queue.front();
      if (write(l.to, l.ring.get() + f.at, f.len) < 0) {
        if (errno == EAGAIN) l.blocked = true;
        if (errno == EAGAIN || errno == EINTR) return;  // the frame stays first in line
        ++l.dropped;  // ENOBUFS (tbf's queue is full), ENETDOWN (link down): lost, as on a wire
      }
      l.pop();
    }
  }

  void run() {
    wire_ = open_wire(o_.wire);
    Line up(wire_, open_tap(o_.tap));
    Line down(up.to, up.from);
    // This host's timers fire late (tens of microseconds in a VM, more under load): wake that
    // much before a frame is due, as learned from the last wake-ups, and spin the rest.
    int64_t early_ns = 50000;
    while (!g_stop) {
      int64_t next = -1;
      for (const Line* l : {&up, &down})
        if (!l->blocked && !l->queue.empty() && (next < 0 || l->queue.front().due_ns < next))
          next = l->queue.front().due_ns;
      const int64_t t = now_ns();
      const int64_t wait_ns = next < 0 ? -1 : std::max<int64_t>(next - t - early_ns, 0);
      pollfd fds[2] = {{up.from, short(POLLIN | (down.blocked ? POLLOUT : 0)), 0},
                       {down.from, short(POLLIN | (up.blocked ? POLLOUT : 0)), 0}};
      const timespec wait{time_t(wait_ns / 1000000000), long(wait_ns % 1000000000)};
      const int ready = ppoll(fds, 2, wait_ns < 0 ? nullptr : &wait, nullptr);
      if (ready < 0 && errno != EINTR) fail("ppoll");
      if (ready == 0 && wait_ns > 0) {
        const int64_t late = now_ns() - (t + wait_ns);
        early_ns = std::clamp<int64_t>(early_ns + (late - early_ns) / 8, 0, 1000000);
      }
      if (ready > 0) {
        if (fds[0].revents & POLLIN) take(up);
        if (fds[1].revents & POLLIN) take(down);
      }
      give(up);
      give(down);
    }
    std::fprintf(stderr,
                 "edge_delay_line (%s <-> %s): stopped; frames dropped: %llu towards the switch, %llu towards "
                 "the device\n",
                 o_.wire.c_str(), o_.tap.c_str(), (unsigned long long)up.dropped, (unsigned long long)down.dropped);
  }

 private:
  Options o_;
  std::mt19937_64 rng_;
  int wire_ = -1;
  std::vector<unsigned char> buf_ = std::vector<unsigned char>(kMaxFrame);
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Wake-ups within a microsecond, and ahead of the emulated devices' busy processes: the
  // delay is what the frames must see, not the delay plus this host's scheduling.
  prctl(PR_SET_TIMERSLACK, 1000UL);
  struct sigaction stop {};
  stop.sa_handler = [](int) { g_stop = 1; };  // no SA_RESTART: ppoll returns EINTR
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
  sched_param p{};
  p.sched_priority = 10;
  if (sched_setscheduler(0, SCHED_FIFO, &p))
    std::fprintf(stderr, "edge_delay_line: no real-time priority (%s)\n", std::strerror(errno));
  try {
    Wire(o).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edge_delay_line (%s <-> %s): %s\n", o.wire.c_str(), o.tap.c_str(), e.what());
    return 1;
  }
}
