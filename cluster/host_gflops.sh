#!/usr/bin/env bash
# Prints ONE number: this machine's one-core speed in GFLOP/s as tiletrain's own kernels
# reach it, the "one core here" that cluster/edge.sh's time dilation compares with a real
# device's one-core speed (cluster/profiles.conf).
#
#   cluster/host_gflops.sh [-v] [--rounds N]
#
# How: `tiletrain bench --layers --json` on cluster/host_gflops.cfg (W1's 3x3 convolutions
# from 104x104 down to 26x26, batch 1) with one thread, N rounds (default 5) of 1 untimed
# and 3 timed steps. The figure is the forward FLOPs of the counted layers (every
# convolution but layer 0, which only reads the plain input) over the sum of their mean
# forward times, each layer's taken from its fastest round (load from other VMs on a shared
# host only ever slows a round). About 10 s (15 under an AVX2 cap).
#
# It times the kernels a device's tiles run, so it follows what changes them
# (ONEDNN_MAX_CPU_ISA) and nothing that does not: the timed forwards run on oneDNN's JIT
# or the own kernels, never on OpenBLAS, so OPENBLAS_CORETYPE does not move it (it did move
# numpy's sgemm, which the dilation used before: issue #33). It checks that premise and
# fails if a counted forward ran on OpenBLAS.
#
# TILETRAIN_BIN: the binary (default: build/tiletrain of this repository).
# -v: each round's figure and the kernels on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${TILETRAIN_BIN:-$root/build/tiletrain}
cfg=$here/host_gflops.cfg
rounds=5
verbose=0

die() { echo "host_gflops.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    -v) verbose=1; shift ;;
    --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; rounds=$2; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || die "--rounds must be 1-99 (got '$rounds')"
[ -f "$bin" ] || die "no tiletrain binary at $bin: build it (scripts/setup.sh tiletrain) or set TILETRAIN_BIN"
[ -x "$bin" ] || die "$bin is not executable (TILETRAIN_BIN)"
[ -f "$cfg" ] || die "missing $cfg"

# One thread everywhere: tiletrain's own option, and the libraries' in case they read theirs.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# Forward FLOPs per counted layer, from tiletrain's own count (`info`: index, GFLOPs).
info=$("$bin" info --cfg "$cfg") || die "$bin info --cfg $cfg failed"
flops=$(awk '$2 ~ /^convolutional/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
    if ($8 !~ /^[0-9.]+$/) exit 1; printf "%s %s\n", $1, $8 * 1e9 }' <<<"$info") ||
  die "cannot read the layers' GFLOPs from '$bin info' (has its table changed?)"
[ -n "$flops" ] || die "no convolution after layer 0 in $cfg"

best_times=""  # per counted layer, its fastest mean forward time over the rounds so far
for ((r = 1; r <= rounds; r++)); do
  json=$("$bin" bench --cfg "$cfg" --threads 1 --steps 3 --warmup 1 --layers --json 2>/dev/null | tail -n 1) ||
    die "'$bin bench --cfg $cfg --threads 1' failed (run it by hand to see why)"
  # The counted layers' forward kernels (none may be OpenBLAS: it would follow
  # OPENBLAS_CORETYPE) and each convolution's mean forward time (rank 0's layer_times), read
  # with a JSON parser.
  kernels=$(/usr/bin/python3 -c 'import json, sys
for k in json.load(sys.stdin).get("kernels", []):
    if k.get("pass") == "forward": print(k["layer"], k["kernel"])' <<<"$json" 2>/dev/null) || true
  times=$(/usr/bin/python3 -c 'import json, sys
for t in (json.load(sys.stdin).get("layer_times") or [[]])[0]:
    if t.get("type") == "convolutional": print(t["layer"], repr(float(t["fwd_s"])))' <<<"$json" 2>/dev/null) || true
  if [ -z "$times" ] || [ -z "$kernels" ]; then
    die "no per-layer forward times or kernels in bench's JSON (has it changed?)"
  fi
  # Line 1: status, this round's figure, the kernels; then each layer's best time so far.
  out=$(awk '
    part == 1 { flops[$1] = $2 } part == 2 { kern[$1] = $2 } part == 3 { secs[$1] = $2 } part == 4 { best[$1] = $2 }
    END {
      for (l in flops) {
        if (!(l in secs) || !(l in kern)) { print "missing " l; exit }
        if (kern[l] ~ /gemm|openblas/) { print "openblas " l " " kern[l]; exit }
        if (secs[l] <= 0) { print "zero " l; exit }
        f += flops[l]; s += secs[l]; used[kern[l]] = 1
      }
      for (k in used) names = names (names == "" ? "" : ",") k
      printf "ok %.1f %s\n", f / s / 1e9, names
      for (l in flops) printf "%s %.9g\n", l, (l in best && best[l] < secs[l]) ? best[l] : secs[l]
    }' part=1 <(echo "$flops") part=2 <(echo "$kernels") part=3 <(echo "$times") part=4 <(echo "$best_times"))
  read -r status fig names <<<"$out"
  case $status in
    ok) ;;
    openblas) die "layer $fig's forward ran on $names, not on tiletrain's own kernels: this figure would follow OPENBLAS_CORETYPE" ;;
    *) die "bench's JSON lacks a forward time or kernel for a counted layer ($status $fig)" ;;
  esac
  best_times=$(tail -n +2 <<<"$out")
  if [ "$verbose" = 1 ]; then echo "host_gflops.sh: round $r: $fig GFLOP/s (forward, kernels $names)" >&2; fi
done
# The figure: each counted layer at its fastest round (load from other VMs only slows a round).
awk 'part == 1 { flops[$1] = $2 } part == 2 { secs[$1] = $2 }
  END { for (l in flops) { f += flops[l]; s += secs[l] }; printf "%.1f\n", f / s / 1e9 }' \
  part=1 <(echo "$flops") part=2 <(echo "$best_times")
