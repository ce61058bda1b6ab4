#!/usr/bin/env bash
# Cross-builds tiletrain for arm64 (Raspberry Pi 3/4/5) on a Debian 12 amd64 host and tests the
# build under qemu-user: unit tests, `info`, a small `verify`, a 2-rank verify through the amd64
# mpirun, and a check that no reference convolution kernel runs. Run as root; see docs/arm64.md.
#
#   scripts/test-arm64.sh [--quick] [--budget SECONDS] [--no-install] [--no-build]
#                         [--cpus "cortex-a53 cortex-a72"] [--filter GTEST_FILTER]
#
#   --quick          only QEMU_CPU=cortex-a72 and a smaller set of unit tests
#   --budget S       wall-time budget of the whole run in seconds (default 1500); every step's
#                    timeout is cut to what is left, and steps that no longer fit are reported
#                    as SKIP (which counts as a failure)
#   --no-install     do not install anything (fail later if something is missing)
#   --no-build       test the existing $BUILD as it is
#   --cpus LIST      emulated cores (default "cortex-a53 cortex-a72"; --quick: "cortex-a72")
#   --filter F       GoogleTest filter instead of the default set
#
# Environment: SRC (tree to build, default: the repository this script lives in),
# BUILD (default $SRC/build-a64), A64_ROOT (dpkg -x sysroot, default /opt/a64/root),
# DEBS (cache of downloaded .debs, default /opt/a64/debs), TC (toolchain file, default
# cmake/aarch64-debian12.cmake next to this script), JOBS (build jobs, default nproc),
# LOGDIR (default $BUILD/test-arm64-logs; one log per step).
#
# Exit status 0 only if every step passed.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
SRC=$(cd "${SRC:-$REPO}" && pwd) || { echo "test-arm64: SRC=${SRC:-} is not a directory" >&2; exit 2; }
BUILD=${BUILD:-$SRC/build-a64}
A64_ROOT=${A64_ROOT:-/opt/a64/root}
DEBS=${DEBS:-/opt/a64/debs}
TC=${TC:-$REPO/cmake/aarch64-debian12.cmake}
JOBS=${JOBS:-$(nproc)}
LOGDIR=${LOGDIR:-$BUILD/test-arm64-logs}

SELF=$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")
QUICK=0 INSTALL=1 BUILD_IT=1 BUDGET=1500 CPUS="" FILTER="" CALL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --call-internal) shift; CALL=("$@"); break ;;   # run one of the functions below (under timeout)
    --quick) QUICK=1 ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
    --budget=*) BUDGET=${1#*=} ;;
    --no-install) INSTALL=0 ;;
    --no-build) BUILD_IT=0 ;;
    --cpus) CPUS=${2:?--cpus needs a list}; shift ;;
    --cpus=*) CPUS=${1#*=} ;;
    --filter) FILTER=${2:?--filter needs a GoogleTest filter}; shift ;;
    --filter=*) FILTER=${1#*=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-arm64: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "test-arm64: --budget wants whole seconds" >&2; exit 2; }
[ -n "$CPUS" ] || { [ $QUICK = 1 ] && CPUS="cortex-a72" || CPUS="cortex-a53 cortex-a72"; }

# GoogleTest suites that finish in reasonable time under qemu (whole set about 3 min per
# core). OwnConv*: the own (Highway) convolution kernels; GemmConv.*: the OpenBLAS ones;
# KernelTable.*: which kernel runs
# each pass; ConvBitIdentical, TiledEquivalenceRandom (TILETRAIN_EQ_COUNT configurations
# per kernel path), LowMemory, NoAllocation: exactness and allocation on the NEON path.
# Left out: TiledEquivalence.W1 and .HandPicked, Composite/GradCheck.* (too slow under
# emulation); Cli.* (needs binfmt_misc: it execs the arm64 binary).
OWN_TESTS='OwnConv*:*/OwnConv*:GemmConv.*:KernelTable.*'
EXACT_TESTS='Paths/ConvBitIdentical.*:TiledEquivalenceRandom*:TiledEquivalence.Map97x131:LowMemory.*:NoAllocation.*:Overlap.*'
FULL_TESTS="CfgErrors.*:CfgShapes.*:CfgRate.*:Geometry.*:HaloIndex.*:ShardPlan.*:WeightsIO.*"
FULL_TESTS+=":Pointwise.*:DenseNaive.*:Channels/Pointwise.*:GradCheckLoss.*"
FULL_TESTS+=":GradCheckDropout.*:Head/GradCheck.*:Random/ConvNaive.*:Darknet/MaxPoolNaive.*"
FULL_TESTS+=":Fixtures/TorchReference.*:Conv/GradCheck.*:MaxPool/GradCheck.*:$OWN_TESTS:$EXACT_TESTS"
QUICK_TESTS="CfgShapes.*:Geometry.*:HaloIndex.*:Pointwise.*:DenseNaive.*"
QUICK_TESTS+=":Head/GradCheck.*:Random/ConvNaive.*:Fixtures/TorchReference.*:Paths/ConvBitIdentical.*:$OWN_TESTS"
export TILETRAIN_EQ_COUNT=${TILETRAIN_EQ_COUNT:-30}
[ -n "$FILTER" ] || { [ $QUICK = 1 ] && FILTER=$QUICK_TESTS || FILTER=$FULL_TESTS; }

CFG=$SRC/cfgs/fashion-mnist.cfg
VERIFY_ARGS=(verify --cfg "$CFG" --grid 2x2 --groups none --steps 1 --batch 8)
MPI_VERIFY_ARGS=(verify --cfg "$CFG" --grid 1x2 --groups none --steps 1 --batch 8)
# depthwise and grouped convolutions on the own NEON-path kernels, with shortcuts, tiled
MOBILE_VERIFY_ARGS=(verify --cfg "$SRC/cfgs/mobilenetv2.cfg" --size 48x48 --batch 2 --grid 2x2 --groups 0,6,20 --steps 1)
# ResNet-18 tiled through every stage: shortcuts that sample a larger map, on NEON's blocks
RESNET_VERIFY_ARGS=(verify --cfg /usr/share/darknet/cfg/resnet18.cfg --size 64x64 --batch 1 --grid 2x2 --groups 0,8,14
                    --steps 1)
Q=(qemu-aarch64-static -L "$A64_ROOT")
MPIRUN_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
# vader's single-copy mechanism (CMA, process_vm_readv) is not implemented by qemu-user.
MPIRUN_ARGS=(--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
             --mca oob_tcp_if_include lo)

# Packages. Host side (amd64): cross compiler, emulator, build tools, header-only libraries,
# the amd64 mpirun. arm64 multiarch (Multi-Arch: same, co-install with their amd64 twins).
HOST_PKGS=(g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static cmake ninja-build
           pkg-config nlohmann-json3-dev libcli11-dev libstb-dev openmpi-bin darknet)  # darknet: its cfgs
A64_MULTIARCH_PKGS=(libc6:arm64 libstdc++6:arm64 libgomp1:arm64 zlib1g-dev:arm64 libgtest-dev:arm64
                    libhwy-dev:arm64 libopenblas-openmp-dev:arm64)
# arm64 packages that cannot be co-installed (libdnnl-dev: dnnl_config.h differs from amd64's;
# Open MPI: Conflicts with the amd64 one; libpmix2 -> libmunge2, not Multi-Arch: same) and
# libopenmpi3's runtime closure: unpacked with dpkg -x into A64_ROOT.
A64_ROOT_PKGS=(libdnnl-dev libdnnl2 libopenmpi-dev libopenmpi3 openmpi-bin libpmix2 libmunge2
  libhwloc15 libhwloc-plugins libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0
  libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1 libudev1
  libatomic1 libmd0 libbsd0 libpciaccess0 libxau6 libxdmcp6 libxcb1 libx11-6 libxext6 libxnvctrl0
  ocl-icd-libopencl1 libicu72 libxml2 liblzma5)

# ---------------------------------------------------------------------------------------------
# Step bookkeeping: every step has a status (PASS / FAIL / SKIP), a wall time and a note.
START_MS=$(date +%s%3N)
RESULTS=()
FAILED=0
mkdir -p "$LOGDIR" || exit 2
elapsed_s() { echo $(( ($(date +%s%3N) - START_MS) / 1000 )); }
left_s() { echo $(( BUDGET - $(elapsed_s) )); }
fmt_ms() { printf '%d.%d' $(( $1 / 1000 )) $(( ($1 % 1000) / 100 )); }
record() {  # record STATUS NAME MS NOTE
  local status=$1 name=$2 ms=$3 note=$4
  RESULTS+=("$status"$'\t'"$name"$'\t'"$ms"$'\t'"$note")
  [ "$status" = PASS ] || FAILED=$((FAILED + 1))
  printf '%-4s  %-44s %7s s  %s\n' "$status" "$name" "$(fmt_ms "$ms")" "$note"
}
summary() {
  local total_ms=$(( $(date +%s%3N) - START_MS )) r status name ms note
  echo
  echo "=== test-arm64 summary (SRC=$SRC, BUILD=$BUILD, logs in $LOGDIR)"
  for r in "${RESULTS[@]}"; do
    IFS=$'\t' read -r status name ms note <<<"$r"
    printf '%-4s  %-44s %7s s  %s\n' "$status" "$name" "$(fmt_ms "$ms")" "$note"
  done
  if [ "$FAILED" -eq 0 ] && [ ${#RESULTS[@]} -gt 0 ]; then
    echo "RESULT: PASS (${#RESULTS[@]} steps, $(fmt_ms $total_ms) s, budget $BUDGET s)"
  else
    echo "RESULT: FAIL ($FAILED of ${#RESULTS[@]} steps did not pass, $(fmt_ms $total_ms) s, budget $BUDGET s)"
  fi
}
trap 'echo; echo "test-arm64: interrupted"; summary; exit 130' INT TERM

# run LIMIT LOG CMD...: runs CMD with output to LOG under `timeout` (LIMIT cut to the budget left);
# sets RC (124 = timed out, 125 = not run: budget used up), MS (wall time) and LIMIT_USED.
run() {
  local limit=$1 log=$2; shift 2
  local left; left=$(left_s)
  [ "$left" -lt "$limit" ] && limit=$left
  LIMIT_USED=$limit
  if [ "$limit" -lt 5 ]; then RC=125 MS=0; : >"$log"; return; fi
  local t0; t0=$(date +%s%3N)
  { echo "+ $*"; echo; } >"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1 </dev/null
  RC=$?
  MS=$(( $(date +%s%3N) - t0 ))
}
# why LOG: a one-line reason for a failed run, from RC and the end of LOG
why() {
  case $RC in
    124|137) echo "timed out after ${LIMIT_USED} s (log: $1)" ;;
    125) echo "not run: time budget of $BUDGET s used up" ;;
    *) echo "exit $RC: $(grep -v '^onednn_verbose' "$1" | grep -v '^[[:space:]]*$' | tail -n1 | cut -c1-110) (log: $1)" ;;
  esac
}
status_of() { [ "$RC" = 125 ] && echo SKIP || echo FAIL; }
# record_verify NAME LOG: the outcome of a `tiletrain verify` just run (RC and MS from `run`).
record_verify() {
  if [ "$RC" = 0 ] && grep -q 'OK: tiled training matches untiled' "$2"; then
    record PASS "$1" "$MS" "$(grep -m1 '^OK:' "$2" | cut -c1-90)"
  elif [ "$RC" = 0 ]; then
    record FAIL "$1" "$MS" "no 'OK: tiled training matches untiled' line (log: $2)"
  else
    record "$(status_of)" "$1" "$MS" "$(why "$2")"
  fi
}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# ---------------------------------------------------------------------------------------------
# 1. install (install_packages) and 2. cross-build (build_tree), run as `SELF --call-internal FN`
install_packages() {
  local missing=() p
  grep -qx arm64 <(dpkg --print-foreign-architectures) || dpkg --add-architecture arm64 || return 1
  for p in "${HOST_PKGS[@]}" "${A64_MULTIARCH_PKGS[@]}"; do have_pkg "$p" || missing+=("$p"); done
  local need_root=0
  for p in "${A64_ROOT_PKGS[@]}"; do
    [ -f "$A64_ROOT/.dpkg-x/$p" ] || { need_root=1; break; }
  done
  [ -f "$A64_ROOT/usr/include/oneapi/dnnl/dnnl.hpp" ] &&
    [ -f "$A64_ROOT/usr/lib/aarch64-linux-gnu/openmpi/lib/libmpi.so" ] || need_root=1
  if [ ${#missing[@]} -eq 0 ] && [ $need_root = 0 ]; then
    echo "install: everything already there (${#HOST_PKGS[@]} host + ${#A64_MULTIARCH_PKGS[@]} multiarch packages, ${#A64_ROOT_PKGS[@]} in $A64_ROOT)"
    return 0
  fi
  apt-get update -qq || return 1
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install: apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" || return 1
  fi
  if [ $need_root = 1 ]; then
    echo "install: dpkg -x into $A64_ROOT: ${A64_ROOT_PKGS[*]}"
    mkdir -p "$A64_ROOT/.dpkg-x" "$DEBS" || return 1
    # apt-get download drops privileges to _apt where it can write; silences the
    # "Download is performed unsandboxed as root" warning
    id _apt >/dev/null 2>&1 && chown _apt "$DEBS"
    (cd "$DEBS" && apt-get download "${A64_ROOT_PKGS[@]/%/:arm64}") || return 1
    for p in "${A64_ROOT_PKGS[@]}"; do
      local deb; deb=$(ls -t "$DEBS/${p}_"*_arm64.deb 2>/dev/null | head -n1)
      [ -n "$deb" ] || { echo "install: no .deb for $p in $DEBS"; return 1; }
      dpkg -x "$deb" "$A64_ROOT" || return 1
      basename "$deb" >"$A64_ROOT/.dpkg-x/$p"
    done
  fi
  echo "install: apt-get installed ${#missing[@]} packages$([ $need_root = 1 ] && echo ", unpacked ${#A64_ROOT_PKGS[@]} into $A64_ROOT")"
}

build_tree() {
  [ -f "$TC" ] || { echo "no toolchain file $TC"; return 1; }
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$TC" -DA64_ROOT="$A64_ROOT" \
    -DCMAKE_BUILD_TYPE=Release -DTILETRAIN_NATIVE=OFF \
    -DCMAKE_C_FLAGS="-march=armv8-a+crc -mtune=cortex-a72" \
    -DCMAKE_CXX_FLAGS="-march=armv8-a+crc -mtune=cortex-a72" \
    -DTILETRAIN_DARKNET_LIBRARY=OFF || return 1
  cmake --build "$BUILD" -j "$JOBS" || return 1
  local f
  for f in "$BUILD/tiletrain" "$BUILD/tests/tiletrain_tests"; do
    aarch64-linux-gnu-readelf -h "$f" | grep -q 'Machine:.*AArch64' || { echo "$f is not an AArch64 ELF"; return 1; }
  done
  echo "build: tiletrain and tests/tiletrain_tests are AArch64 ELF"
}

if [ ${#CALL[@]} -gt 0 ]; then "${CALL[@]}"; exit; fi

if [ $INSTALL = 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    record FAIL "install packages" 0 "needs root (apt-get, dpkg -x into $A64_ROOT)"
  else
    run 1800 "$LOGDIR/install.log" bash "$SELF" --call-internal install_packages
    if [ $RC = 0 ]; then record PASS "install packages" $MS "$(grep '^install:' "$LOGDIR/install.log" | tail -n1 | cut -c1-100)"
    else record "$(status_of)" "install packages" $MS "$(why "$LOGDIR/install.log")"; fi
  fi
fi

# ---------------------------------------------------------------------------------------------
# 2. cross-build
if [ $BUILD_IT = 1 ]; then
  run 1800 "$LOGDIR/build.log" bash "$SELF" --call-internal build_tree
  if [ $RC = 0 ]; then record PASS "cross-build $(basename "$BUILD")/" $MS "Release, -march=armv8-a+crc -mtune=cortex-a72, $JOBS jobs"
  else record "$(status_of)" "cross-build $(basename "$BUILD")/" $MS "$(why "$LOGDIR/build.log")"; fi
fi

# ---------------------------------------------------------------------------------------------
# 3. under qemu-user, per emulated core
TT=$BUILD/tiletrain
TESTS=$BUILD/tests/tiletrain_tests
REF_RE='(^|[^[:alnum:]_])ref:[[:alnum:]_]|gemm:ref'   # a reference kernel named in `info` output
KERNEL_RE='(^|[^[:alnum:]_])(jit|own|ref|gemm|brgemm|brg|acl|simple|hwy)(:[[:alnum:]_.]+)+'

count_listed() {  # number of tests that FILTER selects (0 if the binary does not run)
  QEMU_CPU=$1 timeout 60 "${Q[@]}" "$TESTS" --gtest_list_tests --gtest_filter="$2" 2>/dev/null | grep -c '^  '
}

for cpu in $CPUS; do
  export QEMU_CPU=$cpu
  tag=${cpu#cortex-}
  echo "=== QEMU_CPU=$cpu"
  if [ ! -x "$TT" ] || [ ! -x "$TESTS" ]; then
    record FAIL "$tag: everything" 0 "no build in $BUILD"
    continue
  fi

  # (b) info, and its kernel table must name no reference kernel
  log=$LOGDIR/$tag-info.log
  run 120 "$log" "${Q[@]}" "$TT" info --cfg "$CFG"
  if [ $RC = 0 ]; then record PASS "$tag: info" $MS "$(grep -m1 '^total:' "$log" | cut -c1-90)"
  else record "$(status_of)" "$tag: info" $MS "$(why "$log")"; fi
  if [ $RC = 0 ]; then
    nk=$(grep -cE "$KERNEL_RE" "$log")
    nref=$(grep -cE "$REF_RE" "$log")
    if [ "$nref" -gt 0 ]; then
      record FAIL "$tag: no ref kernel in info's kernel table" 0 \
        "$nref lines name a reference kernel, first: $(grep -m1 -E "$REF_RE" "$log" | tr -s ' ' | cut -c1-70)"
    elif [ "$nk" -eq 0 ]; then
      record PASS "$tag: no ref kernel in info's kernel table" 0 "info prints no kernel table (yet)"
    else
      record PASS "$tag: no ref kernel in info's kernel table" 0 "$nk lines name kernels, none ref:/gemm:ref"
    fi
  else
    record "$(status_of)" "$tag: no ref kernel in info's kernel table" 0 "info did not run"
  fi

  # (c) verify, with ONEDNN_VERBOSE=1 for (e)
  log=$LOGDIR/$tag-verify.log
  run 600 "$log" env ONEDNN_VERBOSE=1 "${Q[@]}" "$TT" "${VERIFY_ARGS[@]}"
  vrc=$RC
  record_verify "$tag: verify 2x2, 1 step, batch 8" "$log"

  # (e) no oneDNN reference convolution in the verify's ONEDNN_VERBOSE=1 exec lines
  #     oneDNN 2.x: onednn_verbose,exec,cpu,convolution,ref:any,forward_training,...
  #     oneDNN 3.x: onednn_verbose,primitive,exec,cpu,convolution,ref:any,forward_training,...
  impls=$LOGDIR/$tag-onednn-impls.txt
  awk -F, '$1 == "onednn_verbose" || $1 == "dnnl_verbose" {
             for (i = 2; i <= NF - 3; i++) if ($i == "exec") { print $(i+2), $(i+3), $(i+4); break } }' \
      "$log" | sort | uniq -c | sort -rn >"$impls"
  isa=$(grep -m1 -o 'isa:[^,]*' "$log")
  refs=$(awk '$2 ~ /convolution/ && ($3 ~ /^ref([:_]|$)/ || $3 ~ /^gemm:ref/)' "$impls")
  convs=$(awk '$2 ~ /convolution/ {n += $1} END {print n + 0}' "$impls")
  if [ "$vrc" = 125 ]; then
    record SKIP "$tag: no ref convolution (ONEDNN_VERBOSE)" 0 "verify not run"
  elif [ -n "$refs" ]; then
    record FAIL "$tag: no ref convolution (ONEDNN_VERBOSE)" 0 \
      "$(echo "$refs" | awk '{printf "%s%d x %s %s %s", sep, $1, $2, $3, $4; sep = ", "}') ($isa; $impls)"
  elif [ "$vrc" != 0 ]; then
    record FAIL "$tag: no ref convolution (ONEDNN_VERBOSE)" 0 "verify failed; $convs oneDNN convolutions seen, none ref"
  elif [ "$convs" -eq 0 ]; then
    record PASS "$tag: no ref convolution (ONEDNN_VERBOSE)" 0 "no oneDNN convolution executed${isa:+ ($isa)}"
  else
    record PASS "$tag: no ref convolution (ONEDNN_VERBOSE)" 0 \
      "$convs oneDNN convolutions: $(awk '$2 ~ /convolution/ {print $3}' "$impls" | sort -u | paste -sd' ')"
  fi

  # (c2) MobileNetV2: depthwise convolutions and shortcuts tiled (about 15 s under qemu)
  log=$LOGDIR/$tag-verify-mobilenetv2.log
  run 600 "$log" "${Q[@]}" "$TT" "${MOBILE_VERIFY_ARGS[@]}"
  record_verify "$tag: verify mobilenetv2 2x2" "$log"

  # (c3) ResNet-18: every stage tiled (about 12 s under qemu)
  log=$LOGDIR/$tag-verify-resnet18.log
  run 600 "$log" "${Q[@]}" "$TT" "${RESNET_VERIFY_ARGS[@]}"
  record_verify "$tag: verify resnet18 2x2" "$log"

  # (d) 2 ranks through the amd64 mpirun; each rank is qemu + the arm64 tiletrain
  log=$LOGDIR/$tag-mpirun-2ranks.log
  run 600 "$log" env "${MPIRUN_ENV[@]}" mpirun -np 2 "${MPIRUN_ARGS[@]}" -x QEMU_CPU \
      "${Q[@]}" "$TT" "${MPI_VERIFY_ARGS[@]}"
  record_verify "$tag: mpirun -np 2 verify 1x2" "$log"

  # (a) unit tests
  log=$LOGDIR/$tag-unit-tests.log
  nsel=$(count_listed "$cpu" "$FILTER")
  nown=$(count_listed "$cpu" "$OWN_TESTS")
  run 600 "$log" "${Q[@]}" "$TESTS" --gtest_filter="$FILTER" --gtest_brief=1 --gtest_color=no
  npass=$(grep -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*' | tail -n1)
  nskip=$(grep -o '\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]*' | tail -n1)
  own_note="OwnConv*/KernelTable.*: ${nown} tests"; [ "$nown" = 0 ] && own_note="no OwnConv*/KernelTable.* tests yet"
  if [ $RC = 0 ] && [ "${npass:-0}" -gt 0 ]; then
    record PASS "$tag: unit tests ($nsel selected)" $MS "${npass} passed, ${nskip:-0} skipped; $own_note"
  elif [ $RC = 0 ]; then
    record FAIL "$tag: unit tests ($nsel selected)" $MS "the filter selected no test (log: $log)"
  else
    nfail=$(grep -c '^\[  FAILED  \] .*\.' "$log")
    record "$(status_of)" "$tag: unit tests ($nsel selected)" $MS \
      "$( [ $RC = 1 ] && echo "$nfail failed: $(grep '^\[  FAILED  \] .*\.' "$log" | awk '{print $4}' | sort -u | head -n3 | paste -sd' ') (log: $log)" || why "$log")"
  fi
done

summary
[ "$FAILED" -eq 0 ] && [ ${#RESULTS[@]} -gt 0 ]
