#include "planner/cost_model.hpp"

#include <algorithm>

#include "engine/filter_blocks.hpp"
#include "engine/memory_plan.hpp"
#include "engine/schedule.hpp"
#include "engine/tail.hpp"
#include "engine/trainer.hpp"
#include "layers/tensor.hpp"
#include "planner/tail_shares.hpp"
#include "planner/weights_memory.hpp"
#include "tiling/plan.hpp"
#include "tiling/tiled_traits.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

constexpr double kMB = 1048576.0;

// One training step replayed rank by rank: `clock[r]` is when rank r is done with what it
// has been given so far; waiting for another rank advances it into the bucket the engine
// times that wait in (bench's split).
struct Replay {
  const NetSpec& net;
  const Partition& p;
  const ClusterModel& cm;
  Plan plan;
  Schedule schedule;  // what the Segment runs, in order
  int P = 1, T = 1, first = 0, cut = 0, dense_begin = 0, batch = 1, devices_used = 0;  // first: the first tiled layer
  std::vector<int> tile_rank, rank_dev;
  std::vector<std::vector<int>> local;  // per rank: its tiles
  TailShares tail;                      // what each rank runs and holds after the cut
  std::vector<double> clock, crowd;     // crowd: compute slowdown from ranks sharing a device
  std::vector<double> since_sync;       // compute since the last synchronisation
  AloneCompute alone;                   // the step's, at each rank's device speed alone
  LinkBuckets buckets{cm.spec};         // the device links' bursts (ClusterSpec::burst_bytes)
  double grads_leave = -1;              // gradient buckets during backward: when the first leaves (-1: after it)
  std::vector<RankPrediction> acc;
  std::vector<SegmentMemoryPlan> rank_layouts;  // per rank: the Segment's memory plan of its tiles
  Prediction out;

  Replay(const NetSpec& n, const Partition& part, const ClusterModel& c) : net(n), p(part), cm(c) {
    first = net.first_tiled();
    cut = resolve_cut(net, p.cut, p.rows, p.cols);
    dense_begin = net.first_untileable();
    batch = net.micro_batch();
    plan = make_plan(net, p.rows, p.cols, first, cut,
                     p.group_starts.empty() ? parse_groups("none", first, cut) : p.group_starts, {p.split, p.features});
    T = plan.tiles_count();
    schedule = compile_schedule(
        net, plan, {.fetch_weights = formats_before_use(), .sharded = p.low_memory, .recompute = p.low_memory});
    if (p.tiles_per_rank < 1 || T % p.tiles_per_rank)
      fail("--tiles-per-rank ", p.tiles_per_rank, " does not divide ", T, " tiles");
    P = T / p.tiles_per_rank;
    tile_rank = tile_ranks(T, p.tiles_per_rank, P);
    const int D = int(cm.spec.devices.size());
    if (p.ranks_per_device < 1) fail("ranks per device must be at least 1");
    if ((P + p.ranks_per_device - 1) / p.ranks_per_device > D)
      fail(P, " ranks at ", p.ranks_per_device, " per device need ", (P + p.ranks_per_device - 1) / p.ranks_per_device,
           " devices; the cluster has ", D);
    local.resize(size_t(P));
    for (int t = 0; t < T; ++t) local[size_t(tile_rank[size_t(t)])].push_back(t);
    tail = {.net = &net,
            .cut = cut,
            .dense_begin = dense_begin,
            .tiles = T,
            .ranks = P,
            .filters = p.tail_filters,
            .local = &local};
    std::vector<int> per_dev(size_t(D), 0);
    for (int r = 0; r < P; ++r) {
      rank_dev.push_back(r / p.ranks_per_device);
      devices_used += per_dev[size_t(rank_dev.back())]++ == 0;
    }
    for (int r = 0; r < P; ++r) {
      const int d = rank_dev[size_t(r)];
      crowd.push_back(crowd_slowdown(cm.models[size_t(d)], per_dev[size_t(d)], cm.capacity[size_t(d)]));
    }
    clock = since_sync = alone.cpu = alone.kernels = std::vector<double>(size_t(P), 0.);
    acc.resize(size_t(P));
    for (int r = 0; r < P; ++r) acc[size_t(r)].device = rank_dev[size_t(r)];
    for (int r = 0; r < P; ++r) {
      std::vector<bool> far;  // as the Trainer decides it, with devices for hosts
      if (p.overlap != Overlap::Off)
        for (int t = 0; t < T; ++t)
          far.push_back(p.overlap == Overlap::On || rank_dev[size_t(tile_rank[size_t(t)])] != rank_dev[size_t(r)]);
      rank_layouts.push_back(plan_segment_memory(net, plan, batch, 1, cm.models[0].channel_block, p.low_memory, false,
                                                 local[size_t(r)], far));
    }
  }
  // Layouts (channel blocks) of tiled layer l's input and output maps, alike on every rank.
  int in_cb(int l) const { return rank_layouts[0].in_cb[size_t(l - first)]; }
  int out_cb(int l) const { return rank_layouts[0].out_cb[size_t(l - first)]; }

  const DeviceModel& model(int r) const { return cm.models[size_t(rank_dev[size_t(r)])]; }
  double scale(int r) const { return cm.slowdown[size_t(rank_dev[size_t(r)])] * crowd[size_t(r)]; }
  double comp(int r, int l, const LinearFit& f, double cells) const {
    return cells > 0 ? f.at(cells) * scale(r) * model(r).correction(l, cells) : 0;
  }
  LinkSpec link(int a, int b) const { return cm.spec.link(rank_dev[size_t(a)], rank_dev[size_t(b)]); }
  double msg(int a, int b, double bytes) const {
    const LinkSpec l = link(a, b);
    return l.latency_s() + bytes / l.bytes_per_s();
  }
  double map_bytes(int c, int cb, const Box& b) const { return 4. * double(tensor_floats(batch, c, cb, b)); }
  const LayerModel& lm(int r, int l) const { return model(r).layers.at(size_t(l)); }

  // Every rank waits for the last one, then `cost` more; waits go to `bucket`. The last
  // one is later than the replay's clocks say by the spread of the compute since the last
  // synchronisation: the expected largest of one draw per device (its quota's pauses and
  // its host's other work slow all of its ranks alike).
  void sync(double cost, double RankPrediction::*bucket) {
    double spread = 0;
    for (int r = 0; r < P; ++r) spread += since_sync[size_t(r)] * model(r).jitter / P;
    std::fill(since_sync.begin(), since_sync.end(), 0.);
    const double m = *std::max_element(clock.begin(), clock.end()) + cost + expected_max_normal(devices_used) * spread;
    for (int r = 0; r < P; ++r) {
      acc[size_t(r)].*bucket += m - clock[size_t(r)];
      clock[size_t(r)] = m;
    }
  }
  // `kernels`: compute from the layer fits (not e.g. formatting, timed as one long phase).
  void run(int r, double secs, double RankPrediction::*bucket, bool kernels = true) {
    clock[size_t(r)] += secs;
    const bool layers = bucket == &RankPrediction::fwd_s || bucket == &RankPrediction::bwd_s;
    if (layers) since_sync[size_t(r)] += secs;
    if (layers || bucket == &RankPrediction::update_s) alone.cpu[size_t(r)] += secs / crowd[size_t(r)];
    if (layers && kernels) alone.kernels[size_t(r)] += secs / crowd[size_t(r)];
    acc[size_t(r)].*bucket += secs;
  }
  // Messages `pieces` (cells of a map with c channels in layout cb) between ranks; each
  // rank waits for its senders, then for its own traffic: the bytes over its device's link
  // (both ways at once), one latency (the messages are posted together).
  struct Message {
    int from, to;  // tiles
    double bytes;
  };
  void exchange(const std::vector<Piece>& pieces, int c, int cb, double RankPrediction::*bucket,
                const std::vector<double>& overlap = {}) {
    std::vector<Message> m;
    for (const Piece& pc : pieces) m.push_back({pc.from, pc.to, map_bytes(c, cb, pc.box)});
    exchange(m, bucket, overlap);
  }
  // `overlap[r]`: compute rank r does after posting, while its messages are in flight.
  void exchange(const std::vector<Message>& messages, double RankPrediction::*bucket,
                const std::vector<double>& overlap = {}) {
    std::vector<PointToPoint> m;
    for (const Message& pc : messages) {
      const int a = tile_rank[size_t(pc.from)], b = tile_rank[size_t(pc.to)];
      if (a == b) continue;
      m.push_back({a, b, pc.bytes});
      out.halo_bytes += pc.bytes / batch;
      ++out.halo_messages;
    }
    const std::vector<double> done = point_to_point_finish(cm.spec, rank_dev, m, clock);
    for (int r = 0; r < P; ++r) {
      const double busy = overlap.empty() ? 0 : overlap[size_t(r)];
      if (busy > 0) run(r, busy, &RankPrediction::fwd_s);
      if (done[size_t(r)] <= clock[size_t(r)]) continue;
      acc[size_t(r)].*bucket += done[size_t(r)] - clock[size_t(r)];
      clock[size_t(r)] = done[size_t(r)];
    }
  }
  // Rank 0's whole map → every tile's box (or back with `to_root`), over rank 0's link, at
  // the rate one pair measured: the many-flows efficiency is for all-to-all traffic (every
  // link both ways); priced with it the scatter and gather come out too slow.
  void root_transfer(const std::vector<double>& bytes_of_rank, bool to_root) {
    double link_time = 0, lat = 0;
    for (int r = 1; r < P; ++r) {
      if (bytes_of_rank[size_t(r)] == 0) continue;
      const LinkSpec l = link(0, r);
      link_time += bytes_of_rank[size_t(r)] / l.bytes_per_s();
      lat = std::max(lat, l.latency_s());
    }
    if (to_root) {
      double start = clock[0];
      for (int r = 1; r < P; ++r) start = std::max(start, clock[size_t(r)]);
      const double done = start + lat + link_time;
      for (int r = 0; r < P; ++r) {
        const double fin = r == 0 ? done : std::max(clock[size_t(r)], clock[0]) + msg(0, r, bytes_of_rank[size_t(r)]);
        acc[size_t(r)].io_s += fin - clock[size_t(r)];
        clock[size_t(r)] = fin;
      }
    } else {
      const double done = clock[0] + lat + link_time;
      for (int r = 0; r < P; ++r) {
        const double fin = std::max(clock[size_t(r)], done);
        acc[size_t(r)].io_s += fin - clock[size_t(r)];
        clock[size_t(r)] = fin;
      }
    }
  }

  bool bn_sync(const LayerSpec& s) const { return s.batch_normalize() && P > 1; }
  int64_t conv_weights() const {
    int64_t n = 0;
    for (int l = first; l < cut; ++l)
      if (tiled_traits(net.layers[size_t(l)]).weights) n += net.layers[size_t(l)].weight_count();
    return n;
  }
  // Layer l's weight chunks (--low-memory), all-gathered before each use (link bursts followed).
  double chunked_gather_cost(int l) {
    double t = 0;
    for (const auto& parts : weight_chunk_parts(net, cut, l, model(0).channel_block, P))
      t += chunk_gather_time(cm.spec, rank_dev, parts, &buckets, last_end() + t);
    return t;
  }
  // Layer l's gradient chunks round the ring one after another, overlapping on different
  // links (the ranks go on when their own steps are done): a run of one owner's chunks
  // costs about two hops a chunk, not three. bench/planner/chunk_ring.sh times the calls.
  void reduce_scatter_chunks(int l) {
    const std::vector<double> t = chunk_ring_finish(
        cm.spec, rank_dev, weight_chunk_parts(net, cut, l, model(0).channel_block, P), clock, &buckets);
    for (int r = 0; r < P; ++r) {
      acc[size_t(r)].weights_s += t[size_t(r)] - clock[size_t(r)];
      clock[size_t(r)] = t[size_t(r)];
    }
  }
  // Before layer l's forward or backward-data (`uses`): sharded, its weights gathered and
  // formatted; else formatted for that use, half the calibrated reload (both uses).
  void fetch_weights(int l, int uses) {
    const double w = double(net.layers[size_t(l)].weight_count());
    if (p.low_memory) sync(chunked_gather_cost(l), &RankPrediction::weights_s);
    for (int r = 0; r < P; ++r)
      run(r, (p.low_memory ? 1. : 0.5) * reload_per_param(r) * w,
          p.low_memory                    ? &RankPrediction::weights_s
          : uses == WeightCache::kForward ? &RankPrediction::fwd_s
                                          : &RankPrediction::bwd_s,
          false);
  }
  // The tiled layers' weights formatted just before each use (Trainer::stage_weights).
  bool formats_before_use() const { return !p.low_memory && net.subdivisions == 1; }
  // What the update formats again: everything a rank runs with, or only the layers after
  // the cut (the tiled ones are formatted before each use).
  double reformat_after_update(int r) const {
    if (!formats_before_use())
      return p.tail_filters ? reload_per_param(r) * (double(tiled_params()) + tail.params(r))
                            : model(r).reload_s * scale(r);
    return reload_per_param(r) * (p.tail_filters ? tail.params(r)
                                  : r == 0       ? double(net_params() - tiled_params())
                                                 : 0.);
  }
  // Formatting weights for the kernels, per parameter: the calibrated net's reload.
  double reload_per_param(int r) const {
    return net_params() > 0 ? model(r).reload_s * scale(r) / double(net_params()) : 0;
  }
  // Filter blocks with --low-memory: rank r formats its blocks' weights of layer l before
  // each use (forward, backward-data).
  double staged_block_weights(int r, int l) const {
    const LayerSpec& s = net.layers[size_t(l)];
    if (!p.tail_filters || !p.low_memory || !splits_into_filter_blocks(s)) return 0;
    return reload_per_param(r) * double(s.weight_count()) * tail.share(r, l);
  }
  double allgather_cost(double bytes) const { return all_gather_time(cm.spec, rank_dev, bytes); }
  double reduce_scatter_cost(double bytes) const { return reduce_scatter_time(cm.spec, rank_dev, bytes); }
  double last_end() const { return *std::max_element(clock.begin(), clock.end()); }

  // The Segment's schedule (engine/schedule.hpp), step by step; each step's time goes to
  // the layer it is charged to.
  void run_steps(const std::vector<Step>& steps) {
    double mark = last_end();
    for (const Step& st : steps) {
      price(st);
      if (st.charge >= 0) out.layer_s[size_t(st.charge)] += last_end() - mark;
      mark = last_end();
    }
  }

  void price(const Step& st) {
    const int l = st.layer;
    switch (st.kind) {
      case StepKind::ScatterInput:
        return scatter_input();
      case StepKind::PostHalo:
        return;  // priced with the forward that waits for it
      case StepKind::FetchWeights:
        return fetch_weights(l, st.uses);
      case StepKind::Forward:
        return forward_layer(l, st.halo_in_flight);
      case StepKind::Pointwise: {
        std::vector<double> pw(size_t(P), 0);
        for (int r = 0; r < P; ++r)
          for (int t : local[size_t(r)])
            pw[size_t(r)] += comp(r, l, lm(r, l).fwd_pointwise, cells(t, l, &TileLayer::fwd));
        return pointwise(pw, bn_sync(net.layers[size_t(l)]), net.layers[size_t(l)].out.c, &RankPrediction::fwd_s);
      }
      case StepKind::ScatterDelta:
        return scatter_map(cut - 1, false, &TileLayer::delta);
      case StepKind::ExchangeFeatures:
        return exchange_features(l);
      case StepKind::PointwiseBackward:
        return pointwise_backward(l, st.owned_only);
      case StepKind::Backward:
        for (int r = 0; r < P; ++r)
          for (int t : local[size_t(r)]) {
            if (st.input_delta)
              run(r, comp(r, l, lm(r, l).bwd_data, cells(t, l, &TileLayer::delta)), &RankPrediction::bwd_s);
            if (tiled_traits(net.layers[size_t(l)]).weights)
              run(r,
                  comp(r, l, lm(r, l).bwd_weights,
                       cells(t, l, weights_on_delta_box(net, plan, t, l) ? &TileLayer::delta : &TileLayer::own)),
                  &RankPrediction::bwd_s);
          }
        return;
      case StepKind::ReduceGrad:  // sharded: the gradient's chunks to their owners (else nothing to do)
        if (p.low_memory) reduce_scatter_chunks(l);
        return;
      case StepKind::SumDeltas:  // the additions are priced as nothing; the exchange where a reader is in a later group
        if (plan.group_start(l + 1)) return;
        for (int e : plan.consumers[size_t(l - plan.first)])
          if (plan.side_edge(e) && plan.crosses_groups(e))
            return exchange(plan.bwd_halo[size_t(e)], net.layers[size_t(l)].out.c, out_cb(l), &RankPrediction::halo_s);
        return;
      case StepKind::BackwardHalo:
        return exchange(plan.bwd_halo[size_t(plan.edge(l))], net.layers[size_t(l - 1)].out.c, out_cb(l - 1),
                        &RankPrediction::halo_s);
      case StepKind::GatherInputDelta:
        fail("internal: the cost model prices no input delta");
    }
  }
  double cells(int t, int l, Box TileLayer::*box) const { return double(batch) * (plan.at(t, l).*box).area(); }

  // Every tile's `box` of layer l's output map between the root and its rank.
  void scatter_map(int l, bool to_root, Box TileLayer::*box) {
    if (P == 1) return;
    std::vector<double> bytes(size_t(P), 0);
    const LayerSpec& s = net.layers[size_t(l)];
    for (int t = 0; t < T; ++t)
      bytes[size_t(tile_rank[size_t(t)])] += map_bytes(s.out.c, out_cb(l), plan.at(t, l).*box);
    root_transfer(bytes, to_root);
  }

  // Every tile's input box of the first tiled layer, from the root to its rank.
  void scatter_input() {
    if (P == 1) return;
    std::vector<double> bytes(size_t(P), 0);
    for (int t = 0; t < T; ++t)
      bytes[size_t(tile_rank[size_t(t)])] +=
          map_bytes(net.layers[size_t(first)].in.c, in_cb(first), plan.at(t, first).in[0]);
    root_transfer(bytes, false);
  }

  // Layer l's convolution or max-pool on every tile; with its input's halo in flight, the
  // interiors (overlap parts) are computed while it travels, the border strips after.
  void forward_layer(int l, bool halo_in_flight) {
    const LayerSpec& s = net.layers[size_t(l)];
    auto parts = [&](int r, int t) -> const std::vector<Box>& {
      return rank_layout(r).tiles[size_t(t)].layers[size_t(l - first)].parts;
    };
    if (halo_in_flight) {
      std::vector<double> interior(size_t(P), 0);
      for (int r = 0; r < P; ++r)
        for (int t : local[size_t(r)])
          if (!parts(r, t).empty())
            interior[size_t(r)] += comp(r, l, lm(r, l).fwd, double(batch) * parts(r, t)[0].area());
      std::vector<Message> m;  // every input edge that crosses groups (PostHalo)
      for (int e : plan.node_edges[size_t(l - plan.first)]) {
        if (!plan.crosses_groups(e)) continue;
        const PlanEdge& pe = plan.edges[size_t(e)];
        const int c = pe.slot == 0 ? s.in.c : net.layers[size_t(pe.from)].out.c;
        const int cb = pe.slot == 0 ? in_cb(l) : out_cb(pe.from);
        for (const Piece& pc : plan.fwd_halo[size_t(e)]) m.push_back({pc.from, pc.to, map_bytes(c, cb, pc.box)});
      }
      exchange(m, &RankPrediction::halo_s, interior);
    }
    for (int r = 0; r < P; ++r)
      for (int t : local[size_t(r)]) {
        out.cells_computed += plan.at(t, l).fwd.area();
        if (parts(r, t).empty() || !halo_in_flight)
          run(r, comp(r, l, lm(r, l).fwd, cells(t, l, &TileLayer::fwd)), &RankPrediction::fwd_s);
        for (size_t k = 1; halo_in_flight && k < parts(r, t).size(); ++k)
          run(r, comp(r, l, lm(r, l).fwd, double(batch) * parts(r, t)[k].area()), &RankPrediction::fwd_s);
      }
  }

  // Filter blocks: layer l's outputs to every rank; in backward, each rank gets every block's
  // part of its slice of the input delta, then the slices' sums go round.
  void block_exchange(int l, bool backward) {
    const LayerSpec& s = net.layers[size_t(l)];
    if (!p.tail_filters || !splits_into_filter_blocks(s)) return;
    const double bytes = 4. * batch * (backward ? s.in.size() : s.out.size());
    if (backward) sync(allgather_cost(bytes * filled_filter_blocks(s, T) / P), &RankPrediction::halo_s);
    sync(allgather_cost(bytes), &RankPrediction::halo_s);
  }
  // The root's update of those to every rank: all_gather_v with the root's part alone, each
  // of a ring's P - 1 steps carrying all of it.
  void send_tail_whole_params() {
    if (tail.whole_params() > 0) sync(allgather_cost(4 * tail.whole_params() * P), &RankPrediction::weights_s);
  }

  void forward() {
    if (first > 0) {  // a [crop] before the tiled part: whole, on the root
      const LayerSpec& pre = net.layers[size_t(first - 1)];
      const double t = comp(0, pre.index, lm(0, pre.index).fwd, double(batch) * pre.out.h * pre.out.w);
      run(0, t, &RankPrediction::fwd_s);
      out.layer_s[size_t(pre.index)] += t;
    }
    run_steps(schedule.forward);
    // Gather at the cut (filter blocks: then from the root to every rank).
    scatter_map(cut - 1, true, &TileLayer::own);
    if (p.tail_filters) sync(allgather_cost(4. * batch * net.layers[cut - 1].out.size()), &RankPrediction::halo_s);
    // The untiled tail and the head, on rank 0 (filter blocks: each rank its share).
    for (int l = cut; l < dense_begin; ++l) {
      const LayerSpec& s = net.layers[size_t(l)];
      const double cells = double(batch) * s.out.h * s.out.w;
      for (int r = 0; r < P; ++r) {
        const double all = comp(r, l, lm(r, l).fwd, cells) + comp(r, l, lm(r, l).fwd_pointwise, cells);
        run(r, tail.share(r, l) * all, &RankPrediction::fwd_s);
        run(r, staged_block_weights(r, l), &RankPrediction::fwd_s, false);
      }
      block_exchange(l, false);
    }
    for (int r = 0; r < P; ++r)
      run(r, model(r).head_fwd_per_sample * batch * scale(r) * tail.head_share(r), &RankPrediction::fwd_s);
    for (int l = dense_begin; l < int(net.layers.size()); ++l) block_exchange(l, false);
  }

  // Batch-norm/activation: the statistics' sums halfway (a synchronisation): every tile's
  // 2 x C doubles gathered by every rank and added in tile order (TileOrder::sum), an
  // all-gather of T parts, not an all-reduce of one.
  void pointwise(const std::vector<double>& pw, bool sync_bn, int channels, double RankPrediction::*bucket) {
    if (!sync_bn) {
      for (int r = 0; r < P; ++r) run(r, pw[size_t(r)], bucket);
      return;
    }
    for (int r = 0; r < P; ++r) run(r, pw[size_t(r)] / 2, bucket);
    sync(allgather_cost(16. * channels * T), &RankPrediction::halo_s);
    for (int r = 0; r < P; ++r) run(r, pw[size_t(r)] / 2, bucket);
  }

  // last: the batch's last micro-batch, where gradient buckets may leave during backward.
  void backward(bool last) {
    for (int r = 0; r < P; ++r)
      run(r, model(r).head_bwd_per_sample * batch * scale(r) * tail.head_share(r), &RankPrediction::bwd_s);
    for (int l = int(net.layers.size()) - 1; l >= dense_begin; --l) block_exchange(l, true);
    for (int l = dense_begin - 1; l >= cut; --l) {
      const LayerSpec& s = net.layers[size_t(l)];
      const double cells = double(batch) * s.out.h * s.out.w;
      for (int r = 0; r < P; ++r) {
        const LayerModel& m = lm(r, l);
        const double all = comp(r, l, m.bwd_pointwise, cells) + comp(r, l, m.bwd_data, cells);
        run(r, tail.share(r, l) * (all + comp(r, l, m.bwd_weights, cells)), &RankPrediction::bwd_s);
        run(r, staged_block_weights(r, l), &RankPrediction::bwd_s, false);
      }
      block_exchange(l, true);
    }
    // Gradient buckets (engine/gradient_sync.hpp, --overlap on): the first leaves when every
    // rank has begun the tiled backward (the tail's, from the root).
    if (last && P > 1 && !p.low_memory && p.overlap == Overlap::On) grads_leave = last_end();
    run_steps(schedule.backward);
  }

  // Backward features: the values the group ending at layer `end` reads outside forward's
  // boxes (y as floats, max-pool winners as bytes), in one exchange.
  void exchange_features(int end) {
    std::vector<Message> m;
    for (int l = end;; --l) {
      const LayerSpec& s = net.layers[size_t(l)];
      const double scale = tiled_traits(s).feature_bytes / sizeof(float);
      for (const Piece& pc : plan.feature_halo[size_t(l - first)])
        m.push_back({pc.from, pc.to, scale * map_bytes(s.out.c, out_cb(l), pc.box)});
      if (plan.group_start(l)) break;
    }
    if (!m.empty()) exchange(m, &RankPrediction::halo_s);
  }

  // Batch-norm/activation backward of layer l on the delta box (or the owned cells), with
  // the convolution recomputed (and its sharded weights gathered) where it was not kept.
  void pointwise_backward(int l, bool owned_only) {
    std::vector<double> pw(size_t(P), 0);
    for (int r = 0; r < P; ++r)
      for (int t : local[size_t(r)]) {
        const TileLayer& x = plan.at(t, l);
        pw[size_t(r)] += comp(r, l, lm(r, l).bwd_pointwise, double(batch) * (owned_only ? x.own : x.delta).area());
        if (p.low_memory && recomputed(t, l)) pw[size_t(r)] += comp(r, l, lm(r, l).fwd, double(batch) * x.fwd.area());
      }
    const LayerSpec& s = net.layers[size_t(l)];
    pointwise(pw, bn_sync(s), s.out.c, &RankPrediction::bwd_s);
  }

  bool recomputed(int t, int l) const {
    const auto& tl = rank_layout(tile_rank[size_t(t)]).tiles[size_t(t)].layers;
    return !tl.empty() && tl[size_t(l - first)].recompute;
  }
  const SegmentMemoryPlan& rank_layout(int r) const { return rank_layouts[size_t(r)]; }

  void update() {
    // Filter blocks: the parameters after the cut are updated where they run, never sent.
    const double n = p.tail_filters ? double(tiled_params()) : double(net_params());
    if (P == 1) {
      run(0, model(0).sgd_per_param * (n + tail.updated(0)) * scale(0) + reformat_after_update(0),
          &RankPrediction::update_s);
      return;
    }
    if (!p.low_memory) {
      // The tiled layers' gradients go tile by tile, every rank sending each other rank its
      // part of each of its tiles at once (engine/tile_order.hpp): an all-to-all, over each
      // device's link like the all-gather, not as a ring: with two ranks a device a ring
      // would cross each device's link with 7/8 of the bytes, the all-to-all crosses it
      // with 12/8. The layers after the cut go round a ring. Several ranks on a device (and
      // no buckets): a chain over the devices instead.
      const double tiled = double(tiled_params());
      const bool chain = grads_leave < 0 && DeviceChain::useful(rank_dev);
      const double sum = (chain ? device_chain_reduce_time(cm.spec, rank_dev, tile_rank, 4 * tiled)
                                : allgather_cost(4 * p.tiles_per_rank * tiled)) +
                         reduce_scatter_cost(4 * (n - tiled));
      // In buckets during backward: what of it the backward since the first bucket did not hide.
      const double end = *std::max_element(clock.begin(), clock.end());
      sync(grads_leave < 0 ? sum : std::max(0., grads_leave + sum - end), &RankPrediction::weights_s);
      for (int r = 0; r < P; ++r)
        run(r, model(r).sgd_per_param * (n / P + tail.updated(r)) * scale(r), &RankPrediction::update_s);
      send_tail_whole_params();
      sync(chain ? device_share_time(cm.spec, rank_dev, 4 * n) : allgather_cost(4 * n), &RankPrediction::weights_s);
      for (int r = 0; r < P; ++r) run(r, reformat_after_update(r), &RankPrediction::update_s);
      return;
    }
    const double sharded = double(conv_weights());
    sync(small_allreduce_time(cm.spec, rank_dev, 4 * (n - sharded)), &RankPrediction::weights_s);
    for (int r = 0; r < P; ++r)
      run(r, model(r).sgd_per_param * (n - sharded + sharded / P + tail.updated(r)) * scale(r),
          &RankPrediction::update_s);
    send_tail_whole_params();
    // The tail's weights formatted again after the update: on the root, or (filter blocks,
    // whose own are formatted before each use) the layers every rank runs whole.
    for (int r = 0; r < P; ++r)
      run(r,
          reload_per_param(r) * (p.tail_filters ? tail.whole_params()
                                 : r == 0       ? double(net_params() - tiled_params())
                                                : 0.),
          &RankPrediction::update_s);
  }
  int64_t net_params() const { return net.param_count(); }
  int64_t tiled_params() const { return net.param_count(0, cut); }
  void memory() {
    // Filter blocks: the parameters after the cut are a rank's blocks' (and the whole layers').
    const double n = p.tail_filters ? double(tiled_params()) : double(net_params()), sharded = double(conv_weights());
    for (int r = 0; r < P; ++r) {
      const SegmentMemoryPlan& mp = rank_layout(r);
      const DeviceModel& m = model(r);
      RankPrediction& a = acc[size_t(r)];
      a.maps_mb = mp.maps_bytes / kMB;
      a.deltas_mb = mp.deltas_bytes / kMB;
      double kept = P == 1 ? 3 * n : p.low_memory ? 3 * (n - sharded + sharded / P) : 2 * n + n / P;
      kept += tile_order_floats(net, p, T, P, double(tiled_params())) + (p.tail_filters ? 3 * tail.params(r) : 0);
      // The kernels' copies of the weights, with filter blocks of the head's and this rank's
      // blocks' and whole layers' only.
      const double runs_with =
          p.tail_filters && net_params() > 0 ? (double(tiled_params()) + tail.params(r)) / double(net_params()) : 1;
      a.filters_mb = kept * 4 / kMB + kernel_copies_mb(net, m, p.low_memory || net.subdivisions == 1, runs_with);
      double extra = 0;
      // The input, the whole maps at the cut, the untiled tail and the head: on the root (filter
      // blocks: the maps on every rank, with the blocks' staging).
      if (r == 0) extra += 4. * batch * (net.input().size() + net.output().size()) / kMB;
      if (r == 0 && first > 0) a.maps_mb += 4. * batch * net.layers[size_t(first - 1)].out.size() / kMB;  // the crop's
      if (r == 0 || p.tail_filters) {
        const LayerSpec& at_cut = net.layers[size_t(cut - 1)];
        const TailShares::Memory t = tail.memory(
            r, batch, m.channel_block, map_bytes(at_cut.out.c, out_cb(cut - 1), full_box(at_cut.out.h, at_cut.out.w)));
        a.maps_mb += t.maps / kMB;
        a.deltas_mb += t.deltas / kMB;
      }
      a.peak_rss_mb = m.base_mb + m.scratch_mb + a.maps_mb + a.deltas_mb + a.filters_mb + extra;
    }
  }

  // A step: every micro-batch's forward and backward (--subdivisions), then the update.
  Prediction finish() {
    out.layer_s.assign(size_t(cut), 0.);
    for (int m = 0; m < net.subdivisions; ++m) {
      forward();
      backward(m + 1 == net.subdivisions);
    }
    out.cells_computed /= net.subdivisions;  // per sample: each micro-batch counted them
    out.halo_bytes /= net.subdivisions;
    out.halo_messages /= net.subdivisions;
    update();
    memory();
    stretch_to_quota_pauses(cm, rank_dev, alone, clock, acc);
    const double end = last_end();
    out.step_s = end;
    for (int r = 0; r < P; ++r) acc[size_t(r)].step_s = clock[size_t(r)];
    out.ranks = acc;
    out.summarize(cm.spec);
    return out;
  }
};

}  // namespace

Prediction predict(const NetSpec& net, const Partition& p, const ClusterModel& cm) {
  if (p.replicas > 0 && p.tail_filters) fail("--tail filters splits one copy over its processes: not with --replicas");
  if (p.replicas > 0) return predict_replicas(net, p, cm);
  Replay r(net, p, cm);
  return r.finish();
}

}  // namespace tt
