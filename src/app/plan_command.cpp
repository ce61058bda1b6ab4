// `tiletrain plan`: a partition's boxes per tile and layer, its halos, its redundant
// FLOPs and memory; with --cluster its predicted time; --draw, --schedule, --json.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "app/commands.hpp"
#include "engine/schedule.hpp"
#include "tiling/plan.hpp"
#include "tiling/plan_picture.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

// plan --draw's heading: what the partition was made of. (Appended piece by piece: chains
// of + trip GCC 12's -Wrestrict.)
std::string plan_title(const RunOptions& o, const Plan& p) {
  std::string t = o.cfg;
  t.append(": grid ").append(std::to_string(p.rows)).append("x").append(std::to_string(p.cols));
  if (!o.size.empty()) t.append(", --size ").append(o.size);
  if (!o.row_weights.empty()) t.append(", row weights ").append(o.row_weights);
  if (!o.col_weights.empty()) t.append(", column weights ").append(o.col_weights);
  t.append(", layers ").append(std::to_string(p.first)).append("-").append(std::to_string(p.last - 1));
  if (int(p.group_starts.size()) == p.last - p.first) {
    t.append(" tiled, a group per layer");
  } else {
    t.append(" tiled, groups start at");
    for (int s : p.group_starts) t.append(" ").append(std::to_string(s));
  }
  return t;
}

// The input boxes forward reads: one box, or for a node with several inputs each box
// followed by the layer it reads ("[0,8)x[0,8)<3").
std::string reads_str(const Plan& p, int l, const TileLayer& x) {
  if (x.in.size() == 1) return x.in[0].str();
  std::string s;
  for (int e : p.node_edges[size_t(l - p.first)]) {
    if (!s.empty()) s += ' ';
    s += x.in[size_t(p.edges[size_t(e)].slot)].str();
    s += '<';
    s += std::to_string(p.edges[size_t(e)].from);
  }
  return s;
}

std::string held_note(const TileLayer& x) {
  std::string s = " ";
  s += x.held.str();
  if (!(x.held == x.fwd)) s += " (+exchanged)";
  return s;
}
}  // namespace

namespace {

// The steps of the tiled part as a process of this run compiles them (one training process
// needs no input delta: verify's does, and gathers it at the end).
Schedule schedule_of(const TrainOptions& t, const NetSpec& net, const Plan& p) {
  return compile_schedule(
      net, p, {.fetch_weights = Trainer::stage_weights(t, net), .sharded = t.low_memory, .recompute = t.low_memory});
}

void print_schedule(const NetSpec& net, const Plan& p, const Schedule& s) {
  std::printf("one training step of the tiled layers, in order (every process runs these steps on its tiles):\n");
  int k = 0;
  for (const auto* steps : {&s.forward, &s.backward})
    for (const Step& st : *steps) std::printf("  %3d  %s\n", ++k, describe(st, net, p).c_str());
}

nlohmann::json schedule_json(const NetSpec& net, const Plan& p, const Schedule& s) {
  nlohmann::json j;
  for (auto [name, steps] : {std::pair{"forward", &s.forward}, std::pair{"backward", &s.backward}}) {
    nlohmann::json v = nlohmann::json::array();
    for (const Step& st : *steps)
      v.push_back({{"step", step_name(st.kind)}, {"layer", st.layer}, {"text", describe(st, net, p)}});
    j[name] = v;
  }
  return j;
}

}  // namespace

int cmd_plan(const RunOptions& o, const PlanOptions& po) {
  if (po.optimize) return cmd_optimize(o, po);
  if (!po.draw.empty()) check_can_write(po.draw);
  NetSpec net = load_run_net(o);
  std::unique_ptr<ClusterModel> cm;
  std::unique_ptr<Prediction> pred;
  if (!po.cluster.empty()) {
    cm = std::make_unique<ClusterModel>(load_cluster_model(po, net));
    pred = std::make_unique<Prediction>(predict(net, partition_of(o, po, net, *cm), *cm));
  }
  TrainOptions t = train_options(o, net);
  const int cut = resolve_cut(net, t.cut, t.rows, t.cols), first = net.first_tiled();
  Plan p = make_plan(net, t.rows, t.cols, first, cut, parse_groups(t.groups, first, cut), {t.split, t.features});
  PlanStats st = plan_stats(net, p);
  print_kernel_warnings(planned_kernels(net, DnnlContext(t.kernels), cut));
  const double redundant = st.flops_tiled / st.flops_untiled - 1;
  const double tile_max = *std::max_element(st.tile_bytes.begin(), st.tile_bytes.end());
  if (o.json) {
    nlohmann::json j;
    j["grid"] = o.grid;
    j["groups"] = p.group_starts;
    j["cut"] = cut;
    j["flops_untiled"] = st.flops_untiled;
    j["flops_tiled"] = st.flops_tiled;
    j["redundant_flops_frac"] = redundant;
    j["halo_bytes_fwd"] = st.halo_bytes_fwd;
    j["halo_bytes_bwd"] = st.halo_bytes_bwd;
    j["halo_bytes_features"] = st.halo_bytes_features;
    j["backward_features"] = backward_features_name(p.features);
    j["tile_bytes_max"] = tile_max;
    nlohmann::json tiles = nlohmann::json::array();
    for (int ti = 0; ti < p.tiles_count(); ++ti) {
      nlohmann::json layers = nlohmann::json::array();
      for (int l = first; l < cut; ++l) {
        const TileLayer& x = p.at(ti, l);
        nlohmann::json inputs = nlohmann::json::array();
        for (int e : p.node_edges[size_t(l - first)])
          inputs.push_back({{"from", p.edges[size_t(e)].from},
                            {"in", x.in[size_t(p.edges[size_t(e)].slot)].str()},
                            {"delta_in", x.delta_in[size_t(p.edges[size_t(e)].slot)].str()}});
        layers.push_back({{"layer", l},
                          {"own", x.own.str()},
                          {"fwd", x.fwd.str()},
                          {"inputs", inputs},
                          {"delta", x.delta.str()},
                          {"held", x.held.str()}});
      }
      tiles.push_back({{"tile", ti}, {"bytes", st.tile_bytes[ti]}, {"layers", layers}});
    }
    j["tiles"] = tiles;
    nlohmann::json halos = nlohmann::json::array();
    // Forward and backward pieces per edge (the map of layer `of`, read by `layer`);
    // feature pieces per layer (its own map).
    for (size_t e = 0; e < p.edges.size(); ++e)
      for (const auto& [kind, pieces] : {std::pair{"forward", &p.fwd_halo}, std::pair{"backward", &p.bwd_halo}})
        for (const Piece& pc : (*pieces)[e])
          if (pc.from != pc.to)
            halos.push_back({{"layer", p.edges[e].to},
                             {"of", p.edges[e].from},
                             {"pass", kind},
                             {"from", pc.from},
                             {"to", pc.to},
                             {"box", pc.box.str()}});
    for (int l = first; l < cut; ++l)
      for (const Piece& pc : p.feature_halo[size_t(l - first)])
        if (pc.from != pc.to)
          halos.push_back(
              {{"layer", l}, {"of", l}, {"pass", "features"}, {"from", pc.from}, {"to", pc.to}, {"box", pc.box.str()}});
    j["halos"] = halos;
    if (pred) j["prediction"] = prediction_to_json(*pred);
    if (po.schedule) j["schedule"] = schedule_json(net, p, schedule_of(t, net, p));
    if (!po.draw.empty()) {
      draw_plan(net, p, plan_title(o, p), po.draw);
      j["picture"] = po.draw;
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("%s: grid %dx%d, tiled layers [%d, %d), groups start at", net.path.c_str(), t.rows, t.cols, first, cut);
  for (int s : p.group_starts) std::printf(" %d", s);
  std::printf("\n");
  for (int ti = 0; ti < p.tiles_count(); ++ti) {
    std::printf("tile %d (row %d, col %d): input owned %s, %.1f MB per sample\n", ti, ti / t.cols, ti % t.cols,
                p.own_input[ti].str().c_str(), st.tile_bytes[ti] / 1048576.0);
    const bool exchange = p.features == BackwardFeatures::Exchange;
    std::printf("  %4s %-26s %-26s %-26s %-26s%s\n", "#", "owned output", "forward computes", "forward reads",
                "backward delta", exchange ? " kept for backward" : "");
    for (int l = first; l < cut; ++l) {
      const TileLayer& x = p.at(ti, l);
      std::printf("  %3d%s %-26s %-26s %-26s %-26s%s\n", l, p.group_start(l) ? "*" : " ", x.own.str().c_str(),
                  x.fwd.str().c_str(), reads_str(p, l, x).c_str(), x.delta.str().c_str(),
                  exchange ? held_note(x).c_str() : "");
    }
    // The halo this tile exchanges on each edge that crosses a group boundary (cells of the
    // map named).
    for (size_t e = 0; e < p.edges.size(); ++e) {
      if (!p.crosses_groups(int(e))) continue;
      const int l = p.edges[e].to, from = p.edges[e].from;
      std::string recv_f, send_f, recv_b, send_b;
      auto add = [](std::string& to, int tile, const Box& b) {
        to += ' ';  // in steps: GCC 12 warns (-Wrestrict, falsely) about one concatenation
        to += b.str();
        if (tile >= 0) {
          to += '@';
          to += std::to_string(tile);
        }
      };
      for (const Piece& pc : p.fwd_halo[e]) {
        if (pc.from == pc.to) continue;
        if (pc.to == ti) add(recv_f, pc.from, pc.box);
        if (pc.from == ti) add(send_f, pc.to, pc.box);
      }
      for (const Piece& pc : p.bwd_halo[e]) {
        if (pc.from == pc.to) continue;
        if (pc.to == ti) add(recv_b, pc.from, pc.box);
        if (pc.from == ti) add(send_b, pc.to, pc.box);
      }
      const std::string which = p.node_edges[size_t(l - first)].size() > 1 ? " from layer " + std::to_string(from) : "";
      std::printf("  layer %d input%s: receives%s, sends%s; backward, delta of layer %d: receives%s, sends%s\n", l,
                  which.c_str(), recv_f.empty() ? " nothing" : recv_f.c_str(),
                  send_f.empty() ? " nothing" : send_f.c_str(), from, recv_b.empty() ? " nothing" : recv_b.c_str(),
                  send_b.empty() ? " nothing" : send_b.c_str());
    }
  }
  std::printf("(box@t = cells from or to tile t)\n");
  std::printf(
      "(* = group start: halo exchange of the input in forward, of the output delta of the layer before in "
      "backward)\n");
  std::printf("forward GFLOPs per sample: untiled %.3f, all tiles %.3f (redundant %.2f%%)\n", st.flops_untiled / 1e9,
              st.flops_tiled / 1e9, 100 * redundant);
  std::printf("halo per sample: forward %.1f KB, backward %.1f KB", st.halo_bytes_fwd / 1024, st.halo_bytes_bwd / 1024);
  if (p.features == BackwardFeatures::Exchange)
    std::printf(", forward values for backward %.1f KB", st.halo_bytes_features / 1024);
  std::printf("; largest tile %.1f MB of maps and deltas\n", tile_max / 1048576.0);
  if (po.schedule) print_schedule(net, p, schedule_of(t, net, p));
  if (pred) {
    std::printf("on %s (%s):\n", po.cluster.c_str(), partition_of(o, po, net, *cm).str().c_str());
    print_prediction(*pred, *cm);
  }
  if (!po.draw.empty()) {
    draw_plan(net, p, plan_title(o, p), po.draw);
    std::printf("wrote %s (%d panels: each group's input map with its halos, and the last tiled output)\n",
                po.draw.c_str(), plan_panels(p));
  }
  return 0;
}

}  // namespace tt
