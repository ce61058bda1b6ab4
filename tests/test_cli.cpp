// The tiletrain command line as a user meets it: runs the built binary (TILETRAIN_BINARY)
// with stdout and stderr captured, and checks exit codes, messages and files written.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

using cli::Cli;
using cli::Result;
using cli::slurp;

// 20-byte header + every array of the Darknet layout, computed from the cfg.
int64_t darknet_weights_bytes(const NetSpec& net) {
  int64_t floats = 0;
  for (const auto& l : net.layers) {
    if (l.is(kConvKind)) floats += int64_t(l.conv().filters) * (l.batch_normalize() ? 4 : 1) + l.weight_count();
    if (l.is(kConnectedKind)) floats += l.connected().outputs + l.weight_count();
  }
  return 20 + 4 * floats;
}

TEST_F(Cli, HelpOfEachSubcommand) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expect = {
      {"info", {"--cfg", "--threads", "--batch", "--size"}},
      {"plan", {"--cfg", "--grid", "--groups", "--cut", "--bn", "--json"}},
      {"bench", {"--cfg", "--grid", "--steps", "--warmup", "--json"}},
      {"train", {"--cfg", "--grid", "--steps", "--weights", "--save-weights", "--seed"}},
      {"verify", {"--cfg", "--grid", "--groups", "--steps"}},
      {"calibrate", {"--cfg", "--out", "--steps", "--threads"}},
  };
  for (const auto& [cmd, options] : expect) {
    SCOPED_TRACE(cmd);
    const Result r = run(cmd + " --help");
    EXPECT_EQ(r.code, 0) << r.err;
    for (const auto& o : options) EXPECT_CONTAINS(r.out, o);
  }
  const Result top = run("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* cmd : {"info", "plan", "bench", "train", "verify", "calibrate"}) EXPECT_CONTAINS(top.out, cmd);
}

TEST_F(Cli, UsageErrors) {
  const Result none = run("");
  EXPECT_NE(none.code, 0);
  const Result no_cfg = run("train --steps 1");
  EXPECT_NE(no_cfg.code, 0);
  EXPECT_CONTAINS(no_cfg.err, "--cfg");
  const Result bad_bn = run("train --steps 1 --cfg '" + fixture("bn_stride") + "' --bn maybe");
  EXPECT_NE(bad_bn.code, 0);
  EXPECT_CONTAINS(bad_bn.err, "--bn");
  for (const char* flag : {"--backward-features", "--overlap"}) {
    std::string cmd = "train --steps 1 --cfg '" + fixture("bn_stride");
    cmd.append("' ").append(flag).append(" sometimes");  // (one chain of + trips GCC 12's -Wrestrict)
    const Result bad = run(cmd);
    EXPECT_NE(bad.code, 0);
    EXPECT_CONTAINS(bad.err, flag);
  }
  const Result missing = run("info --cfg does_not_exist.cfg");
  EXPECT_NE(missing.code, 0);
  EXPECT_CONTAINS(missing.err, "does_not_exist.cfg");
}

TEST_F(Cli, MalformedCfgNamesFileAndLine) {
  const std::string cfg = write("bad.cfg",
                                "[net]\nbatch=2\nwidth=8\nheight=8\nchannels=1\n"
                                "[convolutional]\nfilters=4\nsize=abc\nactivation=leaky\n[cost]\n");
  const Result r = run("train --steps 1 --cfg '" + cfg + "' --save-weights out.weights");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "tiletrain: error:");
  EXPECT_CONTAINS(r.err, "bad.cfg:8:");
  EXPECT_CONTAINS(r.err, "size");
  EXPECT_FALSE(fs::exists(path("out.weights")));
  const Result info = run("info --cfg '" + cfg + "'");
  EXPECT_EQ(info.code, 2);
  EXPECT_CONTAINS(info.err, "bad.cfg:8:");
}

TEST_F(Cli, SaveWeightsFolderCheckedBeforeTraining) {
  // A missing folder is reported at start, not after the run (no step is printed).
  const Result r = run("train --steps 2 --cfg '" + fixture("bn_stride") + "' --save-weights no_such_dir/out.weights");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "folder 'no_such_dir' does not exist");
  EXPECT_EQ(r.out.find("step 1"), std::string::npos) << r.out;
}

TEST_F(Cli, TrainSavesWeightsOfTheRightSize) {
  const std::string cfg = fixture("bn_stride");
  const Result r = run("train --steps 2 --cfg '" + cfg + "' --save-weights out.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "step 1");
  ASSERT_TRUE(fs::exists(path("out.weights")));
  const NetSpec net = load_net(cfg);
  EXPECT_EQ(int64_t(fs::file_size(path("out.weights"))), darknet_weights_bytes(net));
  EXPECT_EQ(int64_t(fs::file_size(path("out.weights"))), 6420);  // by hand: 20 + 4*(248 + 1216 + 136)
  Params p(net);
  load_weights(p, net, path("out.weights"));
  EXPECT_EQ(p.seen, 2 * net.batch);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();

  // Continue from the saved file: the counter of images goes on.
  const Result r2 = run("train --steps 1 --cfg '" + cfg + "' --weights out.weights --save-weights out2.weights");
  ASSERT_EQ(r2.code, 0) << r2.err;
  load_weights(p, net, path("out2.weights"));
  EXPECT_EQ(p.seen, 3 * net.batch);
}

TEST_F(Cli, TruncatedWeightsFailAndSaveNothing) {
  const std::string cfg = fixture("bn_stride");
  ASSERT_EQ(run("train --steps 1 --cfg '" + cfg + "' --save-weights full.weights").code, 0);
  const std::string bytes = slurp(path("full.weights"));
  ASSERT_EQ(bytes.size(), 6420u);
  write("truncated.weights", bytes.substr(0, 1000));
  const Result r = run("train --steps 2 --cfg '" + cfg + "' --weights truncated.weights --save-weights out.weights");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "tiletrain: error:");
  EXPECT_CONTAINS(r.err, "truncated.weights");
  EXPECT_CONTAINS(r.err, "6420");
  EXPECT_CONTAINS(r.err, "1000");
  EXPECT_EQ(r.out.find("step 0"), std::string::npos) << "trained despite bad weights:\n" << r.out;
  EXPECT_FALSE(fs::exists(path("out.weights")));

  write("long.weights", bytes + std::string(8, '\0'));
  const Result l = run("train --steps 1 --cfg '" + cfg + "' --weights long.weights --save-weights out.weights");
  EXPECT_EQ(l.code, 2);
  EXPECT_CONTAINS(l.err, "6428");
  EXPECT_CONTAINS(l.err, "6420");
  EXPECT_FALSE(fs::exists(path("out.weights")));
}

TEST_F(Cli, BadGrids) {
  const std::string cfg = fixture("bn_stride");  // 17x19 input
  for (const char* g : {"0x2", "2x0", "-1x2", "abc", "2x", "2x2x2"}) {
    const Result r = run(std::string("train --steps 1 --cfg '") + cfg + "' --grid " + g);
    EXPECT_EQ(r.code, 2) << g << ": " << r.err;
    EXPECT_CONTAINS(r.err, "tiletrain: error:");
    EXPECT_CONTAINS(r.err, std::string("'") + g + "'");
  }
  // Tiles that would own no rows or columns of the input.
  for (const char* cmd : {"train --steps 1", "bench --steps 1 --warmup 0", "plan", "verify --steps 1"}) {
    const Result r = run(std::string(cmd) + " --cfg '" + cfg + "' --grid 50x50");
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out << r.err;
    EXPECT_CONTAINS(r.err, "50x50");
    EXPECT_CONTAINS(r.err, "empty");
  }
  // 6 rows fit the 17-row input but not layer 3's 5 rows: a cut through layer 3 names that
  // layer; the default cut stops before the maps get too small for the grid.
  const Result r = run("train --steps 1 --cfg '" + cfg + "' --grid 6x1 --cut 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "layer 3");
  EXPECT_CONTAINS(r.err, "split 6 ways");
  const Result d = run("plan --cfg '" + cfg + "' --grid 6x1");
  EXPECT_EQ(d.code, 0) << d.err;
  EXPECT_CONTAINS(d.out, "grid 6x1, tiled layers [0, 2)");
}

TEST_F(Cli, BadCutAndGroups) {
  const std::string cfg = fixture("bn_stride");
  const Result c0 = run("train --steps 1 --cfg '" + cfg + "' --cut 0");
  EXPECT_EQ(c0.code, 2);
  EXPECT_CONTAINS(c0.err, "--cut 0");
  const Result c99 = run("plan --cfg '" + cfg + "' --cut 99");
  EXPECT_EQ(c99.code, 2);
  EXPECT_CONTAINS(c99.err, "--cut 99");
  const Result g = run("train --steps 1 --cfg '" + cfg + "' --groups 0,99");
  EXPECT_EQ(g.code, 2);
  EXPECT_CONTAINS(g.err, "--groups");
  EXPECT_CONTAINS(g.err, "99");
  const Result g2 = run("train --steps 1 --cfg '" + cfg + "' --groups 2,1");
  EXPECT_EQ(g2.code, 2);
  EXPECT_CONTAINS(g2.err, "--groups");
  const Result g3 = run("train --steps 1 --cfg '" + cfg + "' --groups x");
  EXPECT_EQ(g3.code, 2);
  EXPECT_CONTAINS(g3.err, "--groups");
}

// A [crop] at layer 0 runs whole on the root before the tiled layers: plan shows the tiled
// layers from 1, --cut and --groups count from there; calibrate measures it and the
// planner's groupings start after it.
TEST_F(Cli, CropBeforeTheTiledLayers) {
  const std::string cfg = path("crop.cfg");
  std::ofstream(cfg) << "[net]\nbatch=2\nwidth=20\nheight=18\nchannels=3\n[crop]\ncrop_height=16\ncrop_width=16\n"
                        "flip=1\n[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=ramp\n[maxpool]\nsize=2\n"
                        "stride=2\n[connected]\noutput=3\nactivation=linear\n[softmax]\n";
  const Result p = run("plan --cfg '" + cfg + "' --grid 2x2");
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_CONTAINS(p.out, "grid 2x2, tiled layers [1, 3), groups start at 1 2");
  const Result c1 = run("train --steps 1 --cfg '" + cfg + "' --cut 1");
  EXPECT_EQ(c1.code, 2);
  EXPECT_CONTAINS(c1.err, "at least layer 1 must be tiled");
  const Result g0 = run("train --steps 1 --cfg '" + cfg + "' --groups 0,2");
  EXPECT_EQ(g0.code, 2);
  EXPECT_CONTAINS(g0.err, "--groups");
  const Result v = run("verify --steps 2 --cfg '" + cfg + "' --grid 2x2 --groups all");
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_CONTAINS(v.out, "OK: tiled training matches untiled");
  const Result cal = run("calibrate --cfg '" + cfg + "' --steps 1 --out model.json");
  ASSERT_EQ(cal.code, 0) << cal.err;
  const Result opt = run("plan --optimize --cfg '" + cfg + "' --cluster model.json --top 3");
  ASSERT_EQ(opt.code, 0) << opt.err;
  EXPECT_EQ(opt.out.find("--groups 0"), std::string::npos) << opt.out;
  // Every one-process command line it prints runs (groupings from layer 1).
  std::istringstream lines(opt.out);
  int ran = 0;
  for (std::string line; std::getline(lines, line);) {
    const std::string head = "mpirun -np 1 build/tiletrain ", tail = " --steps 100";
    const size_t at = line.find(head);
    if (at == std::string::npos || line.size() < tail.size() || line.substr(line.size() - tail.size()) != tail)
      continue;
    const std::string args = line.substr(at + head.size(), line.size() - tail.size() - at - head.size());
    const Result t = run(args + " --steps 1");
    EXPECT_EQ(t.code, 0) << args << ": " << t.err;
    ++ran;
  }
  EXPECT_GT(ran, 0) << opt.out;
}

TEST_F(Cli, VersionAndMisspellings) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_CONTAINS(r.out, "tiletrain ");
  EXPECT_CONTAINS(r.out, "oneDNN ");
  r = run("trian --cfg x.cfg");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "unknown command 'trian'; did you mean 'train'?");
  r = run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "unknown command 'frobnicate'");
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  r = run("train --cfg '" + fixture("bn_stride") + "' --steps 1 --thread 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "unknown option '--thread'; did you mean '--threads'?");
  r = run("bench --cfg '" + fixture("bn_stride") + "' --grdi=2x2");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "unknown option '--grdi'; did you mean '--grid'?");
}

TEST_F(Cli, ThreadsDefaultToTheCoresOfTheHostSharedByItsProcesses) {
  const std::string cfg = " --cfg '" + fixture("bn_stride") + "' --steps 1";
  // As mpirun would tell a process that shares the host with 64 others: one thread.
  Result r = run("train" + cfg, "OMPI_COMM_WORLD_LOCAL_SIZE=64");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "tiletrain: 1 thread(s) per process");
  EXPECT_CONTAINS(r.err, "64 process(es) on this host");
  r = run("train" + cfg + " --threads 3");
  EXPECT_EQ(r.err.find("thread(s) per process"), std::string::npos) << "printed although --threads was given";
  // Whatever data it trains on, train says so first.
  EXPECT_EQ(r.out.rfind("training ", 0), 0u) << r.out;
  EXPECT_CONTAINS(r.out, "on synthetic data");
}

TEST_F(Cli, BenchJsonLastLine) {
  const Result r = run("bench --steps 2 --warmup 1 --json --layers --grid 2x2 --cfg '" + fixture("pool_mix") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  // With --json, stdout is the one JSON line and nothing else (the table goes to stderr).
  std::istringstream in(r.out);
  std::string line, last;
  int lines = 0;
  while (std::getline(in, line))
    if (!line.empty()) last = line, ++lines;
  EXPECT_EQ(lines, 1) << r.out;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(last)) << last;
  for (const char* k : {"step_s", "fwd_s", "bwd_s", "update_s", "peak_rss_mb"}) {
    ASSERT_TRUE(j.contains(k)) << k << " missing in " << last;
    EXPECT_TRUE(j[k].is_number()) << k;
    EXPECT_GE(j[k].get<double>(), 0) << k;
  }
  EXPECT_GT(j["step_s"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_mb"].get<double>(), 0);
  EXPECT_LE(j["fwd_s"].get<double>() + j["bwd_s"].get<double>(), 2 * j["step_s"].get<double>() + 1e-3);
  // Every timed step, the fastest of them, and (--layers) each layer's mean time per pass
  // on the one rank, which together fit inside the mean step.
  ASSERT_EQ(j["all_step_s"].size(), 2u);
  const double a = j["all_step_s"][0].get<double>(), b = j["all_step_s"][1].get<double>();
  EXPECT_DOUBLE_EQ(j["min_step_s"].get<double>(), std::min(a, b));
  ASSERT_EQ(j["layer_times"].size(), 1u);
  const nlohmann::json& layers = j["layer_times"][0];
  EXPECT_EQ(layers.size(), 6u);  // pool_mix: conv, max-pool, conv, conv, max-pool, cost
  double sum = 0, fwd = 0;
  for (const auto& e : layers)
    for (const char* pass : {"fwd_s", "fwd_pointwise_s", "bwd_pointwise_s", "bwd_data_s", "bwd_weights_s"}) {
      ASSERT_TRUE(e.contains(pass)) << e.dump();
      EXPECT_GE(e[pass].get<double>(), 0) << e.dump();
      sum += e[pass].get<double>();
      if (std::string(pass) == "fwd_s") fwd += e[pass].get<double>();
    }
  EXPECT_GT(fwd, 0);
  EXPECT_LE(sum, (a + b) / 2 + 1e-3);
  EXPECT_CONTAINS(run("bench --steps 1 --warmup 0 --layers --cfg '" + fixture("pool_mix") + "'").out, "bwd_weights");
}

TEST_F(Cli, PlanJsonParses) {
  const Result r = run("plan --json --grid 2x3 --cfg '" + fixture("pool_mix") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_EQ(j["tiles"].size(), 6u);
}

// plan --schedule lists the compiled steps (engine/schedule.hpp), numbered: the weights
// formatted before each use are steps; with --low-memory the gradient reductions too.
TEST_F(Cli, PlanPrintsTheSchedule) {
  const std::string cfg = "--grid 1x2 --groups 0,2 --cfg '" + fixture("pool_mix") + "'";
  const Result r = run("plan --schedule " + cfg);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "    1  scatter input\n");
  EXPECT_CONTAINS(r.out, "  post halo layer 2 convolutional (its input from layer 1)\n");
  EXPECT_CONTAINS(r.out, "  backward halo layer 2 convolutional\n");
  EXPECT_CONTAINS(r.out, "  fetch weights layer 2 convolutional for forward\n");
  EXPECT_EQ(r.out.find("reduce gradient"), std::string::npos) << r.out;
  const Result low = run("plan --schedule --low-memory --json " + cfg);
  ASSERT_EQ(low.code, 0) << low.err;
  const nlohmann::json j = nlohmann::json::parse(low.out);
  int fetches = 0, reductions = 0;
  for (const auto& st : j["schedule"]["forward"]) fetches += st["step"] == "fetch weights";
  for (const auto& st : j["schedule"]["backward"]) reductions += st["step"] == "reduce gradient";
  EXPECT_EQ(fetches, 3);  // the three convolutions
  EXPECT_EQ(reductions, 3);
}

TEST_F(Cli, InfoPrintsALinePerLayer) {
  for (const char* name : {"bn_stride", "classifier", "fc", "pool_mix"}) {
    SCOPED_TRACE(name);
    const std::string cfg = fixture(name);
    const NetSpec net = load_net(cfg);
    const Result r = run("info --cfg '" + cfg + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    // Layer rows start with the layer index, then the layer type.
    std::istringstream in(r.out);
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
      if (line.rfind("total", 0) == 0) break;  // the kernel table follows
      std::istringstream ls(line);
      int index = -1;
      std::string type;
      if (!(ls >> index >> type)) continue;
      ASSERT_EQ(index, rows) << line;
      ASSERT_LT(size_t(index), net.layers.size());
      EXPECT_EQ(type.rfind(net.layers[size_t(index)].type_name(), 0), 0u) << line;
      ++rows;
    }
    EXPECT_EQ(rows, int(net.layers.size())) << r.out;
    EXPECT_CONTAINS(r.out, "total");
  }
}

TEST_F(Cli, VerifySmallGrid) {
  const Result r = run("verify --steps 1 --grid 2x2 --cfg '" + fixture("bn_stride") + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "OK");
}

// A reference (unoptimised) oneDNN kernel never runs silently: forced onto oneDNN, every
// subcommand names the layer and pass in one warning line; the default path has none.
// oneDNN capped to AVX2 has only a reference kernel for backward-weights of a 1-channel
// plain input (Fashion-MNIST's first layer) on x86, and only reference kernels on ARM.
TEST_F(Cli, WarnsWhenAReferenceKernelWouldRun) {
  const std::string cfg = test::source_dir() + "/cfgs/fashion-mnist.cfg";
  const std::string env = "ONEDNN_MAX_CPU_ISA=AVX2";
  const std::string where = "layer 0 backward-weights (";
  for (const std::string cmd : {"info", "plan --grid 2x2", "bench --steps 1 --warmup 0 --batch 2",
                                "train --steps 1 --batch 2", "verify --steps 1 --batch 2 --grid 2x1"}) {
    SCOPED_TRACE(cmd);
    const Result forced = run(cmd + " --cfg '" + cfg + "' --kernels onednn", env);
    EXPECT_EQ(forced.code, 0) << forced.err;
    EXPECT_NE(forced.err.find("warning: oneDNN's reference convolution runs for"), std::string::npos) << forced.err;
    EXPECT_NE(forced.err.find(where), std::string::npos) << forced.err;
    EXPECT_NE(forced.err.find("slower"), std::string::npos) << forced.err;
    const Result def = run(cmd + " --cfg '" + cfg + "'", env);
    EXPECT_EQ(def.code, 0) << def.err;
    EXPECT_EQ(def.err.find("reference"), std::string::npos) << def.err;
  }
  const Result bad = run("info --cfg '" + cfg + "' --kernels fast");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--kernels"), std::string::npos) << bad.err;
}

#if defined(__x86_64__)
// An x86 CPU without AVX2 (here: oneDNN capped to SSE4.1) is named at start; training
// still runs, and still exactly.
TEST_F(Cli, WarnsOnACpuWithoutAvx2) {
  const std::string cfg = test::source_dir() + "/cfgs/fashion-mnist.cfg";
  const Result r = run("verify --cfg '" + cfg + "' --steps 1 --batch 2 --grid 2x2", "ONEDNN_MAX_CPU_ISA=SSE41");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("no AVX2"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("OK: tiled training matches untiled"), std::string::npos) << r.out;
  EXPECT_EQ(run("info --cfg '" + cfg + "'").err.find("no AVX2"), std::string::npos);  // this CPU, uncapped
}
#endif

// info prints the CPU, the channel block and a kernel per layer and pass.
TEST_F(Cli, InfoPrintsTheKernelTable) {
  const Result r = run("info --cfg '" + test::source_dir() + "/cfgs/yolov2-16.cfg' --kernels own");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("maps in blocks of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forward              backward-data        backward-weights"), std::string::npos) << r.out;
  // 12 convolutions, every pass on own kernels (layer 0 has no backward-data)
  size_t own = 0;
  for (size_t p = r.out.find("own:"); p != std::string::npos; p = r.out.find("own:", p + 1)) ++own;
  EXPECT_EQ(own, 12u * 3 - 1) << r.out;
}

}  // namespace
}  // namespace tt

namespace tt {
namespace {

// calibrate → a device model; a cluster file of profile-only devices that uses it; plan
// prints a prediction with bench's names; --optimize the best partitions and their
// command lines; bad cluster files name file and field, with a non-zero exit.
TEST_F(Cli, CalibratePlanAndOptimize) {
  const std::string cfg = fixture("pool_mix");
  const Result cal = run("calibrate --cfg '" + cfg + "' --steps 1 --out model.json");
  ASSERT_EQ(cal.code, 0) << cal.err;
  EXPECT_CONTAINS(cal.out, "wrote model.json");
  EXPECT_CONTAINS(cal.err, "calibrate: kernels: 1 of ");  // progress while it measures
  // What calibrate wrote, plan --cluster reads: a cluster of this one device, said so.
  const Result here = run("plan --grid 2x1 --cfg '" + cfg + "' --cluster model.json");
  EXPECT_EQ(here.code, 0) << here.err;
  EXPECT_CONTAINS(here.err, "model.json is a device model (calibrate in one process): planning for that one device");
  EXPECT_CONTAINS(here.out, "predicted step");
  const std::string cluster =
      write("c.json", R"({"devices": [{"name": "a", "profile": "pi3"}, {"name": "b", "profile": "pi4"}],
                                                 "links": {"bandwidth_mbit": 100, "latency_us": 200}})");
  const Result plan = run("plan --json --grid 2x1 --cfg '" + cfg + "' --cluster c.json --model model.json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const nlohmann::json j = nlohmann::json::parse(plan.out);
  for (const char* k : {"step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s", "peak_rss_mb_max"})
    EXPECT_GT(j["prediction"].value(k, -1.0), k == std::string("io_s") || k == std::string("halo_s") ? -1e-12 : 0) << k;
  EXPECT_EQ(j["prediction"]["ranks"].size(), 2u);
  const Result text = run("plan --grid 2x1 --cfg '" + cfg + "' --cluster c.json --model model.json");
  EXPECT_CONTAINS(text.out, "predicted step");
  const Result opt = run("plan --optimize --cfg '" + cfg + "' --cluster c.json --model model.json --top 3");
  ASSERT_EQ(opt.code, 0) << opt.err;
  EXPECT_CONTAINS(opt.out, "mpirun -np 2 --host a:1,b:1 build/tiletrain train --cfg ");  // real hosts a and b
  // Every device has a pi3's 1 GB: 1 MB each does not fit, and the shortfall is named.
  write("small.json", R"({"devices": [{"name": "a", "profile": "pi3", "memory_mb": 1}],
                          "links": {"bandwidth_mbit": 100, "latency_us": 200}})");
  const Result none = run("plan --optimize --cfg '" + cfg + "' --cluster small.json --model model.json");
  EXPECT_EQ(none.code, 1);
  EXPECT_CONTAINS(none.out, "nothing fits");
  EXPECT_CONTAINS(none.out, "device a is");
  // Bad input.
  write("zero.json",
        R"({"devices": [{"name": "a", "profile": "pi3"}], "links": {"bandwidth_mbit": 0, "latency_us": 1}})");
  const Result zero = run("plan --cfg '" + cfg + "' --cluster zero.json --model model.json");
  EXPECT_EQ(zero.code, 2);
  EXPECT_CONTAINS(zero.err, "zero.json: links.bandwidth_mbit");
  const Result nomodel = run("plan --cfg '" + cfg + "' --cluster c.json");
  EXPECT_EQ(nomodel.code, 2);
  EXPECT_CONTAINS(nomodel.err, "tiletrain calibrate");
  const Result other = run("plan --cfg '" + fixture("bn_stride") + "' --cluster c.json --model model.json");
  EXPECT_EQ(other.code, 2);
  EXPECT_CONTAINS(other.err, "model.json: calibrated on");
  const Result badout = run("calibrate --cfg '" + cfg + "' --out no/such/dir/m.json");
  EXPECT_EQ(badout.code, 2);
  EXPECT_CONTAINS(badout.err, "does not exist");
}

}  // namespace
}  // namespace tt

namespace tt {
namespace {

// A detector end to end on a few generated pictures: train --data X.data (2 steps, a
// checkpoint, metrics), detect (PNGs with boxes), map; and the errors a user meets.
class CliDetection : public Cli {
 protected:
  std::string shapes() {
    const std::string cmd = "/usr/bin/python3 '" + test::source_dir() + "/scripts/make_shapes_dataset.py' '" +
                            path("shapes") + "' --train 8 --valid 4 >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return "";
    return path("shapes/shapes.data");
  }
  const std::string cfg = test::source_dir() + "/cfgs/yolov2-tiny-shapes.cfg";
};

TEST_F(CliDetection, TrainDetectMap) {
  const std::string data = shapes();
  if (data.empty()) GTEST_SKIP() << "python3-pil or python3-numpy missing (scripts/setup.sh installs them)";
  Result r = run("train --cfg '" + cfg + "' --data '" + data + "' --batch 4 --steps 2 --log-every 1 --grid 2x2" +
                 " --metrics m.jsonl --checkpoint ck --save-weights w.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("coord"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("VOC mAP@0.5 on 4 pictures"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting for data"), std::string::npos);
  EXPECT_CONTAINS(r.out, "a detector usually needs tens of epochs");  // 2 steps is not a training
  EXPECT_CONTAINS(r.out, "checkpoint of step 2 written into ck");
  const std::string metrics = slurp(path("m.jsonl"));
  EXPECT_NE(metrics.find("\"loss_obj\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"map\""), std::string::npos) << metrics;
  EXPECT_CONTAINS(metrics, "\"batch\":4");  // with "step_s": plot_metrics.py's throughput
  EXPECT_CONTAINS(metrics, "\"step_s\":");
  EXPECT_TRUE(fs::exists(path("ck/step-00000002/weights")));
  r = run("detect --cfg '" + cfg + "' --weights w.weights --names '" + data + "' --thresh 0.001 --out pics '" +
          path("shapes/images/valid/00000.jpg") + "' '" + path("shapes/images/valid/00001.jpg") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* p : {"pics/00000.png", "pics/00001.png"}) {
    const std::string png = slurp(path(p));
    ASSERT_GT(png.size(), 100u) << p;
    EXPECT_EQ(png.substr(1, 3), "PNG") << p;
  }
  EXPECT_NE(r.out.find("%  box ("), std::string::npos) << "no detection printed at threshold 0.001:\n" << r.out;
  EXPECT_CONTAINS(r.out, "00000.jpg: 128x128, ");
  EXPECT_CONTAINS(r.out, " object(s)\n");
  // A threshold nothing passes: still a line per picture, saying so.
  r = run("detect --cfg '" + cfg + "' --weights w.weights --names '" + data + "' --thresh 1.5 '" +
          path("shapes/images/valid/00000.jpg") + "' '" + path("shapes/images/valid/00001.jpg") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "00000.jpg: 128x128, no object above --thresh 1.5\n");
  EXPECT_CONTAINS(r.out, "00001.jpg: 128x128, no object above --thresh 1.5\n");
  r = run("map --cfg '" + cfg + "' --weights w.weights --data '" + data + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("VOC mAP@0.5 on 4 pictures"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("triangle"), std::string::npos) << r.out;
}

// YOLOv1 ([detection] after a fully connected layer) on the shapes set: Darknet's region
// crops, tiled 2x2; then detect and map on its boxes.
TEST_F(CliDetection, Yolov1TrainsOnADataSet) {
  const std::string data = shapes();
  if (data.empty()) GTEST_SKIP() << "python3-pil or python3-numpy missing (scripts/setup.sh installs them)";
  write("v1.cfg", R"([net]
batch=4
width=64
height=64
channels=3
learning_rate=0.001
momentum=0.9
hue=.1
saturation=1.5
exposure=1.5

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[connected]
output=144
activation=linear

[detection]
classes=4
coords=4
rescore=1
side=4
num=1
softmax=0
sqrt=1
jitter=.2
object_scale=1
noobject_scale=.5
class_scale=1
coord_scale=5
)");
  Result r =
      run("train --cfg v1.cfg --data '" + data + "' --steps 3 --log-every 1 --grid 2x2 --save-weights v1.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "step 3/3: loss ");
  EXPECT_CONTAINS(r.out, "coord");
  EXPECT_CONTAINS(r.out, "VOC mAP@0.5 on 4 pictures");  // its boxes decoded as Darknet's validate_yolo does
  EXPECT_TRUE(fs::exists(path("v1.weights")));
  r = run("detect --cfg v1.cfg --weights v1.weights --names '" + data + "' --thresh 0.001 --out pics '" +
          path("shapes/images/valid/00000.jpg") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "00000.jpg: 128x128, ");
  EXPECT_CONTAINS(r.out, "%  box (");
  EXPECT_GT(slurp(path("pics/00000.png")).size(), 100u);
  r = run("map --cfg v1.cfg --weights v1.weights --data '" + data + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "VOC mAP@0.5 on 4 pictures");
  // classes= of the .data against the layer's
  write("five.names", "a\nb\nc\nd\ne\n");
  write("five.data", "classes=5\ntrain=" + path("shapes/train.txt") + "\nnames=five.names\n");
  r = run("train --cfg v1.cfg --data five.data --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "v1.cfg:28: [detection] has classes=4 but ");
}

// YOLO9000's way on the shapes set: a [region] over a class tree whose leaves are the four
// shapes (map=). Training scores the held-out pictures, and map, in the data set's classes.
TEST_F(CliDetection, ClassTreeIsScoredThroughItsMap) {
  const std::string data = shapes();
  if (data.empty()) GTEST_SKIP() << "python3-pil or python3-numpy missing (scripts/setup.sh installs them)";
  write("shapes.tree", "round -1\nstraight -1\ncircle 0\nsquare 1\ntriangle 1\ncross 1\n");
  write("shapes.map", "2\n3\n4\n5\n");  // circle, square, triangle, cross (shapes.names)
  std::string text = slurp(cfg);
  const size_t filters = text.rfind("filters=45");
  ASSERT_NE(filters, std::string::npos);
  text.replace(filters, 10, "filters=55");  // 5 boxes x (4 + 1 + 6 classes)
  const size_t classes = text.find("classes=4", filters);
  ASSERT_NE(classes, std::string::npos);
  text.replace(classes, 9, "classes=6\ntree=" + path("shapes.tree") + "\nmap=" + path("shapes.map"));
  write("tree.cfg", text);
  Result r = run("train --cfg tree.cfg --data '" + data + "' --batch 4 --steps 2 --grid 2x2 --save-weights t.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "VOC mAP@0.5 on 4 pictures");
  r = run("map --cfg tree.cfg --weights t.weights --data '" + data + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "VOC mAP@0.5 on 4 pictures");
  EXPECT_CONTAINS(r.out, "triangle");  // the data set's names: its classes, not the tree's
  EXPECT_EQ(r.out.find("straight"), std::string::npos) << r.out;
  // detect names the tree's classes: a data set's name where one maps there, else a number.
  r = run("detect --cfg tree.cfg --weights t.weights --names '" + data + "' --thresh 0 '" +
          path("shapes/images/valid/00000.jpg") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "%  box (");
  // By position the data's four names would label tree classes 0-3 (circle the root
  // "round", which the walk passes whenever it is likelier than "straight") and leave 4
  // and 5 (triangle, cross) numbered; through the map circle is class 2, the only child of
  // "round", where the walk ends in most boxes.
  EXPECT_CONTAINS(r.out, "circle: ");
  EXPECT_EQ(r.out.find("class 4: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("class 5: "), std::string::npos) << r.out;
}

TEST_F(CliDetection, BadInputIsNamed) {
  const std::string data = shapes();
  if (data.empty()) GTEST_SKIP() << "python3-pil or python3-numpy missing (scripts/setup.sh installs them)";
  // a classifier is not a detector
  Result r =
      run("map --cfg '" + test::source_dir() + "/cfgs/fashion-mnist.cfg' --weights x.weights --data '" + data + "'");
  EXPECT_NE(r.code, 0);
  // (the weights file is read first: make one that exists)
  r = run("train --cfg '" + cfg + "' --data '" + data + "' --batch 4 --steps 1 --save-weights w.weights");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("detect --cfg '" + cfg + "' --weights w.weights missing.jpg");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing.jpg"), std::string::npos) << r.err;
  // another class count than the cfg's
  write("five.names", "a\nb\nc\nd\ne\n");
  write("five.data", "classes=5\ntrain=" + path("shapes/train.txt") + "\nnames=five.names\n");
  r = run("train --cfg '" + cfg + "' --data five.data --batch 4 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("classes=4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("five.data"), std::string::npos) << r.err;
  // a detector takes RGB pictures: a grey net would be given 3 channels per pixel
  std::string grey = slurp(cfg);
  write("grey.cfg", grey.replace(grey.find("channels=3"), 10, "channels=1"));
  r = run("train --cfg grey.cfg --data '" + data + "' --batch 4 --steps 1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "grey.cfg: a detector reads RGB pictures");
  // a label outside [0, 1] stops the run naming file and line
  write("shapes/labels/train/00003.txt", "0 0.5 0.5 0.2 0.2\n1 0.5 1.5 0.2 0.2\n");
  r = run("train --cfg '" + cfg + "' --data '" + data + "' --batch 8 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("00003.txt:2:"), std::string::npos) << r.err;
  // an unreadable picture: stops, or is skipped with --skip-bad-images
  write("shapes/labels/train/00003.txt", "0 0.5 0.5 0.2 0.2\n");
  write("shapes/images/train/00005.jpg", "garbage");
  r = run("train --cfg '" + cfg + "' --data '" + data + "' --batch 8 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("00005.jpg"), std::string::npos) << r.err;
  r = run("train --cfg '" + cfg + "' --data '" + data + "' --batch 8 --steps 1 --skip-bad-images");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: skipping a bad image"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tt
