#include "planner/cluster.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "util/error.hpp"
#include "util/sys.hpp"

#ifndef TILETRAIN_PROFILES
#error "TILETRAIN_PROFILES (the path of cluster/profiles.conf) must be defined"
#endif

namespace tt {
namespace {

using json = nlohmann::json;

// Where a value sits: the file and its JSON path ("devices[2].memory_mb"; empty: the
// whole document). fail() prefixes both to the message.
struct At {
  std::string file, path;
  At operator[](const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  At operator[](size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  template <class... A>
  [[noreturn]] void fail(const A&... parts) const {
    tt::fail(file, ": ", path.empty() ? std::string() : path + ": ", parts...);
  }
};

// A value for messages: its JSON text, cut short when long.
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

template <class Range, class F>
std::string join(const Range& r, F name) {
  std::string s;
  for (const auto& x : r) {
    if (!s.empty()) s += ", ";
    s += name(x);
  }
  return s;
}

std::string known_profiles(const std::map<std::string, Profile>& ps) {
  return ps.empty() ? std::string("none") : join(ps, [](const auto& kv) { return kv.first; });
}

// Throws naming the first key of `obj` that is neither in `known` nor a comment ('_...').
void check_keys(const json& obj, const At& at, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : obj.items()) {
    if (!key.empty() && key[0] == '_') continue;
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) at[key].fail("unknown key (known here: ", join(known, [](const char* k) { return std::string(k); }), ")");
  }
}

const json& need_object(const json& v, const At& at) {
  if (!v.is_object()) at.fail("must be an object, got ", shown(v));
  return v;
}

// &obj[key] if present, else null.
const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string need_string(const json& v, const At& at) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) at.fail("must be a non-empty string, got ", shown(v));
  return v.get<std::string>();
}

double positive(const json& v, const At& at) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) at.fail("must be > 0, got ", shown(v));
  return v.get<double>();
}

double non_negative(const json& v, const At& at) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) at.fail("must be ≥ 0, got ", shown(v));
  return v.get<double>();
}

int count_at_least_1(const json& v, const At& at) {
  const bool whole = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                               v.get<double>() == std::floor(v.get<double>()));
  if (!whole || v.get<double>() < 1) at.fail("must be an integer ≥ 1, got ", shown(v));
  if (v.get<double>() > 1e6) at.fail("too large: ", shown(v));
  return int(v.get<double>());
}

// Parses JSON text; syntax errors (with the byte position) and duplicate keys (with their
// JSON path) are thrown prefixed by `where`.
json parse_json(const std::string& text, const std::string& where) {
  struct Frame {
    bool array = false;
    size_t index = 0;  // array: the element being parsed
    std::string key;   // object: the member being parsed
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  auto path = [&] {
    std::string p;
    for (const auto& f : stack) {
      if (f.array) {
        p += '[';
        p += std::to_string(f.index);
        p += ']';
      } else {
        if (!p.empty()) p += '.';
        p += f.key;
      }
    }
    return p;
  };
  auto element_done = [&] {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        stack.push_back({});
        break;
      case json::parse_event_t::array_start:
        stack.push_back({true, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) fail(where, ": ", path(), ": duplicate key");
        break;
      }
      case json::parse_event_t::value:
        element_done();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        element_done();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::parse_error& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line ..."
    if (what.rfind("[json.exception", 0) == 0 && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    fail(where, ": JSON syntax error at byte ", e.byte, ": ", what);
  } catch (const json::out_of_range& e) {  // a number beyond double's range, e.g. 1e400
    std::string what = e.what();
    if (what.rfind("[json.exception", 0) == 0 && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    fail(where, ": ", what);
  }
}

// The whole file; throws "`where`: cannot read 'path': reason".
std::string read_text(const std::string& path, const std::string& where) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(where, ": cannot read '", path, "': it is a folder");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(where, ": cannot read '", path, "': ", std::string(std::strerror(errno)));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(where, ": cannot read '", path, "': read error");
  return s.str();
}

// A number of a profiles.conf row: the whole field, finite.
bool parse_number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno == 0 && std::isfinite(v);
}

// Resolves the link between distinct devices a and b field by field; NaN where nothing
// applies. `pair` gets the index of a's and b's entry in c.pairs, -1 if none.
void resolve_link(const ClusterSpec& c, int a, int b, double& bw, double& lat, int& pair) {
  bw = lat = std::nan("");
  pair = -1;
  for (size_t i = 0; i < c.pairs.size(); ++i) {
    const auto& p = c.pairs[i];
    if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) {
      pair = int(i);
      if (p.bandwidth_mbit) bw = *p.bandwidth_mbit;
      if (p.latency_us) lat = *p.latency_us;
      break;
    }
  }
  if (std::isnan(bw) && c.bandwidth_mbit) bw = *c.bandwidth_mbit;
  if (std::isnan(lat) && c.latency_us) lat = *c.latency_us;
  const Profile* pa = c.profile_of(a);
  const Profile* pb = c.profile_of(b);
  if (pa && pb) {
    if (std::isnan(bw)) bw = std::min(pa->link_mbit, pb->link_mbit);
    // one way: half of each device's round trip to the switch
    if (std::isnan(lat) && pa->rtt_ms && pb->rtt_ms) lat = 500 * (*pa->rtt_ms + *pb->rtt_ms);
  }
}

std::string label(const ClusterSpec& c) { return c.path.empty() ? std::string("cluster") : c.path; }

}  // namespace

double parse_rate_mbit(const std::string& rate) {
  size_t n = 0, dots = 0;
  while (n < rate.size() && (std::isdigit(static_cast<unsigned char>(rate[n])) || rate[n] == '.'))
    dots += rate[n++] == '.';
  std::string unit = rate.substr(n);
  for (char& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  const std::map<std::string, double> scale{{"bit", 1e-6}, {"kbit", 1e-3}, {"mbit", 1}, {"gbit", 1e3}};
  double v = 0;
  if (n == 0 || dots > 1 || !parse_number(rate.substr(0, n), v))
    fail("bad link rate '", rate, "' (a number and a unit, as tc: 100mbit)");
  if (!scale.count(unit)) fail("unknown rate unit in '", rate, "' (use bit, kbit, mbit or gbit, as tc: 100mbit)");
  if (v <= 0) fail("link rate '", rate, "' must be > 0");
  return v * scale.at(unit);
}

std::map<std::string, Profile> load_profiles(const std::string& path) {
  std::istringstream in(read_text(path, path));
  std::map<std::string, Profile> out;
  std::map<std::string, int> line_of;
  std::string line;
  for (int ln = 1; std::getline(in, line); ++ln) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream row(line);
    std::vector<std::string> f;
    for (std::string w; row >> w;) f.push_back(w);
    if (f.empty()) continue;
    const std::string at = path + ":" + std::to_string(ln) + ": ";
    if (f.size() != 5 && f.size() != 7)
      fail(at, "expected 'name cores mem_mb link gflops [rtt_ms jitter_ms]', got ", f.size(), " field",
           f.size() == 1 ? "" : "s");
    Profile p;
    p.name = f[0];
    double cores = 0;
    if (!parse_number(f[1], cores) || cores < 1 || cores != std::floor(cores) || cores > 1e6)
      fail(at, "cores: must be an integer ≥ 1, got '", f[1], "'");
    p.cores = int(cores);
    if (!parse_number(f[2], p.memory_mb) || p.memory_mb <= 0)
      fail(at, "mem_mb: must be a number > 0, got '", f[2], "'");
    try {
      p.link_mbit = parse_rate_mbit(f[3]);
    } catch (const Error& e) {
      fail(at, "link: ", e.what());
    }
    if (!parse_number(f[4], p.gflops) || p.gflops <= 0) fail(at, "gflops: must be a number > 0, got '", f[4], "'");
    if (f.size() == 7) {
      double rtt = 0;
      if (!parse_number(f[5], rtt) || rtt < 0 || rtt > 10000)
        fail(at, "rtt_ms: must be a number of milliseconds, 0 to 10000, got '", f[5], "'");
      p.rtt_ms = rtt;
      if (!parse_number(f[6], p.jitter_ms) || p.jitter_ms < 0 || p.jitter_ms > 10000)
        fail(at, "jitter_ms: must be a number of milliseconds, 0 to 10000, got '", f[6], "'");
    }
    if (line_of.count(p.name)) fail(at, "profile '", p.name, "' is also on line ", line_of[p.name]);
    line_of[p.name] = ln;
    out[p.name] = p;
  }
  return out;
}

std::string default_profiles_path() { return TILETRAIN_PROFILES; }

int ClusterSpec::device_index(const std::string& dev) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == dev) return int(i);
  fail(label(*this), ": no device named '", dev,
       "' (devices: ", join(devices, [](const DeviceSpec& d) { return d.name; }), ")");
}

int ClusterSpec::device_of_host(const std::string& h) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].host == h) return int(i);
  return -1;
}

const Profile* ClusterSpec::profile_of(int device) const {
  if (device < 0 || size_t(device) >= devices.size())
    fail(label(*this), ": profile_of(", device, "): no such device (", devices.size(), " devices)");
  const std::string& p = devices[device].profile;
  if (p.empty()) return nullptr;
  auto it = profiles.find(p);
  if (it == profiles.end())
    fail(label(*this), ": devices[", device, "].profile: unknown profile '", p, "' (known: ", known_profiles(profiles),
         ")");
  return &it->second;
}

LinkSpec ClusterSpec::link(int a, int b) const {
  const int n = int(devices.size());
  if (a < 0 || b < 0 || a >= n || b >= n)
    fail(label(*this), ": link(", a, ", ", b, "): no such device (", n, " devices)");
  if (a == b) return shared_memory;
  double bw, lat;
  int pair;
  resolve_link(*this, a, b, bw, lat, pair);
  if (std::isnan(bw) || std::isnan(lat))
    fail(label(*this), ": no ", std::isnan(bw) ? "bandwidth" : "latency", " for the link ", devices[a].name, "-",
         devices[b].name);
  return {bw, lat};
}

ClusterSpec parse_cluster(const json& j, const std::string& path, const std::map<std::string, Profile>& base_profiles) {
  const At root{path, ""};
  ClusterSpec c;
  c.path = path;
  if (!j.is_object()) root.fail("must be a JSON object with \"devices\" and \"links\", got ", shown(j));
  check_keys(j, root, {"devices", "links", "profiles", "name", "comment"});
  if (const json* v = member(j, "name")) c.name = need_string(*v, root["name"]);
  if (const json* v = member(j, "comment")) {
    if (!v->is_string()) root["comment"].fail("must be a string, got ", shown(*v));
    c.comment = v->get<std::string>();
  }

  // profiles: the file's add to / override the base
  c.profiles = base_profiles;
  if (const json* ps = member(j, "profiles")) {
    const At at = root["profiles"];
    for (const auto& [name, v] : need_object(*ps, at).items()) {
      const At pat = at[name];
      if (name.empty()) pat.fail("a profile needs a name");
      need_object(v, pat);
      check_keys(v, pat, {"cores", "memory_mb", "link_mbit", "gflops", "rtt_ms", "jitter_ms"});
      for (const char* k : {"cores", "memory_mb", "link_mbit", "gflops"})
        if (!member(v, k)) pat[k].fail("missing");
      Profile p;
      p.name = name;
      p.cores = count_at_least_1(v["cores"], pat["cores"]);
      p.memory_mb = positive(v["memory_mb"], pat["memory_mb"]);
      p.link_mbit = positive(v["link_mbit"], pat["link_mbit"]);
      p.gflops = positive(v["gflops"], pat["gflops"]);
      if (const json* x = member(v, "rtt_ms")) p.rtt_ms = non_negative(*x, pat["rtt_ms"]);
      if (const json* x = member(v, "jitter_ms")) p.jitter_ms = non_negative(*x, pat["jitter_ms"]);
      c.profiles[name] = p;
    }
  }

  // devices
  const json* devs = member(j, "devices");
  if (!devs) root["devices"].fail("missing (an array of devices)");
  if (!devs->is_array() || devs->empty()) root["devices"].fail("must be a non-empty array, got ", shown(*devs));
  const std::string folder = std::filesystem::path(path).parent_path().string();
  for (size_t i = 0; i < devs->size(); ++i) {
    const json& v = (*devs)[i];
    const At at = root["devices"][i];
    need_object(v, at);
    check_keys(v, at, {"name", "host", "cores", "memory_mb", "profile", "speed", "model"});
    DeviceSpec d;
    const json* name = member(v, "name");
    if (!name) at["name"].fail("missing");
    d.name = need_string(*name, at["name"]);
    const json* host = member(v, "host");
    d.host = host ? need_string(*host, at["host"]) : d.name;
    for (size_t k = 0; k < c.devices.size(); ++k) {
      if (c.devices[k].name == d.name) at["name"].fail("'", d.name, "' is also devices[", k, "]'s name");
      if (c.devices[k].host == d.host)
        at[host ? "host" : "name"].fail("host '", d.host, "' is also devices[", k, "]'s host (a host is one device)");
    }
    const Profile* prof = nullptr;
    if (const json* p = member(v, "profile")) {
      d.profile = need_string(*p, at["profile"]);
      auto it = c.profiles.find(d.profile);
      if (it == c.profiles.end())
        at["profile"].fail("unknown profile '", d.profile, "' (known: ", known_profiles(c.profiles), ")");
      prof = &it->second;
    }
    if (const json* x = member(v, "cores")) {
      d.cores = count_at_least_1(*x, at["cores"]);
    } else if (prof) {
      d.cores = prof->cores;
    } else {
      at["cores"].fail("missing (give cores or a profile)");
    }
    if (const json* x = member(v, "memory_mb")) {
      d.memory_mb = positive(*x, at["memory_mb"]);
    } else if (prof) {
      d.memory_mb = prof->memory_mb;
    } else {
      at["memory_mb"].fail("missing (give memory_mb or a profile)");
    }
    if (const json* x = member(v, "speed")) d.speed = positive(*x, at["speed"]);
    if (const json* m = member(v, "model")) {
      const At mat = at["model"];
      if (m->is_string()) {
        const std::string rel = need_string(*m, mat);
        const std::filesystem::path mp(rel);
        d.model_source = mp.is_absolute() || folder.empty() ? rel : (std::filesystem::path(folder) / mp).string();
        const std::string where = path + ": " + mat.path + ": model file '" + d.model_source + "'";
        const std::string text = read_text(d.model_source, path + ": " + mat.path);
        d.model = parse_json(text, where);
        if (!d.model.is_object()) tt::fail(where, ": must hold a JSON object, got ", shown(d.model));
      } else if (m->is_object()) {
        d.model = *m;
        d.model_source = "(inline)";
      } else {
        mat.fail("must be a model file's path or a model object, got ", shown(*m));
      }
    }
    if (d.profile.empty() && d.model.is_null())
      at.fail("device '", d.name, "' has no speed: give it a profile or a calibrated model from `tiletrain calibrate`");
    c.devices.push_back(std::move(d));
  }

  // links
  const json* links = member(j, "links");
  const At lat = root["links"];
  if (!links) lat.fail("missing (an object with bandwidth_mbit and latency_us)");
  need_object(*links, lat);
  check_keys(*links, lat,
             {"topology", "bandwidth_mbit", "latency_us", "burst_kb", "pairs", "shared_memory", "efficiency"});
  if (const json* x = member(*links, "burst_kb")) c.burst_bytes = 1024 * non_negative(*x, lat["burst_kb"]);
  if (const json* ef = member(*links, "efficiency")) {
    const At eat = lat["efficiency"];
    need_object(*ef, eat);
    check_keys(*ef, eat,
               {"ring", "many_flows", "ring_overhead_s", "many_flows_overhead_s", "chunk_gather",
                "chunk_gather_overhead_s", "chunk_reduce_scatter", "chunk_reduce_scatter_overhead_s"});
    if (const json* x = member(*ef, "ring")) c.ring_efficiency = positive(*x, eat["ring"]);
    if (const json* x = member(*ef, "many_flows")) c.many_flows_efficiency = positive(*x, eat["many_flows"]);
    if (const json* x = member(*ef, "ring_overhead_s")) c.ring_overhead_s = non_negative(*x, eat["ring_overhead_s"]);
    if (const json* x = member(*ef, "many_flows_overhead_s"))
      c.many_flows_overhead_s = non_negative(*x, eat["many_flows_overhead_s"]);
    c.chunk_gather_overhead_s = c.many_flows_overhead_s;  // unless the file gives the chunks' own
    c.chunk_reduce_scatter_efficiency = c.ring_efficiency;
    c.chunk_reduce_scatter_overhead_s = c.ring_overhead_s;
    if (const json* x = member(*ef, "chunk_gather")) c.chunk_gather_efficiency = positive(*x, eat["chunk_gather"]);
    if (const json* x = member(*ef, "chunk_gather_overhead_s"))
      c.chunk_gather_overhead_s = non_negative(*x, eat["chunk_gather_overhead_s"]);
    if (const json* x = member(*ef, "chunk_reduce_scatter"))
      c.chunk_reduce_scatter_efficiency = positive(*x, eat["chunk_reduce_scatter"]);
    if (const json* x = member(*ef, "chunk_reduce_scatter_overhead_s"))
      c.chunk_reduce_scatter_overhead_s = non_negative(*x, eat["chunk_reduce_scatter_overhead_s"]);
  }
  if (const json* t = member(*links, "topology")) {
    c.topology = need_string(*t, lat["topology"]);
    if (c.topology != "switch" && c.topology != "point-to-point")
      lat["topology"].fail("must be \"switch\" or \"point-to-point\", got ", shown(*t));
  }
  if (const json* x = member(*links, "bandwidth_mbit")) c.bandwidth_mbit = positive(*x, lat["bandwidth_mbit"]);
  if (const json* x = member(*links, "latency_us")) c.latency_us = non_negative(*x, lat["latency_us"]);
  if (const json* sm = member(*links, "shared_memory")) {
    const At sat = lat["shared_memory"];
    need_object(*sm, sat);
    check_keys(*sm, sat, {"bandwidth_mbit", "latency_us"});
    if (const json* x = member(*sm, "bandwidth_mbit"))
      c.shared_memory.bandwidth_mbit = positive(*x, sat["bandwidth_mbit"]);
    if (const json* x = member(*sm, "latency_us")) c.shared_memory.latency_us = non_negative(*x, sat["latency_us"]);
  }
  if (const json* ps = member(*links, "pairs")) {
    const At pat = lat["pairs"];
    if (!ps->is_array()) pat.fail("must be an array, got ", shown(*ps));
    for (size_t i = 0; i < ps->size(); ++i) {
      const json& v = (*ps)[i];
      const At at = pat[i];
      need_object(v, at);
      check_keys(v, at, {"a", "b", "bandwidth_mbit", "latency_us"});
      PairLinkSpec p;
      int* ends[2] = {&p.a, &p.b};
      for (int e = 0; e < 2; ++e) {
        const char* key = e == 0 ? "a" : "b";
        const json* x = member(v, key);
        if (!x) at[key].fail("missing (a device name)");
        const std::string dev = need_string(*x, at[key]);
        *ends[e] = -1;
        for (size_t k = 0; k < c.devices.size(); ++k)
          if (c.devices[k].name == dev) *ends[e] = int(k);
        if (*ends[e] < 0)
          at[key].fail("no device named '", dev,
                       "' (devices: ", join(c.devices, [](const DeviceSpec& d) { return d.name; }), ")");
      }
      if (p.a == p.b)
        at["b"].fail("same device as a ('", c.devices[p.a].name, "'): ranks on one device use links.shared_memory");
      if (const json* x = member(v, "bandwidth_mbit")) p.bandwidth_mbit = positive(*x, at["bandwidth_mbit"]);
      if (const json* x = member(v, "latency_us")) p.latency_us = non_negative(*x, at["latency_us"]);
      if (!p.bandwidth_mbit && !p.latency_us) at.fail("gives neither bandwidth_mbit nor latency_us");
      for (size_t k = 0; k < c.pairs.size(); ++k) {
        const auto& q = c.pairs[k];
        if ((q.a == p.a && q.b == p.b) || (q.a == p.b && q.b == p.a))
          at.fail("the link ", c.devices[p.a].name, "-", c.devices[p.b].name, " is also links.pairs[", k, "]");
      }
      c.pairs.push_back(p);
    }
  }

  // every pair of distinct devices must resolve to a link
  const int n = int(c.devices.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      double bw, la;
      int pair;
      resolve_link(c, a, b, bw, la, pair);
      const std::string which = c.devices[a].name + "-" + c.devices[b].name;
      if (std::isnan(bw))
        lat["bandwidth_mbit"].fail("missing (give links.bandwidth_mbit, a profile for every device, or links.pairs ",
                                   "for every pair of devices; the link ", which, " has none)");
      if (std::isnan(la))
        lat["latency_us"].fail("missing (give links.latency_us, profiles with rtt_ms for both devices, or links.pairs ",
                               "with latency_us for every pair of devices; the link ", which, " has none)");
    }
  }
  return c;
}

ClusterSpec load_cluster(const std::string& path, const std::string& profiles_path) {
  const std::map<std::string, Profile> base =
      profiles_path.empty() ? std::map<std::string, Profile>{} : load_profiles(profiles_path);
  return parse_cluster(parse_json(read_text(path, path), path), path, base);
}

json cluster_to_json(const ClusterSpec& c) {
  json j = json::object();
  if (!c.name.empty()) j["name"] = c.name;
  if (!c.comment.empty()) j["comment"] = c.comment;
  json devs = json::array();
  for (const auto& d : c.devices) {
    json v{{"name", d.name}, {"host", d.host}, {"cores", d.cores}, {"memory_mb", d.memory_mb}, {"speed", d.speed}};
    if (!d.profile.empty()) v["profile"] = d.profile;
    if (!d.model.is_null()) v["model"] = d.model;
    devs.push_back(std::move(v));
  }
  j["devices"] = std::move(devs);
  json links{{"topology", c.topology},
             {"shared_memory",
              {{"bandwidth_mbit", c.shared_memory.bandwidth_mbit}, {"latency_us", c.shared_memory.latency_us}}}};
  links["efficiency"] = {{"ring", c.ring_efficiency},
                         {"many_flows", c.many_flows_efficiency},
                         {"ring_overhead_s", c.ring_overhead_s},
                         {"many_flows_overhead_s", c.many_flows_overhead_s},
                         {"chunk_gather", c.chunk_gather_efficiency},
                         {"chunk_gather_overhead_s", c.chunk_gather_overhead_s},
                         {"chunk_reduce_scatter", c.chunk_reduce_scatter_efficiency},
                         {"chunk_reduce_scatter_overhead_s", c.chunk_reduce_scatter_overhead_s}};
  if (c.bandwidth_mbit) links["bandwidth_mbit"] = *c.bandwidth_mbit;
  if (c.latency_us) links["latency_us"] = *c.latency_us;
  if (c.burst_bytes > 0) links["burst_kb"] = c.burst_bytes / 1024;
  if (!c.pairs.empty()) {
    json ps = json::array();
    for (const auto& p : c.pairs) {
      json v{{"a", c.devices.at(p.a).name}, {"b", c.devices.at(p.b).name}};
      if (p.bandwidth_mbit) v["bandwidth_mbit"] = *p.bandwidth_mbit;
      if (p.latency_us) v["latency_us"] = *p.latency_us;
      ps.push_back(std::move(v));
    }
    links["pairs"] = std::move(ps);
  }
  j["links"] = std::move(links);
  if (!c.profiles.empty()) {
    json ps = json::object();
    for (const auto& [name, p] : c.profiles) {
      ps[name] = {{"cores", p.cores}, {"memory_mb", p.memory_mb}, {"link_mbit", p.link_mbit}, {"gflops", p.gflops}};
      if (p.rtt_ms) ps[name]["rtt_ms"] = *p.rtt_ms;
      if (p.jitter_ms > 0) ps[name]["jitter_ms"] = p.jitter_ms;
    }
    j["profiles"] = std::move(ps);
  }
  return j;
}

void save_cluster(const ClusterSpec& c, const std::string& path) {
  const std::string text = cluster_to_json(c).dump(2) + "\n";
  write_file_atomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace tt
