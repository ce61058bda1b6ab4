// [softmax] over each sample's values, or over each group of a class tree (tree=, as
// YOLO9000's classifier: Darknet's read_tree groups consecutive lines with the same parent),
// and, as the net's last layer, the cross-entropy loss. As in Darknet the delta passes
// through unchanged: the loss's delta p - truth already is the gradient of softmax +
// cross-entropy with respect to the logits.
#include <numeric>

#include "layers/dense.hpp"
#include "model/cfg_reader.hpp"
#include "model/class_tree.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"

namespace tt {

struct SoftmaxParams {
  std::string tree;         // the tree file, or empty: one softmax over all values
  std::vector<int> groups;  // with a tree: the sizes of its consecutive groups
};

namespace {

const SoftmaxParams& params(const LayerSpec& l) { return l.params_as<SoftmaxParams>(); }

class SoftmaxOp final : public PassThroughLoss {
 public:
  using PassThroughLoss::PassThroughLoss;
  void forward(const OpStep& st, const OpTensors& t) const override {
    const int64_t n = spec.in.size();
    if (params(spec).groups.empty()) return softmax_forward(t.in[0], t.out, st.batch, int(n));
    for (int b = 0; b < st.batch; ++b) {
      int64_t at = b * n;
      for (int g : params(spec).groups) {
        softmax_forward(t.in[0] + at, t.out + at, 1, g);
        at += g;
      }
    }
  }
  double loss(const OpStep& st, const OpTensors& t, const LossArgs& a, DetectorLoss*) const override {
    return softmax_cross_entropy(t.out, a.truth, t.dout, st.batch * spec.out.size());
  }
  OpCost cost() const override { return {20. * spec.in.size(), float_bytes(2. * spec.in.size())}; }
};

}  // namespace

std::unique_ptr<Op> make_softmax_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<SoftmaxOp>(s); }

bool softmax_over_tree(const LayerSpec& s) { return s.is(kSoftmaxKind) && !params(s).groups.empty(); }

namespace {
void parse_softmax(CfgReader& r, LayerSpec& l) {
  SoftmaxParams& p = l.params.emplace<SoftmaxParams>();
  if (r.integer("groups", 1) != 1)
    fail(r.where(r.line_of("groups")), ": softmax groups other than 1 are not supported");
  p.tree = r.str("tree", "");
  if (!p.tree.empty()) p.groups = read_class_tree(p.tree, r.where(r.line_of("tree"))).group_size;
  r.reject_unused({"temperature", "spatial", "noloss"});
}

void softmax_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  const SoftmaxParams& p = params(l);
  const int64_t classes = std::accumulate(p.groups.begin(), p.groups.end(), int64_t(0));
  if (!p.tree.empty() && classes != l.in.size())
    fail(check.where(), ": the class tree '", p.tree, "' has ", classes, " classes but the layer's input has ",
         l.in.size(), " values");
  l.out = l.in;
}
}  // namespace

extern const OpKind kSoftmaxKind{"softmax", "soft", parse_softmax, softmax_shape, flops_per_input};

}  // namespace tt
