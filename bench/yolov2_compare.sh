#!/usr/bin/env bash
# The whole YOLOv2 (Darknet's /usr/share/darknet/cfg/yolov2.cfg at 416x416, batch 1), one
# training step against PyTorch and Darknet: bench/cfg_compare.sh on that cfg.
# Usage: bench/yolov2_compare.sh [STEPS] [DARKNET_STEPS] [THREADS]
exec "$(dirname "$0")/cfg_compare.sh" /usr/share/darknet/cfg/yolov2.cfg 416 "$@"
