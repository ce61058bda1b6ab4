// Checkpoints (engine/checkpoint.hpp): a run stopped after k steps and resumed from its
// checkpoint ends bit-identical to the uninterrupted run (weights, batch-norm statistics,
// momentum), also with dropout (its masks follow the step) and a learning-rate schedule
// (it follows `seen`); old checkpoints are pruned; bad checkpoints are refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <tuple>

#include "data/synthetic.hpp"
#include "engine/checkpoint.hpp"
#include "engine/trainer.hpp"
#include "test_util.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

const char* kCfg =
    "[net]\nbatch=4\nsubdivisions=2\nwidth=12\nheight=12\nchannels=2\nlearning_rate=0.05\nmomentum=0.9\n"
    "decay=0.0005\nburn_in=2\npolicy=steps\nsteps=4\nscales=0.5\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=relu\n"
    "[connected]\noutput=16\nactivation=leaky\n"
    "[dropout]\nprobability=0.3\n"
    "[connected]\noutput=5\nactivation=linear\n"
    "[softmax]\n";

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tt_checkpoint_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Trains steps [from, to) with data that depends only on the step.
void train(Trainer& tr, const NetSpec& net, int from, int to) {
  std::vector<float> in, truth;
  for (int s = from; s < to; ++s) {
    synthetic_batch(net, net.batch, 1000 + uint64_t(s), in, truth);
    tr.train_step(in.data(), truth.data());
  }
}

TEST_F(CheckpointTest, ResumedRunIsBitIdentical) {
  const NetSpec net = parse_net(kCfg, "ckpt.cfg");
  TrainOptions opt;
  opt.rows = opt.cols = 2;
  LocalComm comm;
  Params whole(net);
  test::random_params(whole, net, 3);
  Params stopped = whole;
  {
    Trainer tr(net, whole, opt, comm);
    train(tr, net, 0, 6);
  }
  std::vector<float> m_whole;
  {  // the same run again, for its momentum
    Params again = stopped;
    Trainer tr(net, again, opt, comm);
    train(tr, net, 0, 6);
    const std::span<const float> m = tr.momentum();
    m_whole.assign(m.begin(), m.end());
    ASSERT_EQ(0, std::memcmp(again.values.data(), whole.values.data(), whole.values.size() * 4))
        << "training is not deterministic; the comparison below would prove nothing";
  }
  {
    Trainer tr(net, stopped, opt, comm);
    train(tr, net, 0, 3);
    save_checkpoint(dir_.string(), 2, net, stopped, tr.momentum(),
                    {.step = tr.step(), .seed = 1, .cfg = "ckpt.cfg", .params = stopped.size()});
  }
  Params resumed(net);
  const Checkpoint c = load_checkpoint(dir_.string(), net, resumed);
  EXPECT_EQ(c.meta.step, 3);
  EXPECT_EQ(resumed.seen, 3 * net.batch);
  Trainer tr(net, resumed, opt, comm);
  tr.restore_momentum(c.momentum);
  tr.set_step(c.meta.step);
  train(tr, net, 3, 6);
  EXPECT_EQ(0, std::memcmp(resumed.values.data(), whole.values.data(), whole.values.size() * 4)) << "weights";
  EXPECT_TRUE(resumed.rolling_mean == whole.rolling_mean && resumed.rolling_var == whole.rolling_var);
  const std::span<const float> m = tr.momentum();
  EXPECT_EQ(0, std::memcmp(m.data(), m_whole.data(), m.size() * 4)) << "momentum";

  // Resuming without the step (dropout masks of steps 0-2 again) must differ: the check
  // above can fail.
  Params wrong(net);
  const Checkpoint c2 = load_checkpoint(dir_.string(), net, wrong);
  Trainer tw(net, wrong, opt, comm);
  tw.restore_momentum(c2.momentum);
  train(tw, net, 3, 6);
  EXPECT_NE(0, std::memcmp(wrong.values.data(), whole.values.data(), whole.values.size() * 4));
}

TEST_F(CheckpointTest, KeepsTheNewestAndRefusesBadOnes) {
  const NetSpec net = parse_net(kCfg, "ckpt.cfg");
  Params p(net);
  init_params(p, net, 1);
  const std::vector<float> m(p.values.size(), 0.25f);
  for (int64_t s : {5, 10, 15})
    save_checkpoint(dir_.string(), 2, net, p, m, {.step = s, .seed = 7, .cfg = "ckpt.cfg", .params = p.size()});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000010", "step-00000015"}));
  Params q(net);
  const Checkpoint c = load_checkpoint(dir_.string(), net, q);
  EXPECT_EQ(c.meta.step, 15);
  EXPECT_EQ(c.meta.seed, 7u);
  EXPECT_EQ(std::vector<float>(c.momentum.begin(), c.momentum.end()), m);

  // A process that keeps part of the parameters reads only that part of both files.
  Params part(net);
  part.unfilled = {{3, 20}, {p.size() - 5, p.size()}};
  const Checkpoint cp = load_checkpoint(dir_.string(), net, part);
  for (int64_t i = 0; i < p.size(); ++i) {
    const bool left = (i >= 3 && i < 20) || i >= p.size() - 5;
    ASSERT_EQ(cp.momentum[size_t(i)], left ? 0.f : 0.25f) << i;
    ASSERT_EQ(part.values[size_t(i)], left ? 0.f : p.values[size_t(i)]) << i;
  }

  auto error_of = [&](const std::string& dir, const NetSpec& n) {
    try {
      Params x(n);
      load_checkpoint(dir, n, x);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(error_of((dir_ / "empty").string(), net).find("no checkpoint in"), std::string::npos);
  EXPECT_NE(error_of((dir_ / "missing").string(), net).find("is not a folder"), std::string::npos);
  const NetSpec other = parse_net(
      "[net]\nbatch=1\nwidth=4\nheight=4\nchannels=1\n[convolutional]\nfilters=2\nsize=3\npad=1\n[cost]\n", "o.cfg");
  EXPECT_NE(error_of(dir_.string(), other).find("parameters"), std::string::npos);
  // a truncated momentum file is named
  const fs::path mom = dir_ / "step-00000015" / "momentum";
  fs::resize_file(mom, fs::file_size(mom) - 8);
  const std::string msg = error_of(dir_.string(), net);
  EXPECT_NE(msg.find("momentum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // ... and so is one with bytes beyond its values
  fs::resize_file(mom, fs::file_size(mom) + 12);
  const std::string longer = error_of(dir_.string(), net);
  EXPECT_NE(longer.find("oversized"), std::string::npos) << longer;
}

// Written a layer at a time (as several processes save): a writer given the layers out of
// order, or closed before the last, or destroyed before commit() leaves no checkpoint and
// no temporary folder behind, and the older checkpoint stays the one resumed from.
TEST_F(CheckpointTest, LayerByLayerWriterLeavesNothingHalfWritten) {
  const NetSpec net = parse_net(kCfg, "ckpt.cfg");
  Params p(net);
  init_params(p, net, 1);
  const std::vector<float> m(p.values.size(), 0.5f);
  save_checkpoint(dir_.string(), 3, net, p, m, {.step = 1, .seed = 7, .cfg = "ckpt.cfg", .params = p.size()});
  std::vector<const LayerSpec*> with;
  for (const auto& l : net.layers)
    if (l.has_params()) with.push_back(&l);
  ASSERT_GE(with.size(), 3u);
  const CheckpointMeta meta{.step = 2, .seed = 7, .cfg = "ckpt.cfg", .params = p.size()};
  auto momentum_of = [&](const LayerSpec& l) {
    return std::span<const float>(m).subspan(size_t(p.slices[size_t(l.index)].biases));
  };
  auto fails = [&](const auto& write, const std::string& expected) {
    try {
      CheckpointWriter w(dir_.string(), 3, meta, p.seen);
      write(w);
      ADD_FAILURE() << "no error; expected " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  fails([&](CheckpointWriter& w) { w.write_weights(p, *with[1]), w.write_weights(p, *with[0]); }, "after layer");
  fails([&](CheckpointWriter& w) { w.write_momentum(p, *with[1], momentum_of(*with[1])); }, "out of order");
  fails(
      [&](CheckpointWriter& w) {
        w.write_weights(p, *with[0]);
        w.write_momentum(p, *with[0], momentum_of(*with[0]));
        w.commit(net);
      },
      "closed after");
  {  // all layers written but never committed
    CheckpointWriter w(dir_.string(), 3, meta, p.seen);
    for (const LayerSpec* l : with) {
      w.write_weights(p, *l);
      w.write_momentum(p, *l, momentum_of(*l));
    }
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"step-00000001"});
  // ... and written whole, the same bytes as at once.
  {
    CheckpointWriter w(dir_.string(), 3, meta, p.seen);
    for (const LayerSpec* l : with) {
      w.write_weights(p, *l);
      w.write_momentum(p, *l, momentum_of(*l));
    }
    w.commit(net);
  }
  save_checkpoint((dir_ / "at_once").string(), 1, net, p, m, meta);
  for (const char* f : {"weights", "momentum", "meta.json"}) {
    std::ifstream a(dir_ / "step-00000002" / f, std::ios::binary),
        b(dir_ / "at_once" / "step-00000002" / f, std::ios::binary);
    const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_TRUE(!sa.empty() && sa == sb) << f;
  }
}

// A meta.json whose numbers are not whole numbers in range is refused by name (fuzz_weights
// found a step of 2.9e62, which nlohmann converted to int64 with undefined behaviour; a
// fraction was truncated and taken).
TEST_F(CheckpointTest, MetaNumbersOutOfRangeAreRefusedByName) {
  const NetSpec net = parse_net(kCfg, "ckpt.cfg");
  Params p(net);
  init_params(p, net, 1);
  const std::vector<float> m(p.values.size(), 0.f);
  save_checkpoint(dir_.string(), 1, net, p, m, {.step = 3, .seed = 7, .cfg = "ckpt.cfg", .params = p.size()});
  const fs::path meta = dir_ / "step-00000003" / "meta.json";
  const std::string params = std::to_string(p.size());
  for (const auto& [field, step, seed] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"step", "288888888888888888888888888888888888888888888888888888888888888", "7"},
           {"step", "-3", "7"},
           {"step", "1.5", "7"},
           {"step", "\"3\"", "7"},
           {"seed", "3", "-1"},
           {"seed", "3", "1e30"}}) {
    std::ofstream(meta) << "{\"cfg\": \"ckpt.cfg\", \"params\": " << params << ", \"seed\": " << seed
                        << ", \"step\": " << step << "}\n";
    Params q(net);
    try {
      load_checkpoint(dir_.string(), net, q);
      ADD_FAILURE() << "step " << step << ", seed " << seed << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("meta.json: " + field + " must be a whole number"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tt
