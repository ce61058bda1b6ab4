// The cluster file (JSON) the planner reads: the devices, their speed (a profile from
// cluster/profiles.conf or the file, a calibrated model from `tiletrain calibrate`) and
// the links between them. Every error is a tt::Error that starts with the file and names
// the field at fault as a JSON path ("c.json: devices[2].memory_mb: missing ...").
//
//   {"devices": [{"name": "dev0", "host": "dev0", "cores": 4, "memory_mb": 1024,
//                 "profile": "pi3", "speed": 1.0, "model": "dev0.model.json"}],
//    "links": {"topology": "switch", "bandwidth_mbit": 100, "latency_us": 200,
//              "pairs": [{"a": "dev0", "b": "dev1", "bandwidth_mbit": 94.1, "latency_us": 310}],
//              "shared_memory": {"bandwidth_mbit": 40000, "latency_us": 1}},
//    "profiles": {"my-board": {"cores": 2, "memory_mb": 512, "link_mbit": 100, "gflops": 3}}}
//
// Keys starting with '_' are comments at any level; unknown keys are errors (typos).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tt {

// A row of cluster/profiles.conf (or of a cluster file's "profiles"): the real device an
// emulated or planned device stands for.
struct Profile {
  std::string name;
  int cores = 0;                 // cores of the real device
  double memory_mb = 0;          // its memory
  double link_mbit = 0;          // its link rate, Mbit/s (10^6 bit/s)
  double gflops = 0;             // sustained sgemm of ONE core, GFLOP/s
  std::optional<double> rtt_ms;  // round trip from the device to its switch or access point
  double jitter_ms = 0;          // +- on that round trip (edge.sh emulates it; the planner uses rtt_ms)
  bool operator==(const Profile&) const = default;
};

// Parses a profiles file: a whitespace table "name cores mem_mb link gflops [rtt_ms jitter_ms]",
// '#' starts a comment, link in tc syntax (100mbit; units bit, kbit, mbit, gbit, powers of 1000).
// Throws naming path:line on a bad row, a duplicate name, or an unreadable file.
std::map<std::string, Profile> load_profiles(const std::string& path);

// The source tree's cluster/profiles.conf (compile definition TILETRAIN_PROFILES).
std::string default_profiles_path();

// "100mbit" -> 100, "1gbit" -> 1000, "500kbit" -> 0.5 (Mbit/s). Throws on anything else.
double parse_rate_mbit(const std::string& rate);

// A link between two devices, or between two ranks of one device.
struct LinkSpec {
  double bandwidth_mbit = 0;  // Mbit/s (10^6 bit/s)
  double latency_us = 0;      // one way, microseconds
  double bytes_per_s() const { return bandwidth_mbit * 1e6 / 8; }
  double latency_s() const { return latency_us * 1e-6; }
  bool operator==(const LinkSpec&) const = default;
};

// links.pairs[i]: a measured or declared link between devices a != b (indices into
// ClusterSpec::devices). A field left out takes the default link's value.
struct PairLinkSpec {
  int a = 0, b = 0;
  std::optional<double> bandwidth_mbit, latency_us;
};

struct DeviceSpec {
  std::string name;          // unique in the file
  std::string host;          // the host name its MPI ranks report (default: name)
  int cores = 1;             // given, or the profile's
  double memory_mb = 0;      // given, or the profile's
  std::string profile;       // empty: none (then model is set)
  double speed = 1;          // against the profile: 0.5 = half as fast
  nlohmann::json model;      // calibrated device model (a JSON object), null: none
  std::string model_source;  // the model file it was read from, "(inline)", or empty: none
};

struct ClusterSpec {
  std::string path;                         // where it was read from (messages, model paths)
  std::string name, comment;                // the file's optional top-level strings
  std::vector<DeviceSpec> devices;          // at least one
  std::string topology = "switch";          // "switch" | "point-to-point"
  std::map<std::string, Profile> profiles;  // profiles.conf merged with the file's (file wins)
  LinkSpec shared_memory{40000, 1};         // between two ranks on one device
  // links.efficiency: the fraction of the links' rates that collective traffic gets, as
  // calibrate measured it: a ring (one flow each way per device: the gradient
  // reduce-scatter) and many flows at once (the weights' all-gather, halos); 1 when not
  // measured. (The scatter and gather at the cut, one way through rank 0's link, run at
  // the pair rate.) And the fixed cost of one such collective call (seconds).
  double ring_efficiency = 1, many_flows_efficiency = 1;
  double ring_overhead_s = 0, many_flows_overhead_s = 0;
  // The same for --low-memory's weight chunks, which mostly have one owner: its all-gather
  // (the owner sends the chunk to every other rank) and its ring reduce-scatter (the chunk
  // passes from rank to rank). When the file does not give them: the pair rate with the
  // many-flows call cost, and the ring's values.
  double chunk_gather_efficiency = 1, chunk_reduce_scatter_efficiency = 1;
  double chunk_gather_overhead_s = 0, chunk_reduce_scatter_overhead_s = 0;
  // links.burst_kb: what a device's link passes at once after a pause, in bytes (a token
  // bucket's depth, as `tc tbf` shapes cluster/edge.sh's links; its level refills at the
  // link's rate), calibrate's estimate from the ping-pong; 0: none (a real Ethernet link).
  double burst_bytes = 0;
  // The links as the file gives them; link() resolves them.
  std::optional<double> bandwidth_mbit;  // links.bandwidth_mbit: default for every pair
  std::optional<double> latency_us;      // links.latency_us: default for every pair
  std::vector<PairLinkSpec> pairs;       // links.pairs: overrides, at most one per pair

  // Index of the device named `name`; throws naming it (and the file) if there is none.
  int device_index(const std::string& name) const;
  // Index of the device whose host is `host`, -1 if none.
  int device_of_host(const std::string& host) const;
  // The link between devices a and b (symmetric; a == b: shared_memory). Per field: the
  // pair's override, else the default, else (bandwidth only) the smaller of the two
  // devices' profile link rates. Throws if none applies (parse_cluster checks they do).
  LinkSpec link(int a, int b) const;
  // The device's profile, null if it has none; throws if its name is not in `profiles`.
  const Profile* profile_of(int device) const;
};

// Reads and checks the cluster file at `path`, with the profiles of `profiles_path`
// (empty: none) under the file's own.
ClusterSpec load_cluster(const std::string& path, const std::string& profiles_path = default_profiles_path());

// Checks and converts a parsed cluster file. `path` starts every message and its folder
// resolves relative model paths; the file's "profiles" add to / override `base_profiles`.
ClusterSpec parse_cluster(const nlohmann::json& j, const std::string& path,
                          const std::map<std::string, Profile>& base_profiles);

// Everything back out as a cluster file (models inline, all merged profiles, resolved
// cores and memory): parse_cluster of it gives the same cluster.
nlohmann::json cluster_to_json(const ClusterSpec& c);

// Writes cluster_to_json(c) to `path` atomically (write_file_atomically).
void save_cluster(const ClusterSpec& c, const std::string& path);

}  // namespace tt
