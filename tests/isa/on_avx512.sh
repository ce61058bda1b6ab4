#!/usr/bin/env bash
# Runs COMMAND only on a CPU with AVX-512; elsewhere exits 77, which CTest reports as
# skipped (there the native runs already are the AVX2 runs).
# Usage: on_avx512.sh COMMAND...
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "SKIP: this CPU has no AVX-512; the native tests already ran the AVX2 kernels"
  exit 77
fi
exec "$@"
