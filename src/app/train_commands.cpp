// train: on synthetic data, and on Fashion-MNIST or a folder of IDX files (the detection
// data sets are in detect_commands.cpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>

#include "app/commands.hpp"
#include "app/progress.hpp"
#include "data/idx.hpp"
#include "data/synthetic.hpp"
#include "engine/checkpoint.hpp"
#include "engine/trainer.hpp"
#include "model/params.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

int cmd_train(const RunOptions& run, Comm& comm, int steps, const RunFiles& f) {
  TrainingRun tr(run, comm, f);
  const RunOptions& o = tr.o;
  const NetSpec& net = tr.net;
  const Start& start = tr.start;
  Params& params = tr.params;
  Trainer& trainer = tr.trainer;
  std::vector<float> input, truth;
  if (trainer.root()) {
    std::printf(
        "training %s on synthetic data (pictures and labels drawn from --seed %llu; --data for a data set): "
        "%d steps of %d images, grid %s, %d rank(s)\n",
        o.cfg.c_str(), (unsigned long long)o.seed, steps, net.batch, o.grid.c_str(), comm.size());
    std::fflush(stdout);
  }
  for (int64_t i = start.step; i < steps; ++i) {  // --steps counts from the start of the run
    if (trainer.root()) synthetic_batch(net, net.batch, o.seed * 1000003 + uint64_t(params.seen), input, truth);
    trainer.reset_times();
    const double loss = trainer.train_step(input.data(), truth.data());
    if (trainer.root()) {
      std::printf("step %lld: loss %.6g (%.3f s), %lld images seen\n", (long long)i, loss / net.batch,
                  trainer.times().total, (long long)params.seen);
      std::fflush(stdout);
    }
    checkpoint_if_due(trainer, net, params, o, f, i + 1, i + 1 == steps);
  }
  save_weights_if_asked(trainer, net, params, f);
  return 0;
}

void print_rank_times(Comm& comm, const Trainer& trainer, int64_t steps) {
  const StepTimes t = trainer.times();
  const auto fwd = comm.all_gather(t.fwd), bwd = comm.all_gather(t.bwd), halo = comm.all_gather(t.halo),
             w = comm.all_gather(t.weights), io = comm.all_gather(t.io), rss = comm.all_gather(peak_rss_mb());
  if (comm.rank() != kRoot) return;
  const double n = double(steps);
  std::printf("time per step by rank (s): %-6s %8s %8s %8s %8s %8s %9s\n", "rank", "forward", "backward", "halo",
              "weights", "io", "peak MB");
  for (size_t r = 0; r < fwd.size(); ++r)
    std::printf("                           %-6zu %8.4f %8.4f %8.4f %8.4f %8.4f %9.1f\n", r, fwd[r] / n, bwd[r] / n,
                halo[r] / n, w[r] / n, io[r] / n, rss[r]);
  std::fflush(stdout);
}

void warn(const std::string& m) { std::cerr << "tiletrain: warning: " << m << std::endl; }

std::vector<std::string> checked_pictures(const DataConfig& dc, bool valid, int64_t max_pixels, bool skip_bad,
                                          const TruthCheck& check_truth) {
  check_list_file(dc, valid);
  const std::string& list = valid ? dc.valid : dc.train;
  Ticker ticker("checking the pictures of " + list);
  auto progress = [&ticker](size_t done, size_t total) { ticker.tick(int64_t(done), int64_t(total)); };
  return check_list(list, check_truth, max_pixels, skip_bad, warn, progress).usable;
}

void check_data_outputs(const DataOptions& d, const Comm& comm) {
  if (comm.rank() != 0) return;
  for (const std::string* p : {&d.loss_log, &d.metrics})
    if (!p->empty()) check_can_write(*p);
}

int cmd_train_data(const RunOptions& run, Comm& comm, const DataOptions& d, const RunFiles& f) {
  check_data_outputs(d, comm);
  TrainingRun tr(run, comm, f);
  const RunOptions& o = tr.o;
  const NetSpec& net = tr.net;
  const Start& start = tr.start;
  Params& params = tr.params;
  Trainer& trainer = tr.trainer;
  const bool root = trainer.root();
  const std::string dir = d.data == "fashion-mnist" ? kFashionMnistDir : d.data;
  // Only the root reads the data; it scatters each batch to the tiles.
  ImageSet train_set, test_set;
  double counts[2] = {0, 0};
  if (root) {
    train_set = load_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
    test_set = load_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
    if (train_set.rows != net.height || train_set.cols != net.width || net.channels != 1)
      fail(o.cfg, ": the net takes ", net.channels, "x", net.height, "x", net.width, " input but the images are 1x",
           train_set.rows, "x", train_set.cols);
    if (net.output().size() != train_set.classes)
      fail(o.cfg, ": the net has ", net.output().size(), " outputs for ", train_set.classes, " classes");
    if (test_set.rows != train_set.rows || test_set.cols != train_set.cols)
      fail(dir, "/t10k-images-idx3-ubyte.gz: ", test_set.rows, "x", test_set.cols,
           " pictures, but the training ones are ", train_set.rows, "x", train_set.cols);
    if (train_set.count < net.batch)  // not one step's batch: an epoch would be 0 steps
      fail(dir, "/train-images-idx3-ubyte.gz: ", train_set.count, " training pictures, fewer than the batch of ",
           net.batch, " (--batch sets a smaller one)");
    counts[0] = train_set.count;
    counts[1] = test_set.count;
  }
  comm.broadcast(counts, 2, kRoot);
  const int B = net.batch, n_train = int(counts[0]), n_test = int(counts[1]);
  const int per_epoch = n_train / B;
  const int total = d.max_steps > 0 ? d.max_steps : per_epoch * d.epochs;
  const int64_t pix = net.input().size(), classes = net.output().size();
  std::vector<float> input(size_t(B * pix)), truth(size_t(B * classes));
  std::vector<int> order(static_cast<size_t>(n_train));
  auto fill = [&](const ImageSet& set, const int* idx, int n, float* in, float* tr) {
    for (int k = 0; k < n; ++k) {
      const uint8_t* p = set.pixels.data() + int64_t(idx[k]) * pix;
      for (int64_t j = 0; j < pix; ++j) in[k * pix + j] = p[j] / 255.f - 0.5f;
      if (tr) {
        std::fill(tr + k * classes, tr + (k + 1) * classes, 0.f);
        tr[k * classes + set.labels[size_t(idx[k])]] = 1.f;
      }
    }
  };
  if (root) {
    std::printf("training %s on %s: %d steps of %d images (%d per epoch), grid %s, %d rank(s)\n", o.cfg.c_str(),
                dir.c_str(), total, B, per_epoch, o.grid.c_str(), comm.size());
    std::fflush(stdout);
  }
  std::vector<double> losses;
  trainer.reset_times();
  const double t_start = now_s();
  double window = 0;
  int in_window = 0;
  std::unique_ptr<Progress> progress;
  if (root) progress = std::make_unique<Progress>(d.metrics, start.step, total, B);
  for (int step = int(start.step); step < total; ++step) {  // --steps counts from the start of the run
    const int epoch = step / per_epoch, pos = step % per_epoch;
    if ((pos == 0 || step == start.step) && root) {  // this epoch's order, also when resuming inside it
      for (int i = 0; i < n_train; ++i) order[size_t(i)] = i;
      std::mt19937_64 rng(o.seed * 1315423911ULL + uint64_t(epoch));
      std::shuffle(order.begin(), order.end(), rng);
    }
    if (root) fill(train_set, order.data() + int64_t(pos) * B, B, input.data(), truth.data());
    const double loss = trainer.train_step(input.data(), truth.data()) / B;
    checkpoint_if_due(trainer, net, params, o, f, step + 1, step + 1 == total);
    if (!root) continue;
    losses.push_back(loss);
    window += loss;
    ++in_window;
    if ((step + 1) % d.log_every == 0 || step + 1 == total) {
      progress->log(step + 1, epoch, window / in_window, in_window, net.rate_at(params.seen / net.batch), {});
      window = 0;
      in_window = 0;
    }
  }
  const double train_s = now_s() - t_start;
  const int ran = std::max(1, total - int(start.step));  // steps this process ran
  // Test accuracy: every rank runs the tiled forward, the root scores.
  const int n = net.micro_batch();
  std::vector<int> idx(static_cast<size_t>(n));
  std::vector<float> batch_in(size_t(n) * size_t(pix), 0.f);
  int correct = 0;
  for (int start = 0; start < n_test; start += n) {
    const int m = std::min(n, n_test - start);
    if (root) {
      for (int k = 0; k < n; ++k) idx[size_t(k)] = start + std::min(k, m - 1);  // pad the last chunk
      fill(test_set, idx.data(), n, batch_in.data(), nullptr);
    }
    const float* out = trainer.predict(batch_in.data());
    if (!root) continue;
    for (int k = 0; k < m; ++k) {
      const float* p = out + k * classes;
      const int guess = int(std::max_element(p, p + classes) - p);
      correct += guess == test_set.labels[size_t(start + k)];
    }
  }
  const double acc = n_test ? 100.0 * correct / n_test : 0;
  if (root) {
    std::printf("test accuracy %.2f%% (%d/%d) after %d steps, %.1f s of training\n", acc, correct, n_test, total,
                train_s);
    progress->record(total, {{"accuracy", acc / 100}, {"test_images", n_test}});
  }
  print_rank_times(comm, trainer, ran);
  save_weights_if_asked(trainer, net, params, f);
  if (!root) return 0;
  if (!d.loss_log.empty())
    write_file_atomically(d.loss_log, [&](std::ostream& out) {
      out.precision(9);
      for (double l : losses) out << l << "\n";
      out << "accuracy " << acc << "\n";
    });
  return 0;
}

}  // namespace tt
