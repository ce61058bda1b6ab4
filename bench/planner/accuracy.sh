#!/usr/bin/env bash
# The planner's cost model against measurement (issue #10): for each configuration,
# `tiletrain plan --cluster C --json` (the prediction, from a cluster file that
# `tiletrain calibrate` wrote on the same machines) beside `tiletrain bench --json` (the
# measurement: median step of 5 after 1 warm-up, peak RSS of the largest rank).
#
#   bench/planner/accuracy.sh [--only local,edge,paper] [--links 30mbit,100mbit,1gbit] [--out DIR] [--append]
#   bench/planner/accuracy.sh --repredict DIR   (predictions again from DIR's cluster files
#                                                 with the current binary; measurements kept)
#   bench/planner/accuracy.sh --recalibrate DIR (calibrate again, here and on each emulated
#                                                 cluster (as --only says), into DIR's cluster
#                                                 files; then --repredict)
#
#   local  this machine, ranks over shared memory (mpirun): W1 at batch 1 and 4, grids
#          1x1 to 3x2, 1-4 ranks, several tiles per rank, groupings none/all/0,4,8,12 and
#          the optimizer's, --low-memory.
#   local4 this machine as issue #28 asks: calibrated on 4 ranks at W1's size, then W1 at
#          320x320 on 1-4 ranks: groupings, batches 1-3, several tiles per rank, --low-memory.
#   edge   4 emulated devices (cluster/edge.sh: 1 core at 0.45 of a core here each) on
#          links of 30 Mbit/s, 100 Mbit/s and 1 Gbit/s: each calibrated, then 2x2 with
#          every grouping, --low-memory, batch 4, 4x2 and 6x4 with several tiles per rank.
#   paper  backward features exchanged (--backward-features exchange) beside recomputed:
#          here (one process and 4 ranks) and on the 4 devices at 100 Mbit/s.
#   residual  issue #29's networks on the 4 devices at 1 Gbit/s: ResNet-18 and MobileNetV2
#          at 128x128 (each calibrated on its own cfg), grids 1x1 to 2x2, stage groupings,
#          exchanged features, --low-memory, 2 ranks per device; the tail as --tail auto
#          (filter blocks) takes it.
#   whole  issue #30's whole networks on the 4 devices at 1 Gbit/s: yolov2-voc at 224x224
#          (calibrated on it): one device, tiled with the tail on the root, filter blocks
#          after the cut (2 and 4 devices, --low-memory, batch 2), data parallel at batch 4.
# --append adds to DIR/runs.jsonl instead of starting it anew.
# Output: DIR/runs.jsonl (configuration, prediction, measurement), and from plot.py
# runs.csv, scatter.png and summary.md. Needs root for `edge` (namespaces, tc, cgroups).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
only=local,edge,paper out=$here/out repredict="" append=0 recalibrate=0 edge_links="30mbit 100mbit 1gbit"
while [ $# -gt 0 ]; do
  case $1 in
    --repredict) repredict=$2; shift 2 ;;
    --recalibrate) recalibrate=1; out=$2; repredict=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --links) edge_links=${2//,/ }; shift 2 ;;  # the edge part's links (a link measured again)
    --out) out=$2; shift 2 ;;
    --append) append=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "accuracy.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
bin=$root/build/tiletrain
[ -x "$bin" ] || { echo "accuracy.sh: no $bin: run scripts/test.sh or cmake --build build first" >&2; exit 1; }
cfg=cfgs/yolov2-16.cfg
if [ $recalibrate = 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "accuracy.sh: --recalibrate needs root (cluster/edge.sh)" >&2; exit 1; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  if want local; then
    mpirun -np 2 --oversubscribe --mca btl self,vader "$bin" calibrate --cfg $cfg --threads 1 --out "$out/local-cluster.json" >&2
  fi
  if want local4; then
    mpirun -np 4 --oversubscribe --mca btl self,vader "$bin" calibrate --cfg $cfg --threads 1 --out "$out/local4-cluster.json" >&2
  fi
  links=""
  if want edge || want paper; then links="30mbit 100mbit 1gbit"; fi
  export EDGE_CLUSTER=planner
  trap 'cluster/edge.sh down >/dev/null 2>&1 || true' EXIT
  for link in $links; do
    cluster/edge.sh down >/dev/null 2>&1 || true
    cluster/edge.sh up --devices 4 --link $link --cores 1 --device-speed 0.45 >&2
    cluster/edge.sh run -- calibrate --cfg $cfg --threads 1 --out "$out/edge-$link-cluster.json" >&2
  done
fi
if [ -n "$repredict" ]; then
  python3 - "$repredict" "$bin" <<'EOF'
import json, os, subprocess, sys
out, bin = sys.argv[1:]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl") if l.strip()]
for r in runs:
    # DIR's own cluster file (DIR may be a copy, with a cluster file changed)
    cluster = os.path.join(out, os.path.basename(r["cluster"]))
    args = r["args"].split()
    if "--tail" not in args and r.get("tail_default") != "auto":  # measured when the root was the default
        args += ["--tail", "root"]
    cmd = [bin, "plan", "--cfg", r.get("cfg", "cfgs/yolov2-16.cfg"), *args, "--cluster", cluster,
           "--ranks-per-device", str(r["per"]), "--json"]
    p = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["prediction"]
    r["predicted"] = {k: v for k, v in p.items() if k != "ranks"}
with open(f"{out}/runs.jsonl", "w") as f:
    for r in runs:
        f.write(json.dumps(r) + "\n")
EOF
  exec /usr/bin/python3 "$here/plot.py" "$repredict"
fi
mkdir -p "$out/raw"
runs=$out/runs.jsonl
[ $append = 1 ] || : >"$runs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log() { echo "[$(date +%T)] $*" >&2; }

# record SETTING CLUSTER RANKS RANKS_PER_DEVICE LAUNCH... :: TILETRAIN-ARGS...
record() {
  local setting=$1 cluster=$2 ranks=$3 per=$4
  shift 4
  local launch=()
  while [ "$1" != :: ]; do launch+=("$1"); shift; done
  shift
  local name
  name=$(echo "$setting $*" | tr -c 'A-Za-z0-9.,=-' _)
  "$bin" plan --cfg $cfg "$@" --cluster "$cluster" --ranks-per-device "$per" --json >"$out/raw/$name.plan.json"
  # stdout and stderr apart: under mpirun a rank's table on stderr can land inside the JSON line
  if ! "${launch[@]}" bench --cfg $cfg --threads 1 "$@" --steps 5 --warmup 1 --json >"$out/raw/$name.bench.txt" \
    2>"$out/raw/$name.bench.err"; then
    log "FAILED: $setting $* (see $out/raw/$name.bench.err)"
    exit 1
  fi
  python3 - "$setting" "$ranks" "$out/raw/$name.plan.json" "$out/raw/$name.bench.txt" "$*" "$cluster" "$per" "$cfg" >>"$runs" <<'EOF'
import json, sys
setting, ranks, plan, bench, args, cluster, per, cfg = sys.argv[1:]
p = json.load(open(plan))["prediction"]
b = json.loads([l for l in open(bench) if l.startswith("{")][-1])
print(json.dumps({"setting": setting, "cfg": cfg, "ranks": int(ranks), "args": args, "cluster": cluster, "per": int(per), "tail_default": "auto", "predicted": {k: v for k, v in p.items() if k != "ranks"},
                  "measured": {k: b[k] for k in ("step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s", "peak_rss_mb_max")}}))
EOF
  python3 -c "import json,sys; r=json.loads(open('$runs').readlines()[-1]); print('  %-40s predicted %.3f s %.0f MB, measured %.3f s %.0f MB' % (r['setting']+' '+r['args'][:40], r['predicted']['step_s'], r['predicted']['peak_rss_mb_max'], r['measured']['step_s'], r['measured']['peak_rss_mb_max']))" >&2
}

# The 4 emulated devices at 1 Gbit/s (1 core at 0.45 of one here each) of the residual and
# whole sets, brought up anew.
four_devices_1gbit() {
  [ "$(id -u)" -eq 0 ] || { echo "accuracy.sh: $1 needs root (cluster/edge.sh)" >&2; exit 1; }
  export EDGE_CLUSTER=planner
  trap 'cluster/edge.sh down >/dev/null 2>&1 || true' EXIT
  cluster/edge.sh down >/dev/null 2>&1 || true
  cluster/edge.sh up --devices 4 --link 1gbit --cores 1 --device-speed 0.45 >&2
}

if want local; then
  log "local: calibrating this machine (2 ranks, shared memory)"
  mpirun -np 2 --oversubscribe --mca btl self,vader "$bin" calibrate --cfg $cfg --threads 1 --out "$out/local-cluster.json" >&2
  c=$out/local-cluster.json
  mp() { echo mpirun -np "$1" --oversubscribe --mca btl self,vader "$bin"; }
  # shellcheck disable=SC2046
  {
    record shm "$c" 1 1 $(mp 1) :: --grid 1x1
    record shm "$c" 1 1 $(mp 1) :: --grid 1x1 --batch 4
    record shm "$c" 1 1 $(mp 1) :: --grid 2x2 --tiles-per-rank 4 --groups none
    record shm "$c" 1 1 $(mp 1) :: --grid 2x2 --tiles-per-rank 4 --groups all
    record shm "$c" 2 2 $(mp 2) :: --grid 1x2 --groups none
    record shm "$c" 2 2 $(mp 2) :: --grid 2x1 --groups 0,4,8,12
    record shm "$c" 2 2 $(mp 2) :: --grid 1x2 --groups all
    record shm "$c" 2 2 $(mp 2) :: --grid 2x2 --tiles-per-rank 2 --groups none
    record shm "$c" 2 2 $(mp 2) :: --grid 3x2 --tiles-per-rank 3 --groups 0,4,8,12
    record shm "$c" 2 2 $(mp 2) :: --grid 1x2 --groups none --low-memory
    record shm "$c" 2 2 $(mp 2) :: --grid 1x2 --groups none --batch 4
    record shm "$c" 4 4 $(mp 4) :: --grid 2x2 --groups none
  }
fi

if want local4; then
  log "local4: calibrating this machine on 4 ranks (shared memory)"
  mpirun -np 4 --oversubscribe --mca btl self,vader "$bin" calibrate --cfg $cfg --threads 1 --out "$out/local4-cluster.json" >&2
  c=$out/local4-cluster.json
  mp() { echo mpirun -np "$1" --oversubscribe --mca btl self,vader "$bin"; }
  s=(--size 320x320)
  # shellcheck disable=SC2046
  {
    record shm4 "$c" 1 1 $(mp 1) :: "${s[@]}" --grid 1x1
    record shm4 "$c" 1 1 $(mp 1) :: "${s[@]}" --grid 1x1 --batch 3
    record shm4 "$c" 1 1 $(mp 1) :: "${s[@]}" --grid 2x2 --tiles-per-rank 4 --groups none
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 1x2 --groups none
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 2x1 --groups 0,4,8,12
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 1x2 --groups all
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 1x2 --groups none --low-memory
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 1x2 --groups none --batch 2
    record shm4 "$c" 2 2 $(mp 2) :: "${s[@]}" --grid 2x2 --tiles-per-rank 2 --groups 0,4,8,12
    record shm4 "$c" 3 3 $(mp 3) :: "${s[@]}" --grid 1x3 --groups none
    record shm4 "$c" 3 3 $(mp 3) :: "${s[@]}" --grid 3x1 --groups none --low-memory
    record shm4 "$c" 4 4 $(mp 4) :: "${s[@]}" --grid 2x2 --groups none
    record shm4 "$c" 4 4 $(mp 4) :: "${s[@]}" --grid 2x2 --groups 0,4,8,12 --batch 2
    record shm4 "$c" 4 4 $(mp 4) :: "${s[@]}" --grid 2x2 --groups none --low-memory
    record shm4 "$c" 4 4 $(mp 4) :: "${s[@]}" --grid 4x1 --groups all
  }
fi

if want edge; then
  [ "$(id -u)" -eq 0 ] || { echo "accuracy.sh: edge needs root (cluster/edge.sh)" >&2; exit 1; }
  export EDGE_CLUSTER=planner
  trap 'cluster/edge.sh down >/dev/null 2>&1 || true' EXIT
  for link in $edge_links; do
    log "edge: 4 devices, $link"
    cluster/edge.sh down >/dev/null 2>&1 || true
    cluster/edge.sh up --devices 4 --link $link --cores 1 --device-speed 0.45 >&2
    c=$out/edge-$link-cluster.json
    cluster/edge.sh run -- calibrate --cfg $cfg --threads 1 --out "$c" >&2
    run4() { record "edge-$link" "$c" 4 1 cluster/edge.sh run --timeout 600 -- :: "$@"; }
    run8() { record "edge-$link" "$c" 8 2 cluster/edge.sh run --ranks-per-device 2 --timeout 600 -- :: "$@"; }
    run4 --grid 2x2 --groups none
    run4 --grid 2x2 --groups 0,4,8,12
    run4 --grid 2x2 --groups all
    run4 --grid 2x2 --groups none --low-memory
    run4 --grid 2x2 --groups none --batch 4
    run4 --grid 4x2 --tiles-per-rank 2 --groups none
    [ $link = 100mbit ] && run4 --grid 6x4 --tiles-per-rank 6 --groups 0,4,8,12
    [ $link = 1gbit ] && run8 --grid 2x4 --groups none
  done
fi
if want residual; then
  four_devices_1gbit residual
  w1=$cfg
  for cfg in /usr/share/darknet/cfg/resnet18.cfg cfgs/mobilenetv2.cfg; do
    net=$(basename $cfg .cfg)
    log "residual: $net on 4 devices, 1gbit"
    c=$out/residual-$net-cluster.json
    cluster/edge.sh run -- calibrate --cfg $cfg --size 128x128 --threads 1 --out "$c" >&2
    run() { local n=$1; shift; record "residual-$net" "$c" "$n" 1 cluster/edge.sh run --devices "$n" --timeout 600 -- :: --size 128x128 "$@"; }
    run8() { record "residual-$net" "$c" 8 2 cluster/edge.sh run --ranks-per-device 2 --timeout 600 -- :: --size 128x128 "$@"; }
    run 1 --grid 1x1
    run 2 --grid 1x2 --groups none
    run 4 --grid 2x2 --groups none
    run 4 --grid 2x2 --groups all
    run 4 --grid 2x2 --groups none --low-memory
    run 4 --grid 2x2 --groups all --backward-features exchange
    run 4 --grid 2x2 --groups none --batch 2
    run8 --grid 2x4 --groups none
  done
  cfg=$w1
fi
if want whole; then
  four_devices_1gbit whole
  w1=$cfg
  cfg=/usr/share/darknet/cfg/yolov2-voc.cfg
  log "whole: yolov2-voc on 4 devices, 1gbit"
  c=$out/whole-yolov2-voc-cluster.json
  cluster/edge.sh run -- calibrate --cfg $cfg --size 224x224 --threads 1 --out "$c" >&2
  run() { local n=$1; shift; record whole "$c" "$n" 1 cluster/edge.sh run --devices "$n" --timeout 900 -- :: --size 224x224 "$@"; }
  run 1 --grid 1x1
  run 4 --grid 2x2 --tail root
  run 2 --grid 1x2 --tail filters
  run 4 --grid 2x2 --tail filters
  run 4 --grid 2x2 --tail filters --low-memory
  run 4 --grid 2x2 --tail filters --batch 2
  run 4 --grid 1x1 --replicas 4 --batch 4 --subdivisions 4
  cfg=$w1
fi
if want paper; then
  [ "$(id -u)" -eq 0 ] || { echo "accuracy.sh: paper needs root (cluster/edge.sh)" >&2; exit 1; }
  c=$out/local-cluster.json
  [ -f "$c" ] || { echo "accuracy.sh: paper needs $c (run --only local first)" >&2; exit 1; }
  mp() { echo mpirun -np "$1" --oversubscribe --mca btl self,vader "$bin"; }
  for f in recompute exchange; do  # each pair measured in one sitting
    # shellcheck disable=SC2046
    {
      record paper-shm "$c" 1 1 $(mp 1) :: --grid 2x2 --tiles-per-rank 4 --groups all --backward-features $f
      record paper-shm "$c" 2 2 $(mp 2) :: --grid 1x2 --groups all --backward-features $f
      record paper-shm "$c" 2 2 $(mp 2) :: --grid 2x1 --groups 0,4,8,12 --backward-features $f
    }
  done
  export EDGE_CLUSTER=planner
  trap 'cluster/edge.sh down >/dev/null 2>&1 || true' EXIT
  cluster/edge.sh down >/dev/null 2>&1 || true
  cluster/edge.sh up --devices 4 --link 100mbit --cores 1 --device-speed 0.45 >&2
  c=$out/edge-100mbit-cluster.json
  [ -f "$c" ] || cluster/edge.sh run -- calibrate --cfg $cfg --threads 1 --out "$c" >&2
  run4() { record "paper-edge-100mbit" "$c" 4 1 cluster/edge.sh run --timeout 600 -- :: "$@"; }
  for f in recompute exchange; do
    run4 --grid 2x2 --groups all --backward-features $f
    run4 --grid 2x2 --groups 0,4,8,12 --backward-features $f
  done
fi
log "wrote $runs"
/usr/bin/python3 "$here/plot.py" "$out"
