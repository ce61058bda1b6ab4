// Detectors: training on a Darknet .data file, detection on pictures, VOC mAP.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "app/commands.hpp"
#include "app/progress.hpp"
#include "data/darknet_data.hpp"
#include "detect/detection_picture.hpp"
#include "detect/detections.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace fs = std::filesystem;

namespace {

// A detector's loss layers: its [region]/[yolo] heads, or YOLOv1's [detection] layer.
std::vector<const LayerSpec*> detector_layers(const NetSpec& net, const std::string& cfg) {
  std::vector<const LayerSpec*> out;
  for (const LayerSpec& l : net.layers)
    if (l.box_loss()) out.push_back(&l);
  if (out.empty()) fail(cfg, ": the net has no [region], [yolo] or [detection] layer: it is not a detector");
  if (net.channels != 3)  // the pictures are read as RGB
    fail(cfg, ": a detector reads RGB pictures (3 channels, as Darknet's), but [net] has channels=", net.channels);
  return out;
}

// The classes a detector's data speaks of (with a class map, the map's domain).
int head_classes(const LayerSpec& l) { return l.is(kDetectionKind) ? l.detection().classes : l.det().truth_classes(); }

// The classes of a detector's boxes: a tree's classes where the data's (head_classes) are
// those of its map.
int output_classes(const LayerSpec& l) { return l.is(kDetectionKind) ? l.detection().classes : l.det().classes; }

// A [region] with map= (YOLO9000's over a class tree): detect names its boxes by the
// layer's classes (the tree's top prediction); map and the held-out mAP score them in the
// data set's, through the map (DetectionHead::class_map).

// YOLOv1's [detection] layer if the net has one: it sees pictures resized, not letterboxed,
// trains on Darknet's region data, and its programs use other thresholds.
const LayerSpec* yolov1_head(const NetSpec& net) {
  for (const LayerSpec& l : net.layers)
    if (l.is(kDetectionKind)) return &l;
  return nullptr;
}

// A picture as the net takes it: resized (YOLOv1, Darknet's test_yolo) or letterboxed
// (YOLOv2/v3, test_detector).
Image net_picture(const Image& im, const NetSpec& net) {
  return yolov1_head(net) ? resize_image(im, net.width, net.height) : letterbox_image(im, net.width, net.height);
}

void check_classes(const std::vector<const LayerSpec*>& heads, const DataConfig& dc, const std::string& cfg) {
  for (const LayerSpec* l : heads)
    if (head_classes(*l) != dc.classes)
      fail(cfg, ":", l->line, ": [", l->type_name(), "] has classes=", head_classes(*l), " but ", dc.path, ":",
           dc.classes_line, " has classes=", dc.classes);
}

// Every rank runs the tiled forward of `n` pictures (root: net_picture()s in `input`); the
// root turns each detector layer's output into detections, normalised to each picture, and
// suppresses overlaps at `nms`. truth_classes: boxes in the data set's classes (a layer's
// map= applied), as map scores them; else in the layer's.
std::vector<std::vector<Detection>> detect_batch(Trainer& tr, const NetSpec& net, const float* input,
                                                 const std::vector<std::pair<int, int>>& sizes, float thresh, float nms,
                                                 bool truth_classes) {
  tr.predict(input);
  std::vector<std::vector<Detection>> out(sizes.size());
  if (!tr.root()) return out;
  int classes = 0;
  for (const LayerSpec& l : net.layers) {
    if (!l.box_loss()) continue;
    classes = truth_classes ? head_classes(l) : output_classes(l);
    const float* y = tr.output_of(l.index);
    if (l.is(kDetectionKind)) {
      for (size_t k = 0; k < sizes.size(); ++k)
        yolov1_detections(l.detection(), y + int64_t(k) * l.out.size(), 1, 1, thresh, out[k]);
      continue;
    }
    DetectionHead h = detection_head(l);
    if (truth_classes && !l.det().map.empty()) h.class_map = &l.det().map;
    for (size_t k = 0; k < sizes.size(); ++k)
      head_detections(h, y + int64_t(k) * l.out.size(), sizes[k].first, sizes[k].second, net.width, net.height, thresh,
                      true, out[k]);
  }
  for (auto& d : out) do_nms_sort(d, classes, nms);
  return out;
}

// VOC mAP of the net on a list of labelled pictures (every rank calls it). A picture that
// cannot be decoded (its header was checked up front) stops the evaluation, or, with
// `skip_bad`, is left out with a warning; `used` is how many pictures were scored.
MapResult evaluate_map(Trainer& tr, const NetSpec& net, Comm& comm, const std::vector<std::string>& paths, int classes,
                       int64_t max_pixels, bool skip_bad, size_t& used) {
  used = 0;
  const int n = net.micro_batch();
  const int64_t px = net.input().size();
  double count = double(paths.size());
  comm.broadcast(&count, 1, kRoot);
  std::vector<float> input(size_t(n * px), 0.f);
  std::vector<std::vector<Detection>> dets;
  std::vector<std::vector<GroundTruth>> truth;
  std::optional<Ticker> ticker;
  if (tr.root()) ticker.emplace("mAP: pictures evaluated");
  for (int64_t start = 0; start < int64_t(count); start += n) {
    if (ticker) ticker->tick(start, int64_t(count));
    std::vector<std::pair<int, int>> sizes;
    std::vector<bool> ok(size_t(n), true);
    if (tr.root())
      for (int k = 0; k < n; ++k) {
        const int64_t i = std::min<int64_t>(start + k, int64_t(count) - 1);  // pad the last batch
        Image im;
        try {
          im = load_image(paths[size_t(i)], 3, max_pixels);
        } catch (const Error& e) {
          if (!skip_bad) throw;
          if (start + k < int64_t(count)) warn(std::string("evaluation: skipping a bad image: ") + e.what());
          ok[size_t(k)] = false;
          im = Image(1, 1, 3, .5f);  // the forward runs on every rank all the same
        }
        const Image boxed = net_picture(im, net);
        std::copy(boxed.data.begin(), boxed.data.end(), input.begin() + k * px);
        sizes.push_back({im.w, im.h});
      }
    else
      sizes.assign(size_t(n), {1, 1});
    // Darknet's validate_detector, or validate_yolo for YOLOv1.
    const bool v1 = yolov1_head(net) != nullptr;
    std::vector<std::vector<Detection>> d = detect_batch(tr, net, tr.root() ? input.data() : nullptr, sizes,
                                                         v1 ? kDarknetYolov1ValidThresh : kDarknetValidThresh,
                                                         v1 ? kDarknetYolov1ValidNms : kDarknetValidNms, true);
    if (!tr.root()) continue;
    for (int k = 0; k < n && start + k < int64_t(count); ++k) {
      if (!ok[size_t(k)]) continue;
      ++used;
      dets.push_back(std::move(d[size_t(k)]));
      std::vector<GroundTruth> g;
      for (const TruthBox& b : read_labels(label_path(paths[size_t(start + k)], yolov1_head(net) != nullptr), classes))
        g.push_back({{b.x, b.y, b.w, b.h}, b.cls, false});
      truth.push_back(std::move(g));
    }
  }
  return tr.root() ? voc_map(dets, truth, classes) : MapResult{};
}

void print_map(const MapResult& m, const std::vector<std::string>& names, size_t images) {
  std::printf("VOC mAP@0.5 on %zu pictures: %.4f\n", images, m.map);
  for (const ClassAp& c : m.per_class)
    std::printf("  %-16s AP %.4f  (%d boxes, %d detections)\n",
                size_t(c.cls) < names.size() ? names[size_t(c.cls)].c_str() : std::to_string(c.cls).c_str(), c.ap,
                c.positives, c.detections);
}

bool is_data_file(const std::string& f) { return f.size() > 5 && f.substr(f.size() - 5) == ".data"; }

std::vector<std::string> class_names(const std::string& file, const std::vector<const LayerSpec*>& heads,
                                     const std::string& cfg) {
  const int classes = output_classes(*heads.back());
  std::vector<std::string> names;
  if (!file.empty()) {
    if (is_data_file(file)) {
      const DataConfig dc = load_data_config(file);
      check_classes(heads, dc, cfg);
      names = dc.class_names;
      // The .data's classes are the truths'; boxes over a class map are named by the layer's
      // (the tree's) classes: each of the data's names labels the class it maps to, the
      // others are numbered.
      const LayerSpec& head = *heads.back();
      if (head.detector() && !head.det().map.empty()) {
        names.assign(size_t(classes), "");
        for (size_t j = 0; j < head.det().map.size() && j < dc.class_names.size(); ++j)
          names[size_t(head.det().map[j])] = dc.class_names[j];
        for (int c = 0; c < classes; ++c)
          if (names[size_t(c)].empty()) names[size_t(c)] = "class " + std::to_string(c);
      }
    } else {
      names = read_list(file, "names file");
    }
  }
  for (int c = int(names.size()); c < classes; ++c) names.push_back("class " + std::to_string(c));
  return names;
}

// The file behind a path, to tell whether two paths name one file (hard links included).
struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator<(const FileId& o) const { return dev != o.dev ? dev < o.dev : ino < o.ino; }
};
bool file_id(const std::string& path, FileId& id) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  id = {st.st_dev, st.st_ino};
  return true;
}

// detect --out DIR: every picture's output name, worked out before any work: DIR/STEM.png,
// or DIR/STEM-2.png, -3, ... when that name is already another picture's output, is one of
// the input pictures, or is something other than a file (a folder). So an input is never
// written over, nor one output by another (a.jpg and a.png; sub1/x.jpg and sub2/x.jpg; DIR
// the pictures' own folder). A file there from an earlier run is replaced.
std::vector<std::string> output_names(const std::vector<std::string>& images, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("--out: cannot create '", dir, "': ", ec.message());
  if (!fs::is_directory(dir, ec)) fail("--out: '", dir, "' is not a folder");
  std::set<FileId> inputs;
  for (const std::string& p : images) {
    FileId id;
    if (file_id(p, id)) inputs.insert(id);
  }
  std::set<std::string> taken;  // outputs so far, as canonical paths
  std::vector<std::string> out;
  for (const std::string& p : images) {
    std::string stem = fs::path(p).stem().string();
    if (stem.empty()) stem = "picture";
    for (int n = 1;; ++n) {
      std::string name = stem;  // (appended piece by piece: one chain of + trips GCC 12's -Wrestrict)
      if (n > 1) name.append("-").append(std::to_string(n));
      name.append(".png");
      const fs::path cand = fs::path(dir) / name;
      const std::string canon = fs::weakly_canonical(cand, ec).string();
      if (taken.count(ec ? cand.string() : canon)) continue;
      FileId id;
      if (file_id(cand.string(), id) && (inputs.count(id) || !fs::is_regular_file(cand, ec))) continue;
      taken.insert(ec ? cand.string() : canon);
      out.push_back(cand.string());
      break;
    }
  }
  return out;
}

// detect --montage: refused before any work unless it can be written, and when it names one
// of the input pictures or of the --out pictures (one would replace the other).
void check_montage(const std::string& montage, const std::vector<std::string>& images,
                   const std::vector<std::string>& outputs) {
  check_can_write(montage);
  FileId id, other;
  const bool exists = file_id(montage, id);
  for (const std::string& p : images)
    if (exists && file_id(p, other) && !(id < other) && !(other < id))
      fail("--montage '", montage, "' is one of the pictures (", p, "): it would be written over");
  std::error_code ec, ec_out;
  const fs::path canon = fs::weakly_canonical(montage, ec);
  for (const std::string& p : outputs)
    if (!ec && fs::weakly_canonical(p, ec_out) == canon && !ec_out)
      fail("--montage '", montage, "' is also one of the pictures --out writes");
}

}  // namespace

int cmd_train_detection(const RunOptions& run, Comm& comm, const DataOptions& d, const RunFiles& f) {
  check_data_outputs(d, comm);
  // Only the root reads pictures; it scatters each batch to the tiles. Every picture and
  // label of train= and valid= is checked first, before anything is set up (weights read,
  // checkpoint folder claimed): the evaluation after training must not be where a bad
  // valid= picture shows.
  DataConfig dc;
  std::vector<std::string> train_paths, valid_paths;
  if (comm.rank() == kRoot) {
    const NetSpec spec = load_run_net(run);
    dc = load_data_config(d.data);
    check_classes(detector_layers(spec, run.cfg), dc, run.cfg);
    // (YOLOv1's label files follow fill_truth_region's path rule.)
    const TruthCheck labels = detection_truth(dc.classes, yolov1_head(spec) != nullptr);
    train_paths = checked_pictures(dc, false, d.max_pixels, d.skip_bad_images, labels);
    if (!dc.valid.empty()) valid_paths = checked_pictures(dc, true, d.max_pixels, d.skip_bad_images, labels);
  }
  TrainingRun tr(run, comm, f);
  const RunOptions& o = tr.o;
  const NetSpec& net = tr.net;
  const Start& start = tr.start;
  Params& params = tr.params;
  Trainer& trainer = tr.trainer;
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  const LayerSpec* v1 = yolov1_head(net);
  const bool root = trainer.root();
  std::unique_ptr<BatchLoader> loader;
  double n_train = 0;
  if (root) {
    n_train = double(train_paths.size());
    BatchLoader::Options lo;
    lo.paths = train_paths;
    const Augment augment{.width = net.width,
                          .height = net.height,
                          .jitter = v1 ? v1->detection().jitter : heads.back()->det().jitter,
                          .hue = net.hue,
                          .saturation = net.saturation,
                          .exposure = net.exposure,
                          .flip = true};
    const int max_boxes = int(net.truth_size() / 5);
    // YOLOv1 trains on Darknet's load_data_region crops, the others on load_data_detection's.
    lo.sample = v1 ? region_sample(dc.classes, augment, max_boxes, d.max_pixels)
                   : detection_sample(dc.classes, augment, max_boxes, d.max_pixels);
    lo.image_floats = net.input().size();
    lo.truth_floats = net.truth_size();
    lo.batch = net.batch;
    lo.seed = o.seed;
    lo.skip_bad_images = d.skip_bad_images;
    lo.threads = d.loader_threads;
    lo.warn = warn;
    loader = std::make_unique<BatchLoader>(std::move(lo));
  }
  comm.broadcast(&n_train, 1, kRoot);
  const int B = net.batch;
  const int64_t per_epoch = std::max<int64_t>(1, int64_t(n_train) / B);
  const int64_t total = d.max_steps > 0 ? d.max_steps : per_epoch * d.epochs;
  if (root)
    std::printf("training %s on %s: %lld steps of %d pictures (%lld per epoch), grid %s, %d rank(s)\n", o.cfg.c_str(),
                d.data.c_str(), (long long)total, B, (long long)per_epoch, o.grid.c_str(), comm.size());
  std::vector<float> input(root ? size_t(B * net.input().size()) : 0), truth(root ? size_t(B * net.truth_size()) : 0);
  std::unique_ptr<Progress> progress;
  if (root) progress = std::make_unique<Progress>(d.metrics, start.step, total, B);
  trainer.reset_times();
  const double t_start = now_s();
  double window = 0;
  int in_window = 0;
  DetectorLoss seen_parts;
  for (int64_t step = start.step; step < total; ++step) {  // --steps counts from the start of the run
    if (root) loader->get(step, input.data(), truth.data());
    const double loss = trainer.train_step(input.data(), truth.data()) / B;
    checkpoint_if_due(trainer, net, params, o, f, step + 1, step + 1 == total);
    if (!root) continue;
    window += loss;
    ++in_window;
    if ((step + 1) % d.log_every == 0 || step + 1 == total) {
      const DetectorLoss all = trainer.detector_loss();
      const double per = 1.0 / (double(in_window) * B);
      const std::map<std::string, double> parts = {{"coord", (all.coord - seen_parts.coord) * per},
                                                   {"obj", (all.obj - seen_parts.obj) * per},
                                                   {"noobj", (all.noobj - seen_parts.noobj) * per},
                                                   {"class", (all.cls - seen_parts.cls) * per}};
      seen_parts = all;
      progress->log(step + 1, step / per_epoch, window / in_window, in_window, net.rate_at(params.seen / net.batch),
                    parts);
      window = 0;
      in_window = 0;
    }
  }
  const double train_s = now_s() - t_start;
  const int64_t ran = std::max<int64_t>(1, total - start.step);
  if (root) {
    std::printf("%lld steps in %.1f s; waiting for data %.3f s per step (the loader runs ahead on %d thread(s))\n",
                (long long)ran, train_s, loader->wait_s() / double(ran), d.loader_threads);
    std::fflush(stdout);
  }
  print_rank_times(comm, trainer, ran);
  // The trained weights first: nothing the evaluation meets can lose them.
  save_weights_if_asked(trainer, net, params, f);
  // Held-out mAP when the .data file names a valid= list.
  double has_valid = root && !valid_paths.empty() ? 1 : 0;
  comm.broadcast(&has_valid, 1, kRoot);
  if (has_valid != 0) {
    size_t used = 0;
    const MapResult m =
        evaluate_map(trainer, net, comm, valid_paths, root ? dc.classes : 0, d.max_pixels, d.skip_bad_images, used);
    if (root) {
      print_map(m, dc.class_names, used);
      progress->record(total, {{"map", m.map}, {"valid_images", used}});
      // Detectors learn slowly: a first run of the default single epoch is rarely useful.
      const double epochs = double(total) / double(per_epoch);
      if (epochs < 10)
        std::printf(
            "(trained %.3g epoch(s), %lld steps: a detector usually needs tens of epochs, e.g. --epochs 25 "
            "as scripts/detect_job.sh trains; --resume continues this run if it wrote --checkpoint)\n",
            epochs, (long long)total);
    }
  }
  return 0;
}

int cmd_map(const RunOptions& o, Comm& comm, const std::string& weights, const std::string& data, int64_t max_pixels) {
  NetSpec net = load_run_net(o);
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  Params params = params_to_fill(net, o, comm);
  load_weights(params, net, weights);
  // The .data file, every valid= picture's header and every label, before any work.
  DataConfig dc;
  std::vector<std::string> paths;
  if (comm.rank() == kRoot) {
    dc = load_data_config(data);
    check_classes(heads, dc, o.cfg);
    if (dc.valid.empty()) fail(data, ": no valid= list to evaluate on");
    paths = checked_pictures(dc, true, max_pixels, false, detection_truth(dc.classes, yolov1_head(net) != nullptr));
  }
  Trainer trainer(net, params, inference_options(o, net), comm);
  print_kernel_warnings(trainer);
  size_t used = 0;
  const MapResult m = evaluate_map(trainer, net, comm, paths, dc.classes, max_pixels, false, used);
  if (trainer.root()) print_map(m, dc.class_names, used);
  return 0;
}

// Every picture's header is checked before any work: one that is missing, not a picture, or
// above --max-pixels stops detect naming it (all of them, up to 10), nothing written. A
// picture whose data turns out corrupt while it is decoded is reported, the others are
// still done, and detect then stops with an error naming it (exit status 2).
int cmd_detect(const RunOptions& o, Comm& comm, const DetectOptions& d) {
  NetSpec net = load_run_net(o);
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  const int classes = output_classes(*heads.back());
  const std::vector<std::string> names = class_names(d.names, heads, o.cfg);
  Params params = params_to_fill(net, o, comm);
  load_weights(params, net, d.weights);
  std::vector<std::string> outputs;
  if (comm.rank() == kRoot) {
    std::string bad;
    size_t n_bad = 0;
    for (const std::string& p : d.images) {
      try {
        image_info(p, d.max_pixels);
      } catch (const Error& e) {
        if (++n_bad <= 10) bad += std::string(bad.empty() ? "" : "; ") + e.what();
      }
    }
    if (n_bad)
      fail(n_bad, " of ", d.images.size(), " pictures cannot be used, nothing done: ", bad, n_bad > 10 ? "; ..." : "");
    if (!d.out.empty()) outputs = output_names(d.images, d.out);
    if (!d.montage.empty()) check_montage(d.montage, d.images, outputs);
  }
  Trainer trainer(net, params, inference_options(o, net), comm);
  print_kernel_warnings(trainer);
  std::string failed;  // pictures that could not be decoded after all
  size_t n_failed = 0;
  const int n = net.micro_batch();
  const int64_t px = net.input().size();
  std::vector<float> input(size_t(n * px), 0.f);
  double count = double(d.images.size());
  comm.broadcast(&count, 1, kRoot);
  std::unique_ptr<Montage> montage;
  if (trainer.root() && !d.montage.empty()) montage = std::make_unique<Montage>(int(d.images.size()));
  const auto file_name = [&](int64_t i) { return fs::path(d.images[size_t(i)]).filename().string(); };
  for (int64_t i = 0; i < int64_t(count); ++i) {  // one picture per forward (padded batch)
    Image im;
    std::vector<std::pair<int, int>> sizes(size_t(n), {1, 1});
    bool ok = true;
    if (trainer.root()) {
      try {
        im = load_image(d.images[size_t(i)], 3, d.max_pixels);
      } catch (const Error& e) {
        warn(std::string("skipping a picture that cannot be read (detect ends with an error): ") + e.what());
        failed += std::string(n_failed++ ? "; " : "") + e.what();
        ok = false;
        im = Image(1, 1, 3, .5f);  // every rank runs the forward all the same
      }
      const Image boxed = net_picture(im, net);
      for (int k = 0; k < n; ++k) std::copy(boxed.data.begin(), boxed.data.end(), input.begin() + k * px);
      sizes.assign(size_t(n), {im.w, im.h});
    }
    const std::vector<std::vector<Detection>> dets =
        detect_batch(trainer, net, trainer.root() ? input.data() : nullptr, sizes, d.thresh,
                     yolov1_head(net) ? kDarknetYolov1TestNms : kDarknetTestNms, false);
    if (trainer.root() && !ok && montage) montage->add(int(i), Image(), file_name(i));
    if (!trainer.root() || !ok) continue;
    int found = 0;
    for (const Detection& det : dets[0])
      for (int c = 0; c < classes; ++c) found += det.prob[size_t(c)] > 0;
    if (found)
      std::printf("%s: %dx%d, %d object(s)\n", d.images[size_t(i)].c_str(), im.w, im.h, found);
    else
      std::printf("%s: %dx%d, no object above --thresh %g\n", d.images[size_t(i)].c_str(), im.w, im.h, d.thresh);
    // One drawn box per detection, labelled with its classes, the most probable first and
    // in its colour (classes of one box would otherwise stack their labels on one spot).
    std::vector<DrawnBox> boxes;
    for (const Detection& det : dets[0]) {
      std::vector<int> found_classes;
      for (int c = 0; c < classes; ++c)
        if (det.prob[size_t(c)] > 0) found_classes.push_back(c);  // else below the threshold or suppressed
      if (found_classes.empty()) continue;
      const BoxF& b = det.box;
      // A box of an untrained head can be infinite or NaN (exp overflow): converting that to
      // int is undefined (UBSan, CliDetection.TrainDetectMap), so clamp it first.
      const auto px = [](float v) { return std::isnan(v) ? 0 : int(std::clamp(v, -1e9f, 1e9f)); };
      const int x1 = px((b.x - b.w / 2) * im.w), x2 = px((b.x + b.w / 2) * im.w);
      const int y1 = px((b.y - b.h / 2) * im.h), y2 = px((b.y + b.h / 2) * im.h);
      for (int c : found_classes)
        std::printf("  %s: %.0f%%  box (%d, %d)-(%d, %d)\n", names[size_t(c)].c_str(), 100 * det.prob[size_t(c)], x1,
                    y1, x2, y2);
      std::stable_sort(found_classes.begin(), found_classes.end(),
                       [&](int a, int c) { return det.prob[size_t(a)] > det.prob[size_t(c)]; });
      std::string label;
      for (int c : found_classes) {
        char part[96];
        std::snprintf(part, sizeof part, "%s%s %.0f%%", label.empty() ? "" : ", ", names[size_t(c)].c_str(),
                      100 * det.prob[size_t(c)]);
        label += part;
      }
      // Darknet's palette idea: a colour per class, spread around the hue circle.
      const float hue = float(found_classes[0]) / float(classes);
      boxes.push_back({x1, y1, x2, y2, label, 0.5f + 0.5f * std::cos(6.2832f * hue),
                       0.5f + 0.5f * std::cos(6.2832f * (hue - 0.333f)),
                       0.5f + 0.5f * std::cos(6.2832f * (hue - 0.667f))});
    }
    if (!d.out.empty() || montage) {
      const Image drawn = detection_picture(im, boxes);
      if (!d.out.empty()) {
        save_png(drawn, outputs[size_t(i)]);
        std::printf("  wrote %s (%dx%d)\n", outputs[size_t(i)].c_str(), drawn.w, drawn.h);
      }
      if (montage) montage->add(int(i), drawn, file_name(i));
    }
    std::fflush(stdout);
  }
  if (montage) {
    montage->save(d.montage);
    std::printf(
        "wrote %s: %d picture(s) in %d column(s)%s\n", d.montage.c_str(), montage->shown(), montage->columns(),
        montage->shown() < int(d.images.size()) ? (", the first of " + std::to_string(d.images.size())).c_str() : "");
  }
  if (n_failed) fail(n_failed, " of ", d.images.size(), " pictures could not be read (the others are done): ", failed);
  return 0;
}

}  // namespace tt
