// Inference against Darknet itself (tests/oracle: Debian's libdarknet behind the
// darknet_forward driver). Each case trains a few steps with tiletrain on random data,
// so the weights are no longer the initial ones, saves them with tt::save_weights,
// lets Darknet load the same cfg + .weights and run the same input, and compares the
// output with Trainer::predict. This checks the .weights layout (array order, header),
// the cfg semantics (padding, odd sizes, defaults) and the inference arithmetic at once.
//
// Batch-norm: Darknet's inference normalizes with (x - mean) / (sqrt(var) + 1e-6), while
// tiletrain (like its training forward and PyTorch) uses (x - mean) / sqrt(var + 1e-5);
// see tests/oracle/README.md (b). The relative difference of the two is about
// 5e-6/var + 1e-6/sqrt(var): for variances of order 1 (a few training steps from the initial
// 1) it is ~5e-6 per layer, but rolling variances can be anything after real training and
// for var ~ 1e-3 it is ~0.5%. The BN case therefore sets the rolling variances to
// 1e2..1e3 (difference < 1e-7, far below the 1e-4 tolerance) and the scales to 5..20 so
// the normalized signal keeps a useful magnitude; what is compared is then the layout and
// the use of scales, means, variances and biases, not the choice of epsilon.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "test_util.hpp"
#include "util/dump.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

constexpr double kTol = 1e-4;

struct Case {
  std::string name;
  std::string cfg;
  bool big_bn_variance = false;
  std::vector<std::pair<int, int>> grids = {{1, 1}};
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const std::string kTrainKeys = "learning_rate=0.02\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=100\n";
// Detection losses sum over every cell and box unnormalised: YOLO trains at 1e-3.
const std::string kDetectorTrainKeys =
    "learning_rate=0.001\nmomentum=0.9\ndecay=0.0005\npolicy=constant\nmax_batches=100\n";

std::vector<Case> cases() {
  std::vector<Case> c;
  // Every activation, maxpool 2/2 on odd sizes (13x11 -> 7x6), stride-2 3x3 conv, 1x1 conv.
  c.push_back({"conv_acts",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=11\nheight=13\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nfilters=6\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nfilters=8\nsize=3\nstride=2\npad=1\nactivation=relu\n"
                   "[convolutional]\nfilters=5\nsize=1\nstride=1\nactivation=logistic\n"
                   "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=linear\n"
                   "[cost]\ntype=sse\n",
               false,
               {{1, 1}, {2, 2}}});
  // Valid stride-2 conv, "same" 3/1 maxpool, 2/2 maxpool on odd size, 1x1 conv, two
  // connected layers with dropout between them, softmax; subdivisions=2.
  c.push_back({"classifier",
               "[net]\nbatch=4\nsubdivisions=2\nwidth=15\nheight=15\nchannels=2\n" + kTrainKeys +
                   "[convolutional]\nfilters=8\nsize=3\nstride=2\nactivation=leaky\n"
                   "[maxpool]\nsize=3\nstride=1\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nfilters=6\nsize=1\nstride=1\npad=1\nactivation=relu\n"
                   "[connected]\noutput=12\nactivation=leaky\n"
                   "[dropout]\nprobability=0.25\n"
                   "[connected]\noutput=5\nactivation=linear\n"
                   "[softmax]\ngroups=1\n",
               false,
               {{1, 1}, {2, 1}}});
  // 5x5 conv (pad=1 -> padding 2), stride-2 conv to an even/odd map, avgpool,
  // connected logistic, softmax.
  // YOLOv2's shape in small: a passthrough (route to an earlier layer, reorg, route of two)
  // and the region layer's activations (test mode: no loss).
  c.push_back({"yolov2_like",
               "[net]\nbatch=2\nwidth=32\nheight=32\nchannels=3\n" + kDetectorTrainKeys +
                   "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                   "[route]\nlayers=-3\n"
                   "[convolutional]\nfilters=4\nsize=1\nactivation=leaky\n"
                   "[reorg]\nstride=2\n"
                   "[route]\nlayers=-1,-4\n"
                   "[convolutional]\nfilters=21\nsize=1\nactivation=linear\n"
                   "[region]\nanchors=1,1, 2,2, 3,1.5\nnum=3\nclasses=2\nsoftmax=1\n",
               false,
               {{1, 1}, {2, 2}}});
  // YOLOv3-tiny's shape in small: two [yolo] heads, an upsample and a route across scales.
  c.push_back({"yolov3_tiny_like",
               "[net]\nbatch=2\nwidth=32\nheight=32\nchannels=3\n" + kDetectorTrainKeys +
                   "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=2\n"
                   "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
                   "[yolo]\nmask=2,3\nanchors=4,5, 8,10, 14,12, 20,24\nnum=4\nclasses=2\n"
                   "[route]\nlayers=-3\n"
                   "[convolutional]\nfilters=8\nsize=1\nactivation=leaky\n"
                   "[upsample]\nstride=2\n"
                   "[route]\nlayers=-1,2\n"
                   "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
                   "[yolo]\nmask=0,1\nanchors=4,5, 8,10, 14,12, 20,24\nnum=4\nclasses=2\n",
               false,
               {{1, 1}, {2, 2}}});
  // Residual connections ([shortcut]) as Darknet adds them: maps of one size, a larger map
  // sampled with a stride onto fewer channels, a smaller map onto every second cell.
  c.push_back({"residual",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=16\nheight=16\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=linear\n"
                   "[shortcut]\nfrom=-3\nactivation=leaky\n"
                   "[convolutional]\nfilters=12\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
                   "[shortcut]\nfrom=-2\nactivation=linear\n"
                   "[upsample]\nstride=2\n"
                   "[shortcut]\nfrom=5\nactivation=logistic\n"
                   "[convolutional]\nfilters=4\nsize=1\nactivation=linear\n"
                   "[cost]\n",
               false,
               {{1, 1}, {2, 2}}});
  // Grouped convolutions (groups=): depthwise 3x3 at strides 1 and 2 (MobileNet's), groups of
  // two input channels into four outputs (ResNeXt's kind), a grouped 1x1, a grouped first layer.
  c.push_back({"grouped",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=15\nheight=13\nchannels=3\n" + kDetectorTrainKeys +
                   "[convolutional]\nfilters=6\nsize=3\nstride=1\npad=1\ngroups=3\nactivation=leaky\n"
                   "[convolutional]\nfilters=16\nsize=1\nstride=1\nactivation=relu\n"
                   "[convolutional]\nfilters=16\nsize=3\nstride=1\npad=1\ngroups=16\nactivation=relu\n"
                   "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\ngroups=16\nactivation=leaky\n"
                   "[convolutional]\nfilters=32\nsize=3\nstride=1\npad=1\ngroups=8\nactivation=leaky\n"
                   "[convolutional]\nfilters=8\nsize=1\nstride=1\ngroups=4\nactivation=linear\n"
                   "[cost]\n",
               false,
               {{1, 1}, {2, 2}, {3, 2}}});
  c.push_back({"avgpool_head",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=12\nheight=9\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nfilters=7\nsize=5\nstride=1\npad=1\nactivation=logistic\n"
                   "[convolutional]\nfilters=10\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
                   "[avgpool]\n"
                   "[connected]\noutput=6\nactivation=logistic\n"
                   "[softmax]\n",
               false});
  // Plain connected net on an image input.
  c.push_back({"connected_only",
               "[net]\nbatch=3\nsubdivisions=1\nwidth=5\nheight=4\nchannels=2\n" + kTrainKeys +
                   "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=relu\n"
                   "[connected]\noutput=9\nactivation=relu\n"
                   "[connected]\noutput=4\nactivation=linear\n"
                   "[cost]\n",
               false});
  // Locally connected layers (yolov1's): "same" padding and a strided one without, their
  // per-cell weights and biases in Darknet's file order. Darknet allocates the shared
  // workspace in bytes but counts a local layer's in floats: a convolution before it with a
  // larger workspace (8 input channels) keeps libdarknet inside its buffer, as in yolov1.
  c.push_back({"local",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=7\nheight=6\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
                   "[local]\nsize=3\nstride=1\npad=1\nfilters=5\nactivation=leaky\n"
                   "[local]\nsize=2\nstride=2\nfilters=3\nactivation=logistic\n"
                   "[connected]\noutput=4\nactivation=linear\n"
                   "[cost]\n",
               false});
  // go.cfg's head: a one-filter convolution, [reorg] extra=1 (the flat board and a zero
  // "pass" entry), softmax over both; and a flatten (channels last) before a connected layer.
  c.push_back({"reorg_extra_flatten",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=5\nheight=4\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
                   "[reorg]\nstride=2\nflatten=1\nreverse=1\n"
                   "[reorg]\nstride=1\nflatten=1\n"
                   "[convolutional]\nfilters=1\nsize=1\nactivation=linear\n"
                   "[reorg]\nstride=1\nextra=1\n"
                   "[softmax]\n",
               false});
  // vgg-16's and strided's front: a centred crop at layer 0 (inference: no flip, scaled to
  // 2x - 1), ramp activations; and a crop with noadjust=1 after a convolution.
  c.push_back({"crop_ramp",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=11\nheight=9\nchannels=3\n" + kTrainKeys +
                   "[crop]\ncrop_height=6\ncrop_width=8\nflip=1\nangle=0\nsaturation=1\nexposure=1\nshift=.2\n"
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=ramp\n"
                   "[crop]\ncrop_height=5\ncrop_width=5\nnoadjust=1\n"
                   "[connected]\noutput=4\nactivation=ramp\n"
                   "[softmax]\n",
               false});
  // darknet9000's head: a softmax per group of a class tree (tests/fixtures/class_tree: 9
  // classes in groups of 3, 2, 2, 2).
  c.push_back({"tree_softmax",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=5\nheight=4\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nfilters=9\nsize=3\npad=1\nactivation=leaky\n"
                   "[avgpool]\n"
                   "[softmax]\ngroups=1\ntree=" +
                   test::source_dir() + "/tests/fixtures/class_tree/tree.txt\n",
               false});
  // Batch-norm convs (see the note on epsilon at the top).
  c.push_back({"batchnorm",
               "[net]\nbatch=2\nsubdivisions=1\nwidth=13\nheight=11\nchannels=3\n" + kTrainKeys +
                   "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
                   "[maxpool]\nsize=2\nstride=1\n"
                   "[convolutional]\nbatch_normalize=1\nfilters=6\nsize=3\nstride=2\npad=1\nactivation=relu\n"
                   "[convolutional]\nbatch_normalize=1\nfilters=5\nsize=1\nstride=1\nactivation=logistic\n"
                   "[convolutional]\nfilters=4\nsize=1\nstride=1\npad=1\nactivation=linear\n"
                   "[cost]\n",
               true,
               {{1, 1}, {2, 2}}});
  return c;
}

class DarknetOracle : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (std::string(DARKNET_FORWARD).empty()) GTEST_SKIP() << "darknet_forward not built (libdarknet missing)";
    dir_ = fs::temp_directory_path() / ("tt_darknet_oracle_" + std::to_string(getpid()) + "_" + GetParam().name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  // Runs darknet_forward (which also re-saves the weights with Darknet's own writer when
  // `resave` is given); returns its exit status and fills `err` with its stderr.
  int run_darknet(const std::string& cfg, const std::string& weights, const std::string& in, const std::string& out,
                  std::string& err, const std::string& resave = "") {
    const std::string err_file = path("darknet.stderr");
    const std::string cmd = std::string("'") + DARKNET_FORWARD + "' '" + cfg + "' '" + weights + "' '" + in + "' '" +
                            out + "'" + (resave.empty() ? "" : " '" + resave + "'") + " >/dev/null 2>'" + err_file +
                            "'";
    const int status = std::system(cmd.c_str());
    std::ifstream e(err_file);
    err.assign(std::istreambuf_iterator<char>(e), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  fs::path dir_;
};

void fill_batch(const NetSpec& net, int n, std::mt19937_64& rng, std::vector<float>& input, std::vector<float>& truth) {
  std::normal_distribution<float> d(0.f, 1.f);
  input.resize(size_t(n * net.input().size()));
  for (auto& v : input) v = d(rng);
  const int64_t k = net.output().size();
  truth.assign(size_t(n * net.truth_size()), 0.f);
  if (net.detector()) {  // two boxes per sample
    std::uniform_real_distribution<float> u(0.1f, 0.9f);
    for (int s = 0; s < n; ++s)
      for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 5; ++i)
          truth[size_t(s * net.truth_size() + b * 5 + i)] = i < 4 ? u(rng) * (i < 2 ? 1 : .5f) : 1;
  } else if (net.layers.back().is(kSoftmaxKind)) {
    for (int s = 0; s < n; ++s) truth[size_t(s * k + int64_t(rng() % uint64_t(k)))] = 1.f;
  } else {
    for (auto& v : truth) v = 0.5f * d(rng);
  }
}

TEST_P(DarknetOracle, PredictMatchesDarknet) {
  const Case& c = GetParam();
  const std::string cfg_path = path(c.name + ".cfg");
  {
    std::ofstream f(cfg_path);
    f << c.cfg;
  }
  NetSpec net = load_net(cfg_path);
  Params params(net);
  init_params(params, net, 17);
  LocalComm comm;
  std::mt19937_64 rng(12345);
  std::vector<float> input, truth;
  {
    // A few training steps so that biases, BN scales and running statistics move away
    // from their initial values.
    Trainer tr(net, params, TrainOptions{}, comm);
    for (int step = 0; step < 3; ++step) {
      fill_batch(net, net.batch, rng, input, truth);
      tr.train_step(input.data(), truth.data());
    }
  }
  if (c.big_bn_variance) {
    std::uniform_real_distribution<float> var(100.f, 1000.f), mean(-1.f, 1.f), scale(5.f, 20.f);
    for (const auto& l : net.layers) {
      if (!l.batch_normalize()) continue;
      const ParamSlice& s = params.slices[l.index];
      for (auto& v : params.rolling_var[l.index]) v = var(rng);
      for (auto& v : params.rolling_mean[l.index]) v = mean(rng);
      for (int64_t i = 0; i < s.n_out; ++i) params.values[size_t(s.scales + i)] = (i % 2 ? -1 : 1) * scale(rng);
    }
  }
  // Biases are zero at init and move little in 3 steps: make them non-trivial too.
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = params.slices[l.index];
    std::uniform_real_distribution<float> b(-0.3f, 0.3f);
    for (int64_t i = 0; i < s.n_out; ++i) params.values[size_t(s.biases + i)] += b(rng);
  }
  const std::string weights = path("trained.weights");
  save_weights(params, net, weights);

  const int n = net.micro_batch();
  std::vector<float> x(size_t(n * net.input().size()));
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  write_dump(path("input.bin"), {{"input", {{n, net.channels, net.height, net.width}, x}}});
  std::string err;
  const int rc = run_darknet(cfg_path, weights, path("input.bin"), path("output.bin"), err, path("resaved.weights"));
  ASSERT_EQ(rc, 0) << "darknet_forward failed:\n" << err;

  // The other direction: what Darknet's own save_weights wrote loads back bit for bit.
  Params back(net);
  load_weights(back, net, path("resaved.weights"));
  EXPECT_EQ(back.seen, params.seen);
  EXPECT_TRUE(back.values == params.values) << "parameters differ after a round trip through Darknet";
  EXPECT_TRUE(back.rolling_mean == params.rolling_mean && back.rolling_var == params.rolling_var)
      << "batch-norm statistics differ after a round trip through Darknet";
  const Dump out = read_dump(path("output.bin"));
  ASSERT_TRUE(out.count("output"));
  const DumpTensor& ref = out.at("output");
  const size_t count = size_t(n * net.output().size());
  ASSERT_EQ(ref.data.size(), count);
  ASSERT_FALSE(ref.dims.empty());
  EXPECT_EQ(ref.dims[0], n);

  // Not a trivially constant output (e.g. a dead ReLU net would compare equal anyway).
  double spread = 0;
  for (size_t i = 1; i < count; ++i) spread = std::max(spread, double(std::fabs(ref.data[i] - ref.data[0])));
  EXPECT_GT(spread, 1e-3) << "Darknet's output is nearly constant; the comparison would prove little";

  for (auto [rows, cols] : c.grids) {
    SCOPED_TRACE("grid " + std::to_string(rows) + "x" + std::to_string(cols));
    Params loaded(net);
    load_weights(loaded, net, weights);  // predict from the file Darknet read, not from memory
    TrainOptions opt;
    opt.rows = rows;
    opt.cols = cols;
    Trainer tr(net, loaded, opt, comm);
    const float* got = tr.predict(x.data());
    const double diff = test::rel_diff(got, ref.data.data(), count);
    EXPECT_LE(diff, kTol) << "relative difference to Darknet " << diff;
  }
}

INSTANTIATE_TEST_SUITE_P(Cfgs, DarknetOracle, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// Darknet must refuse a file that does not match the cfg (the driver checks the size),
// so a matching run above is not an accident of lenient loading.
TEST(DarknetOracleSanity, RefusesWeightsOfAnotherCfg) {
  if (std::string(DARKNET_FORWARD).empty()) GTEST_SKIP() << "darknet_forward not built";
  ASSERT_TRUE(fs::exists(DARKNET_FORWARD)) << "the oracle is configured but not built: " << DARKNET_FORWARD;
  const fs::path dir = fs::temp_directory_path() / ("tt_darknet_oracle_sanity_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string head = "[net]\nbatch=1\nwidth=5\nheight=5\nchannels=1\n";
  const std::string a = head + "[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=linear\n[cost]\n";
  const std::string b = head + "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=linear\n[cost]\n";
  { std::ofstream(dir / "b.cfg") << b; }
  NetSpec net = parse_net(a, "a.cfg");
  Params p(net);
  init_params(p, net, 1);
  save_weights(p, net, (dir / "a.weights").string());
  write_dump((dir / "in.bin").string(), {{"input", {{1, 1, 5, 5}, std::vector<float>(25, 1.f)}}});
  const std::string cmd = std::string("'") + DARKNET_FORWARD + "' '" + (dir / "b.cfg").string() + "' '" +
                          (dir / "a.weights").string() + "' '" + (dir / "in.bin").string() + "' '" +
                          (dir / "out.bin").string() + "' >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  EXPECT_NE(status, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tt
