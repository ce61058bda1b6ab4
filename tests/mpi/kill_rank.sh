#!/usr/bin/env bash
# A rank killed mid-run: every rank must end within 10 s with a non-zero status and no
# weights file (not even a partial one) may appear.
# Usage: kill_rank.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
set +e  # the exit statuses below are checked one by one (wait, kill -0)
"${mpi[@]}" -np 4 "$bin" train \
  --cfg "$src/cfgs/fashion-mnist.cfg" --data fashion-mnist --grid 2x2 --epochs 50 --log-every 1000 \
  --save-weights "$tmp/out.weights" > "$tmp/log" 2>&1 &
launcher=$!
# Wait for a sign of life (the root's "training ..." line once the data is loaded and every
# rank has set up), then kill one of the ranks mpirun started (not the root).
for _ in $(seq 600); do
  grep -q "^training " "$tmp/log" && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
pids=$(pgrep -P "$launcher" || true)
grep -q "^training " "$tmp/log" && [ "$(echo "$pids" | grep -c .)" -eq 4 ] ||
  { echo "FAIL: the 4 ranks never started training"; cat "$tmp/log"; kill -9 $launcher $pids 2>/dev/null; exit 1; }
victim=$(echo "$pids" | sort -n | tail -n 1)
kill -9 "$victim"
killed_at=$(date +%s.%N)
for _ in $(seq 100); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAIL: mpirun still running 10 s after a rank was killed"
  kill -9 "$launcher" $pids 2>/dev/null; exit 1
fi
wait "$launcher"
rc=$?
took=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
# The other ranks end as mpirun does; a rank not yet reaped (a zombie) has ended.
alive() { local n=0 p; for p in $pids; do ps -o stat= -p "$p" 2>/dev/null | grep -qv '^Z' && n=$((n + 1)); done; echo $n; }
for _ in $(seq 100); do [ "$(alive)" -eq 0 ] && break; sleep 0.1; done
left=$(alive)
echo "mpirun exited with $rc, ${took}s after the kill; $left rank(s) left"
[ "$rc" -ne 0 ] || fail "exit status 0 after a rank died"
[ "$left" -eq 0 ] || { echo "FAIL: ranks still running"; kill -9 $pids 2>/dev/null; exit 1; }
if ls "$tmp"/out.weights* >/dev/null 2>&1; then echo "FAIL: a weights file was written"; ls -la "$tmp"; exit 1; fi
grep -qiE "killed|signal|exited|terminated|aborted" "$tmp/log" || { echo "FAIL: no message about the dead rank"; cat "$tmp/log"; exit 1; }
echo "PASS"
