#!/usr/bin/env bash
# Two tiletrain binaries on W1 in turn, ROUNDS times (the machine's load comes and goes,
# so only binaries alternated within minutes compare): median step and the totals of the
# forward, forward-pointwise and backward-pointwise columns of `bench --layers`.
# Extra arguments are environment settings, e.g. ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell.
# Usage: bench/ab_binaries.sh ROUNDS OLD_BINARY NEW_BINARY [VAR=VALUE...]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS OLD_BINARY NEW_BINARY [VAR=VALUE...]" >&2; exit 2; }
cd "$(dirname "$0")/.."
rounds=$1 old=$2 new=$3
shift 3
for r in $(seq "$rounds"); do
  for bin in "$old" "$new"; do
    out=$(env "$@" "$bin" bench --cfg cfgs/yolov2-16.cfg --threads 1 --steps 7 --warmup 2 --layers 2>&1)
    step=$(echo "$out" | awk '/^median step/ {print $3}')
    totals=$(echo "$out" | awk '$1 == "total" {print $2, $3, $4}')
    echo "$bin step $step fwd/fwd_pw/bwd_pw $totals"
  done
done
