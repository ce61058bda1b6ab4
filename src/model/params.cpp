#include "model/params.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

Params::Params(const NetSpec& net) {
  int64_t off = 0;
  slices.resize(net.layers.size());
  rolling_mean.resize(net.layers.size());
  rolling_var.resize(net.layers.size());
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    ParamSlice& s = slices[l.index];
    s.n_out = l.bias_count();
    s.n_weights = l.weight_count();
    s.biases = off;
    off += s.n_out;
    if (l.batch_normalize()) {
      s.scales = off;
      off += s.n_out;
      rolling_mean[l.index].assign(s.n_out, 0.f);
      rolling_var[l.index].assign(s.n_out, 1.f);
    }
    s.weights = off;
    off += s.n_weights;
  }
  const double mb = double(off) * 4 / (1024 * 1024), limit = memory_limit_mb();
  if (mb > limit)
    fail(net.path, ": the net's ", off, " parameters need ", int64_t(mb), " MB, more than this process may use (",
         int64_t(limit), " MB)");
  values.resize(size_t(off));
}

std::vector<std::pair<int64_t, int64_t>> filled_pieces(const std::vector<std::pair<int64_t, int64_t>>& unfilled,
                                                       int64_t at, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t from = at;
  for (const auto& [b, e] : unfilled) {
    if (e <= from) continue;
    if (b >= at + n) break;
    if (b > from) out.push_back({from - at, b - at});
    from = std::max(from, e);
  }
  if (from < at + n) out.push_back({from - at, n});
  return out;
}

namespace {
// The parts of n floats at v that are not in p.unfilled, as [begin, end) from v (all of them
// where v is not in p.values: the running statistics).
std::vector<std::pair<int64_t, int64_t>> kept_pieces(const Params& p, const float* v, int64_t n) {
  // Compared as addresses: v may point into another array (pointer arithmetic across
  // arrays is undefined).
  const auto a = reinterpret_cast<uintptr_t>(v), b = reinterpret_cast<uintptr_t>(p.values.data());
  if (a < b || a >= b + uintptr_t(p.size()) * sizeof(float)) return {{0, n}};
  return filled_pieces(p.unfilled, int64_t((a - b) / sizeof(float)), n);
}

// n values of `draw` into v where kept, drawing every one so the kept ones do not depend
// on what is left out.
template <class D>
void fill_drawn(const Params& p, float* v, int64_t n, D&& draw) {
  int64_t i = 0;
  for (const auto& [b, e] : kept_pieces(p, v, n)) {
    for (; i < b; ++i) draw();
    for (; i < e; ++i) v[i] = draw();
  }
  for (; i < n; ++i) draw();
}
}  // namespace

void init_params(Params& p, const NetSpec& net, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& l : net.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = p.slices[l.index];
    float* w = p.values.data() + s.weights;
    if (l.is(kConvKind)) {
      std::normal_distribution<float> d(
          0.f, std::sqrt(2.f / (l.window().size * l.window().size * (l.in.c / l.conv().groups))));
      fill_drawn(p, w, s.n_weights, [&] { return d(rng); });
    } else {
      // Darknet's [local] draws only its first cell's filters (the others start at 0); here
      // every cell's filters get the same U(±sqrt(2/(k*k*c))).
      const float fan_in =
          l.is(kLocalKind) ? float(l.local().win.size * l.local().win.size * l.in.c) : float(l.in.size());
      float a = std::sqrt(2.f / fan_in);
      std::uniform_real_distribution<float> d(-a, a);
      fill_drawn(p, w, s.n_weights, [&] { return d(rng); });
    }
    fill_drawn(p, p.values.data() + s.biases, s.n_out, [] { return 0.f; });
    if (s.scales >= 0) {
      fill_drawn(p, p.values.data() + s.scales, s.n_out, [] { return 1.f; });
      p.rolling_mean[l.index].assign(s.n_out, 0.f);
      p.rolling_var[l.index].assign(s.n_out, 1.f);
    }
  }
  p.seen = 0;
}

namespace {
// Darknet's per-layer order: conv = biases, [scales, rolling_mean, rolling_variance],
// weights; connected and local = biases, weights.
template <class F>
void for_each_array(const LayerSpec& l, F&& f) {
  if (!l.has_params()) return;
  f(l, "biases");
  if (l.batch_normalize()) {
    f(l, "scales");
    f(l, "rolling_mean");
    f(l, "rolling_variance");
  }
  f(l, "weights");
}

template <class F>
void for_each_array(const NetSpec& net, F&& f) {
  for (const auto& l : net.layers) for_each_array(l, f);
}

float* array_of(Params& p, const LayerSpec& l, const std::string& what, int64_t& n) {
  const ParamSlice& s = p.slices[l.index];
  n = s.n_out;
  if (what == "biases") return p.values.data() + s.biases;
  if (what == "scales") return p.values.data() + s.scales;
  if (what == "rolling_mean") return p.rolling_mean[l.index].data();
  if (what == "rolling_variance") return p.rolling_var[l.index].data();
  n = s.n_weights;
  return p.values.data() + s.weights;
}

bool all_finite(const float* v, int64_t n) {
  // An integer test of the exponent bits: vectorises, unlike a float reduction.
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    bad |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

int64_t expected_bytes(const NetSpec& net, int header) {
  int64_t total = header;
  for_each_array(net, [&](const LayerSpec& l, const char* what) {
    total += 4 * (std::string(what) == "weights" ? l.weight_count() : l.bias_count());
  });
  return total;
}
}  // namespace

void load_weights(Params& p, const NetSpec& net, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open weights '", path, "'");
  in.seekg(0, std::ios::end);
  const int64_t actual = in.tellg();
  in.seekg(0);
  int32_t ver[3] = {0, 0, 0};
  if (actual < 12)
    fail(path, ": truncated weights file for '", net.path, "': expected ", expected_bytes(net, 20), " bytes, got ",
         actual, " (shorter than the header)");
  in.read(reinterpret_cast<char*>(ver), 12);
  // Darknet: version 0.2 and later store `seen` as a 64-bit size_t, earlier ones as int32.
  const bool wide = (int64_t(ver[0]) * 10 + ver[1]) >= 2 && ver[0] < 1000 && ver[1] < 1000;
  const int header = wide ? 20 : 16;
  const int64_t expected = expected_bytes(net, header);
  if (actual != expected)
    fail(path, ": ", actual < expected ? "truncated" : "oversized", " weights file for '", net.path, "': expected ",
         expected, " bytes, got ", actual, " (does the .weights file belong to this cfg?)");
  if (wide) {
    uint64_t seen;
    in.read(reinterpret_cast<char*>(&seen), 8);
    p.seen = int64_t(seen);
  } else {
    int32_t seen;
    in.read(reinterpret_cast<char*>(&seen), 4);
    p.seen = seen;
  }
  // Darknet marks files whose connected weights are stored [in][out] with a major or
  // minor version above 1000, and transposes them on load; so do we.
  const bool transposed = ver[0] > 1000 || ver[1] > 1000;
  std::vector<float> tmp;
  for_each_array(net, [&](const LayerSpec& l, const char* what) {
    int64_t n;
    float* dst = array_of(p, l, what, n);
    const auto kept = kept_pieces(p, dst, n);  // the rest is skipped: not this process's
    if (transposed && l.is(kConnectedKind) && std::string(what) == "weights") {
      const int64_t outs = l.connected().outputs, ins = l.in.size();
      tmp.resize(size_t(n));
      in.read(reinterpret_cast<char*>(tmp.data()), n * 4);
      for (const auto& [b, e] : kept)
        for (int64_t k = b; k < e; ++k) dst[k] = tmp[size_t((k % ins) * outs + k / ins)];
      return;
    }
    int64_t at = 0;
    for (const auto& [b, e] : kept) {
      in.seekg((b - at) * 4, std::ios::cur);
      in.read(reinterpret_cast<char*>(dst + b), (e - b) * 4);
      at = e;
    }
    in.seekg((n - at) * 4, std::ios::cur);
  });
  if (!in) fail(path, ": read error");
  if (p.seen < 0) fail(path, ": the header's image count (seen) is negative: ", p.seen);
  const std::string bad = non_finite_array(p, net);
  if (!bad.empty()) fail(path, ": ", bad, " holds values that are not finite (inf or NaN): not weights to train from");
  for (const auto& l : net.layers)
    for (float v : p.rolling_var[size_t(l.index)])
      if (v < 0) fail(path, ": layer ", l.index, "'s rolling_variance holds a negative value (", v, ")");
}

std::string non_finite_array(const Params& p, const NetSpec& net) {
  std::string found;
  for_each_array(net, [&](const LayerSpec& l, const char* what) {
    int64_t n;
    const float* v = array_of(const_cast<Params&>(p), l, what, n);
    if (found.empty() && !all_finite(v, n))
      found = "layer " + std::to_string(l.index) + " ([" + l.type_name() + "]) " + what;
  });
  return found;
}

void save_weights(const Params& p, const NetSpec& net, const std::string& path) {
  WeightsWriter w(path, p.seen);
  for (const auto& l : net.layers)
    if (l.has_params()) w.write(p, l);
  w.commit(net);
}

WeightsWriter::WeightsWriter(const std::string& path, int64_t seen, const std::string& what)
    : path_(path), what_(what.empty() ? "'" + path + "'" : what), file_(path) {
  const int32_t ver[3] = {0, 2, 0};
  const uint64_t s = uint64_t(seen);
  file_.out().write(reinterpret_cast<const char*>(ver), 12);
  file_.out().write(reinterpret_cast<const char*>(&s), 8);
}

void WeightsWriter::write(const Params& p, const LayerSpec& l) {
  if (l.index < next_) fail("internal: layer ", l.index, " written into '", path_, "' after layer ", next_ - 1);
  for_each_array(l, [&](const LayerSpec& layer, const char* what) {
    int64_t n;
    const float* v = array_of(const_cast<Params&>(p), layer, what, n);
    if (!all_finite(v, n))
      fail("refusing to write ", what_, ": layer ", l.index, " ([", l.type_name(), "]) ", what,
           " holds values that are not finite (inf or NaN)");
    file_.out().write(reinterpret_cast<const char*>(v), n * 4);
  });
  next_ = l.index + 1;
}

void WeightsWriter::commit(const NetSpec& net) {
  for (const auto& l : net.layers)
    if (l.has_params() && l.index >= next_)
      fail("internal: '", path_, "' closed before layer ", l.index, " was written");
  file_.commit();
}

}  // namespace tt
