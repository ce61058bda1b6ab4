#!/usr/bin/env bash
# mpirun for this machine: allowed as root, more ranks than cores, shared memory between
# local ranks and no sockets on external interfaces. Usage: scripts/mpirun.sh N tiletrain-args...
set -euo pipefail
n=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$n" --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo \
  "$(dirname "$0")/../build/tiletrain" "$@"
