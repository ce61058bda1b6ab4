// Long runs that go wrong, as a user meets them (the engine's side of hostile input; the
// data and cfg side is test_hostile_input.cpp): a run that diverges, a checkpoint folder
// reused or shared by two runs, grids and sizes no device can hold, weights that are not
// numbers. Each must stop with a message naming what and where, an exit status below 128,
// and lose no file that existed before.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "cli_runner.hpp"
#include "engine/checkpoint.hpp"
#include "model/params.hpp"
#include "util/error.hpp"

namespace tt::cli {
namespace {

class HostileRun : public Cli {
 protected:
  // cfgs/small-classifier.cfg with its learning rate replaced: 1e12 diverges in a few steps.
  std::string classifier(const std::string& name, const std::string& rate) const {
    std::ifstream in(test::source_dir() + "/cfgs/small-classifier.cfg");
    std::string text, line;
    while (std::getline(in, line)) text += (line.rfind("learning_rate", 0) == 0 ? "learning_rate=" + rate : line) + "\n";
    return write(name, text);
  }
  // The step-N folders of a checkpoint folder, each with its files' bytes.
  std::map<std::string, std::string> snapshot(const std::string& dir) const {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(path(dir)))
      if (e.is_regular_file() && e.path().filename() != ".lock")
        files[fs::relative(e.path(), dir_).string()] = slurp(e.path());
    return files;
  }
};

TEST_F(HostileRun, DivergingRunStopsNamingStepAndLayerAndKeepsWhatWasSaved) {
  const std::string cfg = classifier("div.cfg", "1e12");
  const std::string before = "not to be overwritten";
  write("w.weights", before);
  const Result r = run("train --cfg div.cfg --steps 30 --checkpoint ck --checkpoint-every 1 --save-weights w.weights");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "training diverged at step ");
  EXPECT_CONTAINS(r.err, "layer ");
  EXPECT_CONTAINS(r.err, "inf or NaN");
  EXPECT_EQ(slurp(path("w.weights")), before);
  // Every checkpoint written before the divergence holds finite weights (load_weights
  // refuses any other), and no half-written one is left.
  const NetSpec net = load_net(cfg);
  int finished = 0;
  for (const auto& e : fs::directory_iterator(path("ck"))) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind(".tmp", 0), std::string::npos) << "left behind: " << name;
    if (name.rfind("step-", 0) != 0) continue;
    Params p(net);
    EXPECT_NO_THROW(load_weights(p, net, (e.path() / "weights").string())) << name;
    ++finished;
  }
  EXPECT_GE(finished, 1);  // the first steps are still finite
}

TEST_F(HostileRun, WeightsThatAreNotNumbersAreNeitherReadNorWritten) {
  const std::string cfg = classifier("c.cfg", "0.01");
  const NetSpec net = load_net(cfg);
  Params p(net);
  init_params(p, net, 1);
  save_weights(p, net, path("good.weights"));
  const std::string good = slurp(path("good.weights"));
  p.values[p.slices[2].weights + 5] = std::numeric_limits<float>::quiet_NaN();
  try {
    save_weights(p, net, path("good.weights"));
    ADD_FAILURE() << "NaN weights were written";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "layer 2");
    EXPECT_CONTAINS(e.what(), "not finite");
  }
  EXPECT_EQ(slurp(path("good.weights")), good);
  // A file holding an infinity (written by hand) is refused on reading, naming the layer.
  std::string bad = good;
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(bad.data() + 20 + 4 * p.slices[2].weights, &inf, 4);  // header 20 bytes; layer 0's arrays lead
  write("bad.weights", bad);
  const Result r = run("train --cfg c.cfg --steps 1 --weights bad.weights");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "bad.weights");
  EXPECT_CONTAINS(r.err, "not finite");
}

TEST_F(HostileRun, CheckpointFolderServesOneRun) {
  classifier("c.cfg", "0.01");
  ASSERT_EQ(run("train --cfg c.cfg --steps 2 --checkpoint ck --checkpoint-every 1").code, 0);
  const auto kept = snapshot("ck");
  ASSERT_TRUE(kept.count("ck/step-00000002/weights"));
  EXPECT_CONTAINS(slurp(path("ck/run.json")), "c.cfg");
  // Another run (here: another seed) into the same folder is refused before it trains.
  Result r = run("train --cfg c.cfg --steps 4 --seed 7 --checkpoint ck --checkpoint-every 1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "folder 'ck' belongs to a run of");
  EXPECT_CONTAINS(r.err, "--resume ck");
  EXPECT_EQ(r.out.find("step 0"), std::string::npos) << "it trained:\n" << r.out;
  EXPECT_EQ(snapshot("ck"), kept);
  // So is a run resuming from one folder into another that holds a run.
  ASSERT_EQ(run("train --cfg c.cfg --steps 1 --checkpoint other").code, 0);
  const auto other = snapshot("other");
  r = run("train --cfg c.cfg --steps 3 --resume ck --checkpoint other");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(snapshot("other"), other);
  EXPECT_EQ(snapshot("ck"), kept);
  // The run itself goes on.
  r = run("train --cfg c.cfg --steps 3 --resume ck --checkpoint ck --checkpoint-every 1");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "resumed at step 2");
  EXPECT_TRUE(fs::exists(path("ck/step-00000003/weights")));
}

TEST_F(HostileRun, CheckpointsOfAnUnknownRunAreNotPruned) {
  // A folder of checkpoints with no run.json (an older tiletrain's) is not taken over either.
  classifier("c.cfg", "0.01");
  ASSERT_EQ(run("train --cfg c.cfg --steps 2 --checkpoint ck --checkpoint-every 1").code, 0);
  fs::remove(path("ck/run.json"));
  const auto kept = snapshot("ck");
  const Result r = run("train --cfg c.cfg --steps 5 --checkpoint ck --checkpoint-every 1 --keep-checkpoints 1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "already holds checkpoints (newest step-00000002)");
  EXPECT_EQ(snapshot("ck"), kept);
}

TEST_F(HostileRun, CheckpointFolderInUseIsRefused) {
  classifier("c.cfg", "0.01");
  fs::create_directories(path("ck"));
  // This process holds the folder's lock, as a running tiletrain does.
  const int fd = ::open(path("ck/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(::write(fd, "process 1 on elsewhere\n", 23), 23);
  const Result r = run("train --cfg c.cfg --steps 2 --checkpoint ck");
  ::close(fd);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "folder 'ck' is in use by another run (process 1 on elsewhere)");
  EXPECT_FALSE(fs::exists(path("ck/step-00000002")));
  // Released, the folder is free again.
  EXPECT_EQ(run("train --cfg c.cfg --steps 2 --checkpoint ck").code, 0);
}

TEST_F(HostileRun, GridsAndSizesNoDeviceHoldsAreRefusedBeforeAllocating) {
  classifier("c.cfg", "0.01");
  // Each refusal comes before any allocation: under a 2 GB address-space limit a run that
  // allocated first would die of it instead.
  const std::string cap = "ulimit -v 2000000 && ";
  for (const char* grid : {"2000000000x1", "99999999999x1", "1x-3", "2x", "0x2"}) {
    const std::string cmd = "sh -c \"" + cap + "'" + TILETRAIN_BINARY + "' train --cfg c.cfg --steps 1 --grid " + grid +
                            " >stdout 2>stderr\"";
    const int status = std::system(("cd '" + dir_.string() + "' && " + cmd).c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << grid << ": " << slurp(path("stderr"));
    EXPECT_CONTAINS(slurp(path("stderr")), std::string("--grid '") + grid + "'");
  }
  Result r = run("train --cfg c.cfg --steps 1 --grid 30x1");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "grid 30x1 leaves tile rows empty at layer");
  // 64 samples of 6000x6000: hundreds of GB of maps, refused naming the largest one.
  r = run("train --cfg c.cfg --steps 1 --size 6000x6000 --batch 64");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "this run needs at least");
  EXPECT_CONTAINS(r.err, "the largest map, layer 0 [convolutional] of 16x6000x6000 for 64 sample(s)");
  // Past the estimate, an allocation the system refuses (here a 3 GB address-space limit)
  // is a message too, not an abort. (Where the machine itself has less than the run's
  // lower bound, the estimate refuses it first.)
  const int status = std::system(("cd '" + dir_.string() + "' && sh -c \"ulimit -v 3000000 && '" + TILETRAIN_BINARY +
                                  "' train --cfg c.cfg --steps 1 --size 2000x2000 --batch 8 >stdout 2>stderr\"")
                                     .c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << slurp(path("stderr"));
  const std::string err = slurp(path("stderr"));
  EXPECT_TRUE(err.find("error: out of memory") != std::string::npos ||
              err.find("this run needs at least") != std::string::npos)
      << err;
  r = run("train --cfg c.cfg --steps 1 --size 100000x10");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "input size 100000x10 is larger than a device can hold");
}

TEST_F(HostileRun, NumbersOnTheCommandLineAreCheckedNotWrapped) {
  classifier("c.cfg", "0.01");
  const std::pair<const char*, const char*> cases[] = {
      {"--seed -1", "--seed: '-1' is not a whole number"},
      {"--seed 99999999999999999999999", "is not a whole number from 0 to 2^64-1"},
      {"--peer-timeout nan", "--peer-timeout: 'nan' is not a number of seconds"},
      {"--stall-timeout inf", "--stall-timeout: 'inf' is not a number of seconds"},
      {"--threads 5000", "--threads: Value 5000 not in range 1 to 1024"},
      {"--cut -5", "--cut -5: a layer count"},
      {"--size 64x99999999999", "--size '64x99999999999' must look like RxC"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = run(std::string("train --cfg c.cfg --steps 1 ") + args);
    EXPECT_GT(r.code, 0) << args;
    EXPECT_LT(r.code, 128) << args;
    EXPECT_CONTAINS(r.err, message);
    EXPECT_EQ(r.out.find("step 0"), std::string::npos) << args << " trained";
  }
  // Outputs written at the end of a run are checked before it starts.
  const Result r = run("train --cfg " + test::source_dir() +
                       "/cfgs/fashion-mnist.cfg --data fashion-mnist --steps 1 --metrics nowhere/m.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "cannot write 'nowhere/m.jsonl': folder 'nowhere' does not exist");
}

}  // namespace
}  // namespace tt::cli
