#!/usr/bin/env bash
# The main job: trains a small CNN on Fashion-MNIST with 4 MPI ranks, one tile of a 2x2
# grid each (5 epochs, 35-90 s of training on 2 cores), then prints the test accuracy and
# each rank's time split (forward, backward, halo exchange, weight exchange, input/output).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh tiletrain
mkdir -p out
scripts/mpirun.sh 4 train --cfg cfgs/fashion-mnist.cfg --data fashion-mnist --grid 2x2 --epochs 5 --log-every 200 \
  --save-weights out/fashion-mnist.weights
