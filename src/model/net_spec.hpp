// The network as described by a Darknet .cfg: training hyper-parameters of [net] and one
// LayerSpec per layer section, with input/output shapes resolved and validated. Pure
// data; nothing here computes.
#pragma once
#include <any>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <vector>

#include "model/class_tree.hpp"

namespace tt {

enum class Act { Linear, Leaky, Relu, Logistic, Ramp };
// Darknet's learning-rate policies (network.c get_current_rate).
enum class Policy { Constant, Step, Steps, Exp, Poly, Random, Sigmoid };

const char* act_name(Act a);

struct Shape {
  int c = 0, h = 0, w = 0;
  int64_t size() const { return int64_t(c) * h * w; }
  bool operator==(const Shape&) const = default;
};

// A sliding window along one axis: output i reads input [i*stride - pad, i*stride - pad + size).
struct Window {
  int size = 1, stride = 1, pad = 0;
};

// [region] (YOLOv2) and [yolo] (YOLOv3): the detection loss on the layer's input map,
// Darknet's options and defaults (parser.c parse_region / parse_yolo).
struct DetectorSpec {
  int classes = 20, coords = 4;
  int num = 1;                 // [region]: boxes per cell; [yolo]: anchors in total
  std::vector<float> anchors;  // 2 per anchor (w, h): [region] in cells, [yolo] in input pixels
  std::vector<int> mask;       // [yolo]: the anchors this layer predicts (its boxes per cell)
  bool softmax = false, background = false, rescore = false, bias_match = false;
  int max_boxes = 30;  // truths read per sample: [region] 30, [yolo] `max` (90)
  float jitter = 0.2f, thresh = 0.5f;
  float object_scale = 1, noobject_scale = 1, class_scale = 1, coord_scale = 1;
  float ignore_thresh = 0.5f, truth_thresh = 1;  // [yolo]
  bool random = false;                           // multi-scale training: accepted, not done
  // [region] tree= (YOLO9000): a softmax per group of the tree over the classes, and the
  // class loss along the truth's path to its root; map=: a truth's class c stands for tree
  // class map[c] (so the data has map.size() classes).
  ClassTree tree;
  std::vector<int> map;
  int boxes_per_cell(bool yolo) const { return yolo ? int(mask.size()) : num; }
  int truth_classes() const { return map.empty() ? classes : int(map.size()); }
  int truth_floats() const { return max_boxes * 5; }  // Darknet's l.truths: x, y, w, h, class per box
};

// [detection] (YOLOv1): the loss on a flat vector of class scores, confidences and boxes per
// cell of a side x side grid (parser.c parse_detection).
struct DetectionParams {
  int classes = 1, coords = 4, num = 1, side = 7;
  bool softmax = false, sqrt = false, rescore = false, forced = false, random = false;
  float coord_scale = 1, object_scale = 1, noobject_scale = 1, class_scale = 1;
  float jitter = 0.2f;
  int max_boxes = 90;  // truth boxes read per picture (x, y, w, h, class each)
};

// One parameter struct per op type that has options of its own.
struct ConvParams {  // [convolutional]
  int filters = 0;
  bool batch_normalize = false;
  Act act = Act::Linear;
  Window win;
  int pad_total = 0;  // padding over both sides of an axis (2*pad)
  int groups = 1;     // input and output channels split into this many independent convolutions
  // A filter block of a wider convolution (engine/filter_blocks.hpp): its kernels are the
  // ones the whole layer of this many filters would run, so its outputs are the whole
  // layer's (0: this one's own).
  int kernel_filters = 0;
};
struct MaxPoolParams {  // [maxpool]
  Window win;
  int pad_total = 0;  // Darknet's `padding`: over both sides of an axis
};
struct ConnectedParams {  // [connected]
  int outputs = 0;
  Act act = Act::Linear;
};
struct LocalParams {  // [local]: a convolution with its own filters at every output cell
  int filters = 0;
  Window win;  // Darknet pads `pad` (0 or 1) cells whatever the size
  Act act = Act::Linear;
};
struct DropoutParams {  // [dropout]
  float probability = 0.5f;
};
struct ReorgParams {  // [reorg]
  int stride = 1;
  bool reverse = false;
  // Darknet's other modes: `flatten` transposes each picture's [channel][cell] values to
  // [cell][channel] (back with `reverse`), the shape as the stride gives it; `extra` copies the
  // input as a flat vector and appends that many zeros (go.cfg's "pass" move).
  bool flatten = false;
  int extra = 0;
};
struct UpsampleParams {  // [upsample]; a negative stride in the cfg downsamples (reverse)
  int stride = 2;
  bool reverse = false;
  float scale = 1;
};
struct ShortcutParams {   // [shortcut]
  Act act = Act::Linear;  // after the sum
  // Set with the shapes: the `from` map is at least as large as the output, so each output
  // cell reads one cell of it (every `from_window.stride`-th, as Darknet samples a larger
  // map) and it can run tiled; a smaller map (added to every k-th cell) ends the tiled part.
  bool tileable = true;
  Window from_window;  // the cells of `from` an output cell reads: one, at stride
};
// [avgpool], [softmax], [cost] and [route] have no options beyond their input edges. A new
// op type's parameter struct may live beside its op (LayerSpec::params_as).

// A node of the network graph: its op type, the nodes whose outputs it reads (its input
// edges, in order) and its op's parameters. A chain is a graph whose nodes read the one
// before; a [route] reads the nodes it lists, a [shortcut] the one before and its `from`.
struct OpKind;  // model/op_kind.hpp: an op type's cfg section, options, shape and FLOPs
extern const OpKind kConvKind;

struct LayerSpec {
  const OpKind* kind = &kConvKind;  // the op type
  int index = 0;                    // position among the layer sections, from 0
  int line = 0;                     // cfg line of the section header
  std::vector<int> inputs;          // absolute indices of the nodes read; empty: the net's input
  Shape in, out;
  std::any params;  // the type's parameter struct, set by its kind's parse; empty for the others

  // The type's parameters; asking a node of another type is a programming error (throws).
  template <class P>
  const P& params_as() const {
    if (const P* p = std::any_cast<P>(&params)) return *p;
    wrong_params(typeid(P).name());
  }
  template <class P>
  P& params_as() {
    if (P* p = std::any_cast<P>(&params)) return *p;
    wrong_params(typeid(P).name());
  }
  [[noreturn]] void wrong_params(const char* wanted) const;
  const ConvParams& conv() const;
  ConvParams& conv();
  const MaxPoolParams& maxpool() const;
  MaxPoolParams& maxpool();
  const ConnectedParams& connected() const;
  ConnectedParams& connected();
  const LocalParams& local() const { return params_as<LocalParams>(); }
  const DetectionParams& detection() const { return params_as<DetectionParams>(); }
  const DropoutParams& dropout() const;
  DropoutParams& dropout();
  const ReorgParams& reorg() const;
  ReorgParams& reorg();
  const UpsampleParams& upsample() const;
  UpsampleParams& upsample();
  const DetectorSpec& det() const;
  DetectorSpec& det();
  // What tiling needs of a spatial op: the window it reads from its input `slot` (a
  // route's and a shortcut's are one cell, a shortcut's `from` sampled with a stride) and
  // the padding over both sides of an axis.
  const Window& window(int slot = 0) const;
  int pad_total() const;
  bool is(const OpKind& k) const { return kind == &k; }
  const char* type_name() const;  // the cfg section name, e.g. "convolutional"
  bool batch_normalize() const;
  // The activation a convolution, dense layer or shortcut applies; linear for the others.
  Act activation() const;

  // Runs tiled: convolution, max-pool, a shortcut whose `from` map is at least as large as
  // its output, and a route whose first input is the layer before.
  bool spatial() const;
  bool has_params() const;       // convolution, dense, locally connected
  bool detector() const;         // [region], [yolo]
  bool box_loss() const;         // [region], [yolo], [detection]: a loss on lists of truth boxes
  bool loss() const;             // a detector, [cost] or [softmax]
  int64_t weight_count() const;  // conv: filters*(c/groups)*size*size, connected: outputs*inputs
  int64_t bias_count() const;    // one per output channel; [local]: one per output value
  int64_t param_count() const;   // weights + biases (+ scales when batch-normalized)
  double forward_flops() const;  // multiply-adds counted as 2 FLOPs, per sample
};

struct NetSpec {
  std::string path;
  // [net]
  int batch = 1, subdivisions = 1;
  int width = 0, height = 0, channels = 0;
  float learning_rate = 0.001f, momentum = 0.9f, decay = 0.0005f;
  Policy policy = Policy::Constant;
  std::vector<int> steps;
  std::vector<float> scales;
  int step = 1;       // policy=step: the rate is scaled by `scale` every `step` batches
  float scale = 1.f;  //   (sigmoid: `step` is the batch at the curve's middle)
  float gamma = 1.f;  // policy=exp: the rate is scaled by gamma every batch; sigmoid: the slope
  int burn_in = 0;
  float power = 4.f;  // burn-in, poly and random: the exponent
  int max_batches = 0;
  // data augmentation of detection training ([net] hue, saturation, exposure; jitter of the
  // last detector layer)
  float hue = 0, saturation = 1, exposure = 1;
  // classifier training ([net] as Darknet's train_classifier reads it): a rotation drawn in
  // [-angle, angle] degrees, an aspect factor in [1/aspect, aspect], the shorter side scaled
  // to a size drawn in [min_crop, max_crop] (defaults: width, 2 x width) before the crop;
  // center=1: a centred square crop instead
  float angle = 0, aspect = 1;
  int min_crop = 0, max_crop = 0;
  bool center = false;

  std::vector<LayerSpec> layers;
  // What the cfg says that Darknet takes but a user should know (a key given twice): the
  // command that loads the net says each once.
  std::vector<std::string> warnings;

  Shape input() const { return {channels, height, width}; }
  Shape output() const { return layers.back().out; }
  int micro_batch() const { return batch / subdivisions; }
  // Learning rate for update number `batch_num` (0-based), Darknet's get_current_rate.
  // policy=random draws its factor from the batch number (Darknet: from rand()), so a run
  // and its resumed copy use the same rates; poly is 0 after max_batches.
  float rate_at(int64_t batch_num) const;
  // Layers that run on the whole picture, on the root, before the tiled part: a [crop] at
  // layer 0 (it reads across tiles, at an offset drawn per step). 0 or 1.
  int first_tiled() const;
  // The parameters of layers [first, last) (last -1: to the end).
  int64_t param_count(int first = 0, int last = -1) const;
  // Index of the first layer at or after first_tiled() that cannot be tiled (not
  // spatial()); layers.size() if none.
  int first_untileable() const;
  // The largest cut the net allows: no later than first_untileable(), and no layer after
  // the cut reads a tiled layer's output other than the last one's (only the map at the cut
  // is gathered whole). Tiled layers may read any earlier tiled layer (a residual block).
  int max_cut() const;
  // The first layer at or after `cut` that reads a layer before cut - 1 (a residual block
  // the cut would split: only the map at the cut is gathered whole); -1 if none.
  int split_reader(int cut) const;
  // The first layer other than r + 1 that reads layer r's output; -1 if none.
  int far_reader(int r) const;
  // Layers whose output layer l reads (its input edges).
  const std::vector<int>& inputs_of(int l) const { return layers[size_t(l)].inputs; }
  bool detector() const;  // ends in [region], [yolo] or [detection] losses (truth = boxes)
  // Floats of truth per sample: boxes (Darknet's net.truths) or the output's size.
  int64_t truth_size() const;
};

// Parses and validates a .cfg. Throws tt::Error naming file and line on any problem.
NetSpec load_net(const std::string& path);
NetSpec parse_net(const std::string& text, const std::string& name);
// Resolves shapes for a different input size (verify --size, tests). Throws if too small.
void resize_net(NetSpec& net, int height, int width);

}  // namespace tt
