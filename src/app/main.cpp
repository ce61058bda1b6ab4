// tiletrain command line: parses arguments, runs a subcommand, and is the only place
// where errors become messages and exit codes.
#include <CLI/CLI.hpp>

#include <iostream>

#include "app/commands.hpp"
#include "util/error.hpp"

int main(int argc, char** argv) {
  using namespace tt;
  CLI::App app{"tiletrain: train CNNs split into spatial tiles, exactly as one big machine would"};
  app.require_subcommand(1);
  RunOptions o;
  int steps = 10, warmup = 2;
  std::string weights_in, weights_out;

  auto common = [&](CLI::App* c, bool tiling) {
    c->add_option("--cfg", o.cfg, "Darknet .cfg file")->required();
    c->add_option("--threads", o.threads, "threads per process")->check(CLI::PositiveNumber);
    c->add_option("--batch", o.batch, "batch size (default: the cfg's)")->check(CLI::PositiveNumber);
    c->add_option("--size", o.size, "input size HxW (default: the cfg's)");
    if (!tiling) return;
    c->add_option("--grid", o.grid, "tile grid RxC")->capture_default_str();
    c->add_option("--groups", o.groups, "layer groups: none, all, or start layers e.g. 0,4,8")->capture_default_str();
    c->add_option("--cut", o.cut, "number of leading layers to tile (default: up to the first untileable)");
    c->add_option("--bn", o.bn, "batch-norm across tiles: sync (exact) or frozen")->check(CLI::IsMember({"sync", "frozen"}));
    c->add_option("--seed", o.seed, "random seed for weights and data")->capture_default_str();
  };

  auto* info = app.add_subcommand("info", "layer table: shapes, parameters, GFLOPs, activation memory");
  common(info, false);
  auto* plan = app.add_subcommand("plan", "print the tile partition: boxes, halos, redundant FLOPs, memory");
  common(plan, true);
  plan->add_flag("--json", o.json, "machine-readable output");
  auto* bench = app.add_subcommand("bench", "time training steps on synthetic data");
  common(bench, true);
  bench->add_option("--steps", steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--warmup", warmup, "untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  bench->add_flag("--json", o.json, "end with one JSON line");
  auto* train = app.add_subcommand("train", "train on synthetic data");
  common(train, true);
  train->add_option("--steps", steps, "training steps (batches)")->required()->check(CLI::PositiveNumber);
  train->add_option("--weights", weights_in, "Darknet .weights to start from");
  train->add_option("--save-weights", weights_out, "write Darknet .weights here at the end (atomically)");
  auto* verify = app.add_subcommand("verify", "train tiled and untiled from the same start and compare every tensor");
  common(verify, true);
  verify->add_option("--steps", steps, "training steps to compare")->capture_default_str()->check(CLI::PositiveNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*info) return cmd_info(o);
    if (*plan) return cmd_plan(o);
    if (*bench) return cmd_bench(o, steps, warmup);
    if (*train) return cmd_train(o, steps, weights_in, weights_out);
    if (*verify) return cmd_verify(o, steps);
  } catch (const tt::Error& e) {
    std::cerr << "tiletrain: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tiletrain: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
