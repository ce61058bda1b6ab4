#!/usr/bin/env bash
# A rank count that does not fit the grid and tile map: a clear error before any work,
# a non-zero status, and no hang.
# Usage: rank_mismatch.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set +e  # check reads each run's exit status itself
check() {  # expected message, then tiletrain arguments
  local want=$1 np=$2
  shift 2
  out=$(timeout 60 "${mpi[@]}" -np "$np" "$bin" "$@" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then echo "FAIL: exit status $rc for $*"; echo "$out"; exit 1; fi
  echo "$out" | grep -qF "$want" || { echo "FAIL: no '$want' in:"; echo "$out"; exit 1; }
  echo "$out" | grep -q "^step " && fail "training started"
  echo "ok: -np $np $*: $want"
}
cfg="$src/tests/fixtures/bn_stride/net.cfg"
check "needs 4 ranks, but 3 were started" 3 train --cfg "$cfg" --grid 2x2 --steps 1
check "needs 2 ranks, but 4 were started" 4 train --cfg "$cfg" --grid 2x2 --tiles-per-rank 2 --steps 1
check "do not split into 2 tile(s) per rank" 2 bench --cfg "$cfg" --grid 3x1 --tiles-per-rank 2 --steps 1
echo PASS
