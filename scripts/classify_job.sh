#!/usr/bin/env bash
# The classifier job: writes Fashion-MNIST as PNG pictures with their class in the file
# name (scripts/fashion_pictures.py: a Darknet classifier data set, 60000 training and
# 10000 held-out pictures), trains the small residual network cfgs/fashion-resnet.cfg on it
# with Darknet's classifier augmentation and 4 MPI ranks, one tile of a 2x2 grid each,
# prints the held-out top-1 and top-2 accuracy after every epoch, and plots loss and
# accuracy into out/classify.png.
# Usage: scripts/classify_job.sh [EPOCHS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
scripts/setup.sh tiletrain
mkdir -p out
[ -f out/fashion-pictures/fashion.data ] || /usr/bin/python3 scripts/fashion_pictures.py out/fashion-pictures
# Each run of the job starts afresh: --metrics appends.
rm -f out/classify-metrics.jsonl
scripts/mpirun.sh 4 train --cfg cfgs/fashion-resnet.cfg --data out/fashion-pictures/fashion.data --grid 2x2 \
  --epochs "$epochs" --log-every 200 --metrics out/classify-metrics.jsonl --save-weights out/fashion-resnet.weights
/usr/bin/python3 scripts/plot_metrics.py out/classify-metrics.jsonl --out out/classify.png
echo "plot: out/classify.png"
