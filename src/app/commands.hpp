// The tiletrain subcommands. Each returns the process exit code and throws tt::Error
// on bad input; main() turns errors into messages.
#pragma once
#include <cstdint>
#include <string>

#include "comm/comm.hpp"

namespace tt {

struct RunOptions {
  std::string cfg;
  int threads = 1;
  int batch = 0;  // 0: the cfg's
  std::string grid = "1x1";
  std::string groups = "none";
  int cut = -1;
  std::string bn = "sync";
  std::string size;  // HxW; empty: the cfg's
  uint64_t seed = 1;
  bool json = false;
  int tiles_per_rank = 1;
  bool low_memory = false;
  std::string kernels = "auto";  // auto | onednn | own (layers/backend.hpp)
};

int cmd_info(const RunOptions& o);
int cmd_plan(const RunOptions& o);
int cmd_bench(const RunOptions& o, Comm& comm, int steps, int warmup);
int cmd_train(const RunOptions& o, Comm& comm, int steps, const std::string& weights_in,
              const std::string& weights_out);
int cmd_verify(const RunOptions& o, Comm& comm, int steps);

struct DataOptions {
  std::string data;  // "fashion-mnist" or a folder with the four IDX files
  int epochs = 1;
  int max_steps = 0;  // 0: whole epochs
  int log_every = 50;
  std::string loss_log;  // one loss per line, written at the end
};
int cmd_train_data(const RunOptions& o, Comm& comm, const DataOptions& d, const std::string& weights_in,
                   const std::string& weights_out);

}  // namespace tt
