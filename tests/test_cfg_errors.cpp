// The cfg parser on bad input: every problem is a tt::Error that names the file and the
// line at fault. Plus a few shape and learning-rate checks against Darknet's formulas
// (tests/oracle/README.md sections (c), (e), (f)).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "test_util.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

// A valid [net] section of 8 lines (lines 1-8); layer sections start at line 9.
const std::string kNet =
    "[net]\n"
    "batch=2\n"
    "subdivisions=1\n"
    "width=13\n"
    "height=11\n"
    "channels=3\n"
    "learning_rate=0.01\n"
    "momentum=0.9\n";

// 1-based number of the first line of `text` containing `needle`.
int line_of(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string s;
  for (int n = 1; std::getline(in, s); ++n)
    if (s.find(needle) != std::string::npos) return n;
  ADD_FAILURE() << "'" << needle << "' not in the cfg";
  return -1;
}

// Parses `text` and returns the error message; fails the test if nothing was thrown.
std::string parse_error(const std::string& text) {
  try {
    parse_net(text, "test.cfg");
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-tt::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

// Expects a tt::Error whose message starts with "test.cfg:LINE:" where LINE is the line of
// `needle`, and that mentions every string in `words`.
void expect_error_at(const std::string& text, const std::string& needle, std::initializer_list<std::string> words) {
  const std::string msg = parse_error(text);
  const std::string where = "test.cfg:" + std::to_string(line_of(text, needle)) + ":";
  EXPECT_EQ(msg.rfind(where, 0), 0u) << "message does not start with '" << where << "': " << msg;
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "no '" << w << "' in: " << msg;
}

const std::string kConvTail = "activation=leaky\n[cost]\n";

TEST(CfgErrors, UnknownSection) {
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=3\n\n[bogus]\nsize=2\n[cost]\n";
  expect_error_at(cfg, "[bogus]", {"unknown section", "bogus"});
}

TEST(CfgErrors, ShortcutInputs) {
  const std::string conv = "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n";
  expect_error_at(kNet + conv + "[shortcut]\nactivation=linear\n", "[shortcut]", {"needs 'from='"});
  expect_error_at(kNet + conv + "[shortcut]\nfrom=-2\n", "from=", {"shortcut input -2", "not an earlier layer"});
  expect_error_at(kNet + conv + "[shortcut]\nfrom=1\n", "from=", {"shortcut input 1", "layer 1"});
  expect_error_at(kNet + conv + "[shortcut]\nfrom=-0.5\n", "from=", {"not an earlier layer"});
  expect_error_at(kNet + "[shortcut]\nfrom=-1\n", "from=", {"not an earlier layer", "this is layer 0"});
  expect_error_at(kNet + conv + "[shortcut]\nfrom=-1\nalpha=0.5\n", "alpha=", {"unknown key 'alpha'"});
  expect_error_at(kNet + conv + "[shortcut]\nfrom=-1\nactivation=tanh\n", "activation=tanh",
                  {"unsupported activation"});
  // 12x5 onto 3x2 (two stride-2 layers): 4 times as wide but only twice as high. (Darknet
  // takes 13x11 onto 7x6: it adds the top-left 7x6.)
  const std::string down = "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\n";
  expect_error_at("[net]\nwidth=12\nheight=5\nchannels=3\n" + conv + down + down + "[shortcut]\nfrom=0\n", "[shortcut]",
                  {"layer 0's 12x5 map cannot be added to layer 2's 3x2", "integer multiples"});
  EXPECT_NO_THROW(parse_net(kNet + conv + down + "[shortcut]\nfrom=0\n", "test.cfg"));
}

// Shortcuts of maps of one shape run tiled; a cut may not split a residual block (the root
// holds only the map at the cut whole), and one of other shapes ends the tiled part.
TEST(CfgErrors, GroupedConvolution) {
  const std::string conv = "[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=leaky\n";
  expect_error_at(kNet + conv + "[convolutional]\nfilters=8\nsize=3\ngroups=3\n", "groups=3",
                  {"groups=3 does not divide filters=8"});
  expect_error_at(kNet + conv + "[conv]\nfilters=8\nsize=1\ngroups=4\n", "[conv]",
                  {"(layer 1)", "groups=4 does not divide the 6 input channels"});
  expect_error_at(kNet + conv + "[convolutional]\nfilters=6\nsize=1\ngroups=0\n", "groups=0", {"groups"});
  const NetSpec net = parse_net(kNet + conv + "[convolutional]\nfilters=12\nsize=3\ngroups=3\n[cost]\n", "g.cfg");
  EXPECT_EQ(net.layers[1].weight_count(), 12 * 2 * 3 * 3);  // Darknet's: filters x channels/groups x size^2
  EXPECT_EQ(net.layers[1].forward_flops(), 2.0 * net.layers[1].out.size() * 2 * 9);
}

TEST(CfgErrors, LocalLayer) {
  const std::string conv = "[convolutional]\nfilters=6\nsize=1\nactivation=leaky\n";
  expect_error_at(kNet + conv + "[local]\nfilters=4\npad=1\nsize=5\n", "pad=1", {"needs size=3", "size=5"});
  expect_error_at(kNet + conv + "[local]\nfilters=4\nsize=3\npad=-1\n", "pad=-1", {"pad must be >= 0"});
  expect_error_at(kNet + conv + "[local]\nfilters=4\nsize=40\n", "[local]", {"(layer 1)", "does not fit"});
  const NetSpec net = parse_net(kNet + conv + "[local]\nfilters=4\nsize=3\nstride=2\n[cost]\n", "l.cfg");
  const LayerSpec& l = net.layers[1];
  EXPECT_EQ(l.out.h, (net.height - 3) / 2 + 1);  // Darknet's local_out_height without padding
  EXPECT_EQ(l.bias_count(), l.out.size());       // one bias per output value
  EXPECT_EQ(l.weight_count(), int64_t(l.out.h) * l.out.w * 4 * 6 * 9);
  EXPECT_FALSE(l.spatial());
}

TEST(CfgErrors, ReorgModes) {
  const std::string conv = "[convolutional]\nfilters=4\nsize=1\nactivation=leaky\n";
  expect_error_at(kNet + conv + "[reorg]\nstride=1\nflatten=1\nextra=2\n", "extra=2", {"not both"});
  expect_error_at(kNet + conv + "[reorg]\nstride=1\nextra=-1\n", "extra=-1", {"extra must be >= 0"});
  const NetSpec net = parse_net(kNet + conv + "[reorg]\nstride=1\nextra=1\n[softmax]\n", "r.cfg");
  EXPECT_EQ(net.layers[1].out.c, net.layers[0].out.size() + 1);  // flat, plus one zero
  EXPECT_EQ(net.layers[1].out.h, 1);
}

TEST(CfgErrors, CropLayer) {
  // kNet's input is 11x13
  expect_error_at(kNet + "[crop]\ncrop_height=12\ncrop_width=5\n[cost]\n", "[crop]",
                  {"(layer 0)", "12x5 crop", "larger than its 11x13 input"});
  expect_error_at(kNet + "[crop]\ncrop_height=4\ncrop_width=4\nzoom=2\n[cost]\n", "zoom=2", {"unknown key"});
  NetSpec net = parse_net(kNet +
                              "[crop]\ncrop_height=8\ncrop_width=6\nflip=1\nangle=7\n[convolutional]\nfilters=2\n"
                              "size=3\npad=1\nactivation=ramp\n[cost]\n",
                          "c.cfg");
  EXPECT_EQ(net.first_tiled(), 1);  // the crop runs whole before the tiled part
  EXPECT_EQ(net.first_untileable(), 2);
  EXPECT_EQ(net.layers[0].out.h, 8);
  EXPECT_EQ(net.layers[0].out.w, 6);
  EXPECT_EQ(net.layers[1].activation(), Act::Ramp);
  // At another size, Darknet's resize_crop_layer: both sides times crop_height / height.
  resize_net(net, 22, 26);
  EXPECT_EQ(net.layers[0].out.h, int(8.f / 11.f * 22.f));
  EXPECT_EQ(net.layers[0].out.w, int(8.f / 11.f * 26.f));
  // A crop after the first layer is an op after the cut.
  const NetSpec later =
      parse_net(kNet + "[maxpool]\nsize=1\nstride=1\n[crop]\ncrop_height=3\ncrop_width=3\n[cost]\n", "l.cfg");
  EXPECT_EQ(later.first_tiled(), 0);
  EXPECT_EQ(later.first_untileable(), 1);
}

TEST(CfgErrors, ClassTree) {
  const std::string head = "[convolutional]\nfilters=9\nsize=1\nactivation=linear\n[avgpool]\n";
  const std::string tree = test::source_dir() + "/tests/fixtures/class_tree/tree.txt";
  expect_error_at(kNet + head + "[softmax]\ntree=/nonexistent/9k.tree\n", "tree=", {"cannot open", "9k.tree"});
  expect_error_at(kNet + "[convolutional]\nfilters=8\nsize=1\n[avgpool]\n[softmax]\ntree=" + tree + "\n", "[softmax]",
                  {"(layer 2)", "has 9 classes", "8 values"});
  expect_error_at(kNet + head + "[softmax]\n[cost]\ntype=smooth\n", "type=smooth", {"sse, masked"});
  const NetSpec net = parse_net(kNet + head + "[softmax]\ntree=" + tree + "\n[cost]\ntype=masked\n", "t.cfg");
  EXPECT_EQ(net.layers[2].out.c, 9);
}

TEST(CfgErrors, DetectionLayer) {
  const std::string fc = "[connected]\noutput=52\nactivation=linear\n";  // 2^2 x (2 x 5 + 3)
  expect_error_at(kNet + fc + "[detection]\nside=2\nnum=2\nclasses=4\ncoords=4\n", "[detection]",
                  {"(layer 1)", "52 values", "= 56", "output=56"});
  expect_error_at(kNet + fc + "[detection]\nside=2\nnum=2\nclasses=3\ncoords=5\n", "coords=5", {"not supported"});
  expect_error_at(kNet + fc + "[detection]\nside=2\nnum=1\nclasses=8\ncoords=4\nforced=1\n", "forced=1", {"num >= 2"});
  expect_error_at(kNet + fc + "[detection]\nside=2\nnum=2\nclasses=3\ncoords=4\njitter=1.5\n", "jitter=1.5",
                  {"jitter"});
  const NetSpec net = parse_net(kNet + fc + "[detection]\nside=2\nnum=2\nclasses=3\ncoords=4\nmax=7\n", "d.cfg");
  EXPECT_TRUE(net.detector());             // its truth is boxes
  EXPECT_EQ(net.truth_size(), 7 * 5);      // max boxes x (x, y, w, h, class)
  EXPECT_FALSE(net.layers[1].detector());  // not a [region]/[yolo] head
}

TEST(CfgErrors, CutAndResidualBlocks) {
  const std::string conv = "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n";
  const std::string down = "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\n";
  const NetSpec net = parse_net(kNet + conv + conv + conv + "[shortcut]\nfrom=-3\n" + down + "[shortcut]\nfrom=-2\n" +
                                    conv + "[avgpool]\n[cost]\n",
                                "res.cfg");
  EXPECT_TRUE(net.layers[3].spatial());          // 4x11x13 + 4x11x13
  EXPECT_TRUE(net.layers[5].spatial());          // 4x6x7 + 4x11x13 sampled
  EXPECT_EQ(net.layers[5].window(1).stride, 1);  // Darknet's: 13 / 7 (its first 6x7 cells)
  EXPECT_EQ(net.first_untileable(), 7);
  EXPECT_EQ(net.max_cut(), 7);
  EXPECT_EQ(resolve_cut(net, -1), 7);
  EXPECT_EQ(resolve_cut(net, 1), 1);  // before the block
  // The default stops where the grid still fits: 7 rows need layer 3's 11x13 map (cuts 5
  // and 6 end at 6x7, and a cut after the strided layer 4 would split its block).
  EXPECT_EQ(resolve_cut(net, -1, 7, 1), 4);
  EXPECT_EQ(resolve_cut(net, -1, 6, 7), 7);
  EXPECT_EQ(resolve_cut(net, -1, 12, 1), 7);  // nothing fits: make_plan says so
  auto message = [&](int cut) {
    try {
      resolve_cut(net, cut);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (int cut : {2, 3})  // inside the block: layer 3 reads layer 0
    EXPECT_NE(
        message(cut).find("layer 3 ([shortcut]) reads the output of layer 0, which must then be whole on the root: "
                          "the cut must be at most 1 or at least 4"),
        std::string::npos)
        << message(cut);
  EXPECT_NE(message(5).find("layer 5 ([shortcut]) reads the output of layer 3, which must then be whole on the root: "
                            "the cut must be at most 4 or at least 6"),
            std::string::npos)
      << message(5);
  EXPECT_NE(message(8).find("layer 7 ([avgpool] at res.cfg:"), std::string::npos) << message(8);
  EXPECT_NE(message(99).find("the net has 9 layers"), std::string::npos) << message(99);
}

TEST(CfgErrors, UnknownKey) {
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=3\nfilterz=2\n" + kConvTail;
  expect_error_at(cfg, "filterz", {"unknown key", "filterz"});
}

TEST(CfgErrors, UnknownKeyInNet) {
  const std::string cfg =
      "[net]\nbatch=1\nwidth=8\nheight=8\nchannels=1\nlearningrate=0.1\n"
      "[convolutional]\n" +
      kConvTail;
  expect_error_at(cfg, "learningrate", {"unknown key", "learningrate"});
}

TEST(CfgErrors, MissingValue) {
  const std::string cfg = kNet + "[convolutional]\nsize=3\nfilters=\n" + kConvTail;
  expect_error_at(cfg, "filters=", {"filters", "no value"});
}

TEST(CfgErrors, KeyWithoutEquals) {
  const std::string cfg = kNet + "[convolutional]\nsize=3\nfilters\n" + kConvTail;
  expect_error_at(cfg, "filters", {"key=value"});
}

TEST(CfgErrors, NonNumericValue) {
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=abc\n" + kConvTail;
  expect_error_at(cfg, "size=abc", {"size", "not a number", "abc"});
}

TEST(CfgErrors, TrailingGarbageAfterNumber) {
  // Darknet's atoi would read 3 and ignore the rest; we refuse.
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=3#x\n" + kConvTail;
  expect_error_at(cfg, "size=3#x", {"size", "not a number"});
}

TEST(CfgErrors, NonIntegerWhereIntegerNeeded) {
  const std::string cfg = kNet + "[convolutional]\nfilters=2.5\nsize=3\n" + kConvTail;
  expect_error_at(cfg, "filters=2.5", {"filters", "whole number", "2.5"});
}

TEST(CfgErrors, NonIntegerBatch) {
  const std::string cfg = "[net]\nbatch=1.5\nwidth=8\nheight=8\nchannels=1\n[convolutional]\n" + kConvTail;
  expect_error_at(cfg, "batch=1.5", {"batch", "whole number"});
}

TEST(CfgErrors, SizeNotPositive) {
  expect_error_at(kNet + "[convolutional]\nfilters=4\nsize=0\n" + kConvTail, "size=0", {"size", "> 0"});
  expect_error_at(kNet + "[maxpool]\nsize=-2\nstride=2\n[cost]\n", "size=-2", {"size", "> 0"});
}

TEST(CfgErrors, FiltersNotPositive) {
  expect_error_at(kNet + "[convolutional]\nsize=3\nfilters=0\n" + kConvTail, "filters=0", {"filters", "> 0"});
  expect_error_at(kNet + "[convolutional]\nsize=3\nfilters=-4\n" + kConvTail, "filters=-4", {"filters", "> 0"});
}

TEST(CfgErrors, StrideNotPositive) {
  expect_error_at(kNet + "[convolutional]\nfilters=4\nsize=3\nstride=0\n" + kConvTail, "stride=0", {"stride", "> 0"});
  expect_error_at(kNet + "[maxpool]\nsize=2\nstride=0\n[cost]\n", "stride=0", {"stride", "> 0"});
}

TEST(CfgErrors, OutputsNotPositive) {
  expect_error_at(kNet + "[connected]\noutput=0\nactivation=linear\n[cost]\n", "output=0", {"output", "> 0"});
}

TEST(CfgErrors, ImpossibleConvPadding) {
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=3\npadding=3\n" + kConvTail;
  expect_error_at(cfg, "padding=3", {"padding 3", "size 3"});
  const std::string neg = kNet + "[convolutional]\nfilters=4\nsize=3\npadding=-1\n" + kConvTail;
  expect_error_at(neg, "padding=-1", {"padding -1"});
}

TEST(CfgErrors, ImpossibleMaxpoolPadding) {
  const std::string cfg = kNet + "[maxpool]\nsize=2\nstride=2\npadding=6\n[cost]\n";
  expect_error_at(cfg, "padding=6", {"maxpool padding 6", "size 2"});
  const std::string neg = kNet + "[maxpool]\nsize=2\nstride=2\npadding=-1\n[cost]\n";
  expect_error_at(neg, "padding=-1", {"maxpool padding -1"});
}

TEST(CfgErrors, MaxpoolWindowTooLarge) {
  expect_error_at(kNet + "[maxpool]\nsize=16\nstride=1\n[cost]\n", "size=16", {"maxpool size 16", "15"});
}

TEST(CfgErrors, InputTooSmallForTheNet) {
  // 2x2 input: the first valid 3x3 conv already has no room.
  const std::string cfg =
      "[net]\nbatch=1\nwidth=2\nheight=2\nchannels=1\n"
      "[convolutional]\nfilters=2\nsize=3\nstride=1\nactivation=linear\n"
      "[convolutional]\nfilters=2\nsize=3\nstride=1\nactivation=linear\n[cost]\n";
  expect_error_at(cfg, "[convolutional]", {"too small", "2x2", "layer 0"});
  // 5x5 input: the first leaves 3x3, the second 1x1, the third has no room.
  const std::string deeper =
      "[net]\nbatch=1\nwidth=5\nheight=5\nchannels=1\n"
      "[convolutional]\nfilters=2\nsize=3\nactivation=linear\n"
      "[convolutional]\nfilters=2\nsize=3\nactivation=linear\n"
      "[conv]\nfilters=2\nsize=3\nactivation=relu\n[cost]\n";
  expect_error_at(deeper, "[conv]", {"too small", "1x1", "layer 2"});
}

TEST(CfgErrors, ResizeTooSmall) {
  NetSpec net = parse_net(kNet + "[convolutional]\nfilters=2\nsize=3\nactivation=linear\n[cost]\n", "test.cfg");
  try {
    resize_net(net, 2, 2);
    ADD_FAILURE() << "resize_net to 2x2 did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.cfg:9:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resize_net(net, 0, 5), Error);
}

TEST(CfgErrors, KeyBeforeAnySection) {
  const std::string cfg = "# comment\nbatch=1\n" + kNet + "[convolutional]\n" + kConvTail;
  expect_error_at(cfg, "batch=1", {"before any", "section"});
}

TEST(CfgErrors, FirstSectionNotNet) {
  const std::string cfg = "\n[convolutional]\nfilters=2\n" + kNet + kConvTail;
  expect_error_at(cfg, "[convolutional]", {"first section", "[net]"});
}

TEST(CfgErrors, SecondNetSection) {
  const std::string cfg = kNet + "[convolutional]\nactivation=linear\n[network]\nbatch=1\n[cost]\n";
  expect_error_at(cfg, "[network]", {"second", "network"});
}

TEST(CfgErrors, CostNotLast) {
  const std::string cfg = kNet + "[convolutional]\nactivation=linear\n[cost]\n[convolutional]\nactivation=linear\n";
  expect_error_at(cfg, "[cost]", {"[cost]", "last"});
}

TEST(CfgErrors, BatchNotDivisibleBySubdivisions) {
  const std::string cfg =
      "[net]\nbatch=6\nsubdivisions=4\nwidth=8\nheight=8\nchannels=1\n[convolutional]\n" + kConvTail;
  expect_error_at(cfg, "subdivisions=4", {"6", "4", "divisible"});
}

TEST(CfgErrors, UnsupportedActivation) {
  const std::string cfg = kNet + "[convolutional]\nfilters=4\nsize=3\nactivation=mish\n[cost]\n";
  expect_error_at(cfg, "activation=mish", {"unsupported activation", "mish"});
  const std::string conn = kNet + "[connected]\noutput=4\nactivation=tanh\n[cost]\n";
  expect_error_at(conn, "activation=tanh", {"unsupported activation", "tanh"});
}

TEST(CfgErrors, MissingInputSize) {
  const std::string cfg = "[net]\nbatch=1\nheight=8\nchannels=1\n[convolutional]\n" + kConvTail;
  expect_error_at(cfg, "[net]", {"width"});
}

TEST(CfgErrors, UnsupportedPolicy) {
  const std::string cfg = "[net]\nbatch=1\nwidth=8\nheight=8\nchannels=1\npolicy=poly\n[convolutional]\n" + kConvTail;
  expect_error_at(cfg, "policy=poly", {"policy", "poly"});
}

TEST(CfgErrors, StepsWithoutMatchingScales) {
  const std::string cfg =
      "[net]\nbatch=1\nwidth=8\nheight=8\nchannels=1\npolicy=steps\nsteps=10,20\nscales=.1\n"
      "[convolutional]\n" +
      kConvTail;
  expect_error_at(cfg, "steps=10,20", {"steps", "scales"});
}

TEST(CfgErrors, NoLayersAndEmptyFile) {
  EXPECT_NE(parse_error("[net]\nbatch=1\nwidth=8\nheight=8\nchannels=1\n").find("test.cfg"), std::string::npos);
  EXPECT_NE(parse_error("# nothing\n\n").find("test.cfg"), std::string::npos);
}

TEST(CfgErrors, LoadMissingFileNamesIt) {
  try {
    load_net("/nonexistent/dir/missing.cfg");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/missing.cfg"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- positive checks

TEST(CfgShapes, AcceptsDarknetSyntax) {
  // Inner whitespace, comment lines, aliases, [network], CRLF line ends.
  const std::string cfg =
      "[network]\r\n; comment\r\nbatch = 2\r\nwidth=8\r\nheight=8\r\nchannels=1\r\n"
      "[conv]\r\nfilters = 2\r\nsize=3\r\npad=1\r\nactivation = leaky\r\n# c\r\n[max]\r\nsize=2\r\nstride=2\r\n"
      "[avg]\r\n[conn]\r\noutput=3\r\nactivation=linear\r\n[soft]\r\n";
  NetSpec net = parse_net(cfg, "test.cfg");
  ASSERT_EQ(net.layers.size(), 5u);
  EXPECT_EQ(net.layers[0].conv().act, Act::Leaky);
  EXPECT_TRUE(net.layers[1].is(kMaxPoolKind));
  EXPECT_TRUE(net.layers[4].is(kSoftmaxKind));
  EXPECT_EQ(net.output().c, 3);
}

TEST(CfgShapes, StrideTwoConvOnOddSizes) {
  // height 11, width 13
  NetSpec net = parse_net(kNet +
                              "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
                              "[convolutional]\nfilters=5\nsize=3\nstride=2\nactivation=leaky\n"
                              "[convolutional]\nfilters=6\nsize=2\nstride=2\nactivation=leaky\n[cost]\n",
                          "test.cfg");
  const auto& L = net.layers;
  // (11 + 2 - 3)/2 + 1 = 6, (13 + 2 - 3)/2 + 1 = 7
  EXPECT_EQ(L[0].out.c, 4);
  EXPECT_EQ(L[0].out.h, 6);
  EXPECT_EQ(L[0].out.w, 7);
  EXPECT_EQ(L[0].window().pad, 1);
  // valid: (6 - 3)/2 + 1 = 2, (7 - 3)/2 + 1 = 3
  EXPECT_EQ(L[1].out.h, 2);
  EXPECT_EQ(L[1].out.w, 3);
  // 2x2/2 valid: (2-2)/2+1 = 1, (3-2)/2+1 = 1
  EXPECT_EQ(L[2].out.h, 1);
  EXPECT_EQ(L[2].out.w, 1);
  EXPECT_EQ(net.output().c, 6);
}

TEST(CfgShapes, MaxpoolDefaultPadding) {
  const std::string head = "[net]\nbatch=1\nwidth=13\nheight=13\nchannels=2\n";
  {
    NetSpec net = parse_net(head + "[maxpool]\nsize=2\nstride=2\n[cost]\n", "test.cfg");
    const LayerSpec& l = net.layers[0];
    EXPECT_EQ(l.pad_total(), 1);   // Darknet default padding = size - 1
    EXPECT_EQ(l.window().pad, 0);  // window offset -padding/2 = 0
    EXPECT_EQ(l.out.h, 7);         // odd sizes round up
    EXPECT_EQ(l.out.w, 7);
    EXPECT_EQ(l.out.c, 2);
  }
  {
    NetSpec net = parse_net(head + "[maxpool]\nsize=2\nstride=1\n[cost]\n", "test.cfg");
    EXPECT_EQ(net.layers[0].out.h, 13);  // yolov2-tiny's 13 -> 13
    EXPECT_EQ(net.layers[0].out.w, 13);
  }
  {
    NetSpec net = parse_net(head + "[maxpool]\nsize=3\nstride=1\n[cost]\n", "test.cfg");
    EXPECT_EQ(net.layers[0].pad_total(), 2);
    EXPECT_EQ(net.layers[0].window().pad, 1);
    EXPECT_EQ(net.layers[0].out.h, 13);
  }
  {
    // explicit padding=0: plain valid pooling, 13 -> 6
    NetSpec net = parse_net(head + "[maxpool]\nsize=2\nstride=2\npadding=0\n[cost]\n", "test.cfg");
    EXPECT_EQ(net.layers[0].out.h, 6);
  }
}

TEST(CfgShapes, PadOneWithSizeOneMeansNoPadding) {
  NetSpec net =
      parse_net(kNet + "[convolutional]\nfilters=3\nsize=1\nstride=1\npad=1\nactivation=linear\n[cost]\n", "test.cfg");
  EXPECT_EQ(net.layers[0].window().pad, 0);
  EXPECT_EQ(net.layers[0].pad_total(), 0);
  EXPECT_EQ(net.layers[0].out.h, 11);
  EXPECT_EQ(net.layers[0].out.w, 13);
  // pad=1 overrides padding=, as in Darknet (padding= is used only with pad=0).
  NetSpec n5 =
      parse_net(kNet + "[convolutional]\nfilters=3\nsize=5\npad=1\npadding=1\nactivation=linear\n[cost]\n", "test.cfg");
  EXPECT_EQ(n5.layers[0].window().pad, 2);
}

TEST(CfgShapes, DefaultActivationIsLogistic) {
  NetSpec net = parse_net(kNet + "[convolutional]\nfilters=3\n[connected]\noutput=2\n[cost]\n", "test.cfg");
  EXPECT_EQ(net.layers[0].conv().act, Act::Logistic);
  EXPECT_EQ(net.layers[1].connected().act, Act::Logistic);
  EXPECT_EQ(net.layers[1].in.size(), 3 * 11 * 13);
}

TEST(CfgRate, Constant) {
  NetSpec net = parse_net(kNet + "policy=constant\n[convolutional]\n" + kConvTail, "test.cfg");
  for (int64_t b : {0, 1, 100, 100000}) EXPECT_FLOAT_EQ(net.rate_at(b), 0.01f);
}

TEST(CfgRate, Steps) {
  NetSpec net =
      parse_net(kNet + "policy=steps\nsteps=10,20,30\nscales=.1,.5,2\n[convolutional]\n" + kConvTail, "test.cfg");
  EXPECT_FLOAT_EQ(net.rate_at(0), 0.01f);
  EXPECT_FLOAT_EQ(net.rate_at(9), 0.01f);
  EXPECT_FLOAT_EQ(net.rate_at(10), 0.001f);  // steps[i] <= batch_num applies scales[i]
  EXPECT_FLOAT_EQ(net.rate_at(19), 0.001f);
  EXPECT_FLOAT_EQ(net.rate_at(20), 0.0005f);
  EXPECT_FLOAT_EQ(net.rate_at(30), 0.001f);
  EXPECT_FLOAT_EQ(net.rate_at(1000), 0.001f);
}

TEST(CfgRate, BurnIn) {
  NetSpec net =
      parse_net(kNet + "burn_in=100\npolicy=steps\nsteps=200\nscales=.1\n[convolutional]\n" + kConvTail, "test.cfg");
  EXPECT_EQ(net.power, 4.f);  // Darknet's default
  // Darknet: lr * pow(batch_num / burn_in, power) while batch_num < burn_in.
  for (int64_t b : {1, 10, 50, 99}) EXPECT_FLOAT_EQ(net.rate_at(b), 0.01f * std::pow(float(b) / 100.f, 4.f)) << b;
  EXPECT_FLOAT_EQ(net.rate_at(50), 0.01f / 16);
  EXPECT_FLOAT_EQ(net.rate_at(100), 0.01f);
  EXPECT_FLOAT_EQ(net.rate_at(199), 0.01f);
  EXPECT_FLOAT_EQ(net.rate_at(200), 0.001f);

  NetSpec p2 = parse_net(kNet + "burn_in=10\npower=2\n[convolutional]\n" + kConvTail, "test.cfg");
  EXPECT_FLOAT_EQ(p2.rate_at(5), 0.01f * 0.25f);
  EXPECT_FLOAT_EQ(p2.rate_at(10), 0.01f);
}

// Darknet's own get_current_rate (tests/oracle/darknet_rate.c) against rate_at, for every
// policy Darknet computes deterministically. Two places where this libdarknet compares or
// subtracts its unsigned batch number with a signed one, and tiletrain takes what the cfg
// means (as AlexeyAB's fork does): a negative entry in steps= (YOLOv2's steps=-1,100,...)
// ends Darknet's schedule there (the rate stays learning_rate), and policy=sigmoid is 0
// before its middle step. Both are left out here, as is poly after max_batches (Darknet's
// power of a negative number; tiletrain's rate is 0 there).
TEST(CfgRate, EveryPolicyAsDarknet) {
  if (std::string(DARKNET_RATE).empty()) GTEST_SKIP() << "darknet_rate not built (libdarknet missing)";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tt_rate_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string body = "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n[cost]\n";
  struct Policy {
    std::string keys;
    std::vector<int64_t> batches;
  };
  const std::vector<int64_t> many{0, 1, 2, 7, 99, 100, 101, 999, 1000, 1001, 4999, 5000, 12345};
  const std::vector<Policy> policies{
      {"policy=constant\n", many},
      {"policy=step\nstep=100\nscale=0.5\n", many},
      {"policy=step\nstep=7\nscale=0.99\nburn_in=50\npower=2\n", many},
      {"policy=steps\nsteps=100,1000,5000\nscales=0.1,10,.1\n", many},
      {"policy=exp\ngamma=0.999\n", many},
      {"policy=poly\npower=4\nmax_batches=5000\n", {0, 1, 99, 1000, 4999, 5000}},
      {"policy=poly\npower=0.9\nmax_batches=12345\nburn_in=1000\n", many},
      {"policy=sigmoid\ngamma=0.01\nstep=1000\n", {1000, 1001, 1500, 4999, 12345}},
  };
  for (const Policy& p : policies) {
    SCOPED_TRACE(p.keys);
    const std::string cfg = kNet + p.keys + body;
    const std::filesystem::path path = dir / "rate.cfg";
    std::ofstream(path) << cfg;
    const NetSpec net = parse_net(cfg, "rate.cfg");
    std::ostringstream cmd_text;  // (chained string + warns falsely with GCC 12, -Wrestrict)
    cmd_text << "'" << DARKNET_RATE << "' '" << path.string() << "'";
    for (int64_t b : p.batches) cmd_text << " " << b;
    const std::string cmd = cmd_text.str();
    FILE* f = popen((cmd + " 2>/dev/null").c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::vector<double> darknet;
    double v;
    while (std::fscanf(f, "%lf", &v) == 1) darknet.push_back(v);
    ASSERT_EQ(pclose(f), 0) << cmd;
    ASSERT_EQ(darknet.size(), p.batches.size()) << cmd;
    for (size_t k = 0; k < darknet.size(); ++k)
      EXPECT_NEAR(net.rate_at(p.batches[k]), darknet[k], 1e-6 * std::fabs(darknet[k]) + 1e-12)
          << "batch " << p.batches[k];
  }
  std::filesystem::remove_all(dir);
}

TEST(CfgRate, RandomIsDrawnFromTheBatchNumber) {
  const NetSpec net = parse_net(kNet + "policy=random\npower=2\n[convolutional]\n" + kConvTail, "test.cfg");
  double mean = 0;
  const int n = 20000;
  for (int64_t b = 0; b < n; ++b) {
    const float r = net.rate_at(b);
    ASSERT_TRUE(r >= 0 && r <= 0.01f) << b;
    ASSERT_EQ(r, net.rate_at(b)) << "batch " << b << " drew two rates";
    mean += r / 0.01 / n;
  }
  EXPECT_NEAR(mean, 1. / 3, 0.01) << "E[u^2] for u uniform on [0, 1)";
}

// yolo9000.cfg has batch= and subdivisions= twice in [net]: Darknet takes the first of each.
TEST(CfgErrors, KeyGivenTwiceTakesTheFirstWithAWarning) {
  const NetSpec net = parse_net(
      "[net]\nbatch=4\nsubdivisions=2\nbatch=64\nwidth=8\nheight=8\nchannels=3\n[convolutional]\nfilters=2\n"
      "size=3\nfilters=5\n[cost]\n",
      "twice.cfg");
  EXPECT_EQ(net.batch, 4);
  EXPECT_EQ(net.layers[0].conv().filters, 2);
  ASSERT_EQ(net.warnings.size(), 2u);
  EXPECT_NE(net.warnings[0].find("twice.cfg:4: key 'batch' given again in [net]"), std::string::npos)
      << net.warnings[0];
  EXPECT_NE(net.warnings[0].find("line 2 sets it to '4'"), std::string::npos) << net.warnings[0];
  EXPECT_NE(net.warnings[1].find("twice.cfg:11: key 'filters' given again in [convolutional]"), std::string::npos)
      << net.warnings[1];
  EXPECT_TRUE(parse_net(kNet + "[convolutional]\n" + kConvTail, "test.cfg").warnings.empty());
}

// writing.cfg sets seen=0 in [net]: Darknet reads the images seen from the .weights file only.
TEST(CfgErrors, SeenInNetIsIgnoredWithAWarning) {
  const NetSpec net = parse_net(kNet + "seen=1000\n[convolutional]\n" + kConvTail, "test.cfg");
  ASSERT_EQ(net.warnings.size(), 1u);
  EXPECT_NE(net.warnings[0].find("test.cfg:" + std::to_string(line_of(kNet + "seen=1000\n", "seen=")) +
                                 ": key 'seen' in [net] is ignored"),
            std::string::npos)
      << net.warnings[0];
  expect_error_at(kNet + "[convolutional]\nseen=3\n" + kConvTail, "seen=", {"unknown key 'seen'"});
}

// Darknet's classifier cfgs have saturation=.75: a factor between .75 and 1/.75.
TEST(CfgErrors, AugmentationRanges) {
  const NetSpec net = parse_net(kNet + "saturation=.75\nexposure=.75\n[convolutional]\n" + kConvTail, "test.cfg");
  EXPECT_FLOAT_EQ(net.saturation, 0.75f);
  expect_error_at(kNet + "saturation=0\n[convolutional]\n" + kConvTail, "saturation=", {"saturation must be in"});
  expect_error_at(kNet + "exposure=-2\n[convolutional]\n" + kConvTail, "exposure=", {"exposure must be in"});
}

TEST(CfgRate, PolicyErrors) {
  expect_error_at(kNet + "policy=poly\n[convolutional]\n" + kConvTail, "policy=", {"max_batches > 0"});
  expect_error_at(kNet + "policy=step\nstep=0\n[convolutional]\n" + kConvTail, "step=", {"'step'"});
  expect_error_at(kNet + "policy=sigm\n[convolutional]\n" + kConvTail,
                  "policy=", {"unsupported policy 'sigm'", "sigmoid"});
}

}  // namespace
}  // namespace tt

namespace tt {
namespace {

// The YOLO layers: each bad value is named with its line.
TEST(CfgErrors, YoloLayers) {
  const std::string conv = "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n";
  expect_error_at(kNet + conv + "[route]\nlayers=3\n[cost]\n", "layers=3", {"route input", "earlier layer"});
  expect_error_at(kNet + conv + "[route]\nlayers=-2\n[cost]\n", "layers=-2", {"route input", "earlier layer"});
  expect_error_at(kNet + conv + "[route]\n[cost]\n", "[route]", {"layers="});
  // 13x11 does not reorganise by 2
  expect_error_at(kNet + conv + "[reorg]\nstride=2\n[cost]\n", "[reorg]", {"stride 2", "multiples"});
  expect_error_at(kNet + conv + "[reorg]\nstride=2\nflatten=1\n[cost]\n", "[reorg]", {"stride 2", "multiples"});
  // Darknet's reorg order needs channels divisible by stride^2 both ways (3 channels once
  // divided by zero)
  expect_error_at("[net]\nwidth=12\nheight=10\nchannels=3\n[reorg]\nstride=2\n[cost]\n", "[reorg]",
                  {"divisible by stride^2 = 4", "got 3"});
  expect_error_at(kNet + conv + "[yolo]\nmask=0,5\nnum=4\nclasses=2\n", "mask=0,5", {"mask entry 5", "[0, 4)"});
  expect_error_at(kNet + conv + "[yolo]\nmask=0,1\nnum=4\nclasses=2\nanchors=1,2,3\n",
                  "anchors=", {"3 anchor values", "8"});
  expect_error_at(kNet + conv + "[yolo]\nmask=0,1\nnum=4\nclasses=3\n", "[yolo]", {"14 channels", "filters=16"});
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\ncoords=4\nanchors=1,1,0,1\n", "anchors=", {"> 0"});
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\ncoords=5\n", "coords=5", {"coords=5", "not supported"});
  // YOLO9000's class tree and map: the tree must have the layer's classes, the map's
  // entries be classes of it; [yolo] has neither
  const std::string fixtures = test::source_dir() + "/tests/fixtures/class_tree/";
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\ntree=data/9k.tree\n", "tree=", {"cannot open", "9k.tree"});
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\ntree=" + fixtures + "tree.txt\n",
                  "tree=", {"has 9 classes but classes=2"});
  try {  // a bad line of the map names the map's line first, then the cfg's
    (void)parse_net(kNet + conv + "[region]\nnum=2\nclasses=2\nmap=" + fixtures + "map.txt\n", "test.cfg");
    ADD_FAILURE() << "a map entry outside the classes was taken";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("map.txt:1: '3' is not a class number in [0, 2) (cfg test.cfg:"), std::string::npos) << m;
  }
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\nmap=/nonexistent/coco9k.map\n",
                  "map=", {"cannot open the class map", "no such file"});
  {
    const std::string bad_tree = testing::TempDir() + "bad_parent.tree";
    std::ofstream(bad_tree) << "animal -1\ncat x\n";
    try {
      (void)parse_net(kNet + conv + "[region]\nnum=2\nclasses=2\ntree=" + bad_tree + "\n", "test.cfg");
      ADD_FAILURE() << "a parent that is not a number was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad_parent.tree:2: parent 'x' is not an earlier line"), std::string::npos)
          << e.what();
    }
  }
  expect_error_at(kNet + conv + "[region]\nnum=2\nclasses=2\ntree=/dev/zero\n", "tree=",  // not read forever
                  {"cannot open the class tree '/dev/zero': not a regular file"});
  expect_error_at(kNet + conv + "[yolo]\nmask=0,1\nnum=4\nclasses=2\ntree=" + fixtures + "tree.txt\n",
                  "tree=", {"not supported in [yolo]"});
  expect_error_at(kNet + conv + "[yolo]\nmask=0,1\nnum=4\nclasses=2\nbogus=1\n", "bogus=1", {"unknown key", "bogus"});
  // a route of maps of different sizes
  expect_error_at(kNet + conv + "[maxpool]\nsize=2\nstride=2\n[route]\nlayers=-1,-2\n[cost]\n", "[route]",
                  {"route concatenates maps of one size"});
}

// The five detector cfgs Debian's darknet ships load unchanged, and the default cut keeps
// every routed output whole.
TEST(CfgErrors, DarknetYoloCfgsLoad) {
  for (const char* name : {"yolov2", "yolov2-voc", "yolov2-tiny", "yolov2-tiny-voc", "yolov3-tiny"}) {
    const std::string path = std::string("/usr/share/darknet/cfg/") + name + ".cfg";
    if (!std::ifstream(path)) GTEST_SKIP() << path << " missing (package darknet)";
    SCOPED_TRACE(path);
    const NetSpec net = load_net(path);
    EXPECT_TRUE(net.detector());
    for (const LayerSpec& l : net.layers)
      if (l.is(kRouteKind)) {
        for (int r : l.inputs)
          EXPECT_GE(r, net.max_cut() - 1) << "layer " << l.index << " routes from inside the tiles";
      }
  }
  EXPECT_EQ(load_net("/usr/share/darknet/cfg/yolov2.cfg").max_cut(), 17);
  EXPECT_EQ(load_net("/usr/share/darknet/cfg/yolov3-tiny.cfg").max_cut(), 9);
}

// The parser gives each node its input edges (a chain reads the node before, a route the
// nodes it lists) and one parameter struct per op type; asking a node for another type's
// parameters is refused, naming the node.
TEST(CfgErrors, NodesCarryTheirInputEdgesAndTheirOpsParameters) {
  const NetSpec net = parse_net(
      "[net]\nwidth=8\nheight=8\nchannels=3\n"
      "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
      "[maxpool]\nsize=2\nstride=2\n"
      "[convolutional]\nfilters=6\nsize=1\nactivation=linear\n"
      "[route]\nlayers=-1,-2\n"
      "[upsample]\nstride=-2\n",
      "graph.cfg");
  ASSERT_EQ(net.layers.size(), 5u);
  EXPECT_EQ(net.layers[0].inputs, std::vector<int>{});
  EXPECT_EQ(net.layers[1].inputs, std::vector<int>{0});
  EXPECT_EQ(net.layers[3].inputs, (std::vector<int>{2, 1}));
  EXPECT_EQ(net.layers[4].inputs, std::vector<int>{3});
  EXPECT_EQ(net.layers[3].out.c, 6 + 4);
  EXPECT_EQ(net.layers[0].conv().filters, 4);
  EXPECT_EQ(net.layers[0].activation(), Act::Leaky);
  EXPECT_EQ(net.layers[1].window().stride, 2);
  EXPECT_TRUE(net.layers[4].upsample().reverse);
  EXPECT_EQ(net.layers[4].out.h, 2);
  EXPECT_FALSE(net.layers[1].batch_normalize());
  EXPECT_EQ(net.layers[3].activation(), Act::Linear);
  try {
    (void)net.layers[1].conv();
    FAIL() << "a max-pool gave convolution parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1 is [maxpool]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(net.layers[3].window().size, 1);          // a route joins its inputs cell by cell
  EXPECT_TRUE(net.layers[3].spatial());               // its first input is the layer before
  EXPECT_EQ(net.layers[3].in.c, 6);                   // the first input's shape
  EXPECT_THROW((void)net.layers[4].window(), Error);  // an upsample has no window (not tiled)
}

// Every cfg of Debian's darknet package loads but those listed with what stops them; one of
// them loading means the list (and docs/status.md) is due an update.
TEST(CfgErrors, DebianCfgsLoad) {
  const std::filesystem::path dir = "/usr/share/darknet/cfg";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "Debian's darknet package is not installed";
  const std::map<std::string, std::string> refused = {
      {"gru.cfg", "needs 'width='"}, {"rnn.cfg", "needs 'width='"}, {"rnn.train.cfg", "needs 'width='"}};
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".cfg") continue;
    const std::string name = e.path().filename().string();
    std::string error;
    try {
      (void)load_net(e.path().string());
    } catch (const Error& x) {
      error = x.what();
    }
    const auto it = refused.find(name);
    if (it == refused.end()) {
      EXPECT_EQ(error, "") << name;
      ++loaded;
    } else {
      EXPECT_NE(error.find(it->second), std::string::npos) << name << ": " << (error.empty() ? "loads" : error);
    }
  }
  EXPECT_EQ(loaded, 42);
}

}  // namespace
}  // namespace tt
