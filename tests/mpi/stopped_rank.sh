#!/usr/bin/env bash
# A rank that stops answering (SIGSTOP: alive, but silent, as behind a dead link): the
# others must notice within --peer-timeout, end the job with a non-zero status naming the
# silent rank, and write no weights file.
# Usage: stopped_rank.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set +e  # the exit statuses below are checked one by one (wait, kill -0)
"${mpi[@]}" -np 2 "$bin" train \
  --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 1x2 --epochs 50 --log-every 5 --peer-timeout 3 \
  --save-weights "$tmp/out.weights" >"$tmp/log" 2>&1 &
launcher=$!
for _ in $(seq 300); do grep -q "step 5/" "$tmp/log" && break; sleep 0.1; done
victim=$(pgrep -f "grid 1x2 --epochs 50 --log-every 5 --peer-timeout 3" | grep -v "^$launcher\$" | sort -n | tail -n 1)
[ -n "$victim" ] || { echo "FAIL: ranks never started"; cat "$tmp/log"; exit 1; }
kill -STOP "$victim"
for _ in $(seq 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAIL: mpirun still running 30 s after a rank stopped"; kill -9 "$victim" "$launcher"; exit 1
fi
wait "$launcher"
rc=$?
kill -9 "$victim" 2>/dev/null
cat "$tmp/log"
[ "$rc" -ne 0 ] || fail "exit status 0"
grep -q "lost rank 1 on host" "$tmp/log" || fail "no message naming the silent rank 1"
if ls "$tmp"/out.weights* >/dev/null 2>&1; then fail "a weights file was written"; fi
echo "PASS"
