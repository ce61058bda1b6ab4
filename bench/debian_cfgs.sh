#!/usr/bin/env bash
# Every cfg Debian's darknet package ships, as a new user would try it: does it load
# (`tiletrain info`), and does a net with a loss train 2 steps tiled 2x2 on 4 ranks
# (`verify`: tiled against untiled, every tensor) at a reduced size (128x128 when the
# cfg's input is larger; its own size otherwise)? The two feature extractors without a loss
# (jnet-conv, vgg-conv) get `plan --grid 2x2` instead. The recurrent nets (rnn, rnn.train,
# gru) are outside the issue and skipped. Prints a markdown table and a summary line; exits 1
# if a cfg that should pass does not.
# Usage: bench/debian_cfgs.sh [TILETRAIN_BINARY]   (default build/tiletrain)
set -u
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/tiletrain}")
dir=/usr/share/darknet/cfg
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -np 4 --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)
pass=0 fail=0 total=0
echo "| cfg | input | run | result | seconds |"
echo "|---|---|---|---|---|"
for f in "$dir"/*.cfg; do
  name=$(basename "$f" .cfg)
  case $name in rnn | rnn.train | gru) continue ;; esac
  total=$((total + 1))
  info=$("$bin" info --cfg "$f" 2>&1)
  if [ $? -ne 0 ]; then
    echo "| $name | | info | does not load: $(printf '%s' "$info" | grep -m1 error: | sed 's/|/\\|/g') | |"
    fail=$((fail + 1))
    continue
  fi
  # "PATH: input 3x256x256, batch ..." (after any warnings about the cfg)
  read -r h w < <(printf '%s\n' "$info" | sed -n 's/.*: input [0-9]*x\([0-9]*\)x\([0-9]*\), batch.*/\1 \2/p' | head -1)
  size=()
  if [ "${h:-0}" -gt 128 ] || [ "${w:-0}" -gt 128 ]; then size=(--size 128x128); fi
  start=$(date +%s.%N)
  if printf '%s\n' "$info" | grep -qE '^ +[0-9]+ (cost|softmax|region|yolo|detection) '; then
    what="verify 2x2, 4 ranks"
    out=$("${mpi[@]}" "$bin" verify --cfg "$f" --grid 2x2 "${size[@]}" --batch 1 --steps 2 2>&1)
    rc=$?
    ok=$(printf '%s\n' "$out" | grep -c '^OK: tiled training matches untiled')
  else
    what="plan 2x2"
    out=$("$bin" plan --cfg "$f" --grid 2x2 "${size[@]}" 2>&1)
    rc=$?
    ok=$([ $rc -eq 0 ] && echo 1 || echo 0)
  fi
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  shown=${size[1]:-${h}x${w}}
  if [ $rc -eq 0 ] && [ "$ok" -ge 1 ]; then
    pass=$((pass + 1))
    echo "| $name | $shown | $what | OK | $took |"
  else
    fail=$((fail + 1))
    echo "| $name | $shown | $what | FAILED (exit $rc): $(printf '%s' "$out" | grep -m1 -E 'error|MISMATCH' | sed 's/|/\\|/g') | $took |"
  fi
done
echo
echo "summary: $pass of $total cfgs pass (recurrent nets skipped), $fail fail"
[ $fail -eq 0 ]
