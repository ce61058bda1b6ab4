#include "engine/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json_number.hpp"
#include "util/sys.hpp"

namespace tt {

namespace fs = std::filesystem;

namespace {

constexpr char kMomentumMagic[8] = {'T', 'T', 'M', 'O', 'M', '1', '\n', '\0'};

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

// Complete checkpoints in `dir` (folders step-N with meta.json), oldest first.
std::vector<fs::path> checkpoints(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step-", 0) == 0 && fs::exists(e.path() / "meta.json", ec))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CheckpointFolder::CheckpointFolder(const std::string& dir, const RunIdentity& id, const std::string& resume_dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("--checkpoint: '", dir, "' exists and is not a folder");
  fs::create_directories(dir, ec);
  if (ec) fail("--checkpoint: cannot create folder '", dir, "': ", ec.message());
  const std::string lock_path = (fs::path(dir) / ".lock").string();
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("--checkpoint: cannot write into folder '", dir, "': ", std::string(std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, size_t(n)) : "another process";
    while (!who.empty() && who.back() == '\n') who.pop_back();
    ::close(fd_);
    fd_ = -1;
    fail("--checkpoint: folder '", dir, "' is in use by another run (", who,
         "); two runs must not write into one folder");
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string me = "process " + std::to_string(getpid()) + " on " + host + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    fail("--checkpoint: cannot write '", lock_path, "': ", std::string(std::strerror(errno)));

  const fs::path run_json = fs::path(dir) / "run.json";
  const std::vector<fs::path> held = checkpoints(dir);
  const bool resume = !resume_dir.empty() && fs::equivalent(dir, resume_dir, ec);  // this run, going on
  if (!held.empty() && fs::exists(run_json, ec)) {  // a run.json without checkpoints: nothing to lose
    nlohmann::json j;
    try {
      std::ifstream in(run_json);
      j = nlohmann::json::parse(in);
      RunIdentity was{j.at("cfg").get<std::string>(), json_unsigned(j.at("seed"), run_json.string() + ": seed"),
                      j.at("grid").get<std::string>()};
      if (!resume)
        fail("--checkpoint: folder '", dir, "' belongs to a run of '", was.cfg, "' (grid ", was.grid, ", seed ",
             was.seed, ") with checkpoints up to ", held.back().filename().string(), "; continue it with --resume ",
             dir, ", or give another folder");
      if (was.cfg != id.cfg || was.seed != id.seed)
        fail("--checkpoint: folder '", dir, "' belongs to a run of '", was.cfg, "' with seed ", was.seed, ", not '",
             id.cfg, "' with seed ", id.seed, "; give another folder");
      if (was.grid != id.grid)
        std::cerr << "tiletrain: note: resuming a run trained on grid " << was.grid << " on grid " << id.grid
                  << ": it goes on, but no longer bit for bit as the run would have on " << was.grid << "\n";
    } catch (const nlohmann::json::exception& e) {
      fail(run_json.string(), ": not a checkpoint folder's run.json (", e.what(), ")");
    }
  } else if (!held.empty() && !resume) {
    fail("--checkpoint: folder '", dir, "' already holds checkpoints (newest ", held.back().filename().string(),
         "); continue that run with --resume ", dir, ", or give another folder");
  }
  const nlohmann::json j = {{"cfg", id.cfg}, {"seed", id.seed}, {"grid", id.grid}};
  write_file_atomically(run_json.string(), [&](std::ostream& out) { out << j.dump(2) << "\n"; });
}

CheckpointFolder& CheckpointFolder::operator=(CheckpointFolder&& o) noexcept {
  std::swap(fd_, o.fd_);
  return *this;
}

CheckpointFolder::~CheckpointFolder() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) != 0) {  // no holder named once released (best effort)
  }
  ::close(fd_);  // releases the flock
}

CheckpointWriter::CheckpointWriter(const std::string& dir, int keep, const CheckpointMeta& meta, int64_t seen)
    : dir_(dir),
      tmp_((fs::path(dir) / (".tmp-" + step_name(meta.step))).string()),
      final_((fs::path(dir) / step_name(meta.step)).string()),
      keep_(keep),
      meta_(meta) {
  if (keep < 1) fail("--keep-checkpoints must be at least 1");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create checkpoint folder '", dir, "': ", ec.message());
  fs::remove_all(tmp_, ec);
  fs::create_directories(tmp_, ec);
  if (ec) fail("cannot create '", tmp_, "': ", ec.message());
  weights_ =
      std::make_unique<WeightsWriter>((fs::path(tmp_) / "weights").string(), seen, "a checkpoint into '" + dir + "'");
  momentum_ = std::make_unique<AtomicFile>((fs::path(tmp_) / "momentum").string());
  const uint64_t n = uint64_t(meta.params);
  momentum_->out().write(kMomentumMagic, sizeof kMomentumMagic);
  momentum_->out().write(reinterpret_cast<const char*>(&n), sizeof n);
}

CheckpointWriter::~CheckpointWriter() {
  if (done_) return;
  weights_.reset();
  momentum_.reset();
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void CheckpointWriter::write_momentum(const Params& p, const LayerSpec& l, std::span<const float> momentum) {
  const ParamSlice& s = p.slices[size_t(l.index)];
  const int64_t n = s.weights + s.n_weights - s.biases;
  if (s.biases != momentum_written_ || int64_t(momentum.size()) < n)
    fail("internal: layer ", l.index, "'s momentum given out of order or short");
  momentum_->out().write(reinterpret_cast<const char*>(momentum.data()), std::streamsize(n * sizeof(float)));
  momentum_written_ += n;
}

void CheckpointWriter::commit(const NetSpec& net) {
  if (momentum_written_ != meta_.params)
    fail("internal: a checkpoint closed after ", momentum_written_, " of ", meta_.params, " parameters");
  weights_->commit(net);
  momentum_->commit();
  const nlohmann::json j = {{"step", meta_.step}, {"seed", meta_.seed}, {"cfg", meta_.cfg}, {"params", meta_.params}};
  write_file_atomically((fs::path(tmp_) / "meta.json").string(), [&](std::ostream& out) { out << j.dump(2) << "\n"; });
  std::error_code ec;
  fs::remove_all(final_, ec);
  fs::rename(tmp_, final_, ec);
  if (ec) fail("cannot rename '", tmp_, "' to '", final_, "': ", ec.message());
  done_ = true;
  std::vector<fs::path> all = checkpoints(dir_);
  for (size_t i = 0; i + size_t(keep_) < all.size(); ++i) fs::remove_all(all[i], ec);
}

void save_checkpoint(const std::string& dir, int keep, const NetSpec& net, const Params& params,
                     std::span<const float> momentum, const CheckpointMeta& meta) {
  if (momentum.size() != params.values.size())
    fail("internal: momentum of ", momentum.size(), " values for ", params.values.size(), " parameters");
  CheckpointWriter w(dir, keep, meta, params.seen);
  for (const auto& l : net.layers)
    if (l.has_params()) {
      w.write_weights(params, l);
      w.write_momentum(params, l, momentum.subspan(size_t(params.slices[size_t(l.index)].biases)));
    }
  w.commit(net);
}

Checkpoint load_checkpoint(const std::string& dir, const NetSpec& net, Params& params) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("--resume: '", dir, "' is not a folder");
  const std::vector<fs::path> all = checkpoints(dir);
  if (all.empty()) fail("--resume: no checkpoint in '", dir, "' (expected folders step-N with meta.json)");
  Checkpoint c;
  c.path = all.back().string();
  const std::string meta_path = (all.back() / "meta.json").string();
  try {
    std::ifstream in(meta_path);
    const nlohmann::json j = nlohmann::json::parse(in);
    c.meta.step = json_whole(j.at("step"), 0, INT64_MAX, meta_path + ": step");
    c.meta.seed = json_unsigned(j.at("seed"), meta_path + ": seed");
    c.meta.cfg = j.at("cfg").get<std::string>();
    c.meta.params = json_whole(j.at("params"), 0, INT64_MAX, meta_path + ": params");
  } catch (const nlohmann::json::exception& e) {
    fail(meta_path, ": not a checkpoint's meta.json (", e.what(), ")");
  }
  if (c.meta.params != params.size())
    fail(c.path, ": a checkpoint of '", c.meta.cfg, "' with ", c.meta.params, " parameters; '", net.path, "' has ",
         params.size());
  load_weights(params, net, (all.back() / "weights").string());
  const std::string mpath = (all.back() / "momentum").string();
  std::ifstream in(mpath, std::ios::binary);
  char magic[sizeof kMomentumMagic];
  uint64_t n = 0;
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMomentumMagic, sizeof magic) != 0 ||
      !in.read(reinterpret_cast<char*>(&n), sizeof n))
    fail(mpath, ": not a momentum file");
  if (n != uint64_t(params.size())) fail(mpath, ": ", n, " momentum values for ", params.size(), " parameters");
  c.momentum.resize(n);
  int64_t at = 0;  // floats read or skipped
  for (const auto& [b, e] : filled_pieces(params.unfilled, 0, int64_t(n))) {
    in.seekg((b - at) * int64_t(sizeof(float)), std::ios::cur);
    in.read(reinterpret_cast<char*>(c.momentum.data() + b), std::streamsize((e - b) * int64_t(sizeof(float))));
    at = e;
  }
  const std::streamoff end = in.tellg();
  in.seekg(0, std::ios::end);
  if (!in || in.tellg() - end != std::streamoff((int64_t(n) - at) * int64_t(sizeof(float))))
    fail(mpath, ": truncated or oversized (", n, " values expected)");
  return c;
}

}  // namespace tt
