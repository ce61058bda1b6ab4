# Sourced by the planner's benchmarks that run on an emulated cluster (cluster/edge.sh,
# root only): edge_cluster NAME UP-ARGS... brings up cluster NAME anew and takes it down
# when the script exits. Call it from the repository's root.
edge_cluster() {
  local name=$1
  shift
  [ "$(id -u)" -eq 0 ] || { echo "$(basename "$0"): needs root (cluster/edge.sh)" >&2; exit 1; }
  export EDGE_CLUSTER=$name
  trap 'cluster/edge.sh down >/dev/null 2>&1 || true' EXIT
  cluster/edge.sh down >/dev/null 2>&1 || true
  cluster/edge.sh up "$@" >&2
}
