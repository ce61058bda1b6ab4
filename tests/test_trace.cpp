// bench --trace: the file is a Chrome/Perfetto trace whose spans nest the way the engine
// runs them (checked on a 2x2 grid in one process, with a tail run after the cut), and a
// path that cannot be written is refused before the run. The two-rank run is
// tests/mpi/trace.sh; the pictures drawn from a trace, tests/scripts/plot_timing.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;
using cli::Result;
using cli::slurp;
using BenchTrace = cli::Cli;

struct Span {
  std::string name, cat;
  int pid, tid, layer;
  int64_t t0, t1;  // ns: the file's microseconds carry three decimals
};

std::vector<Span> spans_of(const nlohmann::json& j) {
  std::vector<Span> v;
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    for (const char* k : {"name", "cat", "pid", "tid", "ts", "dur"})
      EXPECT_TRUE(e.contains(k)) << k << ": " << e.dump();
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e.dump();
    const int64_t t0 = std::llround(e["ts"].get<double>() * 1e3), d = std::llround(e["dur"].get<double>() * 1e3);
    EXPECT_GE(d, 0) << e.dump();
    const nlohmann::json& args = e.value("args", nlohmann::json::object());
    v.push_back({e["name"], e["cat"], e["pid"], e["tid"], args.value("layer", -1), t0, t0 + d});
  }
  return v;
}

// small-classifier: conv, max, conv | max, conv, conv (a tail run), avgpool, softmax; the
// tail on the root, or its convolutions in filter blocks (spans named by the net's layer).
class BenchTraceTail : public BenchTrace, public ::testing::WithParamInterface<const char*> {};

TEST_P(BenchTraceTail, SpansNestWithinTheirStepsAndLanes) {
  const int steps = 3, layers = 8;
  const Result r = run("bench --threads 1 --steps 3 --warmup 1 --batch 4 --grid 2x2 --cut 3 --trace run.json --cfg '" +
                       test::source_dir() + "/cfgs/small-classifier.cfg' --tail " + GetParam());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "wrote run.json: ");
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(slurp(path("run.json"))));
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary file left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  EXPECT_EQ(j.at("otherData").at("steps"), steps);
  bool named = false;
  for (const nlohmann::json& e : j["traceEvents"])
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      named = e.at("args").at("name").get<std::string>().rfind("rank 0 (", 0) == 0;
  EXPECT_TRUE(named) << "no process named rank 0 (host)";
  const std::vector<Span> all = spans_of(j);

  std::vector<Span> step_spans;
  std::map<std::string, int> per_cat;
  for (const Span& s : all) {
    ++per_cat[s.cat];
    EXPECT_EQ(s.pid, 0);
    EXPECT_TRUE(s.tid == 0 || s.tid == 1) << s.name;
    if (s.cat == "step") step_spans.push_back(s);
  }
  for (const char* c : {"step", "forward", "backward", "tail", "halo", "bn", "weights", "io", "update"})
    EXPECT_GT(per_cat[c], 0) << "no span of category " << c;
  ASSERT_EQ(int(step_spans.size()), steps);

  // Every other span inside a step; in each step every layer has a forward and a backward span.
  std::vector<std::set<int>> fwd(steps), bwd(steps);
  for (const Span& s : all) {
    if (s.cat == "step") continue;
    int in = -1;
    for (int k = 0; k < steps; ++k)
      if (step_spans[size_t(k)].t0 <= s.t0 && s.t1 <= step_spans[size_t(k)].t1) in = k;
    ASSERT_GE(in, 0) << s.name << " [" << s.t0 << ", " << s.t1 << "] ns lies in no step";
    if (s.cat == "forward" && s.layer >= 0) fwd[size_t(in)].insert(s.layer);
    if (s.cat == "backward" && s.layer >= 0) bwd[size_t(in)].insert(s.layer);
  }
  for (int k = 0; k < steps; ++k) {
    EXPECT_EQ(int(fwd[size_t(k)].size()), layers) << "step " << k;
    EXPECT_EQ(int(bwd[size_t(k)].size()), layers) << "step " << k;
  }

  // One thread per lane: any two spans of a lane are disjoint or one holds the other.
  for (int tid : {0, 1}) {
    std::vector<Span> lane;
    for (const Span& s : all)
      if (s.tid == tid) lane.push_back(s);
    std::sort(lane.begin(), lane.end(),
              [](const Span& a, const Span& b) { return a.t0 != b.t0 ? a.t0 < b.t0 : a.t1 > b.t1; });
    std::vector<const Span*> open;
    int deepest = 0;
    for (const Span& s : lane) {
      while (!open.empty() && open.back()->t1 <= s.t0) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.t1, open.back()->t1) << s.name << " overlaps " << open.back()->name << " on lane " << tid;
      }
      open.push_back(&s);
      deepest = std::max(deepest, int(open.size()));
    }
    // compute: step > tail > the tail's layers; waits and transfers: flat.
    EXPECT_EQ(deepest, tid == 0 ? 3 : 1) << "lane " << tid;
  }
}

INSTANTIATE_TEST_SUITE_P(Tail, BenchTraceTail, ::testing::Values("root", "filters"));

TEST_F(BenchTrace, UnwritablePathRefusedBeforeTheRun) {
  const std::string cfg =
      "--cfg '" + test::source_dir() + "/cfgs/small-classifier.cfg' --threads 1 --batch 2 --steps 1";
  const Result r = run("bench " + cfg + " --trace no_such_dir/run.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--trace: cannot write 'no_such_dir/run.json': folder 'no_such_dir' does not exist");
  EXPECT_EQ(r.out.find("step 0"), std::string::npos) << r.out;
  fs::create_directories(path("a_folder"));
  const Result folder = run("bench " + cfg + " --trace a_folder");
  EXPECT_EQ(folder.code, 2);
  EXPECT_CONTAINS(folder.err, "cannot write 'a_folder': it is a folder");
  // A run that fails after the check leaves an existing trace as it was.
  write("old.json", "{\"traceEvents\": []}\n");
  const Result failed = run("bench " + cfg + " --grid 3x3 --size 2x2 --trace old.json");
  EXPECT_EQ(failed.code, 2) << failed.out;
  EXPECT_EQ(slurp(path("old.json")), "{\"traceEvents\": []}\n");
}

}  // namespace
}  // namespace tt
