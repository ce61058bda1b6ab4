# Shared by the cluster tests: skip (exit 77, CTest's SKIP_RETURN_CODE) where network
# namespaces and cgroups cannot be made, with the reason; bring a named cluster up and
# always take it down again.
# Usage (sourced): cluster_test NAME; then edge up ..., edge run ...
cluster_test() {
  export EDGE_CLUSTER=$1
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  src=$(cd "$here/../.." && pwd)
  edge=$src/cluster/edge.sh
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the cluster tests need root (network namespaces, tc, cgroups)"; exit 77; fi
  if ! ip netns add "tt-probe-$1" 2>/dev/null; then
    echo "SKIP: this machine does not allow network namespaces (ip netns add failed)"; exit 77
  fi
  ip netns del "tt-probe-$1"
  tmp=$(mktemp -d)
  trap '"$edge" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
}
edge() { "$edge" "$@"; }
