#!/usr/bin/env bash
# Without a CPU quota a waiting rank polls 2 ms before it naps, also with more ranks than
# cores (comm/mpi_comm.hpp busy_poll_window_s; under a quota, see
# tests/cluster/verify_2_devices.sh). Read from bench --json: what the ranks worked out once
# they knew their host's ranks and their thread count.
# Usage: busy_poll.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set +e  # only -u: each run's status is checked by hand
# A CPU quota anywhere on this process's cgroup path, v1 (cpu.cfs_quota_us) or v2 (cpu.max).
under_quota() {
  [ "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || echo -1)" -gt 0 ] 2>/dev/null && return 0
  local p
  p=$(sed -n 's/^0:://p' /proc/self/cgroup)
  while [ -n "$p" ]; do
    [ -r "/sys/fs/cgroup$p/cpu.max" ] && ! grep -q '^max' "/sys/fs/cgroup$p/cpu.max" && return 0
    [ "$p" = / ] && break
    p=$(dirname "$p")
  done
  return 1
}
if under_quota; then echo "skipped: this process runs under a CPU quota"; exit 77; fi
for run in "1 1x1" "2 1x2" "4 2x2"; do
  set -- $run
  got=$(timeout 120 "${mpi[@]}" -np "$1" "$bin" bench \
          --cfg "$src/tests/fixtures/bn_stride/net.cfg" --grid "$2" --steps 1 --warmup 0 --json 2>/dev/null |
        python3 -c 'import json, sys; print(json.loads([l for l in sys.stdin if l.startswith("{")][-1])["busy_poll_s_by_rank"])') ||
    fail "bench on $1 rank(s)"
  want=$(python3 -c "print([0.002] * $1)")
  [ "$got" = "$want" ] || fail "$1 rank(s) on $(nproc) cores poll $got s, want $want"
  echo "ok: $1 rank(s) on $(nproc) cores poll 2 ms"
done
echo PASS
