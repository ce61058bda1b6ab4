#!/usr/bin/env bash
# scripts/plot_trace.py and scripts/plot_layers.py on what bench writes (a 2x2 grid in one
# process): each draws a PNG; a malformed or missing input ends with a message naming the
# file and a non-zero exit, and no picture.
# Usage: plot_timing.sh SOURCE_DIR TILETRAIN_BINARY
set -eu
src=$1
bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
run=(--cfg "$src/cfgs/small-classifier.cfg" --threads 1 --batch 4 --grid 2x2 --steps 2 --warmup 1)
is_png() {
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "FAIL: $1 is not a PNG"; exit 1; }
  [ "$(stat -c %s "$1")" -gt 10000 ] || { echo "FAIL: $1 is too small"; exit 1; }
}
refused() {  # refused SCRIPT INPUT MESSAGE: non-zero exit, MESSAGE on stderr, no picture
  if "$py" "$src/scripts/$1" "$2" --out "$tmp/x.png" 2> "$tmp/err"; then echo "FAIL: $1 accepted $2"; exit 1; fi
  grep -qF "$3" "$tmp/err" || { echo "FAIL: $1 on $2 said: $(cat "$tmp/err")"; exit 1; }
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || { echo "FAIL: more than one line: $(cat "$tmp/err")"; exit 1; }
  [ ! -e "$tmp/x.png" ] || { echo "FAIL: $1 drew a picture of $2"; exit 1; }
}

"$bin" bench "${run[@]}" --trace "$tmp/run.json" > /dev/null
"$py" "$src/scripts/plot_trace.py" "$tmp/run.json" --out "$tmp/timeline.png" > /dev/null
is_png "$tmp/timeline.png"
"$bin" bench "${run[@]}" --layers --json > "$tmp/bench.json" 2> /dev/null
"$py" "$src/scripts/plot_layers.py" "$tmp/bench.json" --out "$tmp/layers.png" > /dev/null
is_png "$tmp/layers.png"

head -c 300 "$tmp/run.json" > "$tmp/cut.json"
refused plot_trace.py "$tmp/cut.json" "cut.json:1: not JSON"
refused plot_trace.py "$tmp/none.json" "cannot read $tmp/none.json"
echo '{"events": []}' > "$tmp/other.json"
refused plot_trace.py "$tmp/other.json" "other.json: not a trace"
echo '{"traceEvents": [{"ph": "X", "name": "a", "cat": "c", "pid": 0, "tid": 0, "ts": 1, "dur": -2}]}' > "$tmp/neg.json"
refused plot_trace.py "$tmp/neg.json" "neg.json: event 0 (a): negative duration"
echo '{"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "dur": 2}]}' > "$tmp/nots.json"
refused plot_trace.py "$tmp/nots.json" "nots.json: event 0: no \"ts\""
"$bin" bench "${run[@]}" --json > "$tmp/nolayers.json" 2> /dev/null
refused plot_layers.py "$tmp/nolayers.json" "nolayers.json: no \"layer_times\" (run tiletrain bench with --layers --json)"
refused plot_layers.py "$tmp/cut.json" "cut.json:1: not JSON"
refused plot_layers.py "$tmp/none.json" "cannot read $tmp/none.json"
echo PASS
