#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, in build-san/ through scripts/sanitize.sh --build-only)
# and runs each for SECONDS (default 60) of wall time from its seed corpus, as many at once
# as the machine has cores. Fails on any finding (crash, sanitizer report, leak, timeout,
# out-of-memory), printing the report and the reproducer's path.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: fuzz_cfg fuzz_data fuzz_image fuzz_weights fuzz_cluster)
#
# New inputs go to build-san/fuzz-work/TARGET (the seeds in fuzz/corpus stay as they are),
# logs and reproducers to build-san/fuzz-findings/TARGET/. Reproduce one with
#   build-san/fuzz/TARGET build-san/fuzz-findings/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_cfg fuzz_data fuzz_image fuzz_weights fuzz_cluster)
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]"; exit 2; }

scripts/sanitize.sh --build-only "${targets[@]}"

export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# -rss_limit_mb / -malloc_limit_mb: a reader that allocates 2 GB for one input has decoded
# what it should have refused from the header (fuzz/README.md); -timeout: 10 s per input.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10)
# TILETRAIN_FUZZ_SEED: libFuzzer's -seed (0, the default, a new one each run). CI sets one,
# so that its runs mutate the same way each time and a red CI names a reproducible finding.
limits+=("-seed=${TILETRAIN_FUZZ_SEED:-0}")

run() {
  local t=$1 work=build-san/fuzz-work/$1 out=build-san/fuzz-findings/$1
  rm -rf "$out"
  mkdir -p "$work" "$out"
  local dict=()
  [ -f "fuzz/$t.dict" ] && dict=("-dict=fuzz/$t.dict")
  if build-san/fuzz/$t "${limits[@]}" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$out/" "$work" "fuzz/corpus/$t" >"$out/log" 2>&1; then
    echo "$t: no finding in ${seconds} s ($(grep -E '^(#[0-9]+).*(DONE|pulse)' "$out/log" | tail -1 | cut -c1-100))"
    return 0
  fi
  echo "=================== $t: FINDING ==================="
  grep -v '^#[0-9]' "$out/log" | tail -60
  local repro
  repro=$(ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* "$out"/slow-unit-* 2>/dev/null | head -1 || true)
  echo "$t: reproducer ${repro:-(none written: see $out/log)}; log $out/log"
  echo "$t: reproduce with: build-san/fuzz/$t ${repro:-$out/...}"
  return 1
}

jobs_max=$(nproc)
for t in "${targets[@]}"; do
  [ -x "build-san/fuzz/$t" ] || { echo "fuzz: no target $t"; exit 2; }
done
for t in "${targets[@]}"; do
  # each run leaves "pass" or "finding" in its folder (a job's status may be collected by wait -n)
  (r=finding; run "$t" && r=pass; echo $r >"build-san/fuzz-result-$t") &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
done
wait
status=0
for t in "${targets[@]}"; do
  [ "$(cat "build-san/fuzz-result-$t" 2>/dev/null)" = pass ] || status=1
  rm -f "build-san/fuzz-result-$t"
done
[ $status -eq 0 ] && echo "fuzz: PASS (${#targets[@]} targets, ${seconds} s each)" || echo "fuzz: FAILED"
exit $status
