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

#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/net_spec.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {

using namespace net_detail;

namespace {

// A key given twice in a section: Darknet's option_find takes the first and reports the
// other as unused; so does this, with a warning.
std::vector<CfgSection> split_sections(const std::string& text, const std::string& file,
                                       std::vector<std::string>& warnings) {
  std::vector<CfgSection> out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    std::string s = cfg_trim(raw);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    if (s[0] == '[') {
      if (s.back() != ']') fail(file, ":", line, ": malformed section header '", s, "'");
      out.push_back({cfg_trim(s.substr(1, s.size() - 2)), line, {}, {}});
      continue;
    }
    if (out.empty()) fail(file, ":", line, ": '", s, "' comes before any [section]");
    size_t eq = s.find('=');
    if (eq == std::string::npos) fail(file, ":", line, ": expected key=value, got '", s, "'");
    std::string k = cfg_trim(s.substr(0, eq)), v = cfg_trim(s.substr(eq + 1));
    if (k.empty()) fail(file, ":", line, ": missing key before '='");
    if (auto it = out.back().kv.find(k); it != out.back().kv.end()) {
      warnings.push_back(file + ":" + std::to_string(line) + ": key '" + k + "' given again in [" + out.back().name +
                         "]: ignored, as Darknet ignores it (line " + std::to_string(it->second.second) +
                         " sets it to '" + it->second.first + "')");
      continue;
    }
    out.back().kv[k] = {v, line};
  }
  return out;
}

LayerSpec parse_layer(CfgSection& s, int index, const std::string& file) {
  CfgReader r(file, s);
  LayerSpec l;
  l.index = index;
  l.line = s.line;
  if (s.name == "net" || s.name == "network") fail(file, ":", s.line, ": a second [", s.name, "] section");
  const OpKind* kind = find_op_kind(s.name);
  if (!kind) fail(file, ":", s.line, ": unknown section [", s.name, "]");
  l.kind = kind;
  kind->parse(r, l);
  if (l.inputs.empty() && index > 0) l.inputs = {index - 1};  // a chain: the node before
  return l;
}

void parse_net_section(CfgSection& s, NetSpec& net, const std::string& file) {
  CfgReader r(file, s);
  net.batch = r.count("batch", 1, kMaxBatch, "pictures per batch");
  net.subdivisions = r.integer("subdivisions", 1);
  r.positive("subdivisions", net.subdivisions);
  if (net.batch % net.subdivisions != 0)
    fail(r.where(r.line_of("subdivisions")), ": batch ", net.batch, " is not divisible by subdivisions ",
         net.subdivisions);
  net.width = r.count("width", 0, kMaxDim, "the largest map's side a device can hold", true);
  net.height = r.count("height", 0, kMaxDim, "the largest map's side a device can hold", true);
  net.channels = r.count("channels", 0, kMaxChannels, "channels a device can hold", true);
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
  } else if (policy == "step") {
    net.policy = Policy::Step;
    net.step = r.count("step", 1, 1000000000, "batches");
    net.scale = float(r.num("scale", 1));
  } else if (policy == "exp") {
    net.policy = Policy::Exp;
    net.gamma = float(r.num("gamma", 1));
  } else if (policy == "sigmoid") {
    net.policy = Policy::Sigmoid;
    net.gamma = float(r.num("gamma", 1));
    net.step = r.integer("step", 1);
  } else if (policy == "poly") {
    net.policy = Policy::Poly;
    if (net.max_batches <= 0)
      fail(r.where(r.line_of("policy")), ": policy=poly needs max_batches > 0 (the rate falls to 0 there)");
  } else if (policy == "random") {
    net.policy = Policy::Random;
  } else {
    fail(r.where(r.line_of("policy")), ": unsupported policy '", policy,
         "' (constant, step, steps, exp, poly, random, sigmoid)");
  }
  net.hue = float(r.num("hue", 0));
  net.saturation = float(r.num("saturation", 1));
  net.exposure = float(r.num("exposure", 1));
  if (!(net.hue >= 0 && net.hue <= 1)) fail(r.where(r.line_of("hue")), ": hue must be in [0, 1]");
  // A factor between 1/s and s, as Darknet's rand_scale draws it (so .75 acts as 1.33).
  if (!(net.saturation > 0 && net.saturation <= 1000))
    fail(r.where(r.line_of("saturation")), ": saturation must be in (0, 1000] (a range 1/s..s)");
  if (!(net.exposure > 0 && net.exposure <= 1000))
    fail(r.where(r.line_of("exposure")), ": exposure must be in (0, 1000] (a range 1/e..e)");
  // Darknet counts the images seen in the .weights file, never from the cfg (writing.cfg
  // sets seen=0): taken as Darknet takes it, ignored, with a word.
  if (r.has("seen")) {
    r.str("seen", "");
    net.warnings.push_back(r.where(r.line_of("seen")) +
                           ": key 'seen' in [net] is ignored, as Darknet ignores it (the images seen are counted "
                           "in the .weights file)");
  }
  net.angle = float(r.num("angle", 0));
  net.aspect = float(r.num("aspect", 1));
  net.min_crop = r.integer("min_crop", net.width);
  net.max_crop = r.integer("max_crop", 2 * net.width);
  net.center = r.integer("center", 0) != 0;
  if (!(net.angle >= 0 && net.angle <= 360)) fail(r.where(r.line_of("angle")), ": angle must be in [0, 360] degrees");
  if (!(net.aspect > 0 && net.aspect <= 100))
    fail(r.where(r.line_of("aspect")), ": aspect must be in (0, 100] (a range 1/a..a)");
  if (net.min_crop < 1 || net.min_crop > 65536)
    fail(r.where(r.line_of("min_crop")), ": min_crop must be a size from 1 to 65536 pixels");
  if (net.max_crop < net.min_crop || net.max_crop > 65536)
    fail(r.where(r.line_of(r.has("max_crop") ? "max_crop" : "min_crop")), ": max_crop (", net.max_crop,
         ") must be from min_crop (", net.min_crop, ") to 65536 pixels");
  // Inference-only keys of Darknet's [net], and jitter (read from the detector layers): accepted, ignored.
  r.reject_unused({"jitter", "random", "time_steps", "notruth", "inputs"});
}

}  // namespace

NetSpec parse_net(const std::string& text, const std::string& file) {
  std::vector<std::string> warnings;
  auto sections = split_sections(text, file, warnings);
  if (sections.empty()) fail(file, ": no sections (is this a Darknet .cfg?)");
  if (sections[0].name != "net" && sections[0].name != "network")
    fail(file, ":", sections[0].line, ": the first section must be [net], got [", sections[0].name, "]");
  NetSpec net;
  net.path = file;
  net.warnings = std::move(warnings);
  parse_net_section(sections[0], net, file);
  for (size_t i = 1; i < sections.size(); ++i) net.layers.push_back(parse_layer(sections[i], int(i - 1), file));
  if (net.layers.empty()) fail(file, ": the net has no layers");
  for (const auto& l : net.layers)
    if (l.is(kCostKind) && l.index + 1 != int(net.layers.size()))
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
