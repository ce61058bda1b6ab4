#!/usr/bin/env bash
# The detection job: makes the shapes data set (scripts/make_shapes_dataset.py: 1600
# training and 200 held-out pictures, deterministic), trains cfgs/yolov2-tiny-shapes.cfg on
# it with 4 MPI ranks, one tile of a 2x2 grid each, prints the held-out VOC mAP@0.5, and
# draws the detections on a few held-out pictures into out/detections/.
# Usage: scripts/detect_job.sh [STEPS]   (default 2500: 25 epochs)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2500}
scripts/setup.sh tiletrain
mkdir -p out
/usr/bin/python3 scripts/make_shapes_dataset.py out/shapes
# Each run of the job starts afresh: its checkpoint folder refuses a new run otherwise.
rm -rf out/shapes-checkpoints out/shapes-metrics.jsonl
scripts/mpirun.sh 4 train --cfg cfgs/yolov2-tiny-shapes.cfg --data out/shapes/shapes.data --grid 2x2 \
  --steps "$steps" --log-every 100 --metrics out/shapes-metrics.jsonl --checkpoint out/shapes-checkpoints \
  --checkpoint-every 500 --save-weights out/shapes.weights
build/tiletrain detect --cfg cfgs/yolov2-tiny-shapes.cfg --weights out/shapes.weights --names out/shapes/shapes.data \
  --out out/detections out/shapes/images/valid/0000{0,1,2,3}.jpg
