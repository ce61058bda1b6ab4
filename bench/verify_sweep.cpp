// verify_sweep: `tiletrain verify` (engine/verify.hpp) on many random configurations, in
// one process. Random small nets of convolutions (with or without batch-norm; kernel sizes
// 1-7, strides 1-3, paddings 0 to size-1) and max-pools (sizes 1-5, strides 1 to size,
// paddings 0 to size-1, so that no window lies wholly in the padding: its -FLT_MAX is
// beyond the float64 reference that judges failures), random input sizes and channels, batches 1-4 (some in two
// subdivisions), SSE or softmax heads, random grids up to 4x4 (some with uneven row/column weights), groupings, cuts,
// batch-norm sync/frozen, backward features recompute/exchange, halo overlap on/auto. Each configuration is drawn from
// its own seed (--seed + index), so the sweep is reproducible and any one configuration can be rerun alone (--seed S
// --count 1), or through the CLI with the cfg --dump writes and the command it prints. Draws that cannot run (an input
// too small for the stack, a grid that empties a tile) are redrawn and counted apart. The draws it shares with
// tests/test_tiled_equivalence.cpp are in tests/random_net.hpp.
//
//   build/verify_sweep [--count 500] [--seed 1] [--steps 2] [--kernels auto] [--dump DIR] [--quiet]
//
// Prints every configuration and its report, then a summary; exits 1 if any configuration
// fails (or throws). A failing configuration is diagnosed on its first step: every parameter
// tensor's gradient, tiled against untiled (cut alike), beside the untiled run on the other
// kernel path (own kernels against the default), each over verify's scale for it, i.e. how
// far fp32 rounding alone moves that tensor; and the command that judges it against float64
// (TiledEquivalence.GivenConfiguration).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "data/synthetic.hpp"
#include "engine/grad_scale.hpp"
#include "engine/verify.hpp"
#include "layers/backend.hpp"
#include "model/net_spec.hpp"
#include "model/params.hpp"
#include "random_net.hpp"  // tests/
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace {

using namespace tt;

struct Config {
  uint64_t seed = 0;
  std::string cfg, summary;  // the .cfg text; the net in one line
  int rows = 1, cols = 1;
  std::string groups = "none", bn = "sync", features = "recompute", overlap = "auto";
  std::string row_weights, col_weights;  // empty: an even split
  int cut = -1;
};

Config generate(uint64_t seed) {
  random_net::Draws d(seed);
  auto pick = [&](int n) { return d.pick(n); };
  Config c;
  c.seed = seed;
  const int h = 9 + pick(56), w = 9 + pick(56), channels = 1 + pick(4);
  const int batch = 1 + pick(4);
  const int subdivisions = batch % 2 == 0 && pick(3) == 0 ? 2 : 1;
  std::ostringstream s, sum;
  s << "[net]\nbatch=" << batch << "\nsubdivisions=" << subdivisions << "\nwidth=" << w << "\nheight=" << h
    << "\nchannels=" << channels << "\nlearning_rate=0.001\nmomentum=0.9\ndecay=0.0005\npolicy=constant\n";
  sum << h << "x" << w << "x" << channels << " batch " << batch << "/" << subdivisions << ":";
  const int n = 2 + pick(6);
  for (int l = 0; l < n; ++l) {
    if (pick(3) == 0) {
      const int size = 1 + pick(pick(4) == 0 ? 5 : 3), stride = 1 + pick(size);
      s << "\n[maxpool]\nsize=" << size << "\nstride=" << stride << "\n";
      sum << " max" << size << "/" << stride;
      if (pick(3) == 0) {  // less than Darknet's default padding (size - 1): every window still meets the map
        const int padding = pick(size);
        s << "padding=" << padding << "\n";
        sum << "p" << padding;
      }
    } else {
      static const int ks[5] = {1, 3, 3, 5, 7};
      const int size = ks[pick(5)], stride = pick(3) == 0 ? 2 + pick(4) / 3 : 1;
      const int filters = pick(6) == 0 ? 16 + pick(8) : 1 + pick(12);
      const bool bn = pick(2);
      s << "\n[convolutional]\n"
        << (bn ? "batch_normalize=1\n" : "") << "filters=" << filters << "\nsize=" << size << "\nstride=" << stride
        << "\n";
      sum << " conv" << size << "/" << stride;
      switch (pick(3)) {
        case 0:
          s << "pad=1\n";  // size / 2
          sum << "p" << size / 2;
          break;
        case 1:
          sum << "p0";
          break;
        default: {
          const int padding = pick(size);
          s << "padding=" << padding << "\n";
          sum << "p" << padding;
        }
      }
      const char* act = random_net::activation(d);
      s << "activation=" << act << "\n";
      sum << "x" << filters << (bn ? "bn" : "") << "-" << act;
    }
  }
  if (const int classes = random_net::head(d, s))
    sum << " avgpool fc" << classes << " softmax";
  else
    sum << " sse";
  c.cfg = s.str();
  c.summary = sum.str();
  c.rows = 1 + pick(4);
  c.cols = 1 + pick(4);
  const random_net::Partition part = random_net::partition(d, n);
  c.cut = part.cut;
  c.groups = part.groups;
  c.bn = pick(2) ? "sync" : "frozen";
  c.features = pick(2) ? "exchange" : "recompute";
  c.overlap = pick(4) == 0 ? "on" : "auto";
  auto weights = [&](int k) {
    std::string v;
    for (int i = 0; i < k; ++i) {
      if (i) v += ',';
      v += std::to_string(1 + pick(3));
    }
    return v;
  };
  if (pick(4) == 0) {
    c.row_weights = weights(c.rows);
    c.col_weights = weights(c.cols);
  }
  return c;
}

TrainOptions options(const Config& c, KernelPath kernels) {
  TrainOptions t;
  t.rows = c.rows;
  t.cols = c.cols;
  t.groups = c.groups;
  t.cut = c.cut;
  t.bn = c.bn == "frozen" ? BnMode::Frozen : BnMode::Sync;
  t.seed = c.seed;
  t.kernels = kernels;
  if (!c.row_weights.empty()) t.split.rows = parse_weights(c.row_weights, t.rows, "--row-weights");
  if (!c.col_weights.empty()) t.split.cols = parse_weights(c.col_weights, t.cols, "--col-weights");
  t.features = parse_backward_features(c.features);
  t.overlap = parse_overlap(c.overlap);
  return t;
}

// The net, or false when the draw cannot run (random_net::usable).
bool usable(const Config& c, NetSpec& net) {
  const TrainOptions t = options(c, KernelPath::Auto);
  return random_net::usable(c.cfg, "sweep-" + std::to_string(c.seed) + ".cfg", c.rows, c.cols, c.cut, c.groups,
                            {t.split, t.features}, net);
}

std::string cli(const Config& c, const std::string& cfg_path, int steps, const std::string& kernels) {
  std::ostringstream o;
  o << "tiletrain verify --cfg " << cfg_path << " --grid " << c.rows << "x" << c.cols << " --groups " << c.groups
    << " --bn " << c.bn << " --backward-features " << c.features << " --overlap " << c.overlap << " --seed " << c.seed
    << " --steps " << steps;
  if (c.cut >= 0) o << " --cut " << c.cut;
  if (!c.row_weights.empty()) o << " --row-weights " << c.row_weights << " --col-weights " << c.col_weights;
  if (kernels != "auto") o << " --kernels " << kernels;
  return o.str();
}

// The same configuration judged by tests/test_tiled_equivalence.cpp against float64.
std::string f64_check(const Config& c, const std::string& cfg_path, int steps, const std::string& kernels) {
  std::ostringstream o;
  o << "TILETRAIN_EQ_CFG=" << cfg_path << " TILETRAIN_EQ_GRID=" << c.rows << "x" << c.cols
    << " TILETRAIN_EQ_GROUPS=" << c.groups << " TILETRAIN_EQ_CUT=" << c.cut << " TILETRAIN_EQ_BN=" << c.bn
    << " TILETRAIN_EQ_FEATURES=" << c.features << " TILETRAIN_EQ_STEPS=" << steps << " TILETRAIN_EQ_KERNELS=" << kernels
    << " TILETRAIN_EQ_SEED=" << c.seed;
  if (!c.row_weights.empty())
    o << " TILETRAIN_EQ_ROW_WEIGHTS=" << c.row_weights << " TILETRAIN_EQ_COL_WEIGHTS=" << c.col_weights;
  o << " build/tests/tiletrain_tests --gtest_filter=TiledEquivalence.GivenConfiguration";
  return o.str();
}

struct Worst {
  double ratio = 0;  // the largest difference over the tolerance
  std::string what;  // which tensor kind, which configuration
};

// The first step's gradients (verify's first batch) of the tiled run, the untiled run on
// `kernels`, and the untiled run on the other kernel path, per parameter tensor: which
// tensors differ, and by how much more than the untiled engine differs from itself.
// Returns how many tensors differ by more than the tolerance and more than 10 times the
// untiled engine's own difference (suspects); `kinds` collects what differed ("layer 0
// biases" ...).
int diagnose(const NetSpec& net, const Config& c, KernelPath kernels, std::vector<std::string>& kinds) {
  Params p0(net);
  init_params(p0, net, c.seed);
  TrainOptions topt = options(c, kernels);
  topt.need_input_delta = true;
  TrainOptions uopt;
  uopt.need_input_delta = true;
  uopt.cut = topt.cut;  // as verify's reference
  uopt.bn = topt.bn;
  uopt.seed = topt.seed;
  uopt.kernels = kernels;
  uopt.record_grad_scales = true;
  TrainOptions vopt = uopt;
  vopt.record_grad_scales = false;
  vopt.kernels = kernels == KernelPath::Own ? KernelPath::Auto : KernelPath::Own;
  Params pt = p0, pu = p0, pv = p0;
  LocalComm c1, c2, c3;
  Trainer tiled(net, pt, topt, c1), untiled(net, pu, uopt, c2), other(net, pv, vopt, c3);
  std::vector<float> input, truth;
  for (int sub = 0; sub < net.subdivisions; ++sub) {
    synthetic_batch(net, net.micro_batch(), c.seed * 7919 + uint64_t(sub), input, truth);
    tiled.forward_backward(input.data(), truth.data());
    untiled.forward_backward(input.data(), truth.data());
    other.forward_backward(input.data(), truth.data());
  }
  const std::vector<float> gt(tiled.grad().begin(), tiled.grad().end()),
      gu(untiled.grad().begin(), untiled.grad().end()), gv(other.grad().begin(), other.grad().end());
  const std::vector<GradScale> scales = untiled.take_grad_scales();
  auto norm = [](const float* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(b[i]) * b[i];
    return std::sqrt(s);
  };
  int suspects = 0;
  std::printf(
      "  diagnosis, first step (||tiled - untiled|| over verify's scale, max(||untiled||, the sum-of-magnitudes "
      "bound); the untiled run on the other kernel path, likewise):\n");
  for (const LayerSpec& l : net.layers) {
    if (!l.has_params()) continue;
    for (const ScaledTensor& part : scaled_tensors(p0.slices[size_t(l.index)], scales[size_t(l.index)])) {
      if (part.at < 0 || part.n == 0) continue;
      const double nu = norm(gu.data() + part.at, part.n);
      const double dt = gradient_difference(gt.data() + part.at, gu.data() + part.at, size_t(part.n), part.scale);
      const double dv = gradient_difference(gv.data() + part.at, gu.data() + part.at, size_t(part.n), part.scale);
      if (dt <= VerifyReport::kTolerance && dv <= VerifyReport::kTolerance) continue;
      std::printf("    layer %d %s %s: tiled %.3g, other kernel path %.3g (||untiled|| %.3g, bound %.3g)%s\n", l.index,
                  l.type_name(), part.name, dt, dv, nu, part.scale,
                  dt > 10 * dv ? "  <-- beyond the untiled engine's own rounding" : "");
      if (dt > VerifyReport::kTolerance) {
        kinds.push_back(std::string(l.type_name()) + " " + part.name);
        suspects += dt > 10 * dv;
      }
    }
  }
  return suspects;
}

int usage() {
  std::fprintf(stderr,
               "usage: verify_sweep [--count N] [--seed S] [--steps K] [--kernels auto|onednn|own] [--dump DIR] "
               "[--quiet]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 500, steps = 2;
  uint64_t seed0 = 1;
  std::string kernels = "auto", dump = "/tmp/verify_sweep";
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) std::exit(usage());
      return argv[++i];
    };
    if (a == "--count")
      count = std::stoi(value());
    else if (a == "--seed")
      seed0 = std::stoull(value());
    else if (a == "--steps")
      steps = std::stoi(value());
    else if (a == "--kernels")
      kernels = value();
    else if (a == "--dump")
      dump = value();
    else if (a == "--quiet")
      quiet = true;
    else
      return usage();
  }
  const KernelPath path = parse_kernel_path(kernels);
  std::printf(
      "verify_sweep: %d configurations from seed %llu, %d step(s) each, kernels %s, %d thread(s), tolerance %g "
      "(outputs: bit for bit)\n",
      count, static_cast<unsigned long long>(seed0), steps, kernels.c_str(), omp_get_max_threads(),
      VerifyReport::kTolerance);
  const auto t0 = std::chrono::steady_clock::now();
  int passed = 0, failed = 0, errors = 0, redrawn = 0, outputs_not_identical = 0, suspect = 0;
  std::map<std::string, int> failed_kinds;  // diagnosis: which tensors differed in failing configurations
  Worst worst;
  Worst worst_of[VerifyReport::kKinds];
  // A difference over its kind's tolerance (outputs: bit for bit, so any difference is infinitely over).
  auto over = [](const VerifyReport& r, int kind) {
    const double d = r.worst[size_t(kind)].diff, tol = VerifyReport::tolerance(kind);
    return tol > 0 ? d / tol : d > 0 ? HUGE_VAL : 0.;
  };
  std::vector<uint64_t> failing;
  uint64_t seed = seed0;
  for (int k = 0; k < count; ++seed) {
    const Config c = generate(seed);
    NetSpec net;
    bool ok_to_run = false;
    try {
      ok_to_run = usable(c, net);
    } catch (const Error& e) {  // a refusal other than the two expected ones: report it
      ++errors;
      ++k;
      failing.push_back(seed);
      std::printf("[%d] seed %llu: %s\n  ERROR (refused): %s\n", k, static_cast<unsigned long long>(seed),
                  c.summary.c_str(), e.what());
      continue;
    }
    if (!ok_to_run) {
      ++redrawn;
      continue;
    }
    ++k;
    const std::string head = "[" + std::to_string(k) + "] seed " + std::to_string(seed) + ": " + c.summary + "; grid " +
                             std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                             (c.row_weights.empty() ? "" : " (weights " + c.row_weights + " / " + c.col_weights + ")") +
                             ", groups " + c.groups + ", cut " + std::to_string(c.cut) + ", bn " + c.bn + ", " +
                             c.features + ", overlap " + c.overlap;
    try {
      LocalComm comm;
      const VerifyReport r = verify_training(net, options(c, path), comm, c.seed, steps);
      double ratio = 0;
      int kind = 0;
      for (int j = 0; j < VerifyReport::kKinds; ++j) {
        const double o = over(r, j);
        if (o > ratio) ratio = o, kind = j;
        if (o > worst_of[j].ratio) worst_of[j] = {o, "seed " + std::to_string(seed)};
      }
      outputs_not_identical += r.outputs() != 0;
      if (ratio > worst.ratio)
        worst = {ratio, std::string(VerifyReport::name(kind)) + ", seed " + std::to_string(seed)};
      const bool ok = r.ok();
      ok ? ++passed : ++failed;
      if (!ok || !quiet) {
        std::printf("%s (cut %d)\n ", head.c_str(), r.cut);
        for (int j = 0; j < VerifyReport::kKinds; ++j) {
          const VerifyReport::Worst& w = r.worst[size_t(j)];
          std::printf(" %s %.3g", VerifyReport::name(j), w.diff);
          if (w.layer >= 0) std::printf(" (layer %d)", w.layer);
          std::printf(j + 1 < VerifyReport::kKinds ? "," : ":");
        }
        std::printf(" %s, %.3g of the tolerance\n", ok ? "OK" : "MISMATCH", ratio);
      }
      if (!ok) {
        failing.push_back(seed);
        try {
          std::vector<std::string> kinds;
          const int suspects = diagnose(net, c, path, kinds);
          suspect += suspects > 0;
          for (const std::string& k : kinds) ++failed_kinds[k];
          if (kinds.empty()) ++failed_kinds["(no tensor over the tolerance in the first step)"];
        } catch (const std::exception& e) {
          std::printf("  (no diagnosis: %s)\n", e.what());
        }
      }
    } catch (const std::exception& e) {
      ++errors;
      failing.push_back(seed);
      std::printf("%s\n  ERROR: %s\n", head.c_str(), e.what());
    }
    if (!failing.empty() && failing.back() == seed && !dump.empty()) {
      std::filesystem::create_directories(dump);
      const std::string path_cfg = dump + "/sweep-" + std::to_string(seed) + ".cfg";
      std::ofstream(path_cfg) << c.cfg;
      std::printf("  rerun: %s\n", cli(c, path_cfg, steps, kernels).c_str());
      std::printf("  float64: %s\n", f64_check(c, path_cfg, steps, kernels).c_str());
    }
    std::fflush(stdout);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "\nsummary: %d configurations (%d draws redrawn: input too small or a tile empty), %d passed, %d failed, "
      "%d errors; wall time %.1f s\n",
      count, redrawn, passed, failed, errors, wall);
  std::printf("worst: %.3g of the tolerance (%s)\n", worst.ratio, worst.what.c_str());
  for (int j = 0; j < VerifyReport::kKinds; ++j)
    std::printf("  worst %-23s %.3g of the tolerance %g (%s)\n", VerifyReport::name(j), worst_of[j].ratio,
                VerifyReport::tolerance(j), worst_of[j].what.empty() ? "-" : worst_of[j].what.c_str());
  std::printf("  configurations whose outputs were not bit-identical: %d\n", outputs_not_identical);
  if (failed > 0) {
    std::printf("  failing configurations with a tensor beyond 10x the untiled engine's own rounding: %d of %d\n",
                suspect, failed);
    std::printf("  tensors over the tolerance in failing configurations' first steps:");
    for (const auto& [k, n] : failed_kinds) std::printf(" %s %d;", k.c_str(), n);
    std::printf("\n");
  }
  if (!failing.empty()) {
    std::printf("failing seeds:");
    for (uint64_t s : failing) std::printf(" %llu", static_cast<unsigned long long>(s));
    std::printf("\n");
  }
  return failing.empty() ? 0 : 1;
}
