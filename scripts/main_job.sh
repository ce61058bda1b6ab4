#!/usr/bin/env bash
# The main job: trains W1 (YOLOv2 layers 0-15, 416x416) split into a 2x2 grid of tiles
# with two layer groups, checks first that the partition trains exactly like one
# machine, and saves the weights.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p out
build/tiletrain verify --cfg cfgs/yolov2-16.cfg --grid 2x2 --groups 0,8 --size 128x128 --steps 2
build/tiletrain train --cfg cfgs/yolov2-16.cfg --grid 2x2 --groups 0,8 --steps 20 --save-weights out/w1.weights
build/tiletrain bench --cfg cfgs/yolov2-16.cfg --grid 2x2 --groups 0,8 --steps 5
