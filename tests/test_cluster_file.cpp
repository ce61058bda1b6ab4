// The planner's cluster file (src/planner/cluster.hpp): profiles.conf, valid files (values
// from profiles, explicit values, pair overrides, model files), the round trip through
// cluster_to_json, and bad input: every error names the file and the field's JSON path.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/cluster.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

using json = nlohmann::json;

// A fresh folder for this test's files, removed when the test program ends.
std::string temp_dir() {
  struct Folders {
    std::vector<std::string> made;
    ~Folders() {
      std::error_code ec;
      for (const auto& d : made) std::filesystem::remove_all(d, ec);
    }
  };
  static Folders folders;
  std::string tmpl = testing::TempDir() + "/cluster_file_XXXXXX";
  if (!mkdtemp(tmpl.data())) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
  folders.made.push_back(tmpl);
  return tmpl;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// The real cluster/profiles.conf.
const std::map<std::string, Profile>& conf() {
  static const auto p = load_profiles(std::string(TILETRAIN_SOURCE_DIR) + "/cluster/profiles.conf");
  return p;
}

// Three devices: two Pi 3s and one board of explicit cores/memory with a model.
json valid() {
  return json::parse(R"({
    "_note": "comments are keys starting with _",
    "name": "three",
    "devices": [
      {"name": "dev0", "profile": "pi3"},
      {"name": "dev1", "host": "pi-b", "profile": "pi3", "speed": 0.5, "cores": 2},
      {"name": "dev2", "cores": 8, "memory_mb": 2048, "model": {"sgemm_gflops": [1, 2]}}
    ],
    "links": {"bandwidth_mbit": 100, "latency_us": 200,
              "pairs": [{"a": "dev2", "b": "dev0", "bandwidth_mbit": 94.1, "latency_us": 310}]}
  })");
}

// Parses `j` as file "c.json" and returns the error; fails the test if nothing was thrown.
std::string error_of(const json& j, const std::map<std::string, Profile>& base = conf()) {
  try {
    parse_cluster(j, "c.json", base);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-tt::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error for:\n" << j.dump(2);
  return "";
}

// Expects the message to start with "c.json: FIELD:" and to mention every one of `words`.
void expect_error(const json& j, const std::string& field, std::initializer_list<std::string> words = {}) {
  const std::string msg = error_of(j);
  const std::string where = "c.json: " + field + ":";
  EXPECT_EQ(msg.rfind(where, 0), 0u) << "message does not start with '" << where << "': " << msg;
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "no '" << w << "' in: " << msg;
}

TEST(ClusterFile, RealProfilesConf) {
  const auto& p = conf();
  for (const char* name : {"pi3", "pi4", "pi5", "jetson-nano-cpu", "comm-bound", "wifi", "comm-bound-wifi"})
    EXPECT_TRUE(p.count(name)) << name;
  EXPECT_EQ(p.size(), 7u);
  const Profile& pi3 = p.at("pi3");
  EXPECT_EQ(pi3.name, "pi3");
  EXPECT_EQ(pi3.cores, 4);
  EXPECT_DOUBLE_EQ(pi3.memory_mb, 1024);
  EXPECT_DOUBLE_EQ(pi3.link_mbit, 100);
  EXPECT_DOUBLE_EQ(pi3.gflops, 5.5);
  EXPECT_DOUBLE_EQ(p.at("pi4").link_mbit, 1000);
  EXPECT_EQ(p.at("comm-bound").cores, 1);
  EXPECT_FALSE(pi3.rtt_ms.has_value());  // Ethernet: no round trip given
  EXPECT_EQ(p.at("wifi").rtt_ms, 2.0);
  EXPECT_DOUBLE_EQ(p.at("wifi").jitter_ms, 1);
  EXPECT_DOUBLE_EQ(p.at("wifi").link_mbit, 30);
  EXPECT_EQ(default_profiles_path(), std::string(TILETRAIN_SOURCE_DIR) + "/cluster/profiles.conf");
}

TEST(ClusterFile, RateUnits) {
  EXPECT_DOUBLE_EQ(parse_rate_mbit("100mbit"), 100);
  EXPECT_DOUBLE_EQ(parse_rate_mbit("1gbit"), 1000);
  EXPECT_DOUBLE_EQ(parse_rate_mbit("500kbit"), 0.5);
  EXPECT_DOUBLE_EQ(parse_rate_mbit("2000000bit"), 2);
  EXPECT_DOUBLE_EQ(parse_rate_mbit("2.5Mbit"), 2.5);
  for (const char* bad : {"100", "100mbps", "mbit", "0mbit", "1.2.3mbit", "-5mbit", ""})
    EXPECT_THROW(parse_rate_mbit(bad), Error) << bad;
}

TEST(ClusterFile, ProfilesFileCommentsAndBlankLines) {
  const std::string dir = temp_dir();
  write(dir + "/p.conf", "# name cores mem link gflops\n\nboard  2  512  10mbit  1.5  # trailing comment\n");
  const auto p = load_profiles(dir + "/p.conf");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p.at("board"), (Profile{"board", 2, 512, 10, 1.5}));
}

TEST(ClusterFile, ProfileRoundTripAndJitter) {
  const std::string dir = temp_dir();
  write(dir + "/p.conf", "air 1 256 20mbit 2 4.5 1\nwire 1 256 1gbit 2\n");
  const auto p = load_profiles(dir + "/p.conf");
  EXPECT_EQ(p.at("air").rtt_ms, 4.5);
  EXPECT_DOUBLE_EQ(p.at("air").jitter_ms, 1);
  EXPECT_FALSE(p.at("wire").rtt_ms.has_value());
}

// Without links.latency_us, two devices whose profiles give round trips are half of each
// apart (one way); a device whose profile gives none still needs the file's latency.
TEST(ClusterFile, LatencyFromProfilesRoundTrips) {
  json j = json::parse(R"({
    "devices": [{"name": "a", "profile": "wifi"}, {"name": "b", "profile": "air"}, {"name": "c", "profile": "pi3"}],
    "profiles": {"air": {"cores": 1, "memory_mb": 512, "link_mbit": 20, "gflops": 2, "rtt_ms": 6, "jitter_ms": 2}},
    "links": {"pairs": [{"a": "a", "b": "c", "latency_us": 100}, {"a": "b", "b": "c", "latency_us": 100}]}})");
  const ClusterSpec c = parse_cluster(j, "c.json", conf());
  EXPECT_DOUBLE_EQ(c.link(0, 1).latency_us, 500 * (2 + 6));
  EXPECT_DOUBLE_EQ(c.link(0, 2).latency_us, 100);  // the pair's, as given
  EXPECT_EQ(c.profiles.at("air").rtt_ms, 6.0);
  // saved and loaded again: the same
  EXPECT_EQ(parse_cluster(cluster_to_json(c), "c.json", conf()).profiles.at("air"), c.profiles.at("air"));
  j["links"]["pairs"].erase(1);  // b-c: pi3 gives no round trip
  expect_error(j, "links.latency_us", {"missing", "rtt_ms", "b-c"});
  j["profiles"]["air"]["rtt_ms"] = -1;
  expect_error(j, "profiles.air.rtt_ms", {"≥ 0"});
}

TEST(ClusterFile, BrokenProfilesFileNamesItsLine) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/p.conf";
  auto error = [&](const std::string& text) {
    write(path, text);
    try {
      load_profiles(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return std::string();
  };
  const std::string head = "# comment\nok 4 1024 100mbit 5.5\n";
  std::string msg = error(head + "bad 4 1024 100mbps 5.5\n");
  EXPECT_EQ(msg.rfind(path + ":3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("100mbps"), std::string::npos) << msg;
  msg = error(head + "\nshort 4 1024 100mbit\n");
  EXPECT_EQ(msg.rfind(path + ":4:", 0), 0u) << msg;
  msg = error(head + "bad four 1024 100mbit 5.5\n");
  EXPECT_EQ(msg.rfind(path + ":3: cores", 0), 0u) << msg;
  msg = error(head + "bad 4 1024 100mbit 0\n");
  EXPECT_EQ(msg.rfind(path + ":3: gflops", 0), 0u) << msg;
  msg = error(head + "bad 4 1024 100mbit 5 2\n");  // a round trip without its jitter
  EXPECT_EQ(msg.rfind(path + ":3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("rtt_ms jitter_ms"), std::string::npos) << msg;
  msg = error(head + "bad 4 1024 100mbit 5 -2 0\n");
  EXPECT_EQ(msg.rfind(path + ":3: rtt_ms", 0), 0u) << msg;
  msg = error(head + "bad 4 1024 100mbit 5 2 x\n");
  EXPECT_EQ(msg.rfind(path + ":3: jitter_ms", 0), 0u) << msg;
  msg = error(head + "ok 2 512 1gbit 3\n");
  EXPECT_EQ(msg.rfind(path + ":3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  // a missing file names it
  try {
    load_profiles(dir + "/nope.conf");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/nope.conf"), std::string::npos) << e.what();
  }
}

TEST(ClusterFile, ValidFileWithProfiles) {
  const ClusterSpec c = parse_cluster(valid(), "c.json", conf());
  EXPECT_EQ(c.path, "c.json");
  EXPECT_EQ(c.name, "three");
  EXPECT_EQ(c.topology, "switch");
  ASSERT_EQ(c.devices.size(), 3u);
  const DeviceSpec& d0 = c.devices[0];
  EXPECT_EQ(d0.name, "dev0");
  EXPECT_EQ(d0.host, "dev0");  // default: the name
  EXPECT_EQ(d0.profile, "pi3");
  EXPECT_EQ(d0.cores, 4);  // the profile's
  EXPECT_DOUBLE_EQ(d0.memory_mb, 1024);
  EXPECT_DOUBLE_EQ(d0.speed, 1);
  EXPECT_TRUE(d0.model.is_null());
  EXPECT_EQ(d0.model_source, "");
  ASSERT_NE(c.profile_of(0), nullptr);
  EXPECT_DOUBLE_EQ(c.profile_of(0)->gflops, 5.5);
  // explicit cores win over the profile's; memory still the profile's
  const DeviceSpec& d1 = c.devices[1];
  EXPECT_EQ(d1.host, "pi-b");
  EXPECT_EQ(d1.cores, 2);
  EXPECT_DOUBLE_EQ(d1.memory_mb, 1024);
  EXPECT_DOUBLE_EQ(d1.speed, 0.5);
  // no profile: explicit values and an inline model
  const DeviceSpec& d2 = c.devices[2];
  EXPECT_EQ(d2.cores, 8);
  EXPECT_DOUBLE_EQ(d2.memory_mb, 2048);
  EXPECT_EQ(d2.profile, "");
  EXPECT_EQ(c.profile_of(2), nullptr);
  EXPECT_EQ(d2.model, json::parse(R"({"sgemm_gflops": [1, 2]})"));
  EXPECT_EQ(d2.model_source, "(inline)");
  // the conf's profiles are all there
  EXPECT_EQ(c.profiles.size(), conf().size());
}

TEST(ClusterFile, DeviceLookup) {
  const ClusterSpec c = parse_cluster(valid(), "c.json", conf());
  EXPECT_EQ(c.device_index("dev2"), 2);
  EXPECT_EQ(c.device_of_host("pi-b"), 1);
  EXPECT_EQ(c.device_of_host("dev0"), 0);
  EXPECT_EQ(c.device_of_host("dev1"), -1);  // dev1's host is pi-b
  try {
    c.device_index("dev9");
    ADD_FAILURE() << "no error for an unknown device";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("c.json:", 0), 0u) << msg;
    EXPECT_NE(msg.find("'dev9'"), std::string::npos) << msg;
  }
}

TEST(ClusterFile, LinksDefaultPairsAndSharedMemory) {
  const ClusterSpec c = parse_cluster(valid(), "c.json", conf());
  // default link
  EXPECT_EQ(c.link(0, 1), (LinkSpec{100, 200}));
  EXPECT_EQ(c.link(1, 2), (LinkSpec{100, 200}));
  // the pair (given as dev2, dev0) overrides the default, in both directions
  EXPECT_EQ(c.link(0, 2), (LinkSpec{94.1, 310}));
  EXPECT_EQ(c.link(2, 0), (LinkSpec{94.1, 310}));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) EXPECT_EQ(c.link(a, b), c.link(b, a)) << a << "-" << b;
  // shared memory by default: 40000 Mbit/s, 1 µs
  EXPECT_EQ(c.link(1, 1), (LinkSpec{40000, 1}));
  EXPECT_EQ(c.shared_memory, (LinkSpec{40000, 1}));
  EXPECT_DOUBLE_EQ(c.link(0, 1).bytes_per_s(), 100e6 / 8);
  EXPECT_DOUBLE_EQ(c.link(0, 1).latency_s(), 200e-6);
  EXPECT_THROW(c.link(0, 3), Error);
  EXPECT_THROW(c.link(-1, 0), Error);
}

TEST(ClusterFile, ExplicitSharedMemoryAndTopology) {
  json j = valid();
  j["links"]["shared_memory"] = {{"bandwidth_mbit", 80000}, {"latency_us", 0.5}};
  j["links"]["topology"] = "point-to-point";
  const ClusterSpec c = parse_cluster(j, "c.json", conf());
  EXPECT_EQ(c.topology, "point-to-point");
  EXPECT_EQ(c.link(2, 2), (LinkSpec{80000, 0.5}));
}

TEST(ClusterFile, BandwidthFromProfiles) {
  // no links.bandwidth_mbit: every device has a profile, a pair's rate is the smaller one
  const json j = json::parse(R"({
    "devices": [{"name": "a", "profile": "pi3"}, {"name": "b", "profile": "pi4"},
                {"name": "c", "profile": "pi5"}],
    "links": {"latency_us": 50}})");
  const ClusterSpec c = parse_cluster(j, "c.json", conf());
  EXPECT_EQ(c.link(0, 1), (LinkSpec{100, 50}));
  EXPECT_EQ(c.link(1, 2), (LinkSpec{1000, 50}));
  EXPECT_FALSE(c.bandwidth_mbit.has_value());
}

TEST(ClusterFile, PairsCoverEveryPair) {
  // no defaults at all: the pairs give every link
  const json j = json::parse(R"({
    "devices": [{"name": "a", "cores": 1, "memory_mb": 100, "model": {}},
                {"name": "b", "cores": 1, "memory_mb": 100, "model": {}}],
    "links": {"pairs": [{"a": "b", "b": "a", "bandwidth_mbit": 10, "latency_us": 0}]}})");
  const ClusterSpec c = parse_cluster(j, "c.json", {});
  EXPECT_EQ(c.link(0, 1), (LinkSpec{10, 0}));
}

TEST(ClusterFile, FileProfilesAddToAndOverrideTheConf) {
  json j = json::parse(R"({
    "devices": [{"name": "a", "profile": "my-board"}, {"name": "b", "profile": "pi3"}],
    "links": {"latency_us": 10},
    "profiles": {"my-board": {"cores": 2, "memory_mb": 512, "link_mbit": 50, "gflops": 3.0},
                 "pi3": {"cores": 3, "memory_mb": 900, "link_mbit": 80, "gflops": 4}}})");
  const ClusterSpec c = parse_cluster(j, "c.json", conf());
  EXPECT_EQ(c.devices[0].cores, 2);
  EXPECT_DOUBLE_EQ(c.devices[0].memory_mb, 512);
  EXPECT_EQ(c.devices[1].cores, 3);  // the file's pi3
  EXPECT_DOUBLE_EQ(c.profile_of(1)->gflops, 4);
  EXPECT_EQ(c.link(0, 1), (LinkSpec{50, 10}));
  EXPECT_EQ(c.profiles.size(), conf().size() + 1);
  EXPECT_DOUBLE_EQ(c.profiles.at("pi5").gflops, 30);  // the rest of the conf stays
}

TEST(ClusterFile, ModelFileRelativeToTheClusterFile) {
  const std::string dir = temp_dir();
  std::filesystem::create_directories(dir + "/models");
  write(dir + "/models/dev0.model.json", R"({"kind": "calibrated", "gflops": 4.25})");
  write(dir + "/c.json", R"({"devices": [{"name": "dev0", "cores": 4, "memory_mb": 1024,
                                          "model": "models/dev0.model.json"}],
                             "links": {"bandwidth_mbit": 100, "latency_us": 0}})");
  const ClusterSpec c = load_cluster(dir + "/c.json");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].model["gflops"], 4.25);
  EXPECT_EQ(c.devices[0].model_source, dir + "/models/dev0.model.json");
  EXPECT_EQ(c.path, dir + "/c.json");
}

TEST(ClusterFile, RoundTrip) {
  json j = valid();
  j["comment"] = "a comment";
  j["profiles"] = {{"my-board", {{"cores", 2}, {"memory_mb", 512}, {"link_mbit", 100}, {"gflops", 3.0}}}};
  j["links"]["shared_memory"] = {{"bandwidth_mbit", 12345.5}};
  j["links"]["pairs"].push_back({{"a", "dev0"}, {"b", "dev1"}, {"latency_us", 7}});  // bandwidth: the default
  const ClusterSpec a = parse_cluster(j, "c.json", conf());
  const json out = cluster_to_json(a);
  // with the profiles written out, the conf is not needed any more
  const ClusterSpec b = parse_cluster(out, "c.json", {});
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.comment, "a comment");
  EXPECT_EQ(b.topology, a.topology);
  EXPECT_EQ(b.profiles, a.profiles);
  EXPECT_EQ(b.shared_memory, a.shared_memory);
  EXPECT_EQ(b.bandwidth_mbit, a.bandwidth_mbit);
  EXPECT_EQ(b.latency_us, a.latency_us);
  ASSERT_EQ(b.devices.size(), a.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const DeviceSpec &x = a.devices[i], &y = b.devices[i];
    EXPECT_EQ(y.name, x.name);
    EXPECT_EQ(y.host, x.host);
    EXPECT_EQ(y.cores, x.cores);
    EXPECT_EQ(y.memory_mb, x.memory_mb);
    EXPECT_EQ(y.profile, x.profile);
    EXPECT_EQ(y.speed, x.speed);
    EXPECT_EQ(y.model, x.model);
  }
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) EXPECT_EQ(b.link(p, q), a.link(p, q)) << p << "-" << q;
  EXPECT_EQ(a.link(0, 1), (LinkSpec{100, 7}));
  EXPECT_EQ(cluster_to_json(b), out);

  // and through a file: save_cluster, load_cluster
  const std::string dir = temp_dir();
  save_cluster(a, dir + "/saved.json");
  const ClusterSpec c = load_cluster(dir + "/saved.json", "");
  EXPECT_EQ(cluster_to_json(c), out);
}

// ---- bad input: the file and the field's JSON path start every message ----

TEST(ClusterFile, MissingMemory) {
  json j = valid();
  j["devices"][2].erase("memory_mb");
  expect_error(j, "devices[2].memory_mb", {"missing", "profile"});
}

TEST(ClusterFile, MissingCores) {
  json j = valid();
  j["devices"][2].erase("cores");
  expect_error(j, "devices[2].cores", {"missing"});
}

TEST(ClusterFile, MissingName) {
  json j = valid();
  j["devices"][1].erase("name");
  expect_error(j, "devices[1].name", {"missing"});
}

TEST(ClusterFile, ZeroBandwidth) {
  json j = valid();
  j["links"]["bandwidth_mbit"] = 0;
  expect_error(j, "links.bandwidth_mbit", {"> 0", "got 0"});
}

TEST(ClusterFile, ZeroPairBandwidthAndNegativeLatency) {
  json j = valid();
  j["links"]["pairs"][0]["bandwidth_mbit"] = 0;
  expect_error(j, "links.pairs[0].bandwidth_mbit", {"> 0"});
  j = valid();
  j["links"]["latency_us"] = -1;
  expect_error(j, "links.latency_us", {"≥ 0", "-1"});
  j = valid();
  j["links"]["shared_memory"] = {{"bandwidth_mbit", -3}};
  expect_error(j, "links.shared_memory.bandwidth_mbit", {"> 0"});
}

TEST(ClusterFile, MissingBandwidthWithoutProfilesOrPairs) {
  json j = valid();
  j["links"].erase("bandwidth_mbit");  // dev2 has no profile, and dev1-dev2 no pair
  expect_error(j, "links.bandwidth_mbit", {"missing", "dev1-dev2"});
}

TEST(ClusterFile, MissingLatency) {
  json j = valid();
  j["links"].erase("latency_us");
  expect_error(j, "links.latency_us", {"missing"});
}

TEST(ClusterFile, MissingLinksAndDevices) {
  json j = valid();
  j.erase("links");
  expect_error(j, "links", {"missing"});
  j = valid();
  j.erase("devices");
  expect_error(j, "devices", {"missing"});
  j = valid();
  j["devices"] = json::array();
  expect_error(j, "devices", {"non-empty"});
}

TEST(ClusterFile, UnknownProfile) {
  json j = valid();
  j["devices"][1]["profile"] = "pi9";
  expect_error(j, "devices[1].profile",
               {"unknown profile 'pi9'", "(known: comm-bound, comm-bound-wifi, jetson-nano-cpu, pi3, pi4, pi5, wifi)"});
}

TEST(ClusterFile, PairNamesUnknownDevice) {
  json j = valid();
  j["links"]["pairs"][0]["b"] = "dev7";
  expect_error(j, "links.pairs[0].b", {"no device named 'dev7'"});
}

TEST(ClusterFile, PairWithItselfAndDuplicatePair) {
  json j = valid();
  j["links"]["pairs"][0]["b"] = "dev2";
  expect_error(j, "links.pairs[0].b", {"same device"});
  j = valid();
  j["links"]["pairs"].push_back({{"a", "dev0"}, {"b", "dev2"}, {"bandwidth_mbit", 5}});
  expect_error(j, "links.pairs[1]", {"dev0-dev2", "links.pairs[0]"});
}

TEST(ClusterFile, WrongTypes) {
  json j = valid();
  j["devices"][0]["cores"] = "four";
  expect_error(j, "devices[0].cores", {"integer ≥ 1", "got \"four\""});
  j = valid();
  j["devices"][0]["cores"] = 2.5;
  expect_error(j, "devices[0].cores", {"integer ≥ 1", "2.5"});
  j = valid();
  j["devices"][0]["cores"] = 0;
  expect_error(j, "devices[0].cores", {"integer ≥ 1"});
  j = valid();
  j["devices"][2]["memory_mb"] = "2048";
  expect_error(j, "devices[2].memory_mb", {"> 0", "\"2048\""});
  j = valid();
  j["devices"][0]["speed"] = true;
  expect_error(j, "devices[0].speed", {"> 0", "true"});
  j = valid();
  j["devices"][0]["name"] = 3;
  expect_error(j, "devices[0].name", {"string"});
  j = valid();
  j["devices"][2]["model"] = 42;
  expect_error(j, "devices[2].model", {"42"});
  j = valid();
  j["links"]["topology"] = "ring";
  expect_error(j, "links.topology", {"switch", "point-to-point", "ring"});
  j = valid();
  j["links"] = json::array();
  expect_error(j, "links", {"object"});
}

TEST(ClusterFile, DuplicateDeviceNameAndHost) {
  json j = valid();
  j["devices"][2]["name"] = "dev0";
  expect_error(j, "devices[2].name", {"'dev0'", "devices[0]"});
  j = valid();
  j["devices"][2]["host"] = "pi-b";
  expect_error(j, "devices[2].host", {"'pi-b'", "devices[1]"});
}

TEST(ClusterFile, DeviceWithoutSpeed) {
  json j = valid();
  j["devices"][2].erase("model");
  expect_error(j, "devices[2]", {"dev2", "profile", "tiletrain calibrate"});
}

TEST(ClusterFile, UnknownKeys) {
  json j = valid();
  j["devices"][0]["memroy_mb"] = 5;
  expect_error(j, "devices[0].memroy_mb", {"unknown key"});
  j = valid();
  j["links"]["bandwith_mbit"] = 5;
  expect_error(j, "links.bandwith_mbit", {"unknown key"});
  j = valid();
  j["links"]["pairs"][0]["latency"] = 5;
  expect_error(j, "links.pairs[0].latency", {"unknown key"});
  j = valid();
  j["device"] = json::array();
  expect_error(j, "device", {"unknown key"});
  j = valid();
  j["profiles"] = {{"b", {{"cores", 1}, {"memory_mb", 1}, {"link_mbit", 1}, {"gflops", 1}, {"ram", 1}}}};
  expect_error(j, "profiles.b.ram", {"unknown key"});
  // comments (_...) at any level are fine
  j = valid();
  j["devices"][0]["_why"] = "spare";
  j["links"]["_measured"] = "2024-05-01";
  EXPECT_NO_THROW(parse_cluster(j, "c.json", conf()));
}

TEST(ClusterFile, BadFileProfiles) {
  json j = valid();
  j["profiles"] = {{"b", {{"cores", 1}, {"memory_mb", 1}, {"link_mbit", 0}, {"gflops", 1}}}};
  expect_error(j, "profiles.b.link_mbit", {"> 0"});
  j["profiles"] = {{"b", {{"cores", 1}, {"memory_mb", 1}, {"link_mbit", 1}}}};
  expect_error(j, "profiles.b.gflops", {"missing"});
}

// Errors that come from reading files: load_cluster.
class ClusterFileOnDisk : public testing::Test {
 protected:
  void SetUp() override { dir = temp_dir(); }
  // Writes `text` as c.json, loads it and returns the error.
  std::string load_error(const std::string& text) {
    write(dir + "/c.json", text);
    try {
      load_cluster(dir + "/c.json");
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return "";
  }
  std::string dir;
};

TEST_F(ClusterFileOnDisk, SyntaxErrorGivesTheBytePosition) {
  const std::string msg = load_error("{\"devices\": [}\n");
  EXPECT_EQ(msg.rfind(dir + "/c.json: JSON syntax error at byte 14", 0), 0u) << msg;
}

// Found by fuzz_cluster: the JSON parser throws out_of_range (not parse_error) for a number
// beyond double's range; it escaped load_cluster as a non-tt::Error.
TEST_F(ClusterFileOnDisk, NumberOutOfRange) {
  const std::string msg = load_error(R"({"devices": [{"name": "a", "cores": 1, "memory_mb": 1e400}]})");
  EXPECT_EQ(msg.rfind(dir + "/c.json: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("1e400"), std::string::npos) << msg;
}

TEST_F(ClusterFileOnDisk, DuplicateKey) {
  const std::string msg =
      load_error(R"({"devices": [{"name": "a", "cores": 1, "cores": 2}], "links": {"bandwidth_mbit": 1}})");
  EXPECT_EQ(msg.rfind(dir + "/c.json: devices[0].cores: duplicate key", 0), 0u) << msg;
}

TEST_F(ClusterFileOnDisk, MissingFile) {
  try {
    load_cluster(dir + "/none.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(dir + "/none.json:", 0), 0u) << msg;
    EXPECT_NE(msg.find("cannot read"), std::string::npos) << msg;
  }
}

TEST_F(ClusterFileOnDisk, FieldErrorsNameTheFile) {
  const std::string msg = load_error(R"({"devices": [{"name": "a", "cores": 1}], "links": {}})");
  EXPECT_EQ(msg.rfind(dir + "/c.json: devices[0].memory_mb: missing", 0), 0u) << msg;
}

TEST_F(ClusterFileOnDisk, MissingModelFile) {
  const std::string msg =
      load_error(R"({"devices": [{"name": "a", "cores": 1, "memory_mb": 1, "model": "gone.json"}], "links": {}})");
  EXPECT_EQ(msg.rfind(dir + "/c.json: devices[0].model:", 0), 0u) << msg;
  EXPECT_NE(msg.find(dir + "/gone.json"), std::string::npos) << msg;
}

TEST_F(ClusterFileOnDisk, BrokenModelFile) {
  write(dir + "/m.json", "{\"gflops\": 4,,}");
  const std::string msg =
      load_error(R"({"devices": [{"name": "a", "cores": 1, "memory_mb": 1, "model": "m.json"}], "links": {}})");
  EXPECT_EQ(msg.rfind(dir + "/c.json: devices[0].model:", 0), 0u) << msg;
  EXPECT_NE(msg.find(dir + "/m.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte 14"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tt
