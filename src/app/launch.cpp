#include "app/launch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/commands.hpp"
#include "comm/mpi_comm.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

// What Open MPI's --host list can carry: no commas, colons or spaces.
bool valid_host_name(const std::string& s) {
  return !s.empty() && s.size() <= 253 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
         });
}

int parse_slots(const std::string& s, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != 0 || errno != 0 || v < 1 || v > 1024)
    fail(where, ": slots='", s, "' is not a process count from 1 to 1024");
  return static_cast<int>(v);
}

// The value of `--name V` or `--name=V` in a command, or "" when it is not given.
std::string option_value(const std::vector<std::string>& cmd, const std::string& name) {
  std::string value;
  for (size_t i = 1; i < cmd.size(); ++i) {
    if (cmd[i] == name && i + 1 < cmd.size())
      value = cmd[i + 1];
    else if (cmd[i].rfind(name + "=", 0) == 0)
      value = cmd[i].substr(name.size() + 1);
  }
  return value;
}

// "tiles 0-3", "tile 2"
std::string tile_range(int first, int count) {
  return count == 1 ? "tile " + std::to_string(first)
                    : "tiles " + std::to_string(first) + "-" + std::to_string(first + count - 1);
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

std::vector<Host> read_hosts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read hosts file '", path, "': ", std::strerror(errno));
  std::vector<Host> hosts;
  std::map<std::string, int> line_of;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name, word;
    if (!(words >> name)) continue;
    const std::string where = path + ":" + std::to_string(n);
    if (!valid_host_name(name)) fail(where, ": '", name, "' is not a host name (letters, digits, '.', '-', '_')");
    Host h{name, 1};
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0) fail(where, ": '", word, "' is not understood (a line is: NAME [slots=N])");
      h.slots = parse_slots(word.substr(6), where);
    }
    if (auto [it, fresh] = line_of.emplace(name, n); !fresh)
      fail(where, ": host '", name, "' is listed again (first on line ", it->second, "); give it slots=N once");
    hosts.push_back(h);
  }
  if (hosts.empty()) fail("hosts file '", path, "' lists no host");
  return hosts;
}

LaunchPlan plan_launch(const LaunchOptions& o, const std::string& self, unsigned uid, int cores) {
  const std::vector<std::string>& cmd = o.command;
  if (cmd.empty()) fail("launch: no command: e.g. tiletrain launch --local 4 -- train --cfg F --grid 2x2 ...");
  static const std::vector<std::string> kRunnable = {"train", "bench", "verify", "calibrate", "detect", "map"};
  if (std::find(kRunnable.begin(), kRunnable.end(), cmd[0]) == kRunnable.end())
    fail("launch runs train, bench, verify, calibrate, detect or map under mpirun, not '", cmd[0], "'",
         cmd[0] == "plan" || cmd[0] == "info" ? ": it needs one process; run tiletrain " + cmd[0] + " directly" : "");
  if (o.local > 0 && !o.hosts.empty()) fail("launch: give --local N or --hosts, not both");

  std::vector<Host> hosts;
  if (o.local > 0) {
    hosts = {{"localhost", o.local}};
  } else if (!o.hosts.empty()) {
    hosts = read_hosts_file(o.hosts);
  } else {
    fail("launch: say where to run: --local N (N processes here) or --hosts FILE (a host per line, NAME [slots=N])");
  }
  if (o.ranks_per_host > 0)
    for (Host& h : hosts) h.slots = o.ranks_per_host;
  int processes = 0;
  for (const Host& h : hosts) processes += h.slots;

  std::vector<std::string> command = cmd;
  int per_rank = 0;  // tiles per process; 0: the command has no tiles to place (calibrate, data parallel)
  const std::string replicas = option_value(cmd, "--replicas");
  if (!replicas.empty()) {  // data parallel: one copy per process, its tiles (if any) inside it
    if (std::atoi(replicas.c_str()) != processes)
      fail("launch: --replicas ", replicas, " runs one whole copy of the net per process, but ", processes,
           " process(es) are asked for: give as many as copies");
  } else if (cmd[0] != "calibrate") {
    const std::string grid_text = option_value(cmd, "--grid");
    const auto [rows, cols] = parse_pair(grid_text.empty() ? "1x1" : grid_text, "--grid");
    const int64_t tiles = int64_t(rows) * cols;
    const std::string grid = std::to_string(rows) + "x" + std::to_string(cols);
    if (const std::string given = option_value(cmd, "--tiles-per-rank"); !given.empty()) {
      per_rank = std::atoi(given.c_str());
      if (per_rank < 1 || int64_t(per_rank) * processes != tiles)
        fail("launch: grid ", grid, " has ", tiles, " tile(s); with --tiles-per-rank ", given, " that needs ",
             per_rank > 0 && tiles % per_rank == 0 ? std::to_string(tiles / per_rank) : "a whole number of",
             " processes, but ", processes, " are asked for");
    } else {
      if (tiles < processes || tiles % processes != 0)
        fail("launch: grid ", grid, " has ", tiles, " tile(s), which do not split evenly over ", processes,
             " processes: give a grid whose tile count is a multiple of ", processes,
             grid_text.empty() ? " (--grid RxC)" : "", ", or hosts whose slots add up to a divisor of ", tiles);
      per_rank = static_cast<int>(tiles / processes);
      if (per_rank > 1) command.insert(command.end(), {"--tiles-per-rank", std::to_string(per_rank)});
    }
  }

  LaunchPlan p;
  p.argv = {"mpirun"};
  if (uid == 0) p.argv.push_back("--allow-run-as-root");
  p.argv.insert(p.argv.end(), {"-np", std::to_string(processes)});
  if (o.local > 0) {
    // one machine: shared memory between the processes, Open MPI's own traffic on loopback
    if (processes > cores) p.argv.push_back("--oversubscribe");
    p.argv.insert(p.argv.end(), {"--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"});
  } else {
    std::string list;
    for (const Host& h : hosts) list += (list.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
    // ranks fill each host's slots in order (tile t on rank t/K); TCP between hosts
    p.argv.insert(p.argv.end(), {"--host", list, "--map-by", "slot", "--mca", "btl", "self,vader,tcp"});
    // keepalives on mpirun's own connections: a host whose link goes down is noticed in
    // about 15 s instead of Open MPI's minutes (cluster/edge.sh measured it)
    p.argv.insert(p.argv.end(), {"--mca", "oob_tcp_keepalive_time", "5", "--mca", "oob_tcp_keepalive_intvl", "2",
                                 "--mca", "oob_tcp_keepalive_probes", "5"});
    if (!o.iface.empty())
      p.argv.insert(p.argv.end(), {"--mca", "btl_tcp_if_include", o.iface, "--mca", "oob_tcp_if_include", o.iface});
    for (const char* var : {"ONEDNN_MAX_CPU_ISA", "ONEDNN_VERBOSE", "OPENBLAS_CORETYPE"})
      if (std::getenv(var)) p.argv.insert(p.argv.end(), {"-x", var});
  }
  // Each process runs threads of its own over its host's cores: binding it to one core
  // (Open MPI's default for small jobs) would put all of them on that core.
  p.argv.insert(p.argv.end(), {"--bind-to", "none"});
  const std::string binary = o.binary.empty() ? self : o.binary;
  p.argv.push_back(binary);
  p.argv.insert(p.argv.end(), command.begin(), command.end());

  std::ostringstream s;
  s << "launch: " << processes << " process(es)";
  if (o.local > 0)
    s << " on this machine (" << cores << " core(s))";
  else
    s << " on " << hosts.size() << " host(s)";
  if (per_rank > 0) s << ", " << per_rank << " tile(s) each";
  if (!replicas.empty()) s << ", a whole copy of the net each (data parallel)";
  s << "\n";
  if (o.local == 0) {
    int rank = 0;
    for (const Host& h : hosts) {
      s << "  " << h.name << ": " << h.slots << " process(es)";
      if (per_rank > 0) s << ", " << tile_range(rank * per_rank, h.slots * per_rank);
      s << "\n";
      rank += h.slots;
    }
    s << "  every host runs " << binary << " (--binary to change); mpirun reaches the hosts by ssh\n";
  }
  s << "  each process uses its host's cores shared among the processes on it (--threads N to change)\n";
  p.summary = s.str();
  return p;
}

int cmd_launch(const LaunchOptions& o) {
  if (launched_by_mpirun()) fail("launch starts mpirun itself: run tiletrain launch without mpirun");
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) fail("launch: cannot find this program's path (/proc/self/exe): ", ec.message());
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  const LaunchPlan p = plan_launch(o, self, ::getuid(), static_cast<int>(std::max(1L, cores)));
  std::fputs(p.summary.c_str(), stderr);
  std::string line;
  for (const std::string& a : p.argv) {
    if (!line.empty()) line += ' ';
    line += shell_quote(a);
  }
  if (o.dry_run) {
    std::printf("%s\n", line.c_str());
    return 0;
  }
  if (!on_path("mpirun")) fail("launch: mpirun is not on PATH: install Debian's openmpi-bin (scripts/setup.sh does)");
  std::fprintf(stderr, "  %s\n", line.c_str());
  std::fflush(stderr);
  std::vector<char*> argv;
  for (const std::string& a : p.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp("mpirun", argv.data());
  fail("launch: cannot run mpirun: ", std::strerror(errno));
}

}  // namespace tt
