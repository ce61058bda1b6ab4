// train on a classifier's Darknet .data file (classes=, train=, valid=, labels=, top=):
// pictures whose class is the label their path contains, Darknet's classifier augmentation
// from [net] (angle, aspect, min_crop, max_crop, center, hue, saturation, exposure), and
// the held-out top-1 and top-k accuracy after every epoch and at the end.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>

#include "app/commands.hpp"
#include "app/progress.hpp"
#include "data/darknet_data.hpp"
#include "engine/checkpoint.hpp"
#include "engine/trainer.hpp"
#include "model/params.hpp"
#include "ops/op.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {

struct Accuracy {
  double top1 = 0, topk = 0;
  size_t pictures = 0;
};

// Every rank runs the tiled forward of the valid= pictures, a micro-batch at a time (the
// root reads them, centre-cropped as Darknet's validate_classifier does); the root scores
// each picture's output: right at top-1 if the class scores highest, at top-k if it is
// among the k highest (in_top_k).
// A picture that cannot be decoded after all (its header was checked up front) stops the
// run, or, with `skip_bad`, is left out with a warning.
Accuracy evaluate(Trainer& trainer, const NetSpec& net, Comm& comm, const std::vector<std::string>& paths,
                  const std::vector<std::string>& labels, int k, int64_t max_pixels, bool skip_bad) {
  const bool root = comm.rank() == kRoot;
  double count = double(paths.size());
  comm.broadcast(&count, 1, kRoot);
  const int n = net.micro_batch(), total = int(count);
  const int64_t pix = net.input().size(), classes = net.output().size();
  std::vector<float> input(size_t(n * pix), 0.f);
  Accuracy a;
  Ticker ticker("top-1 and top-" + std::to_string(k) + " accuracy on the valid= pictures");
  for (int start = 0; start < total; start += n) {
    const int m = std::min(n, total - start);
    std::vector<char> ok(size_t(n), 1);
    if (root)
      for (int j = 0; j < n; ++j) {  // the last chunk padded with its last picture
        const std::string& p = paths[size_t(start + std::min(j, m - 1))];
        try {
          load_classifier_picture(p, net.width, net.height, net.channels, input.data() + j * pix, max_pixels);
        } catch (const Error& e) {
          if (!skip_bad) throw;
          if (j < m) warn(std::string("evaluation: skipping a bad image: ") + e.what());
          ok[size_t(j)] = 0;
          std::fill_n(input.data() + j * pix, pix, 0.5f);  // every rank runs the forward all the same
        }
      }
    const float* out = trainer.predict(input.data());
    if (!root) continue;
    for (int j = 0; j < m; ++j) {
      if (!ok[size_t(j)]) continue;
      const float* p = out + j * classes;
      const int cls = class_in_path(paths[size_t(start + j)], labels);
      if (cls < 0) continue;  // one class, absent: no top-k to speak of
      a.top1 += in_top_k(p, int(classes), cls, 1);
      a.topk += in_top_k(p, int(classes), cls, k);
      ++a.pictures;
    }
    ticker.tick(start + m, total);
  }
  if (a.pictures) {
    a.top1 /= double(a.pictures);
    a.topk /= double(a.pictures);
  }
  return a;
}

}  // namespace

int cmd_train_classifier(const RunOptions& run, Comm& comm, const DataOptions& d, const RunFiles& f) {
  check_data_outputs(d, comm);
  // Every picture of train= and valid= is checked (its header, its one label) before
  // anything is set up: a bad valid= picture must not show only after training.
  DataConfig dc;
  std::vector<std::string> train_paths, valid_paths;
  if (comm.rank() == kRoot) {
    const NetSpec spec = load_run_net(run);
    dc = load_data_config(d.data, DataKind::Classification);
    if (spec.output().size() != dc.classes)
      fail(run.cfg, ": the net has ", spec.output().size(), " outputs, but ", dc.path, ":", dc.classes_line,
           " has classes=", dc.classes);
    for (const LayerSpec& l : spec.layers)
      if (softmax_over_tree(l))
        fail(run.cfg, ":", l.line, ": a [softmax] over a class tree trains on hierarchical labels (Darknet's ",
             "fill_hierarchy), which training on pictures does not give yet");
    if (spec.channels != 1 && spec.channels != 3)
      fail(run.cfg,
           ": a classifier trained on pictures takes 1 (grey) or 3 (RGB) channels, [net] has channels=", spec.channels);
    const TruthCheck one_label = classifier_truth(dc.class_names);
    train_paths = checked_pictures(dc, false, d.max_pixels, d.skip_bad_images, one_label);
    if (!dc.valid.empty()) valid_paths = checked_pictures(dc, true, d.max_pixels, d.skip_bad_images, one_label);
  }
  TrainingRun tr(run, comm, f);
  const RunOptions& o = tr.o;
  const NetSpec& net = tr.net;
  const Start& start = tr.start;
  Params& params = tr.params;
  Trainer& trainer = tr.trainer;
  const bool root = trainer.root();
  std::unique_ptr<BatchLoader> loader;
  double sizes[3] = {0, 0, 0};  // pictures to train on, to evaluate on, k
  if (root) {
    const ClassifierAugment augment{.width = net.width,
                                    .height = net.height,
                                    .channels = net.channels,
                                    .angle = net.angle,
                                    .aspect = net.aspect,
                                    .min_crop = net.min_crop,
                                    .max_crop = net.max_crop,
                                    .center = net.center,
                                    .hue = net.hue,
                                    .saturation = net.saturation,
                                    .exposure = net.exposure,
                                    .flip = true};
    BatchLoader::Options lo;
    lo.paths = train_paths;
    lo.sample = classifier_sample(dc.class_names, augment, d.max_pixels);
    lo.image_floats = net.input().size();
    lo.truth_floats = dc.classes;
    lo.batch = net.batch;
    lo.seed = o.seed;
    lo.skip_bad_images = d.skip_bad_images;
    lo.threads = d.loader_threads;
    lo.warn = warn;
    loader = std::make_unique<BatchLoader>(std::move(lo));
    sizes[0] = double(train_paths.size());
    sizes[1] = double(valid_paths.size());
    sizes[2] = dc.top > 0 ? dc.top : std::min(5, dc.classes);  // Darknet's top= (default 1), else top-5
  }
  comm.broadcast(sizes, 3, kRoot);
  const int B = net.batch, k = int(sizes[2]);
  const bool has_valid = sizes[1] > 0;
  const int64_t per_epoch = std::max<int64_t>(1, int64_t(sizes[0]) / B);
  const int64_t total = d.max_steps > 0 ? d.max_steps : per_epoch * d.epochs;
  if (root) {
    std::printf("training %s on %s: %lld steps of %d pictures (%lld per epoch), grid %s, %d rank(s)\n", o.cfg.c_str(),
                d.data.c_str(), (long long)total, B, (long long)per_epoch, o.grid.c_str(), comm.size());
    std::fflush(stdout);
  }
  std::vector<float> input(root ? size_t(B * net.input().size()) : 0), truth(root ? size_t(B * dc.classes) : 0);
  std::unique_ptr<Progress> progress;
  if (root) progress = std::make_unique<Progress>(d.metrics, start.step, total, B);
  auto report = [&](int64_t done) {
    const Accuracy a = evaluate(trainer, net, comm, valid_paths, dc.class_names, k, d.max_pixels, d.skip_bad_images);
    if (!root) return;
    std::printf("held-out accuracy after %lld steps: top-1 %.2f%%, top-%d %.2f%% (%zu pictures)\n", (long long)done,
                100 * a.top1, k, 100 * a.topk, a.pictures);
    std::fflush(stdout);
    progress->record(done, {{"accuracy", a.top1}, {"top_k", a.topk}, {"k", k}, {"valid_images", a.pictures}});
  };
  trainer.reset_times();
  const double t_start = now_s();
  double window = 0, eval_s = 0;
  int in_window = 0;
  for (int64_t step = start.step; step < total; ++step) {  // --steps counts from the start of the run
    if (root) loader->get(step, input.data(), truth.data());
    const double loss = trainer.train_step(input.data(), truth.data()) / B;
    checkpoint_if_due(trainer, net, params, o, f, step + 1, step + 1 == total);
    if (root) {
      window += loss;
      ++in_window;
      if ((step + 1) % d.log_every == 0 || step + 1 == total) {
        progress->log(step + 1, step / per_epoch, window / in_window, in_window, net.rate_at(params.seen / net.batch),
                      {});
        window = 0;
        in_window = 0;
      }
    }
    if (has_valid && (step + 1) % per_epoch == 0 && step + 1 < total) {  // each epoch's end; the last one below
      const double e0 = now_s();
      report(step + 1);
      const double e = now_s() - e0;
      eval_s += e;
      if (root) progress->exclude(e);
    }
  }
  const double train_s = now_s() - t_start - eval_s;
  const int64_t ran = std::max<int64_t>(1, total - start.step);
  print_rank_times(comm, trainer, ran);
  if (root) {
    std::printf(
        "%lld steps in %.1f s of training; waiting for data %.3f s per step (the loader runs ahead on %d "
        "thread(s))\n",
        (long long)ran, train_s, loader->wait_s() / double(ran), d.loader_threads);
    std::fflush(stdout);
  }
  // The trained weights first: nothing the evaluation meets can lose them.
  save_weights_if_asked(trainer, net, params, f);
  if (has_valid) report(total);
  return 0;
}

}  // namespace tt
