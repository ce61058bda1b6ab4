// Darknet .cfg text to a NetSpec: sections, keys and values, each checked with its file
// and line; the shapes are resolved at the end (net_shapes.cpp).
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "model/net_limits.hpp"
#include "model/net_spec.hpp"
#include "util/error.hpp"

namespace tt {

using namespace net_detail;

namespace {

struct Section {
  std::string name;
  int line = 0;
  // key -> (value, line); `used` tracks which keys a layer consumed.
  std::map<std::string, std::pair<std::string, int>> kv;
  std::set<std::string> used;
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

class Reader {
 public:
  Reader(const std::string& file, Section& s) : file_(file), s_(s) {}

  std::string where(int line) const { return file_ + ":" + std::to_string(line); }

  bool has(const std::string& k) const { return s_.kv.count(k) > 0; }

  std::string str(const std::string& k, const std::string& def) {
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) return def;
    s_.used.insert(k);
    return it->second.first;
  }

  double num(const std::string& k, double def, bool required = false) {
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) {
      if (required) fail(where(s_.line), ": [", s_.name, "] needs '", k, "='");
      return def;
    }
    s_.used.insert(k);
    return parse_number(it->second.first, k, it->second.second);
  }

  int integer(const std::string& k, int def, bool required = false) {
    double v = num(k, def, required);
    if (v != std::floor(v)) fail(where(line_of(k)), ": '", k, "' must be a whole number, got '", text_of(k), "'");
    if (std::fabs(v) > 1e9) fail(where(line_of(k)), ": '", k, "' is out of range: ", text_of(k));
    return int(v);
  }

  // Throws naming the key's line when v > hi (what a device can hold, or the engine).
  void at_most(const std::string& k, int64_t v, int64_t hi, const char* what) const {
    if (v > hi) fail(where(line_of(k)), ": '", k, "' = ", v, " is larger than ", hi, " (", what, ")");
  }

  // A comma-separated list of numbers ("1, 2,3"; one trailing comma is tolerated, as
  // Darknet's parser does). An empty value or an empty entry is an error naming the line.
  std::vector<double> list(const std::string& k) {
    std::vector<double> out;
    auto it = s_.kv.find(k);
    if (it == s_.kv.end()) return out;
    s_.used.insert(k);
    const std::string& text = it->second.first;
    const int line = it->second.second;
    if (trim(text).empty()) fail(where(line), ": '", k, "' has no value (it takes a comma-separated list)");
    std::vector<std::string> items(1);
    for (char ch : text)
      if (ch == ',')
        items.emplace_back();
      else
        items.back() += ch;
    if (items.size() > 1 && trim(items.back()).empty()) items.pop_back();
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item = trim(items[i]);
      if (item.empty()) fail(where(line), ": '", k, "' has an empty entry (number ", i + 1, ") in '", text, "'");
      out.push_back(parse_number(item, k, line));
    }
    return out;
  }

  int line_of(const std::string& k) const {
    auto it = s_.kv.find(k);
    return it == s_.kv.end() ? s_.line : it->second.second;
  }

  void positive(const std::string& k, double v) {
    if (!(v > 0))
      fail(where(line_of(k)), ": '", k, "' must be > 0, got ", s_.kv.count(k) ? text_of(k) : std::to_string(v));
  }

  std::string text_of(const std::string& k) const {
    auto it = s_.kv.find(k);
    return it == s_.kv.end() ? "" : it->second.first;
  }

  // Every key the layer did not consume is an error, except Darknet keys that only
  // concern data augmentation or inference and are documented as ignored.
  void reject_unused(const std::set<std::string>& ignored) {
    for (const auto& [k, v] : s_.kv)
      if (!s_.used.count(k) && !ignored.count(k)) fail(where(v.second), ": unknown key '", k, "' in [", s_.name, "]");
  }

 private:
  double parse_number(const std::string& text, const std::string& k, int line) const {
    if (text.empty()) fail(where(line), ": '", k, "' has no value");
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v)) fail(where(line), ": '", k, "' is not a number: '", text, "'");
    if (std::fabs(v) > FLT_MAX) fail(where(line), ": '", k, "' is out of range: ", text);
    return v;
  }

  std::string file_;
  Section& s_;
};

std::vector<Section> split_sections(const std::string& text, const std::string& file) {
  std::vector<Section> out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    std::string s = trim(raw);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    if (s[0] == '[') {
      if (s.back() != ']') fail(file, ":", line, ": malformed section header '", s, "'");
      out.push_back({trim(s.substr(1, s.size() - 2)), line, {}, {}});
      continue;
    }
    if (out.empty()) fail(file, ":", line, ": '", s, "' comes before any [section]");
    size_t eq = s.find('=');
    if (eq == std::string::npos) fail(file, ":", line, ": expected key=value, got '", s, "'");
    std::string k = trim(s.substr(0, eq)), v = trim(s.substr(eq + 1));
    if (k.empty()) fail(file, ":", line, ": missing key before '='");
    if (out.back().kv.count(k)) fail(file, ":", line, ": key '", k, "' given twice in [", out.back().name, "]");
    out.back().kv[k] = {v, line};
  }
  return out;
}

Act parse_act(Reader& r, const std::string& key) {
  std::string a = r.str(key, "logistic");
  if (a == "leaky") return Act::Leaky;
  if (a == "relu") return Act::Relu;
  if (a == "linear") return Act::Linear;
  if (a == "logistic") return Act::Logistic;
  fail(r.where(r.line_of(key)), ": unsupported activation '", a, "' (leaky, relu, linear, logistic)");
}

LayerSpec parse_layer(Section& s, int index, const std::string& file) {
  Reader r(file, s);
  LayerSpec l;
  l.index = index;
  l.line = s.line;
  const std::string& n = s.name;
  if (n == "convolutional" || n == "conv") {
    l.type = LayerType::Conv;
    ConvParams& c = l.params.emplace<ConvParams>();
    c.filters = r.integer("filters", 1);
    r.positive("filters", c.filters);
    r.at_most("filters", c.filters, kMaxChannels, "channels a device can hold");
    c.win.size = r.integer("size", 1);
    r.positive("size", c.win.size);
    r.at_most("size", c.win.size, kMaxDim, "a window a device can hold");
    c.win.stride = r.integer("stride", 1);
    r.positive("stride", c.win.stride);
    r.at_most("stride", c.win.stride, kMaxDim, "the largest map's side");
    int padding = r.integer("padding", 0);
    if (r.integer("pad", 0)) padding = c.win.size / 2;
    if (padding < 0 || padding >= c.win.size)
      fail(r.where(r.line_of(r.has("padding") ? "padding" : "pad")), ": impossible padding ", padding, " for size ",
           c.win.size, " (needs 0 <= padding < size)");
    c.win.pad = padding;
    c.pad_total = 2 * padding;
    c.batch_normalize = r.integer("batch_normalize", 0) != 0;
    c.act = parse_act(r, "activation");
    if (r.integer("groups", 1) != 1) fail(r.where(r.line_of("groups")), ": grouped convolution is not supported");
    if (r.integer("binary", 0) || r.integer("xnor", 0))
      fail(r.where(s.line), ": binary/xnor convolution is not supported");
    r.reject_unused({"flipped", "dot"});
  } else if (n == "maxpool" || n == "max") {
    l.type = LayerType::MaxPool;
    MaxPoolParams& p = l.params.emplace<MaxPoolParams>();
    p.win.size = r.integer("size", 1);
    r.positive("size", p.win.size);
    if (p.win.size > 15)  // the engine records winners as a byte position in the window
      fail(r.where(r.line_of("size")), ": maxpool size ", p.win.size, " is larger than the supported 15");
    p.win.stride = r.integer("stride", 1);
    r.positive("stride", p.win.stride);
    r.at_most("stride", p.win.stride, kMaxDim, "the largest map's side");
    p.pad_total = r.integer("padding", p.win.size - 1);
    if (p.pad_total < 0 || p.pad_total / 2 >= p.win.size)
      fail(r.where(r.line_of("padding")), ": impossible maxpool padding ", p.pad_total, " for size ", p.win.size);
    p.win.pad = p.pad_total / 2;
    r.reject_unused({});
  } else if (n == "avgpool" || n == "avg") {
    l.type = LayerType::AvgPool;
    r.reject_unused({});
  } else if (n == "connected" || n == "conn") {
    l.type = LayerType::Connected;
    ConnectedParams& fc = l.params.emplace<ConnectedParams>();
    fc.outputs = r.integer("output", 1);
    r.positive("output", fc.outputs);
    r.at_most("output", fc.outputs, kMaxChannels, "channels a device can hold");
    fc.act = parse_act(r, "activation");
    if (r.integer("batch_normalize", 0))
      fail(r.where(r.line_of("batch_normalize")), ": batch_normalize on [connected] is not supported");
    r.reject_unused({});
  } else if (n == "softmax" || n == "soft") {
    l.type = LayerType::Softmax;
    if (r.integer("groups", 1) != 1)
      fail(r.where(r.line_of("groups")), ": softmax groups other than 1 are not supported");
    r.reject_unused({"temperature", "spatial", "noloss"});
  } else if (n == "dropout") {
    l.type = LayerType::Dropout;
    DropoutParams& d = l.params.emplace<DropoutParams>();
    d.probability = float(r.num("probability", 0.5));
    if (!(d.probability >= 0 && d.probability < 1))
      fail(r.where(r.line_of("probability")), ": dropout probability must be in [0, 1)");
    r.reject_unused({});
  } else if (n == "cost") {
    l.type = LayerType::Cost;
    std::string t = r.str("type", "sse");
    if (t != "sse") fail(r.where(r.line_of("type")), ": cost type '", t, "' is not supported (sse)");
    r.reject_unused({"scale", "ratio", "noobject_scale", "thresh"});
  } else if (n == "route") {
    l.type = LayerType::Route;
    if (!r.has("layers")) fail(r.where(s.line), ": [route] needs 'layers='");
    for (double v : r.list("layers")) {
      // checked as a double first: a value out of int's range has no int to convert to
      if (v != std::floor(v) || v < -index || v >= index)
        fail(r.where(r.line_of("layers")), ": route input ", num_text(v), " is not an earlier layer (this is layer ",
             index, "; negative values count back from it)");
      l.inputs.push_back(v < 0 ? index + int(v) : int(v));
    }
    r.reject_unused({});
  } else if (n == "reorg") {
    l.type = LayerType::Reorg;
    ReorgParams& g = l.params.emplace<ReorgParams>();
    g.stride = r.integer("stride", 1);
    r.positive("stride", g.stride);
    r.at_most("stride", g.stride, kMaxDim, "the largest map's side");
    g.reverse = r.integer("reverse", 0) != 0;
    if (r.integer("flatten", 0) || r.integer("extra", 0))
      fail(r.where(s.line), ": [reorg] with flatten= or extra= is not supported");
    r.reject_unused({});
  } else if (n == "upsample") {
    l.type = LayerType::Upsample;
    UpsampleParams& u = l.params.emplace<UpsampleParams>();
    u.stride = r.integer("stride", 2);
    if (u.stride == 0) fail(r.where(r.line_of("stride")), ": upsample stride 0");
    r.at_most("stride", std::abs(int64_t(u.stride)), kMaxDim, "the largest map's side");
    u.reverse = u.stride < 0;  // Darknet: a negative stride downsamples (sums)
    u.stride = std::abs(u.stride);
    u.scale = float(r.num("scale", 1));
    r.reject_unused({});
  } else if (n == "region" || n == "yolo") {
    const bool yolo = n == "yolo";
    l.type = yolo ? LayerType::Yolo : LayerType::Region;
    DetectorSpec& d = l.params.emplace<DetectorSpec>();
    d.classes = r.integer("classes", 20);
    r.positive("classes", d.classes);
    r.at_most("classes", d.classes, kMaxChannels, "channels a device can hold");
    d.num = r.integer("num", 1);
    r.positive("num", d.num);
    r.at_most("num", d.num, kMaxDim, "anchors a layer can have");
    d.jitter = float(r.num("jitter", 0.2));
    if (!(d.jitter >= 0 && d.jitter < 1)) fail(r.where(r.line_of("jitter")), ": jitter must be in [0, 1)");
    d.random = r.integer("random", 0) != 0;
    if (r.has("map") || r.has("tree"))
      fail(r.where(r.line_of(r.has("map") ? "map" : "tree")), ": class maps and trees (YOLO9000) are not supported");
    if (yolo) {
      d.max_boxes = r.integer("max", 90);
      d.ignore_thresh = float(r.num("ignore_thresh", 0.5));
      d.truth_thresh = float(r.num("truth_thresh", 1));
      if (r.has("mask")) {
        for (double v : r.list("mask")) {
          if (v != std::floor(v) || v < 0 || v >= d.num)
            fail(r.where(r.line_of("mask")), ": mask entry ", num_text(v), " is not an anchor index in [0, ", d.num,
                 ")");
          d.mask.push_back(int(v));
        }
      } else {
        for (int i = 0; i < d.num; ++i) d.mask.push_back(i);
      }
    } else {
      d.coords = r.integer("coords", 4);
      if (d.coords != 4) fail(r.where(r.line_of("coords")), ": coords=", d.coords, " is not supported (4)");
      d.softmax = r.integer("softmax", 0) != 0;
      d.background = r.integer("background", 0) != 0;
      if (d.background) fail(r.where(r.line_of("background")), ": background=1 is not supported");
      r.integer("max", 30);  // read by Darknet, but its [region] always reads 30 truths
      d.max_boxes = 30;
      d.rescore = r.integer("rescore", 0) != 0;
      d.thresh = float(r.num("thresh", 0.5));
      d.coord_scale = float(r.num("coord_scale", 1));
      d.object_scale = float(r.num("object_scale", 1));
      d.noobject_scale = float(r.num("noobject_scale", 1));
      d.class_scale = float(r.num("class_scale", 1));
      d.bias_match = r.integer("bias_match", 0) != 0;
    }
    r.positive("max", d.max_boxes);
    r.at_most("max", d.max_boxes, kMaxDim, "truth boxes per picture");
    const std::vector<double> a = r.list("anchors");
    if (r.has("anchors") && a.size() != size_t(2 * d.num))
      fail(r.where(r.line_of("anchors")), ": ", a.size(), " anchor values for num=", d.num, " (needs ", 2 * d.num,
           ": a width and a height per anchor)");
    d.anchors.assign(size_t(2 * d.num), 0.5f);  // Darknet's default bias
    for (size_t i = 0; i < a.size(); ++i) {
      if (!(a[i] > 0)) fail(r.where(r.line_of("anchors")), ": anchor values must be > 0, got ", num_text(a[i]));
      d.anchors[i] = float(a[i]);
    }
    // Read by Darknet but without effect on training or inference there either.
    r.reject_unused({"absolute", "log", "sqrt", "classfix", "mask_scale"});
  } else if (n == "net" || n == "network") {
    fail(file, ":", s.line, ": a second [", n, "] section");
  } else {
    fail(file, ":", s.line, ": unknown section [", n, "]");
  }
  if (l.type != LayerType::Route && index > 0) l.inputs = {index - 1};  // a chain: the node before
  return l;
}

void parse_net_section(Section& s, NetSpec& net, const std::string& file) {
  Reader r(file, s);
  net.batch = r.integer("batch", 1);
  r.positive("batch", net.batch);
  r.at_most("batch", net.batch, kMaxBatch, "pictures per batch");
  net.subdivisions = r.integer("subdivisions", 1);
  r.positive("subdivisions", net.subdivisions);
  if (net.batch % net.subdivisions != 0)
    fail(r.where(r.line_of("subdivisions")), ": batch ", net.batch, " is not divisible by subdivisions ",
         net.subdivisions);
  net.width = r.integer("width", 0, true);
  r.positive("width", net.width);
  r.at_most("width", net.width, kMaxDim, "the largest map's side a device can hold");
  net.height = r.integer("height", 0, true);
  r.positive("height", net.height);
  r.at_most("height", net.height, kMaxDim, "the largest map's side a device can hold");
  net.channels = r.integer("channels", 0, true);
  r.positive("channels", net.channels);
  r.at_most("channels", net.channels, kMaxChannels, "channels a device can hold");
  if (int64_t(net.width) * net.height * net.channels > kMaxElements)
    fail(r.where(r.line_of("channels")), ": an input of ", net.channels, "x", net.height, "x", net.width,
         " is larger than a device can hold (at most ", kMaxElements, " values per picture)");
  net.learning_rate = float(r.num("learning_rate", 0.001));
  net.momentum = float(r.num("momentum", 0.9));
  net.decay = float(r.num("decay", 0.0001));
  net.burn_in = r.integer("burn_in", 0);
  net.power = float(r.num("power", 4));
  net.max_batches = r.integer("max_batches", 0);
  std::string policy = r.str("policy", "constant");
  if (policy == "constant") {
    net.policy = Policy::Constant;
  } else if (policy == "steps") {
    net.policy = Policy::Steps;
    for (double v : r.list("steps")) {
      if (v != std::floor(v) || std::fabs(v) > 1e9)  // Darknet's cfgs have steps=-1,100,...
        fail(r.where(r.line_of("steps")), ": steps entry ", num_text(v),
             " is not a batch number (a whole number from -1e9 to 1e9)");
      net.steps.push_back(int(v));
    }
    for (double v : r.list("scales")) net.scales.push_back(float(v));
    if (net.steps.empty() || net.steps.size() != net.scales.size())
      fail(r.where(r.line_of("steps")), ": policy=steps needs steps= and scales= lists of equal length");
  } else {
    fail(r.where(r.line_of("policy")), ": unsupported policy '", policy, "' (constant, steps)");
  }
  net.hue = float(r.num("hue", 0));
  net.saturation = float(r.num("saturation", 1));
  net.exposure = float(r.num("exposure", 1));
  if (!(net.hue >= 0 && net.hue <= 1)) fail(r.where(r.line_of("hue")), ": hue must be in [0, 1]");
  if (!(net.saturation >= 1)) fail(r.where(r.line_of("saturation")), ": saturation must be >= 1 (a range 1/s..s)");
  if (!(net.exposure >= 1)) fail(r.where(r.line_of("exposure")), ": exposure must be >= 1 (a range 1/e..e)");
  // Classifier augmentation and inference-only keys of Darknet's [net]: accepted, ignored.
  r.reject_unused(
      {"angle", "jitter", "aspect", "min_crop", "max_crop", "center", "random", "time_steps", "notruth", "inputs"});
}

}  // namespace

NetSpec parse_net(const std::string& text, const std::string& file) {
  auto sections = split_sections(text, file);
  if (sections.empty()) fail(file, ": no sections (is this a Darknet .cfg?)");
  if (sections[0].name != "net" && sections[0].name != "network")
    fail(file, ":", sections[0].line, ": the first section must be [net], got [", sections[0].name, "]");
  NetSpec net;
  net.path = file;
  parse_net_section(sections[0], net, file);
  for (size_t i = 1; i < sections.size(); ++i) net.layers.push_back(parse_layer(sections[i], int(i - 1), file));
  if (net.layers.empty()) fail(file, ": the net has no layers");
  for (const auto& l : net.layers)
    if (l.type == LayerType::Cost && l.index + 1 != int(net.layers.size()))
      fail(file, ":", l.line, ": [cost] must be the last layer");
  resolve_shapes(net);
  return net;
}

NetSpec load_net(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("cannot open cfg '", path, "': it is a folder");
  std::ifstream in(path);
  if (!in) fail("cannot open cfg '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_net(ss.str(), path);
}

}  // namespace tt
