// tiletrain launch: runs a tiletrain command on several processes, on this machine or on the
// hosts of a hosts file, in the spirit of torchrun. It works out what mpirun needs (the
// process count, the hosts and their slots, root permission, no core binding, which
// transports) and how many tiles each process runs, prints it, and replaces itself with
// mpirun. Each process picks its threads itself (the host's cores shared among its ranks).
#pragma once
#include <string>
#include <vector>

namespace tt {

struct LaunchOptions {
  std::string hosts;        // a hosts file, or host names separated by commas; empty: --local
  int local = 0;            // processes on this machine
  int ranks_per_host = 0;   // 0: the hosts file's slots= (default 1)
  std::string iface;        // network interface for traffic between hosts (e.g. eth0)
  std::string binary;       // tiletrain's path on every host; empty: this one's
  bool dry_run = false;     // print the mpirun command, do not run it
  std::vector<std::string> command;  // the tiletrain command and its options
};

struct Host {
  std::string name;
  int slots = 1;  // processes on it
};

// A hosts file: one host per line, `name [slots=N]` (Open MPI's hostfile form), `#` comments.
// Throws naming the file and line.
std::vector<Host> read_hosts_file(const std::string& path);

struct LaunchPlan {
  std::vector<std::string> argv;  // mpirun and its arguments, ending with the command
  std::string summary;            // what runs where, for the user
};

// What `launch` runs, for the user `uid` on a machine of `cores` cores; `self` is this
// binary's path. Throws with the reason for what cannot run (a grid whose tiles do not split
// over the processes, a command launch does not run, a bad hosts file).
LaunchPlan plan_launch(const LaunchOptions& o, const std::string& self, unsigned uid, int cores);

// Prints the plan (to stderr) and runs it: exec of mpirun, or the command line with --dry-run.
int cmd_launch(const LaunchOptions& o);

}  // namespace tt
