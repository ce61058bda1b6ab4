#!/usr/bin/env bash
# scripts/plot_metrics.py: a PNG from a metrics file (loss parts, an evaluation line), with a
# throughput panel when the file has the time per step (or, older files, images_per_s) and
# without one when it has neither; bad files end with a message naming the file and line and
# a non-zero exit.
# Usage: plot_metrics.sh SOURCE_DIR
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plot=("/usr/bin/python3" "$src/scripts/plot_metrics.py")
for i in 1 2 3 4; do
  echo "{\"step\": $((i * 10)), \"epoch\": 0, \"loss\": $((10 - i)).5, \"lr\": 0.001, \"loss_obj\": 1.$i}"
done > "$tmp/run.jsonl"
echo '{"step": 40, "map": 0.5}' >> "$tmp/run.jsonl"
is_png() {
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "FAIL: $1 is not a PNG"; exit 1; }
  [ "$(stat -c %s "$1")" -gt 10000 ] || { echo "FAIL: $1 is too small"; exit 1; }
}
# a file without any time field (older train --metrics): no throughput panel
"${plot[@]}" "$tmp/run.jsonl" --out "$tmp/loss.png" --log > "$tmp/out"
is_png "$tmp/loss.png"
grep -q "panels: loss, learning rate, accuracy/mAP)" "$tmp/out" || { echo "FAIL: panels: $(cat "$tmp/out")"; exit 1; }
# what train --metrics writes now: the batch and the seconds per step since the line before
for i in 1 2 3 4; do
  echo "{\"step\": $((i * 10)), \"loss\": $((10 - i)).5, \"lr\": 0.001, \"images_per_s\": 30, \"batch\": 8, \"step_s\": 0.$i}"
done > "$tmp/timed.jsonl"
"${plot[@]}" "$tmp/timed.jsonl" "$tmp/run.jsonl" --out "$tmp/speed.png" > "$tmp/out"
is_png "$tmp/speed.png"
grep -q "panels: loss, learning rate, images/s, accuracy/mAP)" "$tmp/out" || { echo "FAIL: panels: $(cat "$tmp/out")"; exit 1; }
printf '{"step": 1, "loss": 2}\n{"step": 2, "loss": \n' > "$tmp/bad.jsonl"
if "${plot[@]}" "$tmp/bad.jsonl" --out "$tmp/x.png" 2> "$tmp/err"; then echo "FAIL: accepted bad JSON"; exit 1; fi
grep -q "bad.jsonl:2: not JSON" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
printf '{"loss": 2}\n' > "$tmp/nostep.jsonl"
if "${plot[@]}" "$tmp/nostep.jsonl" --out "$tmp/x.png" 2> "$tmp/err"; then echo "FAIL: accepted no step"; exit 1; fi
grep -q "nostep.jsonl:1:" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
: > "$tmp/empty.jsonl"
if "${plot[@]}" "$tmp/empty.jsonl" --out "$tmp/x.png" 2> "$tmp/err"; then echo "FAIL: accepted empty"; exit 1; fi
grep -q "empty.jsonl: no metrics" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
[ ! -e "$tmp/x.png" ] || { echo "FAIL: wrote a picture for bad input"; exit 1; }
echo PASS
