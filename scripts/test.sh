#!/usr/bin/env bash
# The test suite: installs what is missing, builds, and runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch is a test oracle (tests/test_reference_torch.cpp runs MobileNetV2 against it live).
TILETRAIN_WITH_TORCH=1 scripts/setup.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
