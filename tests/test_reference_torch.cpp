// Per-tensor comparison with the PyTorch reference fixtures (tests/fixtures, made by
// tests/reference/make_fixtures.py): outputs, input gradient, weight gradients, and
// weights after 3 SGD steps, untiled and on a 2x2 grid.
#include <gtest/gtest.h>

#include "engine/trainer.hpp"
#include "test_util.hpp"
#include "util/dump.hpp"

namespace tt {
namespace {

constexpr double kTol = 1e-4;

struct Case {
  std::string net;
  int rows, cols;
};

class TorchReference : public ::testing::TestWithParam<Case> {};

void expect_close(const Dump& ref, const std::string& name, const float* got, double tol = kTol) {
  ASSERT_TRUE(ref.count(name)) << "fixture lacks " << name;
  const DumpTensor& t = ref.at(name);
  const double d = test::rel_diff(got, t.data.data(), t.data.size());
  EXPECT_LE(d, tol) << name;
}

TEST_P(TorchReference, MatchesPerTensor) {
  const Case c = GetParam();
  const std::string dir = test::source_dir() + "/tests/fixtures/" + c.net + "/";
  NetSpec net = load_net(dir + "net.cfg");
  Params params(net);
  load_weights(params, net, dir + "init.weights");
  const Dump ref = read_dump(dir + "ref.bin");
  TrainOptions opt;
  opt.rows = c.rows;
  opt.cols = c.cols;
  opt.need_input_delta = true;
  LocalComm comm;
  Trainer tr(net, params, opt, comm);
  const float* input = ref.at("input").data.data();
  const float* truth = ref.at("truth").data.data();

  const double loss = tr.forward_backward(input, truth);
  EXPECT_NEAR(loss, ref.at("loss").data[0], kTol * std::fabs(ref.at("loss").data[0]));
  expect_close(ref, "output", tr.output());
  expect_close(ref, "input_delta", tr.input_delta());
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = params.slices[l.index];
    const std::string p = "grad." + std::to_string(l.index) + ".";
    expect_close(ref, p + "weights", tr.grad().data() + s.weights);
    expect_close(ref, p + "biases", tr.grad().data() + s.biases);
    if (s.scales >= 0) expect_close(ref, p + "scales", tr.grad().data() + s.scales);
  }
  tr.update();
  for (int step = 1; step < 3; ++step) {
    const double l = tr.forward_backward(input, truth);
    EXPECT_NEAR(l, ref.at("step3.loss").data[step], kTol * std::fabs(ref.at("step3.loss").data[step]));
    tr.update();
  }
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = params.slices[l.index];
    const std::string p = "step3." + std::to_string(l.index) + ".";
    expect_close(ref, p + "weights", params.values.data() + s.weights);
    expect_close(ref, p + "biases", params.values.data() + s.biases);
    if (s.scales >= 0) {
      expect_close(ref, p + "scales", params.values.data() + s.scales);
      expect_close(ref, p + "rolling_mean", params.rolling_mean[l.index].data());
      expect_close(ref, p + "rolling_variance", params.rolling_var[l.index].data());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchReference,
                         ::testing::Values(Case{"bn_stride", 1, 1}, Case{"pool_mix", 1, 1}, Case{"classifier", 1, 1},
                                           Case{"fc", 1, 1}, Case{"bn_stride", 2, 2}, Case{"pool_mix", 2, 3},
                                           Case{"classifier", 3, 2}, Case{"fc", 2, 2},
                                           Case{"inverted_residual", 1, 1}, Case{"inverted_residual", 2, 2},
                                           Case{"inverted_residual", 3, 2}),
                         [](const auto& info) {
                           return info.param.net + "_" + std::to_string(info.param.rows) + "x" +
                                  std::to_string(info.param.cols);
                         });

}  // namespace
}  // namespace tt
