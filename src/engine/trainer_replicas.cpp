// The data-parallel step (TrainOptions::replicas): every process runs a whole copy on its
// share of the batch's micro-batches; what crosses processes is the micro-batches from the
// root, the losses, the running statistics and (in update()) the gradient sum.
#include <algorithm>
#include <climits>
#include <cmath>

#include "engine/trainer.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

namespace {
// A detector's loss statistics as doubles, to move between processes.
constexpr size_t kDetectorLossValues = 8;
void pack(const DetectorLoss& d, double* v) {
  const double x[kDetectorLossValues] = {d.cost, d.coord, d.obj, d.noobj, d.cls, d.iou, d.recall, double(d.count)};
  std::copy(x, x + kDetectorLossValues, v);
}
DetectorLoss unpack(const double* v) {
  return DetectorLoss{.cost = v[0],
                      .coord = v[1],
                      .obj = v[2],
                      .noobj = v[3],
                      .cls = v[4],
                      .iou = v[5],
                      .recall = v[6],
                      .count = int(v[7])};
}
}  // namespace

// Data parallel, one micro-batch at a time (verify compares each with a reference): the
// root hands it to the process that runs it and gets its output (and input delta) back.
double Trainer::forward_backward_replica(const float* input, const float* truth) {
  if (micro_ >= net_.subdivisions) fail("internal: more micro-batches than the batch's ", net_.subdivisions);
  const int m = micro_, me = comm_.rank();
  int runner = 0;
  while (first_micro_batch(runner + 1) <= m) ++runner;
  const size_t in_n = size_t(n_ * net_.input().size()), truth_n = size_t(n_ * net_.truth_size());
  const size_t out_n = size_t(n_ * net_.output().size());
  const float *x = input, *t = truth;
  if (runner != kRoot) {
    if (root()) {
      comm_.isend_floats(input, in_n, runner, 0);
      comm_.isend_floats(truth, truth_n, runner, 1);
    } else if (me == runner) {
      comm_.irecv_floats(replica_in_.data(), in_n, kRoot, 0);
      comm_.irecv_floats(replica_truth_.data(), truth_n, kRoot, 1);
      x = replica_in_.data();
      t = replica_truth_.data();
    }
    comm_.wait_all();
  }
  double loss = 0;
  if (me == runner) {
    tail_->detector_loss = {};
    forward(x, true);
    loss = loss_and_backward(t);
    micro_sync_->capture(m);
  }
  std::vector<double> d(kDetectorLossValues);
  if (me == runner) pack(tail_->detector_loss, d.data());
  if (runner != kRoot) {
    if (root()) {
      replica_out_.resize(out_n);
      comm_.irecv_floats(replica_out_.data(), out_n, runner, 2);
      if (opt_.need_input_delta) comm_.irecv_floats(input_delta_.data(), input_delta_.size(), runner, 3);
    } else if (me == runner) {
      comm_.isend_floats(out_, out_n, kRoot, 2);
      if (opt_.need_input_delta) comm_.isend_floats(input_delta_.data(), input_delta_.size(), kRoot, 3);
    }
    comm_.wait_all();
    if (root()) out_ = replica_out_.data();
    d.push_back(loss);
    comm_.broadcast(d.data(), d.size(), runner);
    loss = d.back();
  }
  if (root()) replica_detector_loss_ += unpack(d.data());
  ++micro_;
  return loss;
}

// Data parallel: the root hands every process its micro-batches, each runs its own, and the
// losses come back to the root, added in micro-batch order.
double Trainer::train_step_replicas(const float* input, const float* truth) {
  const double t0 = now_s();
  const int P = comm_.size(), me = comm_.rank(), S = net_.subdivisions;
  const int64_t in_n = n_ * net_.input().size(), truth_n = n_ * net_.truth_size();
  const int first = first_micro_batch(me), last = first_micro_batch(me + 1);
  // This process's micro-batches, from `first` on.
  const float *x = input, *t = truth;
  if (root()) {
    for (int r = 1; r < P; ++r) {
      const int b = first_micro_batch(r), e = first_micro_batch(r + 1);
      comm_.isend_floats(input + b * in_n, size_t((e - b) * in_n), r, 0);
      comm_.isend_floats(truth + b * truth_n, size_t((e - b) * truth_n), r, 1);
    }
  } else {
    comm_.irecv_floats(replica_in_.data(), replica_in_.size(), kRoot, 0);
    comm_.irecv_floats(replica_truth_.data(), replica_truth_.size(), kRoot, 1);
    x = replica_in_.data();
    t = replica_truth_.data();
  }
  comm_.wait_all();
  const double t1 = now_s();
  times_.io += t1 - t0;
  trace_.add("micro-batches from the root", "io", Lane::Comm, t0, t1);
  // Per micro-batch: its loss, then its detector statistics (kDetectorLossValues).
  const size_t per = 1 + kDetectorLossValues;
  std::vector<double> results(size_t(S) * per, 0.);
  for (int m = first; m < last; ++m) {
    micro_ = m;
    tail_->detector_loss = {};
    forward(x + (m - first) * in_n, true);
    double* r = results.data() + size_t(m) * per;
    r[0] = loss_and_backward(t + (m - first) * truth_n);
    pack(tail_->detector_loss, r + 1);
    micro_sync_->capture(m);
  }
  micro_ = S;
  std::vector<int> counts, displs;
  for (int r = 0; r < P; ++r) {
    displs.push_back(int(size_t(first_micro_batch(r)) * per));
    counts.push_back(int(size_t(first_micro_batch(r + 1) - first_micro_batch(r)) * per));
  }
  comm_.all_gather_v(results.data(), counts, displs);
  double loss = 0;
  for (int m = 0; m < S; ++m) {
    const double* r = results.data() + size_t(m) * per;
    loss += r[0];
    replica_detector_loss_ += unpack(r + 1);
  }
  if (!std::isfinite(loss)) diverged("the loss (" + std::to_string(loss) + ")");  // every process has it
  update();
  const double t2 = now_s();
  times_.total += t2 - t0;
  trace_.add("step", "step", Lane::Compute, t0, t2);
  return loss;
}

// Data parallel: every process's micro-batches' batch statistics, gathered in process order
// (which is micro-batch order), folded into the running ones on every process.
void Trainer::fold_running_stats_in_order() {
  const std::vector<double> sizes = comm_.all_gather(double(stats_log_.size()));
  std::vector<int> counts, displs;
  int64_t total = 0;
  for (double v : sizes) {
    if (total + int64_t(v) >= INT_MAX) fail("the batch-norm statistics of a batch are too many for one MPI message");
    displs.push_back(int(total));
    counts.push_back(int(v));
    total += int64_t(v);
  }
  std::vector<double> all(static_cast<size_t>(total));
  std::copy(stats_log_.begin(), stats_log_.end(), all.begin() + displs[size_t(comm_.rank())]);
  if (comm_.size() > 1 && total > 0) comm_.all_gather_v(all.data(), counts, displs);
  fold_running_stats(all.data(), all.size(), params_);
  stats_log_.clear();
}

}  // namespace tt
