// make_shard_plan (--low-memory, src/engine/shards.hpp): for several nets, layer ranges
// and process counts, the plan every rank computes shards exactly the convolution
// weights of layers [first, last), into contiguous per-rank parts that cover them once,
// balanced to the boundaries total*r/size of their concatenation; `replicated` is the
// exact complement, `owned` the rank's parts, `max_layer` the largest sharded layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/shards.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

// Every layer type, a 1-filter 1x1 convolution over 1 channel (a single weight: most
// ranks own none of it), a connected layer after the first untileable one.
const char* kMixed =
    "[net]\nbatch=2\nwidth=15\nheight=13\nchannels=1\nlearning_rate=0.01\nmomentum=0.9\ndecay=0.0005\n"
    "[convolutional]\nfilters=1\nsize=1\nstride=1\npad=0\nactivation=linear\n"                    // 0: 1 weight
    "[convolutional]\nbatch_normalize=1\nfilters=5\nsize=3\nstride=1\npad=1\nactivation=leaky\n"  // 1: 45
    "[maxpool]\nsize=2\nstride=2\n"                                                               // 2
    "[convolutional]\nbatch_normalize=1\nfilters=7\nsize=3\nstride=2\npad=1\nactivation=relu\n"   // 3: 315
    "[convolutional]\nfilters=3\nsize=1\nstride=1\npad=0\nactivation=linear\n"                    // 4: 21
    "[avgpool]\n"                                                                                 // 5
    "[connected]\noutput=4\nactivation=linear\n"                                                  // 6
    "[softmax]\ngroups=1\n";                                                                      // 7

struct NetCase {
  std::string name;
  NetSpec net;
};

std::vector<NetCase> nets() {
  std::vector<NetCase> v;
  v.push_back({"mixed", parse_net(kMixed, "mixed.cfg")});
  v.push_back({"pool_mix", load_net(test::source_dir() + "/tests/fixtures/pool_mix/net.cfg")});
  v.push_back({"fashion-mnist", load_net(test::source_dir() + "/cfgs/fashion-mnist.cfg")});
  v.push_back({"small-classifier", load_net(test::source_dir() + "/cfgs/small-classifier.cfg")});
  NetSpec w1 = load_net(test::source_dir() + "/cfgs/yolov2-16.cfg");
  resize_net(w1, 64, 64);  // the weights do not depend on the map size
  v.push_back({"yolov2-16", std::move(w1)});
  return v;
}

// Checks one (net, first, last, size) against the contract; `n_sharded` receives the
// number of layers that must be sharded (so callers can see the case was not vacuous).
void check_plans(const NetSpec& net, const Params& p, int first, int last, int size, int& n_sharded) {
  SCOPED_TRACE("layers [" + std::to_string(first) + ", " + std::to_string(last) + "), " + std::to_string(size) +
               " process(es)");
  const int64_t P = p.size();
  const int L = int(net.layers.size());
  std::vector<ShardPlan> plans;
  for (int r = 0; r < size; ++r) plans.push_back(make_shard_plan(net, p, first, last, r, size));

  // Which layers must be sharded, their total and the largest.
  std::vector<char> expect_sharded(size_t(L), 0);
  int64_t total = 0, largest = 0;
  n_sharded = 0;
  for (int l = first; l < last; ++l)
    if (net.layers[l].is(kConvKind)) {
      expect_sharded[size_t(l)] = 1;
      total += p.slices[l].n_weights;
      largest = std::max(largest, p.slices[l].n_weights);
      ++n_sharded;
    }
  // Process r's share of the concatenation is [bound(r), bound(r + 1)).
  auto bound = [&](int r) { return total * r / size; };

  // owner[i]: the rank owning element i of Params::values (-1 none, -2 more than one).
  std::vector<int> owner(size_t(P), -1);
  for (int r = 0; r < size; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const ShardPlan& sp = plans[size_t(r)];
    EXPECT_EQ(sp.rank, r);
    ASSERT_EQ(int(sp.layers.size()), L);
    EXPECT_EQ(sp.max_layer, largest);
    std::vector<ShardPlan::Range> expect_owned;
    int64_t concat = 0;  // the layer's start in the concatenation
    for (int l = 0; l < L; ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const ShardPlan::Layer& sl = sp.layers[size_t(l)];
      if (!expect_sharded[size_t(l)]) {
        EXPECT_EQ(sl.n, 0) << "a layer outside [first, last) or not a convolution is sharded";
        EXPECT_TRUE(sl.counts.empty());
        EXPECT_TRUE(sl.displs.empty());
        continue;
      }
      const ParamSlice& ps = p.slices[l];
      EXPECT_EQ(sl.offset, ps.weights);
      EXPECT_EQ(sl.n, ps.n_weights);
      EXPECT_EQ(sl.n, net.layers[l].weight_count());
      ASSERT_EQ(int(sl.counts.size()), size);
      ASSERT_EQ(int(sl.displs.size()), size);
      // Every process computes the same layer table (the collectives rely on it).
      const ShardPlan::Layer& l0 = plans[0].layers[size_t(l)];
      EXPECT_EQ(sl.offset, l0.offset);
      EXPECT_EQ(sl.counts, l0.counts);
      EXPECT_EQ(sl.displs, l0.displs);
      // counts sum to n, displs contiguous in rank order
      int64_t sum = 0;
      for (int q = 0; q < size; ++q) {
        EXPECT_GE(sl.counts[size_t(q)], 0);
        EXPECT_EQ(sl.displs[size_t(q)], sum) << "rank " << q << "'s part does not follow rank " << q - 1 << "'s";
        sum += sl.counts[size_t(q)];
      }
      EXPECT_EQ(sum, sl.n);
      // This rank's part is its share of the concatenation, clipped to the layer.
      const int64_t lo = std::clamp(bound(r), concat, concat + sl.n),
                    hi = std::clamp(bound(r + 1), concat, concat + sl.n);
      EXPECT_EQ(sl.displs[size_t(r)], lo - concat);
      EXPECT_EQ(sl.counts[size_t(r)], hi - lo);
      const ShardPlan::Range m = sp.mine(sl);
      EXPECT_EQ(m.first, sl.offset + sl.displs[size_t(r)]);
      EXPECT_EQ(m.second - m.first, sl.counts[size_t(r)]);
      EXPECT_GE(m.first, sl.offset);
      EXPECT_LE(m.second, sl.offset + sl.n);
      expect_owned.push_back(m);
      for (int64_t i = m.first; i < m.second; ++i) owner[size_t(i)] = owner[size_t(i)] == -1 ? r : -2;
      concat += sl.n;
    }
    EXPECT_EQ(concat, total);
    // owned: mine(layer) for every sharded layer, in layer order
    EXPECT_EQ(sp.owned, expect_owned);
    // balanced: exactly the share [total*r/size, total*(r+1)/size), i.e. floor or ceil of total/size
    const int64_t mine_total = ShardPlan::total(sp.owned);
    EXPECT_EQ(mine_total, bound(r + 1) - bound(r));
    EXPECT_GE(mine_total, total / size);
    EXPECT_LE(mine_total, (total + size - 1) / size);
    // replicated: sorted, disjoint, non-empty ranges inside [0, P)
    for (size_t k = 0; k < sp.replicated.size(); ++k) {
      const auto [b, e] = sp.replicated[k];
      EXPECT_LT(b, e) << "empty replicated range " << k;
      EXPECT_GE(b, 0);
      EXPECT_LE(e, P);
      if (k > 0) {
        EXPECT_LT(sp.replicated[k - 1].second, b) << "replicated ranges overlap, touch or are unsorted";
      }
    }
    // replicated is exactly the complement of the sharded weights (the same on every rank)
    if (r > 0) {
      EXPECT_EQ(sp.replicated, plans[0].replicated);
    } else {
      std::vector<char> in_rep(size_t(P), 0);
      for (const auto& [b, e] : sp.replicated)
        for (int64_t i = std::max<int64_t>(b, 0); i < std::min(e, P); ++i) in_rep[size_t(i)] = 1;
      std::vector<char> sharded_elem(size_t(P), 0);
      for (int l = 0; l < L; ++l)
        if (expect_sharded[size_t(l)])
          std::fill_n(sharded_elem.begin() + p.slices[l].weights, p.slices[l].n_weights, char(1));
      int64_t wrong = 0;
      for (int64_t i = 0; i < P; ++i) wrong += in_rep[size_t(i)] == sharded_elem[size_t(i)];
      EXPECT_EQ(wrong, 0) << "elements both replicated and sharded, or neither";
    }
    EXPECT_EQ(ShardPlan::total(sp.replicated), P - total);
  }
  // Across ranks: every sharded weight owned exactly once, nothing else owned.
  int64_t bad = 0;
  for (int l = 0; l < L; ++l) {
    const ParamSlice& ps = p.slices[l];
    if (!expect_sharded[size_t(l)]) continue;
    for (int64_t i = ps.weights; i < ps.weights + ps.n_weights; ++i) bad += owner[size_t(i)] < 0;
  }
  int64_t owned_count = 0;
  for (int o : owner) owned_count += o >= 0;
  EXPECT_EQ(bad, 0) << "sharded weights owned by no rank or by several";
  EXPECT_EQ(owned_count, total) << "elements outside the sharded weights are owned";
  // Each rank's parts are one contiguous stretch of the concatenation, in rank order.
  int prev = 0;
  bool in_order = true;
  for (int l = 0; l < L; ++l)
    if (expect_sharded[size_t(l)])
      for (int64_t i = p.slices[l].weights; i < p.slices[l].weights + p.slices[l].n_weights; ++i) {
        in_order &= owner[size_t(i)] >= prev;
        prev = owner[size_t(i)];
      }
  EXPECT_TRUE(in_order) << "the ranks' parts are not in rank order along the concatenated weights";
}

TEST(ShardPlan, EveryNetRangeAndProcessCount) {
  int cases = 0, sharded_cases = 0;
  for (const NetCase& c : nets()) {
    SCOPED_TRACE(c.name);
    const int L = int(c.net.layers.size());
    const int cut = c.net.first_untileable();
    const Params p(c.net);
    // The trainer's range [0, cut), every layer, and ranges starting and ending mid-net.
    std::vector<std::pair<int, int>> ranges = {{0, cut}, {0, L}, {1, cut}, {0, 1}, {1, 2}, {2, L}, {0, 0}};
    for (auto [first, last] : ranges) {
      if (first > last || last > L) continue;
      for (int size : {1, 2, 3, 4, 7, 24}) {
        int n = 0;
        check_plans(c.net, p, first, last, size, n);
        ++cases;
        sharded_cases += n > 0;
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(sharded_cases, cases / 2);
}

// The trainer's range on W1: 16 layers, 13 convolutions (about 3.7 M weights) over 24
// processes -- every part within one element of total/24.
TEST(ShardPlan, W1On24Processes) {
  NetSpec net = load_net(test::source_dir() + "/cfgs/yolov2-16.cfg");
  const Params p(net);
  const int cut = net.first_untileable();
  int64_t total = 0;
  for (int l = 0; l < cut; ++l)
    if (net.layers[l].is(kConvKind)) total += p.slices[l].n_weights;
  ASSERT_GT(total, 1000000);
  int64_t lo = total, hi = 0;
  for (int r = 0; r < 24; ++r) {
    const ShardPlan sp = make_shard_plan(net, p, 0, cut, r, 24);
    const int64_t t = ShardPlan::total(sp.owned);
    lo = std::min(lo, t), hi = std::max(hi, t);
  }
  EXPECT_LE(hi - lo, 1);
  EXPECT_LE(hi, (total + 23) / 24);
  EXPECT_GE(lo, total / 24);
}

// Layers with no convolution in range, and a single weight over many processes.
TEST(ShardPlan, Corners) {
  const NetSpec net = parse_net(kMixed, "mixed.cfg");
  const Params p(net);
  // [2, 3) is a max-pool: nothing sharded, everything replicated, nothing owned.
  for (int size : {1, 4}) {
    const ShardPlan sp = make_shard_plan(net, p, 2, 3, size - 1, size);
    EXPECT_EQ(sp.max_layer, 0);
    EXPECT_TRUE(sp.owned.empty());
    ASSERT_EQ(sp.replicated.size(), 1u);
    EXPECT_EQ(sp.replicated[0], (ShardPlan::Range{0, p.size()}));
    for (const auto& l : sp.layers) EXPECT_EQ(l.n, 0);
  }
  // [0, 1): one weight on 7 processes: exactly one owns it, the others own empty parts.
  int owners = 0;
  for (int r = 0; r < 7; ++r) {
    const ShardPlan sp = make_shard_plan(net, p, 0, 1, r, 7);
    ASSERT_EQ(sp.layers[0].n, 1);
    ASSERT_EQ(sp.owned.size(), 1u);
    owners += ShardPlan::total(sp.owned);
    EXPECT_EQ(sp.max_layer, 1);
  }
  EXPECT_EQ(owners, 1);
  // One process: it owns every sharded weight.
  const ShardPlan one = make_shard_plan(net, p, 0, net.first_untileable(), 0, 1);
  for (int l : {0, 1, 3, 4}) {
    EXPECT_EQ(one.layers[size_t(l)].counts, std::vector<int>{int(p.slices[l].n_weights)});
    EXPECT_EQ(one.layers[size_t(l)].displs, std::vector<int>{0});
  }
  EXPECT_EQ(ShardPlan::total(one.owned), 1 + 45 + 315 + 21);
  EXPECT_EQ(one.max_layer, 315);
}

}  // namespace
}  // namespace tt
