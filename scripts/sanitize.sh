#!/usr/bin/env bash
# The project under AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-san/):
# builds tiletrain, its tests and the fuzz targets, runs the unit tests, replays each fuzz target's
# seed corpus (fuzz/corpus, no mutation) and a 2-rank MPI verify. Any sanitizer report
# stops it with a non-zero status (UBSan too: -fno-sanitize-recover). Installs what is missing.
#
#   scripts/sanitize.sh               everything above
#   scripts/sanitize.sh --build-only [TARGET...]   configure and build build-san/ (default: the
#                                                   tests and the fuzz targets; scripts/fuzz.sh uses this)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TILETRAIN_WITH_CLANG=1 scripts/setup.sh --install-only

# OpenMP: oneDNN and OpenBLAS (Debian's, built by GCC) run on GNU libgomp, so this build links
# libgomp too: one OpenMP runtime in the process. clang 14 emits calls to LLVM's libomp only,
# so with -fopenmp=libgomp it links libgomp but compiles the engine's few `#pragma omp`
# loops (gemm_conv.cpp, own_conv_*.cpp) as plain serial loops; oneDNN and OpenBLAS still run
# their threads. omp.h is clang's (libomp-14-dev; GCC's does not compile under clang): the
# engine calls only omp_get_max_threads and omp_set_num_threads, the same C functions in
# both runtimes.
gomp_lib=$(gcc -print-file-name=libgomp.so)
[ -f "$gomp_lib" ] || { echo "sanitize: no libgomp.so ($gomp_lib)"; exit 1; }
omp_flags="-fopenmp=libgomp"
CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTILETRAIN_SANITIZE=ON -DTILETRAIN_FUZZ=ON \
  "-DOpenMP_C_FLAGS=$omp_flags" "-DOpenMP_CXX_FLAGS=$omp_flags" -DOpenMP_C_LIB_NAMES=gomp \
  -DOpenMP_CXX_LIB_NAMES=gomp "-DOpenMP_gomp_LIBRARY=$gomp_lib" >/dev/null
fuzz_targets=(fuzz_cfg fuzz_data fuzz_image fuzz_weights fuzz_cluster)
if [ "${1:-}" = --build-only ]; then
  shift
  [ $# -gt 0 ] || set -- tiletrain_tests "${fuzz_targets[@]}"
  cmake --build build-san --target "$@"
  exit 0
fi
# What the steps below run (the tests bring tiletrain and the Darknet oracles); not the benches.
cmake --build build-san --target tiletrain_tests "${fuzz_targets[@]}"

# Every report is fatal and shows where; LeakSanitizer runs at each exit (ASan's default on
# x86-64 and arm64 Linux). The suppressions name what leaks outside this project's code.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"

# Unit tests: parsers (cfg, cluster file, weights, detection data, pictures), layers and
# kernels against their references and Darknet, tiling, checkpoints, the CLI, hostile input.
# Left out: the planner's searches and the memory plan's and random tiling sweeps (they
# repeat the code above thousands of times: 9 of the suite's 15 minutes under ASan, measured on a busy machine), and the
# one test that runs tiletrain under `ulimit -v` (ASan reserves terabytes of address space
# for its shadow memory and cannot start under such a cap), and the launcher's real mpirun runs
# (Open MPI's plugins leak; the 2-rank run below covers mpirun, with leak checking off).
filter="${TILETRAIN_SAN_FILTER:-*:-PlannerOptimizer.*:PlannerHeterogeneous.*:MemoryPlan.*:TiledEquivalenceRandom.*:HostileRun.GridsAndSizesNoDeviceHoldsAreRefusedBeforeAllocating:Launch.RunsVerify*}"
echo "== unit tests under ASan+UBSan (filter $filter)"
build-san/tests/tiletrain_tests --gtest_color=no --gtest_brief=1 "--gtest_filter=$filter"

echo "== fuzz targets over their seed corpora"
for t in "${fuzz_targets[@]}"; do
  # -runs=0 with a corpus folder: every file once, no mutation
  if ! out=$(build-san/fuzz/$t -runs=0 -rss_limit_mb=2048 -timeout=30 fuzz/corpus/$t 2>&1); then
    printf '%s\n' "$out" | tail -40
    echo "sanitize: $t failed on its seed corpus (fuzz/corpus/$t)"
    exit 1
  fi
  printf '%s\n' "$out" | grep -E 'INITED|DONE' | tail -1 | sed "s/^/$t: /"
done

echo "== 2-rank MPI verify under ASan+UBSan"
# Leak checking is off for this run only: Open MPI leaves about 3,300 allocations (120 KB)
# per rank unfreed at exit, most made by its plugins, which it has unloaded by then
# (LeakSanitizer shows them as <unknown module>), so no suppression can name them. The unit
# tests above check the engine's own leaks; address and undefined-behaviour errors stay fatal.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  bash tests/mpi/verify_ok.sh mpirun -np 2 --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo \
  -x ASAN_OPTIONS -x UBSAN_OPTIONS build-san/tiletrain verify --cfg cfgs/fashion-mnist.cfg --grid 2x1 --batch 2 --steps 1
echo "sanitize: PASS"
