#!/usr/bin/env bash
# A stand-in for ssh that Open MPI's launcher (plm_rsh_agent) and `edge.sh exec` call:
#   agent.sh [ssh options] HOST COMMAND...
# HOST is an emulated device's address 10.77.0.(K+1); COMMAND runs inside device K of
# cluster $EDGE_CLUSTER: its network namespace tt-NAME-devK, its own host name devK (a UTS
# namespace) and its cgroups.
set -euo pipefail
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done  # ssh options: none apply
host=${1:?agent.sh: no host}
shift
case $host in
  10.77.0.*) k=$((${host##*.} - 1)) ;;
  *) echo "agent.sh: $host is not an emulated device (10.77.0.1-...)" >&2; exit 255 ;;
esac
cluster=${EDGE_CLUSTER:-main}
ns=tt-$cluster-dev$k
ip netns list | awk '{print $1}' | grep -qx "$ns" || { echo "agent.sh: no namespace $ns (is the cluster up?)" >&2; exit 255; }
# Join the device's cgroups; they stay with this process through exec.
for d in /sys/fs/cgroup/{cpu/,memory/,}tiletrain-edge/$cluster/dev$k; do
  [ -f "$d/cgroup.procs" ] && echo $$ >"$d/cgroup.procs"
done
# nsenter, not `ip netns exec`: the latter mounts the namespace's own /sys, where
# /sys/fs/cgroup is empty, and `calibrate` then read the machine's memory (24 GB) as a
# Pi 3's instead of its cgroup limit (1 GB).
exec nsenter --net="/run/netns/$ns" unshare --uts /bin/sh -c 'hostname "$1"; exec /bin/sh -c "$2"' agent dev$k "$*"
