#include "app/progress.hpp"

#include <cstdio>
#include <exception>

#include "util/error.hpp"
#include "util/sys.hpp"

namespace tt {

Progress::Progress(const std::string& metrics_path, int64_t first, int64_t total, int batch)
    : path_(metrics_path), first_(first), total_(total), batch_(batch), t0_(now_s()), last_done_(first), last_t_(t0_) {
  if (path_.empty()) return;
  out_.open(path_, first > 0 ? std::ios::app : std::ios::trunc);
  if (!out_) fail("--metrics: cannot open '", path_, "' for writing");
}

void Progress::log(int64_t done, int64_t epoch, double loss, int window, double lr,
                   const std::map<std::string, double>& parts) {
  const double now = now_s(), el = now - t0_;
  const double step_s = done > last_done_ ? (now - last_t_) / double(done - last_done_) : 0;
  last_done_ = done;
  last_t_ = now;
  const double per_step = done > first_ ? el / double(done - first_) : 0;
  const double ips = per_step > 0 ? batch_ / per_step : 0;
  const double eta = per_step * double(total_ - done);
  std::string extra;
  for (const auto& [k, v] : parts) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.4g", k.c_str(), v);
    extra += buf;
  }
  std::printf("epoch %lld step %lld/%lld: loss %.4f (mean of last %d)%s, lr %.3g, %.0f images/s, ETA %.0f s\n",
              (long long)epoch, (long long)done, (long long)total_, loss, window, extra.c_str(), lr, ips, eta);
  std::fflush(stdout);
  if (!out_.is_open()) return;
  nlohmann::json j = {{"step", done}, {"epoch", epoch},  {"loss", loss},     {"lr", lr},       {"images_per_s", ips},
                      {"eta_s", eta}, {"elapsed_s", el}, {"step_s", step_s}, {"batch", batch_}};
  for (const auto& [k, v] : parts) j["loss_" + k] = v;
  out_ << j.dump() << "\n" << std::flush;
  if (!out_) fail("--metrics: write to '", path_, "' failed");
}

void Progress::record(int64_t done, nlohmann::json fields) {
  if (!out_.is_open()) return;
  fields["step"] = done;
  out_ << fields.dump() << "\n" << std::flush;
  if (!out_) fail("--metrics: write to '", path_, "' failed");
}

double Ticker::now() { return now_s(); }

void Ticker::tick(int64_t done, int64_t total) {
  total_ = total;
  const double t = now_s(), el = t - t0_;
  if (el < 3 || t - last_ < 5 || done <= 0 || done >= total_) return;
  last_ = t;
  std::fprintf(stderr, "%s: %lld of %lld (%.0f%%), ETA %.0f s\n", what_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), 100.0 * double(done) / double(total_),
               el / double(done) * double(total_ - done));
}

Ticker::~Ticker() {
  if (last_ > 0 && std::uncaught_exceptions() == 0)  // not when an error ends the work
    std::fprintf(stderr, "%s: all %lld done in %.0f s\n", what_.c_str(), static_cast<long long>(total_),
                 now_s() - t0_);
}

}  // namespace tt
