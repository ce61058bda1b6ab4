#include "app/commands.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/synthetic.hpp"
#include "engine/checkpoint.hpp"
#include "engine/kernel_table.hpp"
#include "engine/trainer.hpp"
#include "engine/verify.hpp"
#include "layers/fma_probe.hpp"
#include "layers/own_conv.hpp"
#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "tiling/plan.hpp"
#include "util/error.hpp"
#include "util/median.hpp"
#include "util/sys.hpp"

namespace tt {

std::pair<int, int> parse_pair(const std::string& s, const char* what) {
  // Digits only (no sign, no blanks), each number at most 1,000,000: a grid or map size
  // beyond that is a typo, and must not wrap around an int.
  const size_t x = s.find_first_of("xX");
  auto number = [&](const std::string& d) {
    if (d.empty() || d.size() > 7 || d.find_first_not_of("0123456789") != std::string::npos) return -1;
    const int v = std::stoi(d);
    return v >= 1 && v <= 1000000 ? v : -1;
  };
  const int a = x == std::string::npos ? -1 : number(s.substr(0, x));
  const int b = x == std::string::npos ? -1 : number(s.substr(x + 1));
  if (a < 0 || b < 0) fail(what, " '", s, "' must look like RxC with numbers from 1 to 1000000, e.g. 2x2");
  return {a, b};
}

NetSpec load_run_net(const RunOptions& o) {
  omp_set_num_threads(o.threads);
  NetSpec net = load_net(o.cfg);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");  // said by the first process only
  if (!rank || std::string(rank) == "0")
    for (const std::string& w : net.warnings) std::fprintf(stderr, "tiletrain: warning: %s\n", w.c_str());
  if (o.batch > 0) {
    net.batch = o.batch;
    net.subdivisions = 1;
  }
  if (o.subdivisions > 0) net.subdivisions = o.subdivisions;
  if (net.batch % net.subdivisions != 0)
    fail("--subdivisions ", net.subdivisions, ": a batch of ", net.batch,
         " does not split into that many micro-batches (it must divide the batch)");
  if (!o.size.empty()) {
    auto [h, w] = parse_pair(o.size, "--size");
    resize_net(net, h, w);
  }
  return net;
}

// Shared by the training subcommands (commands.hpp).

TailMode tail_mode(const RunOptions& o, const NetSpec& net) {
  if (o.tail != "auto") return parse_tail_mode(o.tail);
  const auto [rows, cols] = parse_pair(o.grid, "--grid");
  const bool split =
      rows * cols > 1 && o.replicas == 0 && tail_has_filter_blocks(net, resolve_cut(net, o.cut, rows, cols));
  return split ? TailMode::Filters : TailMode::Root;
}

TrainOptions train_options(const RunOptions& o, const NetSpec& net) {
  TrainOptions t;
  std::tie(t.rows, t.cols) = parse_pair(o.grid, "--grid");
  t.groups = o.groups;
  t.cut = o.cut;
  t.bn = o.bn == "frozen" ? BnMode::Frozen : BnMode::Sync;
  t.seed = o.seed;
  t.tiles_per_rank = o.tiles_per_rank;
  t.ranks_per_device = o.ranks_per_device;
  t.replicas = o.replicas;
  t.tail = tail_mode(o, net);
  t.low_memory = o.low_memory;
  t.kernels = parse_kernel_path(o.kernels);
  if (!o.row_weights.empty()) t.split.rows = parse_weights(o.row_weights, t.rows, "--row-weights");
  if (!o.col_weights.empty()) t.split.cols = parse_weights(o.col_weights, t.cols, "--col-weights");
  t.features = parse_backward_features(o.backward_features);
  t.overlap = parse_overlap(o.overlap);
  return t;
}

TrainOptions inference_options(const RunOptions& o, const NetSpec& net) {
  TrainOptions t = train_options(o, net);
  t.keep_formatted_weights = true;  // no updates: formatted once, not before every forward
  return t;
}

// The warnings every subcommand prints once (root only): a CPU without a fast path, and
// any convolution pass that would run a reference kernel.
void print_kernel_warnings(const std::vector<KernelUse>& uses) {
  for (const std::string& w : {slow_cpu_warning(), reference_kernel_warning(uses)})
    if (!w.empty()) std::fprintf(stderr, "tiletrain: %s\n", w.c_str());
}

void print_kernel_warnings(const Trainer& t) {
  if (t.root()) print_kernel_warnings(t.kernel_uses());
}

Params params_to_fill(const NetSpec& net, const RunOptions& o, const Comm& comm) {
  Params params(net);
  params.unfilled = Trainer::weights_not_kept(net, params, train_options(o, net), comm.rank(), comm.size());
  return params;
}

// Random initial weights from the seed, or a Darknet .weights file.
static Params start_params(const NetSpec& net, const RunOptions& o, const Comm& comm, const std::string& weights_in) {
  Params params = params_to_fill(net, o, comm);
  if (weights_in.empty())
    init_params(params, net, o.seed);
  else
    load_weights(params, net, weights_in);
  return params;
}

Start start_run(const NetSpec& net, RunOptions& o, const Comm& comm, const RunFiles& f) {
  if (f.resume.empty()) return {start_params(net, o, comm, f.weights_in), 0, {}};
  if (!f.weights_in.empty()) fail("--weights and --resume exclude each other (a checkpoint has its own weights)");
  Start s{params_to_fill(net, o, comm), 0, {}};
  Checkpoint c = load_checkpoint(f.resume, net, s.params);
  s.step = c.meta.step;
  s.momentum = std::move(c.momentum);
  o.seed = c.meta.seed;  // data order, augmentation and dropout continue as they were
  return s;
}

static const RunOptions& checked(const RunOptions& o, Comm& comm, const RunFiles& f) {
  if (!f.weights_out.empty() && comm.rank() == 0) check_can_write(f.weights_out);
  return o;
}

static CheckpointFolder claim_checkpoints(const RunOptions& o, const NetSpec& net, Comm& comm, const RunFiles& f) {
  if (f.checkpoint_dir.empty() || comm.rank() != 0) return {};
  const auto [rows, cols] = parse_pair(o.grid, "--grid");
  // What decides the bits besides cfg and seed: the grid, the micro-batches (batch-norm's
  // statistics) and whether copies sum by micro-batch (not how many copies).
  const RunIdentity id{
      .cfg = std::filesystem::absolute(o.cfg).lexically_normal().string(),
      .seed = o.seed,
      .grid = std::to_string(rows) + "x" + std::to_string(cols) +
              (net.subdivisions > 1 ? ", " + std::to_string(net.subdivisions) + " micro-batches" : "") +
              (o.replicas ? ", data parallel" : "") +
              (tail_mode(o, net) == TailMode::Filters ? ", filter blocks after the cut" : "")};
  return CheckpointFolder(f.checkpoint_dir, id, f.resume);
}

TrainingRun::TrainingRun(const RunOptions& run, Comm& comm, const RunFiles& f)
    : o(checked(run, comm, f)),
      net(load_run_net(o)),
      start(start_run(net, o, comm, f)),
      checkpoints(claim_checkpoints(o, net, comm, f)),
      params(start.params),
      trainer(net, params, train_options(o, net), comm) {
  if (!start.momentum.empty()) trainer.restore_momentum(start.momentum);
  ZeroPageFloats().swap(start.momentum);  // the trainer holds its part now
  trainer.set_step(start.step);
  if (trainer.root() && start.step > 0) std::printf("resumed at step %lld\n", (long long)start.step);
  print_kernel_warnings(trainer);
}

void checkpoint_if_due(Trainer& tr, const NetSpec& net, Params& params, const RunOptions& o, const RunFiles& f,
                       int64_t done, bool last) {
  if (f.checkpoint_dir.empty() || (done % f.checkpoint_every != 0 && !last)) return;
  const double t0 = now_s();
  std::optional<CheckpointWriter> w;
  if (tr.root())
    w.emplace(f.checkpoint_dir, f.keep_checkpoints,
              CheckpointMeta{.step = done, .seed = o.seed, .cfg = o.cfg, .params = params.size()}, params.seen);
  tr.save_layers({.weights = [&](const LayerSpec& l) { w->write_weights(params, l); },
                  .momentum = [&](const LayerSpec& l, std::span<const float> m) { w->write_momentum(params, l, m); }});
  if (!tr.root()) return;
  w->commit(net);
  std::printf("checkpoint of step %lld written into %s (%.2f s)\n", (long long)done, f.checkpoint_dir.c_str(),
              now_s() - t0);
  std::fflush(stdout);
}

void save_weights_if_asked(Trainer& tr, const NetSpec& net, const Params& params, const RunFiles& f) {
  if (f.weights_out.empty()) return;
  std::optional<WeightsWriter> w;
  if (tr.root()) w.emplace(f.weights_out, params.seen);
  tr.save_layers({.weights = [&](const LayerSpec& l) { w->write(params, l); }, .momentum = {}});
  if (!tr.root()) return;
  w->commit(net);
  std::printf("saved %s\n", f.weights_out.c_str());
  std::fflush(stdout);
}

namespace {

std::string shape_str(const Shape& s) {
  return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}

}  // namespace

int cmd_info(const RunOptions& o) {
  NetSpec net = load_run_net(o);
  const DnnlContext ctx(parse_kernel_path(o.kernels));
  const std::vector<KernelUse> kernels = planned_kernels(net, ctx);
  print_kernel_warnings(kernels);
  std::printf("%s: input %s, batch %d (subdivisions %d), lr %g, momentum %g, decay %g\n", net.path.c_str(),
              shape_str(net.input()).c_str(), net.batch, net.subdivisions, net.learning_rate, net.momentum, net.decay);
  std::printf("%4s %-16s %-6s %-6s %-14s %-14s %11s %9s %10s\n", "#", "layer", "k/s", "act", "input", "output",
              "params", "GFLOPs", "act MB");
  double flops = 0, mem = 0;
  int64_t params = 0;
  for (const auto& l : net.layers) {
    char ks[16] = "";
    if (l.spatial()) std::snprintf(ks, sizeof ks, "%d/%d", l.window().size, l.window().stride);
    const char* act = l.is(kConvKind) || l.is(kConnectedKind) ? act_name(l.activation()) : "";
    std::string name = l.type_name();
    if (l.is(kConvKind) && l.conv().groups > 1)
      name = l.conv().groups == l.in.c && l.conv().groups == l.out.c ? "depthwise"
                                                                     : "conv g" + std::to_string(l.conv().groups);
    if (l.batch_normalize()) name += "+bn";
    const double mb = 4.0 * net.batch * l.out.size() / 1048576.0;
    std::printf("%4d %-16s %-6s %-6s %-14s %-14s %11lld %9.3f %10.1f\n", l.index, name.c_str(), ks, act,
                shape_str(l.in).c_str(), shape_str(l.out).c_str(), (long long)l.param_count(),
                l.forward_flops() * net.batch / 1e9, mb);
    flops += l.forward_flops() * net.batch;
    mem += mb;
    params += l.param_count();
  }
  std::printf(
      "total: %lld parameters (%.1f MB), %.2f GFLOPs forward per batch (x3 for a training step), %.1f MB of "
      "layer outputs per batch\n",
      (long long)params, params * 4 / 1048576.0, flops / 1e9, mem);
  std::printf("cpu: %s%s; kernels %s; maps in blocks of %d channels; own kernels run %s\n", cpu_isa_name().c_str(),
              full_width_avx512_fma() ? " (two full-width 512-bit FMA units)" : "", kernel_path_name(ctx.config.path),
              ctx.config.block, own_conv_target().c_str());
  std::printf("%4s %-20s %-20s %-20s\n", "#", "forward", "backward-data", "backward-weights");
  for (size_t i = 0; i < kernels.size();) {
    const int layer = kernels[i].layer;
    std::string col[3] = {"-", "-", "-"};
    for (; i < kernels.size() && kernels[i].layer == layer; ++i) col[int(kernels[i].pass)] = kernels[i].impl;
    std::printf("%4d %-20s %-20s %-20s\n", layer, col[0].c_str(), col[1].c_str(), col[2].c_str());
  }
  return 0;
}

int cmd_bench(const RunOptions& o, Comm& comm, const BenchOptions& b) {
  if (!b.trace.empty() && comm.rank() == kRoot) try {  // before the run, not after it
      check_can_write(b.trace);
    } catch (const Error& e) {
      fail("--trace: ", e.what());
    }
  FILE* const human = o.json ? stderr : stdout;  // with --json, stdout holds the JSON line alone
  const int steps = b.steps, warmup = b.warmup;
  NetSpec net = load_run_net(o);
  Params params = params_to_fill(net, o, comm);
  init_params(params, net, o.seed);
  Trainer trainer(net, params, train_options(o, net), comm);
  print_kernel_warnings(trainer);
  const bool root = trainer.root();
  std::vector<float> input, truth;  // read on the root process only
  if (root) synthetic_batch(net, net.batch, o.seed, input, truth);
  for (int i = 0; i < warmup; ++i) trainer.train_step(input.data(), truth.data());
  if (!b.trace.empty()) trainer.trace().start(comm);
  std::vector<double> step, fwd, bwd, upd, rel, halo, wts, io, hx, hxf, hov;
  std::vector<LayerTimes> layer_sum(net.layers.size());
  for (int i = 0; i < steps; ++i) {
    trainer.reset_times();
    trainer.train_step(input.data(), truth.data());
    StepTimes t = trainer.times();
    if (b.layers) {
      const std::vector<LayerTimes> lt = trainer.layer_times();
      for (size_t l = 0; l < lt.size(); ++l) layer_sum[l] += lt[l];
    }
    step.push_back(t.total);
    fwd.push_back(t.fwd);
    bwd.push_back(t.bwd);
    upd.push_back(t.update);
    rel.push_back(t.reload);
    halo.push_back(t.halo);
    wts.push_back(t.weights);
    io.push_back(t.io);
    hx.push_back(t.halo_exchange);
    hxf.push_back(t.halo_exchange_fwd);
    hov.push_back(t.halo_overlap);
    if (!o.json && root)
      std::fprintf(human,
                   "step %d: %.4f s (forward %.4f, backward %.4f, halo %.4f, weights %.4f, io %.4f, update %.4f)\n", i,
                   t.total, t.fwd, t.bwd, t.halo, t.weights, t.io, t.update);
  }
  if (!b.trace.empty()) {
    const nlohmann::json about{
        {"cfg", o.cfg},       {"grid", o.grid},       {"groups", o.groups},   {"steps", steps},
        {"batch", net.batch}, {"ranks", comm.size()}, {"threads", o.threads}, {"low_memory", o.low_memory}};
    const size_t spans = write_trace(b.trace, trainer.trace(), comm, about);
    if (root)
      std::fprintf(human,
                   "wrote %s: %zu spans of %d step(s) on %d rank(s) (open it in ui.perfetto.dev or chrome://tracing, "
                   "or draw it with scripts/plot_trace.py)\n",
                   b.trace.c_str(), spans, steps, comm.size());
  }
  // Per-rank medians and memory, collected on every rank.
  const double rss = peak_rss_mb();
  const auto all_step = comm.all_gather(median(step)), all_fwd = comm.all_gather(median(fwd)),
             all_bwd = comm.all_gather(median(bwd)), all_halo = comm.all_gather(median(halo)),
             all_wts = comm.all_gather(median(wts)), all_io = comm.all_gather(median(io)),
             all_upd = comm.all_gather(median(upd)), all_rel = comm.all_gather(median(rel)),
             all_rss = comm.all_gather(rss), all_hx = comm.all_gather(median(hx)),
             all_hxf = comm.all_gather(median(hxf)), all_hov = comm.all_gather(median(hov)),
             all_poll = comm.all_gather(comm.busy_poll_s());
  const Trainer::Memory mem = trainer.memory();
  const auto all_maps = comm.all_gather(mem.maps_mb), all_deltas = comm.all_gather(mem.deltas_mb),
             all_filters = comm.all_gather(mem.filters_mb);
  const auto hosts = comm.all_hosts();
  // Mean seconds per step of each layer and pass, [rank][layer].
  std::vector<std::vector<LayerTimes>> layer_mean;
  if (b.layers) {
    layer_mean.assign(size_t(comm.size()), std::vector<LayerTimes>(layer_sum.size()));
    for (size_t l = 0; l < layer_sum.size(); ++l)
      for (const LayerPass& p : kLayerPasses) {
        const auto all = comm.all_gather(layer_sum[l].*p.time / steps);
        for (size_t r = 0; r < all.size(); ++r) layer_mean[r][l].*p.time = all[r];
      }
  }
  if (!root) return 0;
  for (size_t r = 0; r < layer_mean.size(); ++r) {
    std::fprintf(human, "rank %zu: mean ms per step  %-14s", r, "layer");
    for (const LayerPass& p : kLayerPasses) std::fprintf(human, " %13s", p.name);
    std::fprintf(human, "\n");
    LayerTimes total;
    for (size_t l = 0; l < layer_mean[r].size(); ++l) {
      std::fprintf(human, "%25zu %-14s", l, net.layers[l].type_name());
      for (const LayerPass& p : kLayerPasses) std::fprintf(human, " %13.3f", 1e3 * (layer_mean[r][l].*p.time));
      std::fprintf(human, "\n");
      total += layer_mean[r][l];
    }
    std::fprintf(human, "%25s %-14s", "", "total");
    for (const LayerPass& p : kLayerPasses) std::fprintf(human, " %13.3f", 1e3 * (total.*p.time));
    std::fprintf(human, "\n");
  }
  std::map<std::string, double> per_host;
  for (size_t r = 0; r < hosts.size(); ++r) per_host[hosts[r]] += all_rss[r];
  double host_max = 0;
  for (auto& [h, v] : per_host) host_max = std::max(host_max, v);
  const double rss_max = *std::max_element(all_rss.begin(), all_rss.end());
  auto mx = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::fprintf(
      human,
      "%-5s %-12s %8s %8s %8s %8s %8s %8s %8s | %8s %7s %7s %8s %7s (MB; other = kernel scratch %.1f, libraries, "
      "MPI; rank 0 also holds the input and whole maps at the cut)\n",
      "rank", "host", "step s", "fwd", "bwd", "halo", "weights", "io", "update", "peak MB", "maps", "deltas", "filters",
      "other", mem.scratch_mb);
  for (size_t r = 0; r < hosts.size(); ++r)
    std::fprintf(human, "%-5zu %-12s %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f | %8.1f %7.1f %7.1f %8.1f %7.1f\n", r,
                 hosts[r].substr(0, 12).c_str(), all_step[r], all_fwd[r], all_bwd[r], all_halo[r], all_wts[r],
                 all_io[r], all_upd[r], all_rss[r], all_maps[r], all_deltas[r], all_filters[r],
                 all_rss[r] - all_maps[r] - all_deltas[r] - all_filters[r]);
  std::fprintf(human,
               "median step %.4f s over %d steps, %d rank(s) x %d thread(s), grid %s, groups %s%s; peak RSS %.1f MB "
               "(largest rank), %.1f MB (largest host sum)\n",
               median(step), steps, comm.size(), o.threads, o.grid.c_str(), o.groups.c_str(),
               o.replicas ? (", " + std::to_string(o.replicas) + " data-parallel copies").c_str() : "", rss_max,
               host_max);
  if (o.json) {
    nlohmann::json j{{"cfg", o.cfg},
                     {"batch", net.batch},
                     {"threads", o.threads},
                     {"ranks", comm.size()},
                     {"hosts", hosts},
                     {"peak_rss_mb_by_host", per_host},
                     {"grid", o.grid},
                     {"replicas", o.replicas},
                     {"groups", o.groups},
                     {"low_memory", o.low_memory},
                     {"steps", steps},
                     {"cut", trainer.cut()},  // layers [0, cut) tiled, the rest on rank 0
                     {"step_s", median(step)},
                     {"min_step_s", *std::min_element(step.begin(), step.end())},
                     {"all_step_s", step},
                     {"fwd_s", mx(all_fwd)},
                     {"bwd_s", mx(all_bwd)},
                     {"update_s", mx(all_upd)},
                     {"reload_s", mx(all_rel)},  // update_s's re-formatting of the weights for the kernels
                     {"halo_s", mx(all_halo)},
                     {"halo_exchange_s", mx(all_hx)},       // halo_s without the batch-norm sums' waits
                     {"halo_exchange_fwd_s", mx(all_hxf)},  // its forward part
                     {"halo_overlap_s", mx(all_hov)},       // compute while halo messages were in flight
                     {"backward_features", o.backward_features},
                     {"overlap", o.overlap},
                     {"weights_s", mx(all_wts)},
                     {"io_s", mx(all_io)},
                     {"busy_poll_s_by_rank", all_poll},  // how long a waiting rank polls before it naps
                     {"peak_rss_mb", rss},
                     {"peak_rss_mb_max", rss_max},
                     {"peak_rss_mb_host", host_max},
                     {"maps_mb_max", mx(all_maps)},
                     {"deltas_mb_max", mx(all_deltas)},
                     {"filters_mb", mem.filters_mb},
                     {"isa", cpu_isa_name()},
                     {"kernel_path", kernel_path_name(trainer.kernel_config().path)},
                     {"channel_block", trainer.kernel_config().block}};
    nlohmann::json ks = nlohmann::json::array();
    for (const KernelUse& u : trainer.kernel_uses())
      ks.push_back({{"layer", u.layer}, {"pass", conv_pass_name(u.pass)}, {"kernel", u.impl}});
    j["kernels"] = ks;
    if (b.layers) {
      nlohmann::json lj = nlohmann::json::array();
      for (const auto& rank : layer_mean) {
        nlohmann::json rj = nlohmann::json::array();
        for (size_t l = 0; l < rank.size(); ++l) {
          nlohmann::json e{{"layer", l}, {"type", net.layers[l].type_name()}};
          for (const LayerPass& p : kLayerPasses) e[std::string(p.name) + "_s"] = rank[l].*p.time;
          rj.push_back(e);
        }
        lj.push_back(rj);
      }
      j["layer_times"] = lj;  // [rank][layer]: mean seconds per step of each pass
    }
    std::cout << j.dump() << std::endl;
  }
  return 0;
}

int cmd_verify(const RunOptions& o, Comm& comm, int steps) {
  const NetSpec net = load_run_net(o);
  const VerifyReport r = verify_training(net, train_options(o, net), comm, o.seed, steps,
                                         [](const Trainer& t) { print_kernel_warnings(t); });
  double verdict = 0;
  if (comm.rank() == kRoot) {
    std::printf(
        "verify %s: grid %s, groups %s, cut %d, size %dx%d, batch %d in %d micro-batch(es), %d step(s), bn %s%s%s\n",
        net.path.c_str(), o.grid.c_str(), o.groups.c_str(), r.cut, net.height, net.width, net.batch, net.subdivisions,
        steps, o.bn.c_str(), o.low_memory ? ", low memory" : "",
        o.replicas ? (", " + std::to_string(o.replicas) + " data-parallel copies").c_str() : "");
    std::printf(
        "  largest difference per kind of tensor over its scale (gradients and tensors after a step: over the\n"
        "  larger of ||untiled|| and the bound shown; every step starts both runs from the same weights and\n"
        "  optimizer state; engine/verify.hpp says why each scale and tolerance):\n");
    for (int k = 0; k < VerifyReport::kKinds; ++k) {
      const VerifyReport::Worst& w = r.worst[size_t(k)];
      char where[32] = "";
      if (w.layer >= 0) std::snprintf(where, sizeof where, ", layer %d", w.layer);
      std::printf("    %-23s %-9.3g over %-35s tolerance %g%s%s\n", VerifyReport::name(k), w.diff,
                  VerifyReport::scale(k), VerifyReport::tolerance(k), where, r.ok(k) ? "" : "  <-- over");
    }
    std::printf("%s\n", r.ok() ? "OK: tiled training matches untiled" : "MISMATCH");
    verdict = r.ok() ? 0 : 1;
  }
  comm.broadcast(&verdict, 1, kRoot);
  return verdict == 0 ? 0 : 1;
}

}  // namespace tt
