#include "engine/trace.hpp"

#include <cmath>
#include <cstring>

#include "engine/segment.hpp"

namespace tt {

void Trace::start(Comm& comm) {
  // An all-gather returns on no process before every process has entered it: a barrier.
  // Each process's times count from its own exit from it, so the clocks of different
  // hosts are aligned only there (to within the collective's latency) and may drift
  // apart by their rates' difference over the run.
  comm.all_gather(0.0);
  base_ = now_s();
  events_.clear();
  on_ = true;
}

nlohmann::json Trace::to_json(int pid) const {
  // Whole nanoseconds since the base, rounded once per end point: rounding is monotonic,
  // so a span inside another stays inside it after the conversion.
  auto ns = [&](double s) { return std::llround((s - base_) * 1e9); };
  nlohmann::json out = nlohmann::json::array();
  int step = 0;
  for (const TraceEvent& e : events_) {
    const long long a = ns(e.t0), b = ns(e.t1);
    nlohmann::json args = nlohmann::json::object();
    // "conv 3", "maxpool 4", "step 0" (appended, not concatenated: GCC 12 warns falsely on a + b).
    std::string name = e.layer >= 0 && std::strcmp(e.name, "convolutional") == 0 ? "conv" : e.name;
    if (e.layer >= 0) {
      name.append(" ").append(std::to_string(e.layer));
      args["layer"] = e.layer;
    }
    if (std::strcmp(e.cat, "step") == 0) {
      name.append(" ").append(std::to_string(step));
      args["step"] = step++;
    }
    out.push_back({{"name", name},
                   {"cat", e.cat},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", int(e.lane)},
                   {"ts", double(a) / 1e3},
                   {"dur", double(b - a) / 1e3},
                   {"args", args}});
  }
  return out;
}

size_t write_trace(const std::string& path, const Trace& t, Comm& comm, const nlohmann::json& about) {
  const std::vector<std::string> all = comm.all_gather(t.to_json(comm.rank()).dump());
  const std::vector<std::string> hosts = comm.all_hosts();
  if (comm.rank() != kRoot) return 0;
  nlohmann::json events = nlohmann::json::array();
  size_t spans = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const int pid = int(r);
    auto meta = [&](const char* what, int tid, const nlohmann::json& args) {
      nlohmann::json m{{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", args}};
      if (tid >= 0) m["tid"] = tid;
      events.push_back(m);
    };
    meta("process_name", -1, {{"name", "rank " + std::to_string(r) + " (" + hosts[r] + ")"}});
    meta("process_sort_index", -1, {{"sort_index", pid}});
    meta("thread_name", int(Lane::Compute), {{"name", "compute"}});
    meta("thread_name", int(Lane::Comm), {{"name", "waits and transfers"}});
    for (nlohmann::json& e : nlohmann::json::parse(all[r])) {
      events.push_back(std::move(e));
      ++spans;
    }
  }
  const nlohmann::json j{{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", about}};
  write_file_atomically(path, [&](std::ostream& out) { out << j.dump() << "\n"; });
  return spans;
}

}  // namespace tt
