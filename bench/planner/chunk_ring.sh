#!/usr/bin/env bash
# How --low-memory's weight chunks move on 4 emulated devices (cluster/edge.sh: 1 core at
# 0.45 of a core here each): chunk_ring.c's all-gathers and ring reduce-scatters, back to
# back and one at a time, for W1's chunks and for runs of 1, 2 and 8 one-owner 1 MB chunks.
# The cost model replays the ring rank by rank (chunk_ring_finish in
# src/planner/cost_model.cpp); this is what it is checked against.
#
#   bench/planner/chunk_ring.sh [--links 30mbit,1gbit] [--out DIR]   (root: namespaces, tc, cgroups)
#
# Output: DIR/chunk-ring.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=$here/out links="30mbit 1gbit"
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --links) links=${2//,/ }; shift 2 ;;
    *) echo "chunk_ring.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v mpicc >/dev/null || { echo "chunk_ring.sh: needs mpicc (Debian: libopenmpi-dev)" >&2; exit 1; }
mkdir -p "$out"
bin=$out/.chunk_ring  # not a temporary directory: edge_cluster's exit trap replaces any of ours
mpicc -O2 -o "$bin" "$here/chunk_ring.c"
# shellcheck source=edge_cluster.sh
. "$here/edge_cluster.sh"
: >"$out/chunk-ring.txt"
for link in $links; do
  edge_cluster chring --devices 4 --link "$link" --cores 1 --device-speed 0.45
  for what in W1 1 2 8; do
    echo "== $link, chunks: $what" | tee -a "$out/chunk-ring.txt"
    TILETRAIN_BIN=$bin cluster/edge.sh run --timeout 900 -- "$what" 2>&1 | grep '^round' | tee -a "$out/chunk-ring.txt"
  done
done
rm -f "$bin"
