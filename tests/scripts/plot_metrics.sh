#!/usr/bin/env bash
# scripts/plot_metrics.py: a PNG from a metrics file (loss parts, an evaluation line); bad
# files end with a message naming the file and line and a non-zero exit.
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
"${plot[@]}" "$tmp/run.jsonl" --out "$tmp/loss.png" --log > /dev/null
[ "$(head -c 8 "$tmp/loss.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "FAIL: not a PNG"; exit 1; }
[ "$(stat -c %s "$tmp/loss.png")" -gt 10000 ] || { echo "FAIL: PNG too small"; exit 1; }
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
