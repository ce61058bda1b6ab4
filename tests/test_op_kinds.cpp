// The op kinds (model/op_kind.hpp): every layer type has one, found by its section name
// and its alias, and the parser, shapes and FLOP counts go through them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

TEST(OpKinds, EveryTypeHasOneKindFoundByItsSectionNames) {
  std::set<std::string> names;
  const std::vector<const OpKind*> kinds = op_kinds();
  EXPECT_EQ(kinds.size(), 16u);
  for (const OpKind* kind : kinds) {
    const OpKind& k = *kind;
    EXPECT_EQ(find_op_kind(k.name), &k) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " names two kinds";
    if (k.alias) {
      EXPECT_EQ(find_op_kind(k.alias), &k) << k.alias;
      EXPECT_TRUE(names.insert(k.alias).second) << k.alias << " names two kinds";
    }
    EXPECT_TRUE(k.parse && k.shape && k.flops) << k.name;
  }
  EXPECT_EQ(find_op_kind("lstm"), nullptr);  // not (yet) an op type
  EXPECT_EQ(find_op_kind("net"), nullptr);
}

// A layer's section decides its kind, options, shape and FLOPs, aliases included.
TEST(OpKinds, TheParserShapesAndFlopsComeFromTheKind) {
  const NetSpec net = parse_net(
      "[net]\nwidth=8\nheight=6\nchannels=3\n[conv]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=relu\n"
      "[max]\nsize=2\nstride=1\n[route]\nlayers=-2\n[avg]\n[conn]\noutput=5\nactivation=linear\n[soft]\n",
      "kinds.cfg");
  ASSERT_EQ(net.layers.size(), 6u);
  EXPECT_TRUE(net.layers[0].is(kConvKind));
  EXPECT_EQ(net.layers[0].out.c, 4);
  EXPECT_EQ(net.layers[0].out.h, 3);
  EXPECT_EQ(net.layers[0].out.w, 4);
  EXPECT_DOUBLE_EQ(net.layers[0].forward_flops(), 2.0 * 4 * 3 * 4 * 3 * 3 * 3);
  EXPECT_TRUE(net.layers[1].is(kMaxPoolKind));
  EXPECT_EQ(net.layers[1].out.h, 3);  // padding size-1 by default
  EXPECT_DOUBLE_EQ(net.layers[1].forward_flops(), 4.0 * 3 * 4 * 2 * 2);
  EXPECT_EQ(net.layers[2].inputs, std::vector<int>{0});
  EXPECT_EQ(net.layers[2].out.c, 4);
  EXPECT_EQ(net.layers[3].out.h, 1);
  EXPECT_EQ(net.layers[3].inputs, std::vector<int>{2});
  EXPECT_EQ(net.layers[4].out.c, 5);
  EXPECT_DOUBLE_EQ(net.layers[4].forward_flops(), 2.0 * 5 * 4);
  EXPECT_TRUE(net.layers[5].is(kSoftmaxKind));
  try {
    parse_net("[net]\nwidth=8\nheight=6\nchannels=3\n[lstm]\noutput=2\n", "kinds.cfg");
    ADD_FAILURE() << "an unknown section parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kinds.cfg:5: unknown section [lstm]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tt
