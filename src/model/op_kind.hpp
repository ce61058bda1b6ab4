// What the parser, the shape inference and the FLOP count need of each op type: its cfg
// section, how it reads its options, what output shape it gives and what it costs. One
// OpKind per type, defined beside its op (src/ops/) and listed in ops/registry.cpp, so
// that the model code never switches on a layer's type for these.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/net_spec.hpp"

namespace tt {

class CfgReader;  // model/cfg_reader.hpp

// Checks a layer's output shape against what a device can hold; names the layer (file,
// line, section, index) in its messages.
class ShapeCheck {
 public:
  ShapeCheck(const NetSpec& net, const LayerSpec& l) : net_(net), l_(l) {}
  // "file:line: [type] (layer i)"
  std::string where() const;
  // The shape, computed in 64 bits; throws above what a device can hold.
  Shape checked(int64_t c, int64_t h, int64_t w) const;

 private:
  const NetSpec& net_;
  const LayerSpec& l_;
};

struct OpKind {
  const char* name;   // Darknet's section name, e.g. "convolutional"
  const char* alias;  // its short form ("conv"), or nullptr
  // Reads the section's options into l.params (an op that reads other layers than the one
  // before sets l.inputs) and rejects the keys it does not know. Throws naming file and line.
  void (*parse)(CfgReader& r, LayerSpec& l);
  // Sets l.out from l.in (the output of l.inputs[0], or the net's input) and the outputs of
  // its other inputs. Throws through `check`, naming the layer.
  void (*shape)(const NetSpec& net, LayerSpec& l, const ShapeCheck& check);
  // Forward FLOPs per sample (multiply-adds count 2), from the resolved shapes.
  double (*flops)(const LayerSpec& l);
};

// The kinds other code asks a layer about (LayerSpec::is), each defined beside its op.
extern const OpKind kConvKind, kMaxPoolKind, kConnectedKind, kSoftmaxKind, kCostKind, kRouteKind, kRegionKind,
    kYoloKind, kShortcutKind, kLocalKind, kDetectionKind, kCropKind;

// The kind of a section name (or its alias); null when there is none.
const OpKind* find_op_kind(const std::string& section);
// Every kind, in registry order.
std::vector<const OpKind*> op_kinds();

// For kinds that read no options.
void parse_no_options(CfgReader& r, LayerSpec& l);
// For kinds whose output is their input's shape, and which cost one FLOP per input value.
void same_shape(const NetSpec& net, LayerSpec& l, const ShapeCheck& check);
double flops_per_input(const LayerSpec& l);
double no_flops(const LayerSpec& l);

}  // namespace tt
