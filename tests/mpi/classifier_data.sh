#!/usr/bin/env bash
# A classifier trained on pictures (a Darknet .data with labels=, written from
# Fashion-MNIST by scripts/fashion_pictures.py): 4 steps on 4 ranks (2x2) end with the same
# weights as on 2 ranks with two tiles each and as in one process (the root reads and
# augments the pictures; the sums go in tile order), and each run reports its held-out
# top-1 and top-2 accuracy.
# Usage: classifier_data.sh TILETRAIN_BINARY SOURCE_DIR
# shellcheck source=tests/mpi/common.sh
. "$(dirname "$0")/common.sh"
# absolute: the runs below work in $tmp
bin=$(realpath "$bin")
src=$(realpath "$src")
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
cd "$tmp"
/usr/bin/python3 "$src/scripts/fashion_pictures.py" pictures --train 512 --valid 64 > /dev/null
# One thread per process everywhere: oneDNN sums some backward-weights over its threads, so
# the bits depend on the threads per process (docs/status.md, known limits).
args=(train --cfg "$src/cfgs/fashion-resnet.cfg" --data pictures/fashion.data --grid 2x2 --steps 4 --log-every 2 --threads 1)
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --save-weights a.weights > a.log
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --tiles-per-rank 2 --save-weights b.weights > b.log
"$bin" "${args[@]}" --save-weights c.weights > c.log
grep -q "held-out accuracy after 4 steps: top-1 .*top-2 .*(64 pictures)" a.log || { echo "FAIL: no accuracy"; cat a.log; exit 1; }
cmp a.weights b.weights || fail "4 ranks and 2 ranks of two tiles differ"
cmp a.weights c.weights || fail "4 ranks and one process differ"
# the same accuracy line on every rank count
[ "$(grep held-out a.log)" = "$(grep held-out c.log)" ] || { echo "FAIL: accuracy differs"; grep held-out a.log c.log; exit 1; }
echo PASS
