#!/usr/bin/env bash
# Runs COMMAND (an mpirun of tiletrain verify) and passes only if it exits with status 0
# and prints verify's OK line (a PASS_REGULAR_EXPRESSION alone would make CTest ignore the
# exit status). Not a test of its own: tests/CMakeLists.txt wraps verify runs with it.
# Usage: verify_ok.sh COMMAND...
set -u
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: exit status $rc"
  exit 1
fi
if ! grep -q "^OK: tiled training matches untiled" <<<"$out"; then
  echo "FAIL: no 'OK: tiled training matches untiled' line"
  exit 1
fi
echo PASS
