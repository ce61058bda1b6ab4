#!/usr/bin/env bash
# Regenerates the paper's experiments ("Experiments and Results" of
# ../shared/paper/distributed-cnn-training-edge.tex) on an emulated edge cluster on this
# machine (cluster/edge.sh), and writes CSV and PNG files to bench/paper/out/<mode>/.
#
#   bench/paper/run.sh [--quick] [--only speedup,memory,batch,comm] [--size HxW] [--out DIR]
#
#   speedup  W1 at batch 1 on 1-6 Pi 3 devices x 1-4 cores (one rank per device, one tile
#            per core), and on six of them with --low-memory: step time split and speed-up
#            vs 1 core (batch 1, and "infinite batch" = without weight exchange and update).
#   memory   one process per tile (as the paper's engine): peak RSS per tile and per device,
#            with and without --low-memory.
#   batch    6 Pi 3 devices x 4 cores (24 tiles), batch 1-8 x grouping none / 0,4,8,12 /
#            0,8,12, and the optimizer's choice: `tiletrain plan --optimize` on a cluster file
#            that `tiletrain calibrate` measured on this very emulated cluster.
#   comm     2 comm-bound devices x 1 core, batch 1-8 x grouping none / 0,4,8,12 / 0,8,12 / all
#            and the optimizer's choice, on `comm-bound` (no latency) and `comm-bound-wifi`
#            (600 Mbit/s, 2 ms +-0.5 ms round trip to the access point).
#   Every run: --backward-features exchange (the paper's scheme: features backward needs are
#   swapped with the neighbours, not recomputed) and --overlap auto (interior computed while
#   a halo crosses the network). In batch and comm each candidate runs twice, interleaved,
#   and the faster run counts. Each run times ONE step after one warm-up step, so that rank
#   0's parts add up to its step (medians of parts over several steps do not).
#
# --quick: 5 instead of 24 device/core configurations (1x1 2x1 2x4 4x4 6x4; 6x4 also with
# --low-memory), one process per tile on 1x4 and 6x4, batches 1 and 8, groupings none /
# 0,4,8,12 + the optimizer's, one run each; under 10 minutes on 2 cores (about 3 of them
# are tiletrain calibrate on the three clusters).
# Full run: about an hour.
# Output: runs.jsonl (every run, tiletrain's JSON + what we configured), runs.csv and
# per-experiment CSV, PNG and summary.md written by plot.py; raw/ holds each run's output
# (ID.log: stdout, the JSON line; ID.err: stderr, bench's per-rank table).
# Needs root (network namespaces, tc, cgroups). Every run must succeed; a run killed by a
# device's memory limit is recorded as "oom" (a result); any other failure stops the
# script with a non-zero status. The cluster is removed at the end, on error and on ^C.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

mode=full only=speedup,memory,batch,comm size="" outdir="" cmdline="bench/paper/run.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) mode=quick; shift ;;
    --only) only=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --out) outdir=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (cluster/edge.sh)" >&2; exit 1; }
want() { [[ ",$only," == *",$1,"* ]]; }
exec 9>/run/tiletrain-paper.lock  # one run at a time: they share the cluster name and the output
flock -n 9 || { echo "run.sh: another bench/paper/run.sh is running (it holds /run/tiletrain-paper.lock)" >&2; exit 1; }

cfg=cfgs/yolov2-16.cfg
speed_pi3=$(awk -v h="$(nproc)" 'BEGIN { printf "%.4f", 0.9 * h / 24 }')  # 6 devices x 4 cores in 90 % of this machine
if [ $mode = quick ]; then
  steps=1 warmup=1 timeout=240
  gsteps=1 reps=1                             # grouping experiments: steps per run, runs per candidate
  speedup_cfgs="1x1 2x1 2x4 4x4 6x4"          # devices x cores
  lowmem_cfgs="6x4"                           # of those, also run with --low-memory
  tile_cfgs="1x4 6x4" tile_lows="0 1"         # one process per tile (C > 1; with C = 1 the speedup runs are that)
  tile_lows_cfgs=""                           # of those, also with --low-memory (none)
  batches="1 8"
  groups_pi3="none 0,4,8,12"
  groups_comm="none 0,4,8,12"
  cal_steps=2                                 # tiletrain calibrate: timed steps per map size
else
  steps=1 warmup=1 timeout=600                # one timed step: its parts add up to it
  gsteps=1 reps=2
  cal_steps=10
  speedup_cfgs=""
  for n in 1 2 3 4 5 6; do for c in 1 2 3 4; do speedup_cfgs+="${n}x$c "; done; done
  lowmem_cfgs="2x1 4x1 6x1 2x4 4x4 6x4"
  tile_cfgs="1x4 2x4 4x4 6x4" tile_lows="0 1"
  tile_lows_cfgs=$tile_cfgs
  batches="1 2 4 8"
  groups_pi3="none 0,4,8,12 0,8,12"
  groups_comm="none 0,4,8,12 0,8,12 all"
fi
speed_comm=0.6  # comm-bound devices: 2 x 0.6 cores leave this shared machine some room
# The paper's scheme for every run: features backward needs outside a tile are exchanged
# with the neighbours (not recomputed), and a tile's interior is computed while its halo
# crosses the network (auto = where the halo comes from another device).
scheme=(--backward-features exchange --overlap auto)
mem_steps=1 mem_warmup=0  # memory-only runs: every buffer is allocated and used in the first step

out=${outdir:-$here/out/$mode}
mkdir -p "$out"
rm -rf "$out/raw" "$out/runs.jsonl"
mkdir -p "$out/raw"
t_start=$(date +%s)
log() { printf '[%s %4ds] %s\n' "$(date +%H:%M:%S)" $(($(date +%s) - t_start)) "$*"; }

# matplotlib from Debian.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  log "installing python3-matplotlib"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null
fi
[ -x build/tiletrain ] || scripts/setup.sh tiletrain

# The cluster: cluster/edge.sh's own named cluster `paper` (EDGE_CLUSTER), so that the
# clusters of tests running at the same time are left alone. What we change around it:
#  - we run copies of the committed cluster scripts and of build/tiletrain, both of which
#    may be rebuilt or edited while we run;
#  - `edge.sh up` measures this machine's one-core speed anew each time
#    (cluster/host_gflops.sh: tiletrain's convolutions on one thread; numpy's sgemm, used
#    before, varied between 75 and 92 GFLOP/s from one `up` to the next here), so D and
#    the link rate would differ between configurations run at the same --device-speed. We
#    measure it once (best of 3 runs of the script) and the copy's host_gflops.sh prints
#    that figure: one D and one link rate for all Pi 3 runs;
#  - every run checks that each device's cgroup did run (and throttle) its ranks.
export EDGE_CLUSTER=paper
tmp=$(mktemp -d /tmp/tiletrain-paper.XXXXXX)
edge=$tmp/cluster/edge.sh
cgname=tiletrain-edge/$EDGE_CLUSTER
state=/run/tiletrain-edge/$EDGE_CLUSTER/state
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [ -n "${acct_pid:-}" ] && kill "$acct_pid" 2>/dev/null
  [ -x "$edge" ] && "$edge" down >/dev/null 2>&1
  declare -F acct_cleanup >/dev/null && acct_cleanup
  rm -rf "$tmp"
  [ $rc -ne 0 ] && log "FAILED (status $rc); cluster removed" >&2
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$tmp/cluster"
for f in edge.sh agent.sh profiles.conf ping.py; do
  git show "HEAD:cluster/$f" >"$tmp/cluster/$f" 2>/dev/null || cp "cluster/$f" "$tmp/cluster/$f"
done
chmod +x "$tmp/cluster/"*.sh
grep -q 'EDGE_CLUSTER' "$edge" && grep -q 'EDGE_CLUSTER' "$tmp/cluster/agent.sh" ||
  { echo "run.sh: cluster/edge.sh has no named clusters (EDGE_CLUSTER); it would replace other users' clusters" >&2; exit 1; }
grep -q 'host_gflops\.sh' "$edge" ||
  { echo "run.sh: cluster/edge.sh does not take this machine's speed from cluster/host_gflops.sh; the fixed figure below would not reach it" >&2; exit 1; }
cp build/tiletrain "$tmp/tiletrain"
export TILETRAIN_BIN=$tmp/tiletrain
[ -x build/edge_delay_line ] || scripts/setup.sh edge_delay_line
cp build/edge_delay_line "$tmp/edge_delay_line"
export EDGE_DELAY_LINE=$tmp/edge_delay_line
# Both are best-of measurements: other people's work on this machine only slows them.
host_gflops=0
for _ in 1 2 3; do
  host_gflops=$(cluster/host_gflops.sh | awk -v b="$host_gflops" '{ print ($1 > b ? $1 : b) }')
done
printf '#!/bin/sh\n# run.sh: this machine measured once, the same figure for every cluster\necho %s\n' \
  "$host_gflops" >"$tmp/cluster/host_gflops.sh"
chmod +x "$tmp/cluster/host_gflops.sh"
# The same W1 step on one unthrottled core here, outside the cluster (fastest of 3 runs):
# how much of a core an emulated core really delivers (CFS quota slices are not free).
host_args=(bench --cfg $cfg --threads 1 --steps 3 --warmup 1 --json)
[ -n "$size" ] && host_args+=(--size "$size")
host_json=""
for _ in 1 2 3; do
  j=$("$tmp/tiletrain" "${host_args[@]}" 2>/dev/null | tail -n 1)
  host_json=$(/usr/bin/python3 -c 'import json, sys
a = [json.loads(x) for x in sys.argv[1:] if x]
print(json.dumps(min(a, key=lambda r: r["step_s"])))' "$j" "$host_json")
done

# What ran: commit, binary, machine.
/usr/bin/python3 - "$out/meta.json" "$host_json" <<PY
import json, sys, os, subprocess, datetime
def sh(*a):
    return subprocess.run(a, capture_output=True, text=True).stdout.strip()
json.dump({
    "mode": "$mode", "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    "command": "${cmdline% }",
    "commit": sh("git", "rev-parse", "--short", "HEAD"),
    "src_dirty": bool(sh("git", "status", "--porcelain", "src", "cluster")),
    "binary_sha256": sh("sha256sum", "$tmp/tiletrain").split()[0],
    "binary_mtime": datetime.datetime.fromtimestamp(os.path.getmtime("build/tiletrain")).isoformat(timespec="seconds"),
    "nproc": os.cpu_count(), "cpu": sh("sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
    "kernel": os.uname().release, "steps": $steps, "warmup": $warmup, "size": "${size:-416x416}",
    "speed_pi3": $speed_pi3, "host_gflops": $host_gflops,
    "host_step": {k: v for k, v in json.loads(sys.argv[2]).items() if k.endswith("_s")},
}, open(sys.argv[1], "w"), indent=1)
PY

# --- the cluster ------------------------------------------------------------------------
cgv=1
[ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_period_us ] || cgv=2
cpu_dir() { if [ $cgv = 1 ]; then echo /sys/fs/cgroup/cpu/$cgname/dev$1; else echo /sys/fs/cgroup/$cgname/dev$1; fi; }
mem_dir() { if [ $cgv = 1 ]; then echo /sys/fs/cgroup/memory/$cgname/dev$1; else echo /sys/fs/cgroup/$cgname/dev$1; fi; }
oom_kills() {  # total OOM kills in the devices' memory cgroups
  local k n=0 v
  for ((k = 0; k < cur_devices; k++)); do
    if [ $cgv = 1 ]; then v=$(awk '$1 == "oom_kill" { print $2 }' "$(mem_dir $k)/memory.oom_control" 2>/dev/null)
    else v=$(awk '$1 == "oom_kill" { print $2 }' "$(mem_dir $k)/memory.events" 2>/dev/null); fi
    n=$((n + ${v:-0}))
  done
  echo $n
}
cpu_periods() {  # CFS periods with runnable tasks, per device (space-separated)
  local k
  for ((k = 0; k < cur_devices; k++)); do awk '$1 == "nr_periods" { printf "%s ", $2 }' "$(cpu_dir $k)/cpu.stat"; done
}
reset_mem_peak() {
  local k
  [ $cgv = 1 ] || return 0
  for ((k = 0; k < cur_devices; k++)); do echo 0 >"$(mem_dir $k)/memory.max_usage_in_bytes" 2>/dev/null || true; done
}
mem_peak_mb() {  # largest device's cgroup memory peak (v1: since reset; v2: since up)
  local k m=0 v f
  for ((k = 0; k < cur_devices; k++)); do
    if [ $cgv = 1 ]; then f=$(mem_dir $k)/memory.max_usage_in_bytes; else f=$(mem_dir $k)/memory.peak; fi
    v=$(cat "$f" 2>/dev/null || echo 0)
    [ "$v" -gt "$m" ] && m=$v
  done
  awk -v b="$m" 'BEGIN { printf "%.1f", b / 1048576 }'
}

# CPU time the devices' processes really used: cgroup v1 has no usage in the cpu
# controller, so a sampler moves each device's processes into a cpuacct cgroup of ours
# (every 0.2 s; children forked after a move are in it already). With /proc/stat this
# gives how much CPU everyone else took during a run, i.e. whether the devices could get
# their quota at all on this shared machine.
acct_root=/sys/fs/cgroup/cpuacct/tiletrain-paper
acct_ok=0
[ $cgv = 1 ] && [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ] && acct_ok=1
acct_start() {
  [ $acct_ok = 1 ] || return 0
  local k
  for ((k = 0; k < cur_devices; k++)); do
    mkdir -p "$acct_root/dev$k"
    echo 0 >"$acct_root/dev$k/cpuacct.usage"
  done
  (
    while :; do
      for ((k = 0; k < cur_devices; k++)); do
        while read -r p; do echo "$p" >"$acct_root/dev$k/cgroup.procs" 2>/dev/null || true; done <"$(cpu_dir $k)/cgroup.procs"
      done
      sleep 0.2
    done
  ) &
  acct_pid=$!
}
acct_stop() {  # prints the devices' CPU seconds
  [ $acct_ok = 1 ] || { echo None; return 0; }
  kill "$acct_pid" 2>/dev/null || true
  wait "$acct_pid" 2>/dev/null || true
  local k ns=0
  for ((k = 0; k < cur_devices; k++)); do ns=$((ns + $(cat "$acct_root/dev$k/cpuacct.usage"))); done
  awk -v n=$ns 'BEGIN { printf "%.3f", n / 1e9 }'
}
acct_cleanup() {
  [ -d "$acct_root" ] || return 0
  local d
  for d in "$acct_root"/dev*; do
    [ -d "$d" ] || continue
    while read -r p; do echo "$p" >/sys/fs/cgroup/cpuacct/cgroup.procs 2>/dev/null || true; done <"$d/cgroup.procs"
    rmdir "$d" 2>/dev/null || true
  done
  rmdir "$acct_root" 2>/dev/null || true
}

cur_key="" cur_devices=0
cluster_up() {  # devices cores profile [speed]: skipped when that cluster is already up
  local key="$*"
  [ "$key" = "$cur_key" ] && return 0
  local args=(--devices "$1" --cores "$2" --profile "$3")
  [ -n "${4:-}" ] && args+=(--device-speed "$4")
  "$edge" up "${args[@]}" >"$out/raw/up-$1x$2-$3.txt" 2>&1 || { cat "$out/raw/up-$1x$2-$3.txt" >&2; exit 1; }
  cur_key=$key cur_devices=$1 cur_cal=""
  # shellcheck disable=SC1090
  (. "$state"; log "cluster: $devices x $profile ($cores cores x $speed of a core here), D = $dilation, link $(awk -v b="${link%bit}" 'BEGIN { printf "%.1f", b / 1e6 }') Mbit/s$(read -r rtt jit <"${state%/state}/latency0" 2>/dev/null && [ "${rtt:-0}" != 0 ] && echo ", round trip $rtt ms +-$jit ms to the switch (device time)" || true)")
}

# The optimizer's choice: `tiletrain calibrate` on the cluster that is up (once per
# cluster), then `tiletrain plan --cluster FILE --optimize` for the batch; sets opt_n
# (devices it uses), opt_per (ranks per device), opt_args (its bench options), opt_pred
# (its predicted step, emulated s). As bench/planner/optimizer_check.sh does.
cur_cal=""
optimizer_choice() {  # batch
  local tag=${cur_key// /-}
  if [ -z "$cur_cal" ]; then
    cur_cal=$out/raw/cluster-$tag.json
    local cal=(calibrate --cfg $cfg --threads 1 --steps $cal_steps --out "$cur_cal")
    [ -n "$size" ] && cal+=(--size "$size")
    local t0=$SECONDS
    "$edge" run --timeout "$timeout" -- "${cal[@]}" >"$out/raw/calibrate-$tag.txt" 2>&1 ||
      { tail -n 20 "$out/raw/calibrate-$tag.txt" >&2; echo "run.sh: tiletrain calibrate failed on $tag" >&2; exit 1; }
    log "calibrated the cluster in $((SECONDS - t0)) s: $cur_cal"
  fi
  local plan=(plan --cfg $cfg --cluster "$cur_cal" --optimize --top 1 --batch "$1" --json)
  [ -n "$size" ] && plan+=(--size "$size")
  "$tmp/tiletrain" "${plan[@]}" >"$out/raw/plan-$tag-b$1.json" 2>"$out/raw/plan-$tag-b$1.err" ||
    { cat "$out/raw/plan-$tag-b$1.err" >&2; exit 1; }
  local line
  line=$(/usr/bin/python3 - "$out/raw/plan-$tag-b$1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["best"][0]
args = c["command"].split(" -- ", 1)[1].split("   #")[0].split()
assert args[0] == "train", args
args = args[1:]
i = args.index("--cfg"); del args[i:i + 2]
i = args.index("--steps"); del args[i:i + 2]
if "--batch" in args:  # run() gives the batch
    i = args.index("--batch"); del args[i:i + 2]
print(c["ranks"] // c["ranks_per_device"], c["ranks_per_device"], c["prediction"]["step_s"], " ".join(args), sep="|")
PY
)
  IFS='|' read -r opt_n opt_per opt_pred opt_args <<<"$line"
}

grid_for() {  # devices cores -> RxC: R*C = devices*cores, each device's cores tiles (tile t on
  # rank t/cores, row-major) form a rectangle (part of one row, or whole rows), tiles as
  # square as possible, R <= C on a tie.
  local n=$1 c=$2 t=$(($1 * $2)) r cols best="" bs=0 s
  for ((r = 1; r <= t; r++)); do
    ((t % r == 0)) || continue
    cols=$((t / r))
    ((c % cols == 0 || cols % c == 0)) || continue
    s=$(((r > cols ? r * 1000 / cols : cols * 1000 / r)))
    if [ -z "$best" ] || ((s < bs)); then best=${r}x$cols bs=$s; fi
  done
  echo "$best"
}

nrun=0
# run LABEL EXP DEVICES CORES RANKS_PER_DEVICE BATCH GROUPS LOWMEM(0|1) STEPS WARMUP
# With GROUPS = optimizer: the options opt_args from optimizer_choice on opt_n devices x
# opt_per ranks (DEVICES and RANKS_PER_DEVICE are then the cluster's).
run() {
  local label=$1 rep=1
  if [ "$label" = --rep ]; then rep=$2; shift 2; label=$1; fi
  shift
  local exp=$1 n=$2 c=$3 per=$4 batch=$5 groups=$6 low=$7 st=$8 wu=$9
  local grid tpr id args rc status=ok chosen="" pred=None
  grid=$(grid_for "$n" "$c")
  tpr=$((c / per))
  nrun=$((nrun + 1))
  id=$(printf '%03d-%s-%dx%d-r%d-b%d-%s%s-%d' $nrun "$exp" "$n" "$c" "$per" "$batch" "${groups//,/_}" "$([ "$low" = 1 ] && echo -lowmem)" "$rep")
  if [ "$groups" = optimizer ]; then
    # shellcheck disable=SC2206
    local oa=($opt_args)
    args=(bench --cfg $cfg --threads 1 "${oa[@]}" --batch "$batch" --steps "$st" --warmup "$wu" --json)
    chosen="$opt_n device(s) x $opt_per rank(s): $opt_args" pred=$opt_pred
    n=$opt_n per=$opt_per
    grid=$(/usr/bin/python3 -c 'import sys; a = sys.argv[1:]; print(a[a.index("--grid") + 1])' "${oa[@]}")
    tpr=$(/usr/bin/python3 -c 'import sys; a = sys.argv[1:]; print(a[a.index("--tiles-per-rank") + 1] if "--tiles-per-rank" in a else 1)' "${oa[@]}")
    [[ " $opt_args " == *" --low-memory "* ]] && low=1
  else
    args=(bench --cfg $cfg --threads 1 --grid "$grid" --tiles-per-rank "$tpr" --groups "$groups" "${scheme[@]}" --batch "$batch" --steps "$st" --warmup "$wu" --json)
    [ "$low" = 1 ] && args+=(--low-memory)
  fi
  [ -n "$size" ] && args+=(--size "$size")
  local oom0 per0 per1 t0 t1
  oom0=$(oom_kills)
  per0=$(cpu_periods)
  reset_mem_peak
  local cpu0 cpu1
  cpu0=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  acct_start
  t0=$(date +%s.%N)
  set +e
  "$edge" run --devices "$n" --ranks-per-device "$per" --timeout "$timeout" -- "${args[@]}" >"$out/raw/$id.log" 2>"$out/raw/$id.err" &  # apart: a rank's table could land inside the JSON line
  wait $!  # in the background, so that a TERM is handled (cleanup) at once
  rc=$?
  set -e
  t1=$(date +%s.%N)
  local used
  used=$(acct_stop)
  cpu1=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  per1=$(cpu_periods)
  # Each device's cgroup must have run (and throttled) its ranks.
  local a=($per0) b=($per1) k
  for ((k = 0; k < n; k++)); do
    if [ "${b[$k]}" -le "${a[$k]}" ]; then
      echo "run.sh: device $k's cgroup ran nothing during $id: the ranks are not under the device's CPU quota" >&2
      exit 1
    fi
  done
  if [ $rc -ne 0 ]; then
    if [ "$(oom_kills)" -gt "$oom0" ]; then
      status=oom
    else
      echo "run.sh: run $id failed (status $rc); its output:" >&2
      tail -n 30 "$out/raw/$id.err" "$out/raw/$id.log" >&2
      exit 1
    fi
  fi
  local json="{}"
  if [ $status = ok ]; then
    json=$(tail -n 1 "$out/raw/$id.log")
    [[ "$json" == "{"* ]] || { echo "run.sh: run $id printed no JSON line (see $out/raw/$id.log)" >&2; exit 1; }
  fi
  # One line of runs.jsonl: what we configured, the cluster, tiletrain's JSON (without its kernel list).
  local summary
  summary=$(/usr/bin/python3 - "$out/runs.jsonl" "$state" "$json" "$out/raw/$id.err" "${args[*]}" "$chosen" <<PY
import json, re, sys
st = dict(l.strip().split("=", 1) for l in open(sys.argv[2]) if "=" in l)
r = json.loads(sys.argv[3])
r.pop("kernels", None)
# Every rank's step and parts (bench's table on stderr; the JSON has only maxima over
# ranks, which need not add up to anything).
num = r"(-?[0-9.]+)"
r["by_rank"] = [dict(rank=int(m[0]), host=m[1], **{k: float(v) for k, v in zip(
                    ("step_s", "fwd_s", "bwd_s", "halo_s", "weights_s", "io_s", "update_s", "peak_mb"), m[2:])})
                for m in re.findall(r"(?m)^(\d+)\s+(\S+)" + r"\s+" .join([""] + [num] * 7) + r"\s+\|\s+" + num,
                                    open(sys.argv[4], errors="replace").read())]
try:
    lat = open("${state%/state}/latency0").read().split()
    rtt, jit = float(lat[0]), float(lat[1])
except (OSError, IndexError, ValueError):
    rtt, jit = 0.0, 0.0
r.update(id="$id", rep=$rep, experiment="$exp", devices=$n, cores=$c, tiles=eval("$grid".replace("x", "*")), ranks_per_device=$per,
         tiles_per_rank=$tpr, grid_rc="$grid", batch=$batch, groups="$groups", low_memory=bool($low),
         args=sys.argv[5], chosen=sys.argv[6], predicted_step_s=$pred, rtt_ms=rtt, jitter_ms=jit,
         cluster_devices=$cur_devices,
         size="${size:-416x416}", steps=$st, warmup=$wu, status="$status", profile=st["profile"],
         dilation=float(st["dilation"]), device_speed=float(st["speed"]), link_bps=float(st["link"].rstrip("bit")),
         host_gflops=float(st["host_gflops"]), mem_limit_mb=float(st["memory"] or 0),
         cgroup_peak_mb_max=$(mem_peak_mb), wall_s=round($t1 - $t0, 2),
         loadavg=float(open("/proc/loadavg").read().split()[0]))
# Cores of this machine busy during the run (all processes), and the devices' CPU quota:
# busy well above the quota means someone else was computing at the same time.
(b0, a0), (b1, a1) = [tuple(map(float, x.split())) for x in ("$cpu0", "$cpu1")]
r["busy_cores"] = round($(nproc) * (b1 - b0) / max(a1 - a0, 1), 2)
r["quota_cores"] = round($n * $c * float(st["speed"]), 3)
# used: cores the devices' processes used on average; others: everyone else's cores.
used = $used
if used is not None:
    r["used_cores"] = round(used / max($t1 - $t0, 1e-9), 3)
    r["others_cores"] = round(max(0.0, r["busy_cores"] - r["used_cores"]), 2)
    # starved: this machine was full and the others took part of what the devices were promised
    r["starved"] = r["busy_cores"] >= 0.95 * $(nproc) and r["others_cores"] + r["quota_cores"] > $(nproc)
open(sys.argv[1], "a").write(json.dumps(r) + "\n")
if r["status"] == "ok":
    D = r["dilation"]
    print(f"step {r['step_s']:.3f} s = {r['step_s']/D:.3f} device s (fwd {r['fwd_s']:.2f} bwd {r['bwd_s']:.2f} "
          f"halo {r['halo_s']:.2f} weights {r['weights_s']:.2f} io {r['io_s']:.2f} update {r['update_s']:.2f}); "
          f"RSS {r['peak_rss_mb_max']:.0f} MB/rank, {r['peak_rss_mb_host']:.0f} MB/device; run {r['wall_s']:.0f} s, "
          f"devices used {r.get('used_cores', float('nan')):.2f} cores (quota {r['quota_cores']:.2f}), "
          f"others {r.get('others_cores', float('nan')):.2f}{' STARVED' if r.get('starved') else ''}"
          + (f"; chose {r['chosen']}, predicted {r['predicted_step_s']:.3f} s" if r["chosen"] else ""))
else:
    print(f"OUT OF MEMORY (device limit {r['mem_limit_mb']:.0f} MB); run {r['wall_s']:.0f} s")
PY
)
  log "$(printf '#%-3d %-8s %s' $nrun "$exp" "$label"): $summary"
}

log "mode $mode: steps $steps, warm-up $warmup, size ${size:-416x416 (the cfg)}, output $out"
log "one core here: tiletrain's convolutions $host_gflops GFLOP/s (fixed for every cluster), W1 step $(/usr/bin/python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["step_s"], 3))' "$host_json") s unthrottled"

# --- 1 and 2: speed-up and memory per device, one rank per device ---------------------
if want speedup; then
  for nc in $speedup_cfgs; do
    n=${nc%x*} c=${nc#*x}
    cluster_up "$n" "$c" pi3 "$speed_pi3"
    for low in 0 1; do
      [ $low = 1 ] && [[ " $lowmem_cfgs " != *" $nc "* ]] && continue
      ((n * c == 1 && low == 1)) && continue  # nothing to shard on one process
      run "$n dev x $c cores, grid $(grid_for "$n" "$c")$([ $low = 1 ] && echo ', low-memory' || true)" \
        speedup "$n" "$c" 1 1 none $low $steps $warmup
    done
  done
fi

# --- 2: memory per tile, one process per tile (as the paper's engine) ------------------
if want memory; then
  for nc in $tile_cfgs; do
    n=${nc%x*} c=${nc#*x}
    cluster_up "$n" "$c" pi3 "$speed_pi3"
    for low in $tile_lows; do
      [ $low = 1 ] && [[ " $tile_lows_cfgs " != *" $nc "* ]] && continue
      run "$n dev x $c ranks, grid $(grid_for "$n" "$c")$([ $low = 1 ] && echo ', low-memory' || true)" \
        memory "$n" "$c" "$c" 1 none $low $mem_steps $mem_warmup
    done
  done
fi

# --- 3: batch x grouping on 6 Pi 3 devices x 4 cores ----------------------------------
# The optimizer's choice is one more candidate: `optimizer`.
if want batch; then
  cluster_up 6 4 pi3 "$speed_pi3"
  for b in $batches; do
    optimizer_choice "$b"
    for ((rep = 1; rep <= reps; rep++)); do  # candidates interleaved, the fastest run of each counts
      for g in $groups_pi3 optimizer; do
        run --rep $rep "6 dev x 4 cores, batch $b, groups $g, run $rep/$reps" batch 6 4 1 "$b" "$g" 0 $gsteps $warmup
      done
    done
  done
fi

# --- 4: 2 comm-bound devices x 1 core, without and with latency ---------------------------
if want comm; then
  for prof in comm-bound comm-bound-wifi; do
    exp=comm
    [ $prof = comm-bound-wifi ] && exp=commwifi
    cluster_up 2 1 $prof "$speed_comm"
    for b in $batches; do
      optimizer_choice "$b"
      for ((rep = 1; rep <= reps; rep++)); do
        for g in $groups_comm optimizer; do
          run --rep $rep "2 dev x 1 core ($prof), batch $b, groups $g, run $rep/$reps" $exp 2 1 1 "$b" "$g" 0 $gsteps $warmup
        done
      done
    done
  done
fi

"$edge" down >/dev/null
log "all $nrun runs done; plotting"
/usr/bin/python3 "$here/plot.py" "$out"
log "done in $(($(date +%s) - t_start)) s: $out"
