#include "data/darknet_data.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/batch_loader.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"
#include "util/sys.hpp"

namespace tt {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A path from a .data file: as given if it exists (Darknet: relative to the current
// folder), else relative to the .data file's folder.
std::string resolve(const std::string& p, const std::string& data_file) {
  std::error_code ec;  // a name too long for the system is a file that is not there
  if (p.empty() || fs::path(p).is_absolute() || fs::exists(p, ec)) return p;
  const fs::path alt = fs::path(data_file).parent_path() / p;
  return fs::exists(alt, ec) ? alt.string() : p;
}

// What keeps `path` from being read as a text file ("" if nothing): missing, a folder, a
// device or a pipe.
std::string text_file_problem(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return "no such file";
  if (fs::is_directory(st)) return "it is a folder";
  if (!fs::is_regular_file(st)) return "not a regular file";
  return "";
}

void check_text_file(const std::string& path, const std::string& what) {
  const std::string problem = text_file_problem(path);
  if (!problem.empty()) fail("cannot open ", what, " '", path, "': ", problem);
}

struct ListEntry {
  std::string path;
  int line;
};

std::vector<ListEntry> read_list_lines(const std::string& path, const char* what) {
  check_text_file(path, what);
  std::ifstream in(path);
  if (!in) fail("cannot open ", what, " '", path, "'");
  std::vector<ListEntry> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (!trim(line).empty()) out.push_back({trim(line), n});
  if (in.bad()) fail(path, ": read error");
  if (out.empty()) fail(what, " '", path, "' is empty");
  return out;
}

// find_replace: the first occurrence only, as Darknet.
std::string replace_first(const std::string& s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  return p == std::string::npos ? s : s.substr(0, p) + to + s.substr(p + from.size());
}

}  // namespace

DataConfig load_data_config(const std::string& path, DataKind kind) {
  const bool classifier = kind == DataKind::Classification;
  const std::string names_key = classifier ? "labels" : "names";
  check_text_file(path, "data file");
  std::ifstream in(path);
  if (!in) fail("cannot open data file '", path, "'");
  DataConfig d;
  d.path = path;
  std::string line;
  std::map<std::string, int> seen;  // key -> line
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string s = trim(line);
    if (s.empty() || s[0] == '#') continue;
    const size_t eq = s.find('=');
    if (eq == std::string::npos) fail(path, ":", n, ": expected key=value, got '", s, "'");
    const std::string k = trim(s.substr(0, eq)), v = trim(s.substr(eq + 1));
    if (k == "classes" || k == "train" || k == "valid" || k == names_key || (classifier && k == "top")) {
      if (seen.count(k)) fail(path, ":", n, ": ", k, "= given twice (first on line ", seen[k], ")");
      seen[k] = n;
      if (v.empty()) fail(path, ":", n, ": ", k, "= has no value");
    }
    if (k == "classes") {
      errno = 0;
      char* end = nullptr;
      const long c = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || c < 1 || c > 100000)
        fail(path, ":", n, ": classes must be a whole number from 1 to 100000, got '", v, "'");
      d.classes = int(c);
    } else if (k == "train") {
      d.train = resolve(v, path);
    } else if (k == "valid") {
      d.valid = resolve(v, path);
    } else if (k == names_key) {
      d.names = resolve(v, path);
    } else if (classifier && k == "tree") {
      fail(path, ":", n, ": tree= (hierarchical labels, Darknet's fill_hierarchy) is not supported yet");
    } else if (classifier && k == "top") {
      char* end = nullptr;
      const long t = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || t < 1 || t > 100000) fail(path, ":", n, ": top must be a whole number from 1, got '", v, "'");
      d.top = int(t);
    }  // backup=, eval=, results=, names= of a classifier, ...: Darknet's, not used here
  }
  if (in.bad()) fail(path, ": read error");
  if (!seen.count("classes")) fail(path, ": no classes= line");
  if (d.train.empty()) fail(path, ": no train= line");
  if (d.names.empty())
    fail(path, ": no ", names_key, "= line",
         classifier ? " (a classifier's class labels, one per line: Darknet's "
                      "train_classifier finds a picture's class as the label its "
                      "path contains)"
                    : "");
  if (d.top > d.classes) fail(path, ":", seen["top"], ": top=", d.top, " is more than the ", d.classes, " classes");
  d.train_line = seen["train"];
  d.valid_line = seen.count("valid") ? seen["valid"] : 0;
  d.classes_line = seen["classes"];
  d.names_line = seen[names_key];
  const std::string problem = text_file_problem(d.names);
  std::ifstream nf(d.names);
  if (!problem.empty() || !nf)
    fail(path, ":", seen[names_key], ": cannot open its ", names_key, " file '", d.names, "'",
         problem.empty() ? "" : ": " + problem);
  // Names past classes= are counted, not kept (a huge file costs time, not memory).
  size_t names = 0;
  while (std::getline(nf, line)) {
    if (trim(line).empty()) continue;
    if (int(d.class_names.size()) < d.classes) d.class_names.push_back(trim(line));
    ++names;
  }
  if (names != size_t(d.classes))
    fail(d.names, ": ", names, " class names, but ", path, ":", seen["classes"], " says classes=", d.classes);
  if (classifier) {  // a picture's class is the label its path contains: two equal labels cannot be told apart
    std::map<std::string, size_t> first;
    for (size_t i = 0; i < d.class_names.size(); ++i)
      if (const auto [it, fresh] = first.emplace(d.class_names[i], i); !fresh)
        fail(d.names, ": label '", d.class_names[i], "' is given twice (labels ", it->second, " and ", i, ")");
  }
  return d;
}

std::vector<std::string> read_list(const std::string& path, const char* what) {
  std::vector<std::string> out;
  for (ListEntry& e : read_list_lines(path, what)) out.push_back(std::move(e.path));
  return out;
}

std::string label_path(const std::string& image_path, bool region) {
  std::string p = replace_first(image_path, "images", "labels");
  p = replace_first(p, "JPEGImages", "labels");
  if (!region) p = replace_first(p, "raw", "labels");
  for (const char* ext : {".jpg", ".png", ".JPG", ".JPEG"}) p = replace_first(p, ext, ".txt");
  return p;
}

std::vector<TruthBox> read_labels(const std::string& file, int classes) {
  const std::string problem = text_file_problem(file);
  if (problem == "no such file") fail("missing label file '", file, "'");
  if (!problem.empty()) fail("cannot read label file '", file, "': ", problem);
  std::ifstream in(file);
  if (!in) fail("cannot open label file '", file, "'");
  std::vector<TruthBox> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream ss(line);
    std::vector<std::string> f;
    for (std::string w; ss >> w;) f.push_back(w);
    if (f.empty()) continue;
    if (f.size() != 5) fail(file, ":", n, ": expected 'class x y w h', got ", f.size(), " fields");
    double v[5];
    for (int i = 0; i < 5; ++i) {
      char* end = nullptr;
      v[i] = std::strtod(f[size_t(i)].c_str(), &end);
      if (*end != '\0' || !std::isfinite(v[i])) fail(file, ":", n, ": '", f[size_t(i)], "' is not a number");
    }
    if (v[0] != std::floor(v[0]) || v[0] < 0 || v[0] >= classes)
      fail(file, ":", n, ": class ", f[0], " is not a class id in [0, ", classes, ")");
    for (int i = 1; i < 5; ++i)
      if (v[i] < 0 || v[i] > 1)
        fail(file, ":", n, ": ", f[size_t(i)], " is outside [0, 1] (coordinates are normalised)");
    if (v[3] == 0 || v[4] == 0) fail(file, ":", n, ": a box of zero width or height");
    out.push_back({float(v[1]), float(v[2]), float(v[3]), float(v[4]), int(v[0])});
  }
  if (in.bad()) fail(file, ": read error");
  return out;
}

void check_list_file(const DataConfig& d, bool valid) {
  const std::string& list = valid ? d.valid : d.train;
  const std::string problem = text_file_problem(list);
  if (!problem.empty())
    fail(d.path, ":", valid ? d.valid_line : d.train_line, ": cannot open its ", valid ? "valid" : "train", "= list '",
         list, "': ", problem);
}

CheckedList check_list(const std::string& list, const TruthCheck& check_truth, int64_t max_pixels, bool skip_bad,
                       const std::function<void(const std::string&)>& warn,
                       const std::function<void(size_t, size_t)>& progress) {
  const std::vector<ListEntry> entries = read_list_lines(list, "image list");
  CheckedList out;
  constexpr size_t kNamed = 10;  // skipped pictures named one by one; the rest counted
  size_t checked = 0;
  for (const ListEntry& e : entries) {
    if (progress) progress(checked++, entries.size());
    try {
      image_info(e.path, max_pixels);
    } catch (const Error& err) {
      if (!skip_bad) fail(list, ":", e.line, ": ", err.what(), " (--skip-bad-images leaves such pictures out)");
      if (++out.skipped <= kNamed && warn)
        warn("skipping a bad image: " + list + ":" + std::to_string(e.line) + ": " + err.what());
      continue;
    }
    try {
      check_truth(e.path);
    } catch (const Error& err) {
      fail(list, ":", e.line, ": ", err.what());
    }
    out.usable.push_back(e.path);
  }
  if (out.skipped > 0 && warn)
    warn("skipped " + std::to_string(out.skipped) + " of " + std::to_string(entries.size()) + " pictures of " + list +
         (out.skipped > kNamed ? " (the first " + std::to_string(kNamed) + " named above)" : ""));
  if (out.usable.empty()) fail(list, ": none of its ", entries.size(), " pictures can be used");
  return out;
}

TruthCheck detection_truth(int classes, bool region) {
  return [classes, region](const std::string& picture) {
    const std::string labels = label_path(picture, region);
    if (labels.size() < 4 || labels.compare(labels.size() - 4, 4, ".txt") != 0)
      fail("no label file for '", picture, "': Darknet's rule finds one only for .jpg, .png, .JPG and .JPEG pictures");
    read_labels(labels, classes);
  };
}

TruthCheck classifier_truth(const std::vector<std::string>& labels) {
  return [labels](const std::string& picture) { class_in_path(picture, labels); };
}

int class_in_path(const std::string& path, const std::vector<std::string>& labels) {
  int found = -1;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (path.find(labels[i]) == std::string::npos) continue;
    if (found >= 0)
      fail("'", path, "' contains two class labels, '", labels[size_t(found)], "' and '", labels[i],
           "' (a picture's class is the one label its path contains, as Darknet's fill_truth finds it)");
    found = int(i);
  }
  if (found < 0 && labels.size() != 1)
    fail("'", path, "' contains none of the ", labels.size(),
         " class labels (a picture's class is the one label "
         "its path contains, as Darknet's fill_truth finds it; e.g. train/",
         labels.empty() ? "" : labels[0], "/0001.png)");
  return found;
}

bool in_top_k(const float* scores, int classes, int cls, int k) {
  int above = 0;  // classes ranked before cls
  for (int c = 0; c < classes; ++c) above += scores[c] > scores[cls] || (scores[c] == scores[cls] && c < cls);
  return above < k;
}

namespace {

// Darknet's center_crop_image: the centred square of the shorter side, resized.
Image center_crop(const Image& im, int w, int h) {
  const int m = std::min(im.w, im.h);
  return resize_image(crop_image(im, (im.w - m) / 2, (im.h - m) / 2, m, m), w, h);
}

// random_distort_image on a picture of `c` channels: Darknet's HSV distortion for RGB; on
// grey (r = g = b) only the value scale changes a pixel, clamped as constrain_image does.
void distort(Image& im, float dhue, float dsat, float dexp) {
  if (im.c == 3) {
    distort_image(im, dhue, dsat, dexp);
    return;
  }
  for (float& v : im.data) v = std::clamp(v * dexp, 0.f, 1.f);
}

}  // namespace

void load_classifier_sample(const std::string& path, const std::vector<std::string>& labels, const ClassifierAugment& a,
                            uint64_t seed, float* image, float* truth, int64_t max_pixels) {
  const int cls = class_in_path(path, labels);
  const Image im = load_image(path, a.channels, max_pixels);
  SampleRng rng{mix(seed)};
  Image crop;
  if (a.center) {
    crop = center_crop(im, a.width, a.height);
  } else {  // random_augment_args, draw for draw
    const float aspect = rng.scale(a.aspect);
    const int r = rng.integer(a.min_crop, a.max_crop);
    const int min = float(im.h) < float(im.w) * aspect ? im.h : int(float(im.w) * aspect);
    const float scale = float(r) / float(std::max(min, 1));
    const float rad = float(rng.uniform(-a.angle, a.angle) * 6.2831853071795864769252866 / 360.);
    float dx = float((im.w * scale / aspect - float(a.width)) / 2.);
    float dy = float((im.h * scale - float(a.width)) / 2.);  // Darknet's: w, not h
    dx = rng.uniform(-dx, dx);
    dy = rng.uniform(-dy, dy);
    crop = rotate_crop_image(im, rad, scale, a.width, a.height, dx, dy, aspect);
  }
  if (a.flip && rng.next() % 2) flip_image(crop);
  const float dhue = rng.uniform(-a.hue, a.hue);
  const float dsat = rng.scale(a.saturation), dexp = rng.scale(a.exposure);
  distort(crop, dhue, dsat, dexp);
  std::copy(crop.data.begin(), crop.data.end(), image);
  std::fill_n(truth, labels.size(), 0.f);
  if (cls >= 0) truth[cls] = 1.f;
}

void load_classifier_picture(const std::string& path, int width, int height, int channels, float* image,
                             int64_t max_pixels) {
  const Image crop = center_crop(load_image(path, channels, max_pixels), width, height);
  std::copy(crop.data.begin(), crop.data.end(), image);
}

namespace {

// A truth box moved with the picture as Darknet's correct_boxes does: its sides scaled by
// (sx, sy) and shifted by (ox, oy) (x' = x sx - ox), mirrored if `flip`, clipped to [0, 1];
// written as x, y, w, h, class to `t` unless narrower or lower than `min_size`.
bool corrected_box(const TruthBox& b, float sx, float sy, float ox, float oy, bool flip, float min_size, float* t) {
  float left = (b.x - b.w / 2) * sx - ox, right = (b.x + b.w / 2) * sx - ox;
  float top = (b.y - b.h / 2) * sy - oy, bottom = (b.y + b.h / 2) * sy - oy;
  if (flip) {
    const float l = left;
    left = 1.f - right;
    right = 1.f - l;
  }
  left = std::clamp(left, 0.f, 1.f), right = std::clamp(right, 0.f, 1.f);
  top = std::clamp(top, 0.f, 1.f), bottom = std::clamp(bottom, 0.f, 1.f);
  const float bw = std::clamp(right - left, 0.f, 1.f), bh = std::clamp(bottom - top, 0.f, 1.f);
  if (bw < min_size || bh < min_size) return false;
  t[0] = (left + right) / 2;
  t[1] = (top + bottom) / 2;
  t[2] = bw;
  t[3] = bh;
  t[4] = float(b.cls);
  return true;
}

}  // namespace

void load_detection_sample(const std::string& image_path, int classes, const Augment& a, uint64_t seed, int max_boxes,
                           float* image, float* truth, int64_t max_pixels) {
  const Image orig = load_image(image_path, 3, max_pixels);
  std::vector<TruthBox> boxes = read_labels(label_path(image_path), classes);
  SampleRng rng{mix(seed)};
  const int w = a.width, h = a.height;
  Image sized(w, h, 3, .5f);
  const float dw = a.jitter * float(orig.w), dh = a.jitter * float(orig.h);
  const float new_ar = (float(orig.w) + rng.uniform(-dw, dw)) / (float(orig.h) + rng.uniform(-dh, dh));
  float nw, nh;
  if (new_ar < 1) {
    nh = float(h);
    nw = nh * new_ar;
  } else {
    nw = float(w);
    nh = nw / new_ar;
  }
  const float dx = rng.uniform(0, float(w) - nw), dy = rng.uniform(0, float(h) - nh);
  place_image(orig, int(nw), int(nh), int(dx), int(dy), sized);
  const float dhue = rng.uniform(-a.hue, a.hue);
  const float dsat = rng.scale(a.saturation), dexp = rng.scale(a.exposure);
  distort_image(sized, dhue, dsat, dexp);
  const bool flip = a.flip && rng.next() % 2;
  if (flip) flip_image(sized);
  std::copy(sized.data.begin(), sized.data.end(), image);

  // fill_truth_detection: shuffle, move into the placed image, flip, clip, drop slivers.
  const size_t n = boxes.size();
  for (size_t i = 0; i < n; ++i) std::swap(boxes[i], boxes[size_t(rng.next() % n)]);
  const float sx = nw / float(w), sy = nh / float(h), ox = -dx / float(w), oy = -dy / float(h);
  std::fill_n(truth, max_boxes * 5, 0.f);
  int k = 0;
  for (size_t i = 0; i < std::min(n, size_t(max_boxes)); ++i)
    k += corrected_box(boxes[i], sx, sy, ox, oy, flip, .001f, truth + 5 * k);
}

void load_region_sample(const std::string& image_path, int classes, const Augment& a, uint64_t seed, int max_boxes,
                        float* image, float* truth, int64_t max_pixels) {
  const Image orig = load_image(image_path, 3, max_pixels);
  std::vector<TruthBox> boxes = read_labels(label_path(image_path, true), classes);
  SampleRng rng{mix(seed)};
  const int ow = orig.w, oh = orig.h;
  const int dw = int(float(ow) * a.jitter), dh = int(float(oh) * a.jitter);
  const int pleft = int(rng.uniform(float(-dw), float(dw))), pright = int(rng.uniform(float(-dw), float(dw)));
  const int ptop = int(rng.uniform(float(-dh), float(dh))), pbot = int(rng.uniform(float(-dh), float(dh)));
  // Darknet would crop nothing (and fail) where the sides cross (jitter >= 0.5): one pixel.
  const int swidth = std::max(1, ow - pleft - pright), sheight = std::max(1, oh - ptop - pbot);
  const float sx = float(swidth) / float(ow), sy = float(sheight) / float(oh);
  const bool flip = a.flip && rng.next() % 2;
  Image sized = resize_image(crop_image(orig, pleft, ptop, swidth, sheight), a.width, a.height);
  if (flip) flip_image(sized);
  const float dhue = rng.uniform(-a.hue, a.hue);
  const float dsat = rng.scale(a.saturation), dexp = rng.scale(a.exposure);
  distort_image(sized, dhue, dsat, dexp);
  std::copy(sized.data.begin(), sized.data.end(), image);

  // fill_truth_region: randomize_boxes, then correct_boxes(dx, dy, 1/sx, 1/sy, flip).
  const size_t n = boxes.size();
  for (size_t i = 0; i < n; ++i) std::swap(boxes[i], boxes[size_t(rng.next() % n)]);
  const float dx = (float(pleft) / float(ow)) / sx, dy = (float(ptop) / float(oh)) / sy;
  const float kx = 1.f / sx, ky = 1.f / sy;
  std::fill_n(truth, max_boxes * 5, 0.f);
  int k = 0;
  for (size_t i = 0; i < n && k < max_boxes; ++i) {
    if (boxes[i].x == 0 && boxes[i].y == 0) continue;  // correct_boxes sends such a box off the picture
    k += corrected_box(boxes[i], kx, ky, dx, dy, flip, .005f, truth + 5 * k);
  }
}

BatchLoader::Sample detection_sample(int classes, const Augment& a, int max_boxes, int64_t max_pixels) {
  return [=](const std::string& path, uint64_t seed, float* image, float* truth) {
    load_detection_sample(path, classes, a, seed, max_boxes, image, truth, max_pixels);
  };
}

BatchLoader::Sample classifier_sample(const std::vector<std::string>& labels, const ClassifierAugment& a,
                                      int64_t max_pixels) {
  return [=](const std::string& path, uint64_t seed, float* image, float* truth) {
    load_classifier_sample(path, labels, a, seed, image, truth, max_pixels);
  };
}

BatchLoader::Sample region_sample(int classes, const Augment& a, int max_boxes, int64_t max_pixels) {
  return [=](const std::string& path, uint64_t seed, float* image, float* truth) {
    load_region_sample(path, classes, a, seed, max_boxes, image, truth, max_pixels);
  };
}

}  // namespace tt
