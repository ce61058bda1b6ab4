// Detectors: training on a Darknet .data file, detection on pictures, VOC mAP.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "app/commands.hpp"
#include "app/progress.hpp"
#include "data/detection_data.hpp"
#include "detect/detections.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace fs = std::filesystem;

namespace {

std::vector<const LayerSpec*> detector_layers(const NetSpec& net, const std::string& cfg) {
  std::vector<const LayerSpec*> out;
  for (const LayerSpec& l : net.layers)
    if (l.detector()) out.push_back(&l);
  if (out.empty()) fail(cfg, ": the net has no [region] or [yolo] layer: it is not a detector");
  return out;
}

void check_classes(const std::vector<const LayerSpec*>& heads, int classes, const std::string& cfg,
                   const std::string& data) {
  for (const LayerSpec* l : heads)
    if (l->det.classes != classes)
      fail(cfg, ":", l->line, ": [", layer_type_name(l->type), "] has classes=", l->det.classes, " but ", data, " has ",
           classes);
}

// Every rank runs the tiled forward of `n` pictures (root: letterboxed into `input`); the
// root turns each detector layer's output into detections, normalised to each picture.
std::vector<std::vector<Detection>> detect_batch(Trainer& tr, const NetSpec& net, const float* input,
                                                 const std::vector<std::pair<int, int>>& sizes, float thresh) {
  tr.predict(input);
  std::vector<std::vector<Detection>> out(sizes.size());
  if (!tr.root()) return out;
  for (const LayerSpec& l : net.layers) {
    if (!l.detector()) continue;
    const DetectionHead h = detection_head(l);
    for (size_t k = 0; k < sizes.size(); ++k)
      head_detections(h, tr.output_of(l.index) + int64_t(k) * l.out.size(), sizes[k].first, sizes[k].second, net.width,
                      net.height, thresh, true, out[k]);
  }
  int classes = 0;
  for (const LayerSpec& l : net.layers)
    if (l.detector()) classes = l.det.classes;
  for (auto& d : out) do_nms_sort(d, classes, kDarknetTestNms);
  return out;
}

// VOC mAP of the net on a list of labelled pictures (every rank calls it).
MapResult evaluate_map(Trainer& tr, const NetSpec& net, Comm& comm, const std::vector<std::string>& paths,
                       int classes) {
  const int n = net.micro_batch();
  const int64_t px = net.input().size();
  double count = double(paths.size());
  comm.broadcast(&count, 1, kRoot);
  std::vector<float> input(size_t(n * px), 0.f);
  std::vector<std::vector<Detection>> dets;
  std::vector<std::vector<GroundTruth>> truth;
  for (int64_t start = 0; start < int64_t(count); start += n) {
    std::vector<std::pair<int, int>> sizes;
    if (tr.root())
      for (int k = 0; k < n; ++k) {
        const int64_t i = std::min<int64_t>(start + k, int64_t(count) - 1);  // pad the last batch
        const Image im = load_image(paths[size_t(i)], 3);
        const Image boxed = letterbox_image(im, net.width, net.height);
        std::copy(boxed.data.begin(), boxed.data.end(), input.begin() + k * px);
        sizes.push_back({im.w, im.h});
      }
    else
      sizes.assign(size_t(n), {1, 1});
    std::vector<std::vector<Detection>> d =
        detect_batch(tr, net, tr.root() ? input.data() : nullptr, sizes, kDarknetValidThresh);
    if (!tr.root()) continue;
    for (int k = 0; k < n && start + k < int64_t(count); ++k) {
      dets.push_back(std::move(d[size_t(k)]));
      std::vector<GroundTruth> g;
      for (const TruthBox& b : read_labels(label_path(paths[size_t(start + k)]), classes))
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

std::vector<std::string> class_names(const std::string& file, int classes) {
  std::vector<std::string> names;
  if (!file.empty()) {
    if (file.size() > 5 && file.substr(file.size() - 5) == ".data") return load_data_config(file).class_names;
    names = read_list(file);
  }
  for (int c = int(names.size()); c < classes; ++c) names.push_back("class " + std::to_string(c));
  return names;
}

}  // namespace

int cmd_train_detection(const RunOptions& run, Comm& comm, const DataOptions& d, const RunFiles& f) {
  TrainingRun tr(run, comm, f);
  const RunOptions& o = tr.o;
  const NetSpec& net = tr.net;
  const Start& start = tr.start;
  Params& params = tr.params;
  Trainer& trainer = tr.trainer;
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  const bool root = trainer.root();
  // Only the root reads pictures; it scatters each batch to the tiles.
  DataConfig dc;
  std::vector<std::string> train_paths;
  std::unique_ptr<DetectionLoader> loader;
  double n_train = 0;
  if (root) {
    dc = load_data_config(d.data);
    check_classes(heads, dc.classes, o.cfg, d.data);
    train_paths = read_list(dc.train);
    n_train = double(train_paths.size());
    DetectionLoader::Options lo;
    lo.paths = train_paths;
    lo.classes = dc.classes;
    lo.augment = Augment{.width = net.width,
                         .height = net.height,
                         .jitter = heads.back()->det.jitter,
                         .hue = net.hue,
                         .saturation = net.saturation,
                         .exposure = net.exposure,
                         .flip = true};
    lo.batch = net.batch;
    lo.max_boxes = int(net.truth_size() / 5);
    lo.seed = o.seed;
    lo.skip_bad_images = d.skip_bad_images;
    lo.threads = d.loader_threads;
    lo.warn = [](const std::string& m) { std::cerr << "tiletrain: warning: " << m << std::endl; };
    loader = std::make_unique<DetectionLoader>(std::move(lo));
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
  const StepTimes t = trainer.times();
  const int64_t ran = std::max<int64_t>(1, total - start.step);
  const auto all_fwd = comm.all_gather(t.fwd), all_bwd = comm.all_gather(t.bwd), all_halo = comm.all_gather(t.halo),
             all_w = comm.all_gather(t.weights), all_io = comm.all_gather(t.io),
             all_rss = comm.all_gather(peak_rss_mb());
  if (root) {
    std::printf("%lld steps in %.1f s; waiting for data %.3f s per step (the loader runs ahead on %d thread(s))\n",
                (long long)ran, train_s, loader->wait_s() / double(ran), d.loader_threads);
    std::printf("time per step by rank (s): %-6s %8s %8s %8s %8s %8s %9s\n", "rank", "forward", "backward", "halo",
                "weights", "io", "peak MB");
    for (size_t r = 0; r < all_fwd.size(); ++r)
      std::printf("                           %-6zu %8.4f %8.4f %8.4f %8.4f %8.4f %9.1f\n", r, all_fwd[r] / ran,
                  all_bwd[r] / ran, all_halo[r] / ran, all_w[r] / ran, all_io[r] / ran, all_rss[r]);
    std::fflush(stdout);
  }
  // Held-out mAP when the .data file names a valid= list.
  double has_valid = root && !dc.valid.empty() ? 1 : 0;
  comm.broadcast(&has_valid, 1, kRoot);
  if (has_valid != 0) {
    const std::vector<std::string> valid = root ? read_list(dc.valid) : std::vector<std::string>{};
    const MapResult m = evaluate_map(trainer, net, comm, valid, root ? dc.classes : 0);
    if (root) {
      print_map(m, dc.class_names, valid.size());
      progress->record(total, {{"map", m.map}, {"valid_images", valid.size()}});
    }
  }
  if (!f.weights_out.empty()) trainer.gather_weights();
  if (root && !f.weights_out.empty()) {
    save_weights(params, net, f.weights_out);
    std::printf("saved %s\n", f.weights_out.c_str());
  }
  return 0;
}

int cmd_map(const RunOptions& o, Comm& comm, const std::string& weights, const std::string& data) {
  NetSpec net = load_run_net(o);
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  Params params(net);
  load_weights(params, net, weights);
  Trainer trainer(net, params, train_options(o), comm);
  print_kernel_warnings(trainer);
  DataConfig dc;
  std::vector<std::string> paths;
  if (trainer.root()) {
    dc = load_data_config(data);
    check_classes(heads, dc.classes, o.cfg, data);
    if (dc.valid.empty()) fail(data, ": no valid= list to evaluate on");
    paths = read_list(dc.valid);
  }
  const MapResult m = evaluate_map(trainer, net, comm, paths, dc.classes);
  if (trainer.root()) print_map(m, dc.class_names, paths.size());
  return 0;
}

int cmd_detect(const RunOptions& o, Comm& comm, const DetectOptions& d) {
  NetSpec net = load_run_net(o);
  const std::vector<const LayerSpec*> heads = detector_layers(net, o.cfg);
  const int classes = heads.back()->det.classes;
  Params params(net);
  load_weights(params, net, d.weights);
  if (!d.out.empty() && comm.rank() == kRoot) {
    std::error_code ec;
    fs::create_directories(d.out, ec);
    if (ec) fail("--out: cannot create '", d.out, "': ", ec.message());
  }
  Trainer trainer(net, params, train_options(o), comm);
  print_kernel_warnings(trainer);
  const std::vector<std::string> names = class_names(d.names, classes);
  const int n = net.micro_batch();
  const int64_t px = net.input().size();
  std::vector<float> input(size_t(n * px), 0.f);
  double count = double(d.images.size());
  comm.broadcast(&count, 1, kRoot);
  for (int64_t i = 0; i < int64_t(count); ++i) {  // one picture per forward (padded batch)
    Image im;
    std::vector<std::pair<int, int>> sizes(size_t(n), {1, 1});
    if (trainer.root()) {
      im = load_image(d.images[size_t(i)], 3);
      const Image boxed = letterbox_image(im, net.width, net.height);
      for (int k = 0; k < n; ++k) std::copy(boxed.data.begin(), boxed.data.end(), input.begin() + k * px);
      sizes.assign(size_t(n), {im.w, im.h});
    }
    const std::vector<std::vector<Detection>> dets =
        detect_batch(trainer, net, trainer.root() ? input.data() : nullptr, sizes, d.thresh);
    if (!trainer.root()) continue;
    std::printf("%s: %dx%d\n", d.images[size_t(i)].c_str(), im.w, im.h);
    for (const Detection& det : dets[0])
      for (int c = 0; c < classes; ++c) {
        if (det.prob[size_t(c)] <= 0) continue;  // below the threshold or suppressed
        const BoxF& b = det.box;
        const int x1 = int((b.x - b.w / 2) * im.w), x2 = int((b.x + b.w / 2) * im.w);
        const int y1 = int((b.y - b.h / 2) * im.h), y2 = int((b.y + b.h / 2) * im.h);
        std::printf("  %s: %.0f%%  box (%d, %d)-(%d, %d)\n", names[size_t(c)].c_str(), 100 * det.prob[size_t(c)], x1,
                    y1, x2, y2);
        if (d.out.empty()) continue;
        // Darknet's palette idea: a colour per class, spread around the hue circle.
        const float hue = float(c) / float(classes);
        const float r = 0.5f + 0.5f * std::cos(6.2832f * hue), g = 0.5f + 0.5f * std::cos(6.2832f * (hue - 0.333f)),
                    bl = 0.5f + 0.5f * std::cos(6.2832f * (hue - 0.667f));
        const int thick = std::max(1, im.h / 200);
        draw_box(im, x1, y1, x2, y2, thick, r, g, bl);
        char label[96];
        std::snprintf(label, sizeof label, "%s %.0f%%", names[size_t(c)].c_str(), 100 * det.prob[size_t(c)]);
        draw_label(im, x1, std::max(0, y1 - (im.h >= 300 ? 16 : 9)), label, r, g, bl);
      }
    if (!d.out.empty()) {
      const std::string out = (fs::path(d.out) / (fs::path(d.images[size_t(i)]).stem().string() + ".png")).string();
      save_png(im, out);
      std::printf("  wrote %s\n", out.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tt
