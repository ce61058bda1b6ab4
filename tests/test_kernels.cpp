// Which kernel runs where (layers/backend.hpp, engine/kernel_table.hpp): no shipped cfg
// runs a reference kernel on the default path, in the untiled table nor in any tile of a
// tiled run; the default path differs from oneDNN only where oneDNN has nothing better
// than a reference kernel, or for the 1x1 forward that needs a fixed summation order.
// CTest runs this natively and with oneDNN capped to AVX2 (kernels_avx2_cap).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>

#include "comm/comm.hpp"
#include "engine/kernel_table.hpp"
#include "engine/trainer.hpp"
#include "layers/fma_probe.hpp"
#include "layers/own_conv.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

std::vector<std::string> shipped_cfgs() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() + "/cfgs"))
    if (e.path().extension() == ".cfg") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

// A shipped cfg at a small odd size (the detectors' 416x416 would take long), batch 2 in one
// micro-batch: for building trainers.
NetSpec small_batch_of(const std::string& cfg) {
  NetSpec net = load_net(cfg);
  if (net.height > 64) resize_net(net, 61, 67);
  net.batch = 2;
  net.subdivisions = 1;
  return net;
}

TEST(KernelTable, NoReferenceKernelInShippedCfgs) {
  const DnnlContext ctx;
  std::printf("cpu %s, channel block %d, own kernels %s\n", cpu_isa_name().c_str(), ctx.config.block,
              own_conv_target().c_str());
  ASSERT_GE(shipped_cfgs().size(), 3u);
  for (const std::string& cfg : shipped_cfgs()) {
    SCOPED_TRACE(cfg);
    NetSpec net = load_net(cfg);
    const std::vector<KernelUse> uses = planned_kernels(net, ctx, -1, true);
    EXPECT_FALSE(uses.empty());
    for (const KernelUse& u : uses)
      EXPECT_FALSE(is_reference_impl(u.impl)) << "layer " << u.layer << " " << conv_pass_name(u.pass) << ": " << u.impl;
    EXPECT_EQ(reference_kernel_warning(uses), "");
  }
}

// Tiles have other shapes than the whole map (and oneDNN picks kernels by shape): the
// kernels a 3x2 tiled trainer really built, at a small odd size.
TEST(KernelTable, NoReferenceKernelInTiles) {
  for (const std::string& cfg : shipped_cfgs()) {
    SCOPED_TRACE(cfg);
    NetSpec net = small_batch_of(cfg);
    Params params(net);
    init_params(params, net, 1);
    TrainOptions o;
    o.rows = 3;
    o.cols = 2;
    o.need_input_delta = true;
    // Tile the layers whose maps split 3x2; the deeper ones run untiled after the cut.
    o.cut = 0;
    while (o.cut < net.max_cut() && net.layers[size_t(o.cut)].out.h >= 3 && net.layers[size_t(o.cut)].out.w >= 2)
      ++o.cut;
    LocalComm comm;
    Trainer tr(net, params, o, comm);
    const std::vector<KernelUse> uses = tr.kernel_uses();
    for (const LayerSpec& l : net.layers) {  // tiled or not, every convolution has its kernels
      if (!l.is(kConvKind)) continue;
      const bool found = std::any_of(uses.begin(), uses.end(), [&](const KernelUse& u) { return u.layer == l.index; });
      EXPECT_TRUE(found) << "layer " << l.index;
    }
    EXPECT_FALSE(uses.empty());
    for (const KernelUse& u : uses)
      EXPECT_FALSE(is_reference_impl(u.impl)) << "layer " << u.layer << " " << conv_pass_name(u.pass) << ": " << u.impl;
  }
}

// The table `info` prints (planned_kernels, computed from the net without building
// anything) is what a one-tile trainer really builds, pass by pass, on every shipped cfg.
TEST(KernelTable, TheTableIsWhatTheTrainerBuilds) {
  const DnnlContext ctx;
  for (const std::string& cfg : shipped_cfgs()) {
    SCOPED_TRACE(cfg);
    NetSpec net = small_batch_of(cfg);
    Params params(net);
    init_params(params, net, 1);
    TrainOptions o;
    o.need_input_delta = true;
    LocalComm comm;
    Trainer tr(net, params, o, comm);
    auto key = [](const KernelUse& u) { return std::tuple(u.layer, int(u.pass), u.impl); };
    auto sorted = [&](std::vector<KernelUse> v) {
      std::sort(v.begin(), v.end(), [&](const KernelUse& a, const KernelUse& b) { return key(a) < key(b); });
      return v;
    };
    const std::vector<KernelUse> built = sorted(tr.kernel_uses()),
                                 planned = sorted(planned_kernels(net, ctx, -1, true));
    ASSERT_EQ(built.size(), planned.size());
    for (size_t k = 0; k < built.size(); ++k)
      EXPECT_EQ(key(built[k]), key(planned[k])) << "layer " << built[k].layer << " " << conv_pass_name(built[k].pass)
                                                << ": built " << built[k].impl << ", table " << planned[k].impl;
  }
}

// Odd geometries: wherever oneDNN offers only a reference kernel, auto runs an own one;
// elsewhere auto runs oneDNN's, except forwards that need a fixed summation order (1x1
// stride 1, and oneDNN's GEMM-based ones), which run on own kernels on every path, and
// backward-weights of wide windows (>= 512 inputs per output), which on boxes as small as
// these (126 pixels over the batch: at most 200, below the own kernel's 144) run on
// OpenBLAS, as after the cut.
TEST(KernelTable, AutoReplacesExactlyTheReferenceKernels) {
  const DnnlContext onednn(KernelPath::OneDnn), automatic(KernelPath::Auto), own(KernelPath::Own);
  const int B = automatic.config.block;
  int replaced = 0, kept = 0, gemm = 0;
  for (int ic : {1, 3, 6, 16, 21, 64})
    for (int oc : {5, 10, 32})
      for (int k : {1, 3, 5})
        for (int s : {1, 2}) {
          const int in_cb = ic <= 3 ? 1 : B;
          const Window w{k, s, k / 2};
          const ConvGeom g = conv_geom(2, ic, oc, w, full_box(7, 9), 13, 17, B, in_cb, k == 3);
          for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
            SCOPED_TRACE("ic " + std::to_string(ic) + " oc " + std::to_string(oc) + " k " + std::to_string(k) + " s " +
                         std::to_string(s) + " " + conv_pass_name(p));
            const ConvChoice d = choose_conv(onednn, g, p), a = choose_conv(automatic, g, p),
                             o = choose_conv(own, g, p);
            EXPECT_EQ(o.backend, ConvChoice::Own);
            EXPECT_EQ(o.name, "own:" + own_conv_target());
            EXPECT_NE(d.backend, ConvChoice::Gemm);
            EXPECT_FALSE(is_reference_impl(a.name)) << a.name;
            const bool fixed_order = p == ConvPass::Forward && ((k == 1 && s == 1) || d.backend == ConvChoice::Own);
            if (fixed_order) {
              EXPECT_TRUE(a.backend == ConvChoice::Own && d.backend == ConvChoice::Own);
            } else if (p == ConvPass::BackwardWeights && ic * k * k >= 512 && oc >= 32) {
              EXPECT_EQ(a.backend, ConvChoice::Gemm);
              EXPECT_EQ(a.name, "gemm:openblas");
              ++gemm;
            } else if (is_reference_impl(d.name)) {
              EXPECT_EQ(a.backend, ConvChoice::Own);
              ++replaced;
            } else {
              EXPECT_EQ(a.backend, ConvChoice::Dnnl);
              EXPECT_EQ(a.name, d.name);
              ++kept;
            }
          }
        }
  // Tiled layers leave oneDNN's other JIT kernels alone; some backward-weights go to
  // OpenBLAS (wide windows on these small boxes, and where oneDNN has no JIT kernel).
  if (kept == 0) {
    EXPECT_GT(gemm, 0);
  }
  std::printf("auto: %d passes on oneDNN, %d reference kernels replaced by own ones, %d on OpenBLAS\n", kept, replaced,
              gemm);
}

// Every box of a tiled layer runs one forward kernel (choose_conv refuses a layer whose
// boxes would sum in different orders), none a reference one, whatever the box's size
// and place: every box of small maps, paddings up to size - 1 (Darknet's `padding=`).
// A 1-column box padded by 2 under a 3x3 window gets ref:any from oneDNN 2.7 on AVX-512
// (bench/verify_sweep.md, seed 17): the whole layer then runs the own kernel.
TEST(KernelTable, EveryBoxOfALayerRunsOneForwardKernel) {
  const DnnlContext automatic(KernelPath::Auto);
  const int B = automatic.config.block;
  struct Layer {
    int ic, oc, k, s, pad;
  };
  for (const Layer& l : {Layer{19, 11, 3, 2, 2}, Layer{19, 11, 3, 1, 2}, Layer{16, 16, 3, 1, 1}, Layer{3, 8, 3, 1, 2},
                         Layer{8, 5, 5, 1, 4}, Layer{19, 11, 5, 2, 3}, Layer{2, 19, 7, 1, 3}, Layer{4, 9, 7, 1, 6}}) {
    const Window w{l.k, l.s, l.pad};
    const int ih = 13, iw = 9, in_cb = l.ic <= 3 ? 1 : B;
    const int oh = (ih + 2 * l.pad - l.k) / l.s + 1, ow = (iw + 2 * l.pad - l.k) / l.s + 1;
    SCOPED_TRACE("ic " + std::to_string(l.ic) + " oc " + std::to_string(l.oc) + " k " + std::to_string(l.k) + " s " +
                 std::to_string(l.s) + " padding " + std::to_string(l.pad));
    std::string layer;
    for (int y0 = 0; y0 < oh; ++y0)
      for (int y1 = y0 + 1; y1 <= oh; ++y1)
        for (int x0 = 0; x0 < ow; ++x0)
          for (int x1 = x0 + 1; x1 <= ow; ++x1) {
            const Box box{y0, y1, x0, x1};
            const ConvGeom g = conv_geom(1, l.ic, l.oc, w, box, ih, iw, B, in_cb, false);
            ConvChoice c;
            ASSERT_NO_THROW(c = choose_conv(automatic, g, ConvPass::Forward)) << "box " << box.str();
            ASSERT_FALSE(is_reference_impl(c.name)) << "box " << box.str() << ": " << c.name;
            if (layer.empty()) layer = c.name;
            ASSERT_EQ(c.name, layer) << "box " << box.str();
          }
  }
}

// On x86, tiled backward-weights of windows wider than 1x1 on blocked inputs run on the own
// kernel where a box has at least 144 pixels (faster than oneDNN's there), oneDNN's JIT below
// (OpenBLAS for wide windows on boxes of at most 200 pixels, whose plain gradient needs no
// reorder); on AVX-512 cores with two full-width FMA units oneDNN's JIT (faster there).
TEST(KernelTable, OwnBackwardWeightsOnLargeBoxesOnX86) {
  const DnnlContext automatic(KernelPath::Auto);
  const int B = automatic.config.block;
  const bool x86 = own_conv_target() == "avx2" || (own_conv_target().rfind("avx3", 0) == 0 && !full_width_avx512_fma());
  const Window w{3, 1, 1};
  const ConvGeom large = conv_geom(1, 64, 64, w, full_box(12, 12), 12, 12, B, B, false);
  const ConvGeom small = conv_geom(1, 64, 64, w, full_box(11, 13), 12, 13, B, B, false);
  const ConvGeom plain_in = conv_geom(1, 3, 64, w, full_box(32, 32), 32, 32, B, 1, false);
  const ConvGeom one = conv_geom(1, 64, 64, Window{1, 1, 0}, full_box(32, 32), 32, 32, B, B, false);
  EXPECT_EQ(choose_conv(automatic, large, ConvPass::BackwardWeights).backend == ConvChoice::Own, x86);
  EXPECT_EQ(choose_conv(automatic, large, ConvPass::BackwardWeights, false).backend == ConvChoice::Own, false);
  if (!x86) {  // oneDNN's JIT where it has one (the Pis: OpenBLAS)
    EXPECT_NE(choose_conv(automatic, large, ConvPass::BackwardWeights).backend, ConvChoice::Own);
    return;
  }
  EXPECT_EQ(choose_conv(automatic, small, ConvPass::BackwardWeights).backend, ConvChoice::Gemm);  // 143 pixels
  for (const ConvGeom& g : {plain_in, one}) {  // 1024 pixels; 64 inputs per output
    EXPECT_EQ(choose_conv(automatic, g, ConvPass::BackwardWeights).backend, ConvChoice::Dnnl);
  }
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData}) {
    EXPECT_EQ(choose_conv(automatic, large, p).backend, ConvChoice::Dnnl);
  }
}

// After the cut nothing is tiled: wide layers run every pass on OpenBLAS there unless
// oneDNN has an AVX-512 kernel for the pass; where tiles are, only backward-weights, on
// boxes this small (169 pixels) where the own kernel does not take them (x86 without
// full-width AVX-512 FMA units takes them from 144 pixels).
TEST(KernelTable, UntiledWideLayersRunOnOpenBlas) {
  const DnnlContext automatic(KernelPath::Auto), onednn(KernelPath::OneDnn), own(KernelPath::Own);
  const int B = automatic.config.block;
  const bool x86_own =
      own_conv_target() == "avx2" || (own_conv_target().rfind("avx3", 0) == 0 && !full_width_avx512_fma());
  const ConvGeom wide = conv_geom(1, 64, 64, Window{3, 1, 1}, full_box(13, 13), 13, 13, B, B, false);
  const ConvGeom narrow = conv_geom(1, 16, 64, Window{3, 1, 1}, full_box(13, 13), 13, 13, B, B, false);
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
    SCOPED_TRACE(conv_pass_name(p));
    const std::string d = choose_conv(onednn, wide, p, false).name;
    const bool avx512 = d.find("avx512") != std::string::npos;
    // after the cut: backward-weights always (it adds into the plain gradient), the other
    // passes where oneDNN has no AVX-512 kernel
    EXPECT_EQ(choose_conv(automatic, wide, p, false).backend == ConvChoice::Gemm,
              !avx512 || p == ConvPass::BackwardWeights);
    EXPECT_EQ(choose_conv(automatic, wide, p, true).backend == ConvChoice::Gemm,
              p == ConvPass::BackwardWeights && !x86_own);
    EXPECT_NE(choose_conv(automatic, narrow, p, false).backend, ConvChoice::Gemm);
    EXPECT_NE(choose_conv(onednn, wide, p, false).backend, ConvChoice::Gemm);
    EXPECT_EQ(choose_conv(own, wide, p, false).backend, ConvChoice::Own);
  }
}

#if defined(__x86_64__)
TEST(FmaProbe, NoFullWidthUnitsWithoutAvx512) {
  if (__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU has AVX-512";
  EXPECT_FALSE(full_width_avx512_fma());
}

// The answer the ranks agree on (the Trainer sets rank 0's everywhere) is what the kernel
// choice reads: with AVX-512 own kernels, a tiled 3x3 backward-weights runs on the own
// kernel exactly when the core is said to lack two full-width FMA units.
TEST(FmaProbe, TheAgreedAnswerChoosesTheKernels) {
  const DnnlContext ctx(KernelPath::Auto);
  if (own_conv_target().rfind("avx3", 0) != 0) GTEST_SKIP() << "own kernels " << own_conv_target() << ", not AVX-512";
  const NetSpec net = parse_net(
      "[net]\nbatch=2\nwidth=24\nheight=24\nchannels=16\n[convolutional]\nfilters=16\nsize=3\npad=1\n"
      "activation=leaky\n[convolutional]\nfilters=32\nsize=3\npad=1\nactivation=leaky\n[cost]\n",
      "fma.cfg");
  const bool measured = full_width_avx512_fma();
  auto weights_kernel = [&](bool full) {
    set_full_width_avx512_fma(full);
    for (const KernelUse& u : planned_kernels(net, ctx, -1, true))
      if (u.layer == 1 && u.pass == ConvPass::BackwardWeights) return u.impl;
    return std::string("none");
  };
  const std::string split = weights_kernel(false), full = weights_kernel(true);
  set_full_width_avx512_fma(measured);
  EXPECT_EQ(split.rfind("own:avx3", 0), 0u) << split;
  EXPECT_NE(full.rfind("own:", 0), 0u) << full;
}
#endif

TEST(KernelTable, WarningNamesLayerAndPass) {
  const std::vector<KernelUse> uses{{0, ConvPass::Forward, "jit:avx2"},
                                    {3, ConvPass::BackwardWeights, "ref:any"},
                                    {5, ConvPass::BackwardData, "gemm:ref"},
                                    {6, ConvPass::Forward, "own:neon"}};
  const std::string w = reference_kernel_warning(uses);
  EXPECT_NE(w.find("layer 3 backward-weights (ref:any)"), std::string::npos) << w;
  EXPECT_NE(w.find("layer 5 backward-data (gemm:ref)"), std::string::npos) << w;
  EXPECT_EQ(w.find("layer 0"), std::string::npos) << w;
  EXPECT_EQ(w.find("layer 6"), std::string::npos) << w;
  EXPECT_NE(w.find("slower"), std::string::npos) << w;
  EXPECT_EQ(reference_kernel_warning({uses[0], uses[3]}), "");
}

TEST(KernelTable, KernelPathNames) {
  for (KernelPath p : {KernelPath::Auto, KernelPath::OneDnn, KernelPath::Own})
    EXPECT_EQ(parse_kernel_path(kernel_path_name(p)), p);
  EXPECT_THROW(parse_kernel_path("fast"), Error);
}

TEST(KernelTable, ChannelBlockIsOneDnnsChoice) {
  const int b = DnnlContext().config.block;
  EXPECT_TRUE(b == 8 || b == 16) << b;
  // x86: 8 with AVX2 only (or oneDNN capped to it), 16 with AVX-512
  const std::string isa = cpu_isa_name();
  if (isa.rfind("avx512", 0) == 0) {
    EXPECT_EQ(b, 16) << isa;
  }
  if (isa.rfind("avx2", 0) == 0) {
    EXPECT_EQ(b, 8) << isa;
  }
}

// Run by the kernels_avx2_cap CTest: ONEDNN_MAX_CPU_ISA=AVX2 caps the own kernels too, so
// on an AVX-512 machine they run (and the capped exactness tests test) the AVX2 code.
TEST(KernelTable, OwnKernelsFollowTheIsaCap) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!cap || std::string(cap) != "AVX2") GTEST_SKIP() << "runs under ONEDNN_MAX_CPU_ISA=AVX2";
  EXPECT_EQ(cpu_isa_name(), "avx2");
  EXPECT_EQ(own_conv_target(), "avx2");
}

}  // namespace
}  // namespace tt
