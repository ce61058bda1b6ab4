// tiletrain command line: parses arguments, runs a subcommand, and is the only place
// where errors become messages and exit codes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <system_error>

#include "app/commands.hpp"
#include "app/launch.hpp"
#include "comm/mpi_comm.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"
#include "util/sys.hpp"

namespace {
// CLI11 takes "nan" for a number and wraps "-1" or 2^70 into an unsigned one: these say no.
const CLI::Validator kSeconds(
    [](std::string& s) {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      return *end == 0 && std::isfinite(v) && v >= 0 ? std::string() : "'" + s + "' is not a number of seconds >= 0";
    },
    "SECONDS");
const CLI::Validator kUnsigned64(
    [](std::string& s) {
      errno = 0;
      char* end = nullptr;
      const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
      std::strtoull(s.c_str(), &end, 10);
      return digits && errno == 0 ? std::string() : "'" + s + "' is not a whole number from 0 to 2^64-1";
    },
    "UINT64");
// The release: bumped with each version users are told about.
constexpr const char* kVersion = "0.16";

std::string version_text() {
  const dnnl_version_t* d = dnnl_version();
  return std::string("tiletrain ") + kVersion + " (oneDNN " + std::to_string(d->major) + "." +
         std::to_string(d->minor) + "." + std::to_string(d->patch) + ", CLI11 " + CLI11_VERSION + ")";
}

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest of `names` to a misspelt `word`, or "" when none is close.
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& n : names)
    if (const size_t d = edit_distance(word, n); d < best_d) best = n, best_d = d;
  return best;
}

// A misspelt subcommand or option in `words` (a command and its arguments), said with a
// suggestion; 0 when every word is known. Words after "--" are not options.
int unknown_words(CLI::App& app, const std::vector<std::string>& words) {
  std::vector<std::string> commands;
  for (const CLI::App* c : app.get_subcommands({})) commands.push_back(c->get_name());
  if (words.empty() || words[0][0] == '-') return 0;
  const std::string& command = words[0];
  if (std::find(commands.begin(), commands.end(), command) == commands.end()) {
    const std::string near = closest(command, commands);
    std::cerr << "tiletrain: unknown command '" << command << "'"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\nRun tiletrain --help for the commands.\n";
    return 2;
  }
  const CLI::App* sub = app.get_subcommand(command);
  std::vector<std::string> options;
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& n : o->get_lnames()) options.push_back("--" + n);
  for (size_t i = 1; i < words.size(); ++i) {
    std::string word = words[i];
    if (word == "--") break;
    if (word.rfind("--", 0) != 0) continue;
    word = word.substr(0, word.find('='));
    if (std::find(options.begin(), options.end(), word) != options.end()) continue;
    const std::string near = closest(word, options);
    std::cerr << "tiletrain " << command << ": unknown option '" << word << "'"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\nRun tiletrain " << command
              << " --help for its options.\n";
    return 2;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace tt;
  CLI::App app{"tiletrain: train CNNs split into spatial tiles, exactly as one big machine would"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);
  RunOptions o;
  int steps = 10;
  MpiOptions mpi_options;

  auto common = [&](CLI::App* c, bool tiling) {
    c->add_option("--cfg", o.cfg, "Darknet .cfg file")->required();
    c->add_option("--threads", o.threads,
                  "threads per process (default: the cores this host lets it use, shared among the processes mpirun "
                  "started on it)")
        ->check(CLI::Range(1, 1024));
    c->add_option("--batch", o.batch, "batch size (default: the cfg's)")->check(CLI::PositiveNumber);
    c->add_option("--subdivisions", o.subdivisions,
                  "micro-batches per batch, each with its own batch-norm statistics (default: the cfg's; 1 with "
                  "--batch)")
        ->check(CLI::PositiveNumber);
    c->add_option("--size", o.size, "input size HxW (default: the cfg's)");
    c->add_option("--kernels", o.kernels,
                  "convolution kernels: auto (oneDNN's JIT where it has one, own elsewhere), onednn, own")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "onednn", "own"}));
    if (!tiling) return;
    c->add_option("--peer-timeout", mpi_options.peer_timeout_s,
                  "under mpirun: seconds without a sign of life from another process (its device, link or process "
                  "gone) before this one stops with an error naming it; 0 waits forever")
        ->capture_default_str()
        ->check(kSeconds);
    c->add_option("--stall-timeout", mpi_options.stall_timeout_s,
                  "under mpirun: seconds every process may wait on the others with no data arriving, all of them "
                  "alive, before the job counts as stuck in its transport and stops with an error; 0 waits forever")
        ->capture_default_str()
        ->check(kSeconds);
    c->add_option("--grid", o.grid, "tile grid RxC")->capture_default_str();
    c->add_option("--groups", o.groups, "layer groups: none, all, or start layers e.g. 0,4,8")->capture_default_str();
    c->add_option("--row-weights", o.row_weights,
                  "split the map's rows unevenly: a weight per grid row, e.g. 2,1 (a device twice as fast gets "
                  "twice the rows); default even");
    c->add_option("--col-weights", o.col_weights, "the same for the grid's columns, e.g. 2,1");
    c->add_option("--backward-features", o.backward_features,
                  "forward values backward needs outside a tile's forward boxes: recompute (forward computes them "
                  "too) or exchange (swapped with the neighbours at the start of each group's backward, as the "
                  "paper does: less compute, more messages)")
        ->capture_default_str()
        ->check(CLI::IsMember({"recompute", "exchange"}));
    c->add_option("--overlap", o.overlap,
                  "at group starts, compute each tile's interior while its halo is in flight: auto (where the halo "
                  "crosses a network link, i.e. comes from another host), on (wherever it comes from another tile; "
                  "also sends the weight gradients in buckets while backward still runs), off")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "on", "off"}));
    c->add_option("--cut", o.cut, "number of leading layers to tile (default: up to the first untileable)");
    c->add_option("--bn", o.bn,
                  "batch-norm across tiles: sync (batch statistics over the whole map, as untiled) or frozen")
        ->check(CLI::IsMember({"sync", "frozen"}));
    c->add_option("--seed", o.seed, "random seed for weights and data")->capture_default_str()->check(kUnsigned64);
    c->add_option("--tiles-per-rank", o.tiles_per_rank, "under mpirun: tiles each process runs (tile t on rank t/K)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    if (c->get_name() != "plan")  // plan has its own, for the cluster it prices
      c->add_option("--ranks-per-device", o.ranks_per_device,
                    "under mpirun: processes per device, consecutive ranks together (default: processes with the "
                    "same host name share a device); with several per device the gradient sum and the weights "
                    "cross each device's link once, not once per process")
          ->check(CLI::PositiveNumber);
    c->add_option("--replicas", o.replicas,
                  "under mpirun: data parallel, one whole copy of the net per process (give the process count), "
                  "each running its share of a batch's micro-batches (--subdivisions, at least one per copy); the "
                  "gradients are summed in micro-batch order, so at the same --threads the result does not "
                  "depend on the count (--replicas 1 on one process gives the same bits); --grid then tiles "
                  "each copy inside its process")
        ->check(CLI::PositiveNumber);
    c->add_option("--tail", o.tail,
                  "where the layers after the cut run: root (whole, on the root process, while the others wait), "
                  "filters (on every process: each convolution's filters split into as many blocks as the grid "
                  "has tiles, block b where tile b runs; those weights are updated where they run and never cross "
                  "a link; the result depends on the grid, not on the process count) or auto (filters when the "
                  "grid has several tiles, without --replicas, and a convolution follows the cut; else root)")
        ->capture_default_str()
        ->check(CLI::IsMember({"root", "filters", "auto"}));
    c->add_flag("--low-memory", o.low_memory,
                "shard the convolution weights, gradients and momentum across processes and keep formatted "
                "weights for the running layer only (less memory per process, more weight traffic)");
  };

  auto* info = app.add_subcommand("info", "layer table: shapes, parameters, GFLOPs, activation memory");
  common(info, false);
  auto* plan = app.add_subcommand(
      "plan",
      "print the tile partition: boxes, halos, redundant FLOPs; with --cluster the predicted step time and "
      "memory per rank, or (--optimize) the best partitions for the cluster");
  common(plan, true);
  PlanOptions po;
  plan->add_flag("--json", o.json, "machine-readable output");
  plan->add_option("--cluster", po.cluster, "cluster file (JSON; tiletrain calibrate under mpirun writes one)");
  plan->add_option("--model", po.model,
                   "device model (tiletrain calibrate --out) for devices of the cluster that have only a profile");
  plan->add_option("--ranks-per-device", po.ranks_per_device,
                   "ranks on each device (cluster/edge.sh run --ranks-per-device); default: spread evenly")
      ->check(CLI::PositiveNumber);
  plan->add_flag("--optimize", po.optimize,
                 "search grids, groupings, cuts, tiles per rank and --low-memory for the fastest partitions that fit");
  plan->add_option("--top", po.top, "with --optimize: how many to print")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  plan->add_flag("--schedule", po.schedule,
                 "also print the steps one training step runs, in order (what the engine executes and the cost "
                 "model prices)");
  plan->add_option("--draw", po.draw,
                   "also draw the partition into this PNG: each group's input map with the tiles' cells and the "
                   "halos they read, and the last tiled output");
  auto* calibrate = app.add_subcommand(
      "calibrate",
      "measure this device's kernels for a cfg (and, under mpirun, every device and link) for plan --cluster");
  common(calibrate, false);
  std::string calibrate_out;
  calibrate
      ->add_option("--out", calibrate_out,
                   "write the device model here (one process) or, under mpirun, the cluster file")
      ->required();
  calibrate->add_option("--steps", steps, "timed steps per map size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* bench = app.add_subcommand("bench", "time training steps on synthetic data");
  common(bench, true);
  BenchOptions bo;
  bench->add_option("--steps", bo.steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--warmup", bo.warmup, "untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  bench->add_flag("--json", o.json, "end with one JSON line");
  bench->add_flag("--layers", bo.layers,
                  "also print each layer's mean time per pass on every rank (with --json: layer_times, per rank; "
                  "scripts/plot_layers.py draws them)");
  bench->add_option("--trace", bo.trace,
                    "write the timed steps as a trace (Chrome/Perfetto JSON: each rank's layers, halo and weight "
                    "exchanges, tail, update; open in ui.perfetto.dev, or draw with scripts/plot_trace.py)");
  auto* train = app.add_subcommand(
      "train", "train a net: on a data set (--data: Fashion-MNIST, IDX files or a Darknet .data) or on synthetic data");
  common(train, true);
  DataOptions data;
  train
      ->add_option("--steps", steps,
                   "training steps (batches): required without --data; with --data, stop after this many "
                   "(default: --epochs whole passes over the training set)")
      ->check(CLI::PositiveNumber);
  train->add_option("--data", data.data,
                    "train on a data set: fashion-mnist, a folder with its four IDX files, or a Darknet .data file "
                    "(a detector's: names= and a label file per picture; a classifier's: labels=, a picture's class "
                    "the label its path contains) (default: synthetic data)");
  train->add_option("--epochs", data.epochs, "with --data: passes over the training set")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--log-every", data.log_every, "with --data: steps between progress lines")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--loss-log", data.loss_log, "with --data: write every step's loss and the accuracy here");
  train->add_option("--metrics", data.metrics,
                    "with --data: one JSON object per logged step (step, epoch, loss, lr, images/s, ETA) and the "
                    "final accuracy, appended when resuming (scripts/plot_metrics.py draws it)");
  RunFiles files;
  train->add_option("--weights", files.weights_in, "Darknet .weights to start from");
  train->add_option("--save-weights", files.weights_out, "write Darknet .weights here at the end (atomically)");
  train->add_option("--checkpoint", files.checkpoint_dir,
                    "write checkpoints (weights, momentum, step) into this folder, atomically");
  train->add_option("--checkpoint-every", files.checkpoint_every, "steps between checkpoints (and one at the end)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--keep-checkpoints", files.keep_checkpoints, "checkpoints kept (the newest)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--resume", files.resume,
                    "continue from the newest checkpoint in this folder (--steps counts from the run's start)");
  train->add_flag("--skip-bad-images", data.skip_bad_images,
                  "with a .data file: leave out, with a warning, a picture that is missing, unreadable or "
                  "above --max-pixels, instead of stopping (every listed picture is checked before training)");
  const char* max_pixels_help =
      "refuse a picture larger than this many pixels from its header, before decoding it (4096x4096 = 16777216 "
      "takes 192 MB as floats)";
  train->add_option("--max-pixels", data.max_pixels, std::string("with a .data file: ") + max_pixels_help)
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--loader-threads", data.loader_threads,
                   "with a .data file: threads that prepare the next batches while one trains")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* detect = app.add_subcommand("detect", "detect objects on pictures with a trained [region]/[yolo] net");
  common(detect, true);
  DetectOptions det;
  detect->add_option("--weights", det.weights, "Darknet .weights")->required();
  detect->add_option("images", det.images, "pictures (JPEG, PNG, ...)")->required();
  detect->add_option("--out", det.out,
                     "write each picture with its boxes, class names and confidences here (PNG; a picture whose "
                     "short side is under 480 pixels scaled up)");
  detect->add_option("--montage", det.montage,
                     "also write one PNG of every picture with its boxes, in a grid, each with its file name (the "
                     "first 100 pictures)");
  detect->add_option("--names", det.names, "class names: a .names file, or a .data file (its names=)");
  detect->add_option("--thresh", det.thresh, "probability threshold")->capture_default_str();
  detect->add_option("--max-pixels", det.max_pixels, max_pixels_help)
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* map = app.add_subcommand("map", "VOC mAP@0.5 of a detector on the valid= pictures of a .data file");
  common(map, true);
  std::string map_weights, map_data;
  map->add_option("--weights", map_weights, "Darknet .weights")->required();
  map->add_option("--data", map_data, "Darknet .data file (valid=, names=, classes=)")->required();
  int64_t map_max_pixels = det.max_pixels;
  map->add_option("--max-pixels", map_max_pixels, max_pixels_help)->capture_default_str()->check(CLI::PositiveNumber);
  auto* verify = app.add_subcommand("verify", "train tiled and untiled from the same start and compare every tensor");
  common(verify, true);
  verify->add_option("--steps", steps, "training steps to compare")->capture_default_str()->check(CLI::PositiveNumber);

  auto* launch =
      app.add_subcommand("launch",
                         "run a command on several processes, here or on the hosts of a hosts file, through mpirun "
                         "(works out -np, the tiles per process and mpirun's options): launch --local 4 -- train ...");
  LaunchOptions lo;
  launch->add_option("--local", lo.local, "run this many processes on this machine")->check(CLI::Range(1, 1024));
  launch->add_option("--hosts", lo.hosts, "hosts file: a host per line, NAME [slots=N] (processes on it, default 1)");
  launch->add_option("--ranks-per-host", lo.ranks_per_host, "processes on every host (instead of the file's slots=)")
      ->check(CLI::Range(1, 1024));
  launch->add_option("--iface", lo.iface,
                     "network interface between the hosts, e.g. eth0 (default: Open MPI's choice)");
  launch->add_option("--binary", lo.binary, "tiletrain's path on the hosts (default: this program's path)");
  launch->add_flag("--dry-run", lo.dry_run, "print the mpirun command instead of running it");
  launch->add_option("command", lo.command, "after --: the tiletrain command and its options")->required();

  if (const int code = unknown_words(app, std::vector<std::string>(argv + 1, argv + argc))) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  CLI::App* const command = app.get_subcommands().front();
  if (*launch) {  // the launched command's words are checked here, not on every process
    if (const int code = unknown_words(app, lo.command)) return code;
  }
  const ThreadShare share = default_threads();
  const bool auto_threads = !*launch && command->count("--threads") == 0;
  if (auto_threads) o.threads = share.threads;
  // Under mpirun every process runs this; an error on any of them ends all of them.
  std::unique_ptr<MpiComm> mpi;
  LocalComm local;
  Comm* comm = &local;
  auto report = [&](const char* kind, const char* what, int code) {
    if (mpi)
      std::cerr << "tiletrain: " << kind << " (rank " << mpi->rank() << " of " << mpi->size() << " on " << mpi->host()
                << "): " << what << std::endl;
    else
      std::cerr << "tiletrain: " << kind << ": " << what << std::endl;
    if (mpi && mpi->size() > 1) mpi->abort(code);
    return code;
  };
  try {
    if (launched_by_mpirun()) {
      mpi = std::make_unique<MpiComm>(&argc, &argv, mpi_options);
      comm = mpi.get();
    }
    // info and plan involve no tiles: under mpirun only rank 0 prints them.
    if ((*info || *plan) && comm->rank() != 0) return 0;
    if (auto_threads && comm->rank() == 0 && !*info && !*plan && !*launch)
      std::fprintf(
          stderr,
          "tiletrain: %d thread(s) per process: %d core(s)%s, %d process(es) on this host (--threads N to change)\n",
          o.threads, share.cores,
          std::isfinite(share.quota) ? (", a CPU quota of " + std::to_string(share.quota).substr(0, 4)).c_str() : "",
          share.local);
    if (*launch) return cmd_launch(lo);
    if (*info) return cmd_info(o);
    if (*plan) return cmd_plan(o, po);
    if (*calibrate) return cmd_calibrate(o, *comm, calibrate_out, calibrate->count("--steps") ? steps : 3);
    if (*bench) return cmd_bench(o, *comm, bo);
    if (*train && !data.data.empty()) {
      data.max_steps = train->count("--steps") ? steps : 0;
      const bool darknet = data.data.size() > 5 && data.data.substr(data.data.size() - 5) == ".data";
      if (!darknet) return cmd_train_data(o, *comm, data, files);
      const NetSpec net = load_run_net(o);  // a .data set: the net's loss says which kind
      const bool detector = std::any_of(net.layers.begin(), net.layers.end(),
                                        [](const LayerSpec& l) { return l.detector() || l.is(tt::kDetectionKind); });
      return detector ? cmd_train_detection(o, *comm, data, files) : cmd_train_classifier(o, *comm, data, files);
    }
    if (*detect) return cmd_detect(o, *comm, det);
    if (*map) return cmd_map(o, *comm, map_weights, map_data, map_max_pixels);
    if (*train) {
      if (!train->count("--steps")) throw tt::Error("train: --steps is required without --data");
      return cmd_train(o, *comm, steps, files);
    }
    if (*verify) return cmd_verify(o, *comm, steps);
  } catch (const tt::Error& e) {
    return report("error", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report("error",
                  "out of memory: a request for memory was refused (use a smaller --size or --batch, more tiles "
                  "(--grid) or --low-memory)",
                  2);
  } catch (const std::system_error& e) {  // e.g. a thread that could not be started
    return report("error", (std::string("the system refused: ") + e.what()).c_str(), 2);
  } catch (const std::exception& e) {
    return report("internal error", e.what(), 3);
  }
  return 0;
}
