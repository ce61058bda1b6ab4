// A record of the spans the engine already times (now_s()), for `bench --trace`: each
// step, every layer's forward and backward, halo and batch-norm waits, weight exchanges,
// the tail and the update, written as a Chrome/Perfetto trace (chrome://tracing,
// ui.perfetto.dev). Off unless started: then add() costs one branch.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "util/sys.hpp"

namespace tt {

// A row of the trace per process: the compute thread's spans, nested (step > layer or tail
// > the tail's layers), and, apart, the time spent waiting on or moving data for others.
enum class Lane { Compute = 0, Comm = 1 };

struct TraceEvent {
  const char* name;  // a layer's type with `layer` >= 0 (named "conv 3"), else the span's name
  const char* cat;   // step, forward, backward, tail, update, halo, bn, weights, io
  Lane lane;
  double t0, t1;  // now_s()
  int layer;
};

class Trace {
 public:
  bool on() const { return on_; }
  // Collective: a barrier, then records from here on, times relative to it.
  void start(Comm& comm);
  void add(const char* name, const char* cat, Lane lane, double t0, double t1, int layer = -1) {
    if (on_) events_.push_back({name, cat, lane, t0, t1, layer});
  }
  // The same, ending now.
  void end(const char* name, const char* cat, Lane lane, double t0, int layer = -1) {
    if (on_) add(name, cat, lane, t0, now_s(), layer);
  }
  // The events as Chrome trace events ("ph": "X", microseconds since start(), pid = `pid`,
  // tid = lane; steps numbered from 0 in order).
  nlohmann::json to_json(int pid) const;

 private:
  bool on_ = false;
  double base_ = 0;
  std::vector<TraceEvent> events_;
};

// Collective: every process's events, gathered on the root, written there to `path`
// (atomically) as one trace with a process per rank ("rank N (host)") and `about` as
// its otherData. Returns the number of events written (0 elsewhere).
size_t write_trace(const std::string& path, const Trace& t, Comm& comm, const nlohmann::json& about);

}  // namespace tt
