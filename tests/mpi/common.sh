# Sourced by the MPI test scripts that take TILETRAIN_BINARY SOURCE_DIR: $bin, $src, a
# scratch folder $tmp (removed at exit), mpirun as root on this host (${mpi[@]}), fail, and
# refused NP EXPECTED ARGS... (the run must fail, naming EXPECTED on its stderr).
# shellcheck shell=bash disable=SC2034,SC2054  # set for the scripts that source it; mpirun's commas
set -eu
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)
fail() { echo "FAIL: $*"; exit 1; }
refused() {
  local np=$1 want=$2
  shift 2
  if "${mpi[@]}" -np "$np" "$bin" "$@" > "$tmp/x.log" 2> "$tmp/x.err"; then fail "ran: $*"; fi
  grep -qF -- "$want" "$tmp/x.err" || { cat "$tmp/x.err"; fail "no '$want' for: $*"; }
}
