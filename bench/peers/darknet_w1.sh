#!/bin/sh
# Compile bench/peers/darknet_w1.c against Debian's libdarknet into a temp dir
# (nothing is written into the repo) and run it on W1 (cfgs/yolov2-16.cfg).
#
#   bench/peers/darknet_w1.sh [--steps S] [--warmup W] [--seed N] [--whole] [--cfg FILE]
#
# Defaults: --steps 2 --warmup 1 --cfg <repo>/cfgs/yolov2-16.cfg. All arguments are
# passed through to the program; a later --cfg overrides the default.
# Last line of stdout is one JSON object ("system":"darknet").
# Needs: apt-get install -y darknet   (provides /usr/lib/darknet/{libdarknet.so,include/darknet.h})
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
DARKNET_DIR=${DARKNET_DIR:-/usr/lib/darknet}
CC=${CC:-cc}

if [ ! -f "$DARKNET_DIR/libdarknet.so" ] || [ ! -f "$DARKNET_DIR/include/darknet.h" ]; then
    echo "darknet_w1.sh: $DARKNET_DIR/libdarknet.so or include/darknet.h missing;" \
         "install Debian's darknet package: apt-get install -y darknet" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/darknet_w1.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

"$CC" -O2 -std=gnu11 -Wall -o "$tmp/darknet_w1" "$here/darknet_w1.c" \
    -I"$DARKNET_DIR/include" -L"$DARKNET_DIR" -ldarknet -Wl,-rpath,"$DARKNET_DIR" -lm

# Default steps/cfg first; user arguments come later and win.
"$tmp/darknet_w1" --cfg "$repo/cfgs/yolov2-16.cfg" --steps 2 --warmup 1 "$@"
