#!/usr/bin/env bash
# Is the optimizer's choice the fastest measured? On an emulated cluster of a profile:
# calibrate, `plan --optimize --top 8`, then measure (bench) the optimizer's candidates
# and 10 hand-picked partitions, one after the other, ROUNDS times (default 3), each run
# the median of STEPS steps (default 5); each partition counts with its median round. The same partition moved by up to 16 % from one round to the next
# (pi4, 2 rounds of 3 steps), more than the optimizer's top 8 differ: the fastest of two
# rounds picked whichever partition had had a lucky run.
#
#   bench/planner/optimizer_check.sh PROFILE DEVICES [--out DIR] [--rounds N] [--steps S] [--whole]   (root)
#
# W1 on 2 devices by default. --whole: issue #30's whole network instead, yolov2-voc.cfg at
# 224x224, batch 8, on 4 devices: the optimizer's top 4 against one device, 2x2 with the
# tail on the root, filter blocks (with and without --low-memory) and data parallel.
#
# Output: DIR/optimizer-PROFILE.jsonl (one line per run: round, source, options, predicted
# and measured step) and a summary on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
profile=${1:?profile}
devices=${2:?devices}
out=$here/out
rounds=3
steps=5
whole=0
shift 2
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --whole) whole=1; shift ;;
    *) echo "optimizer_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# shellcheck source=edge_cluster.sh
. "$here/edge_cluster.sh"
speed=()  # --whole: 4 devices x 4 cores at 0.1125 of a core each, 1.8 of this host's 2 cores
[ $whole = 1 ] && speed=(--device-speed 0.1125)
edge_cluster optcheck --devices "$devices" --profile "$profile" "${speed[@]}"
cfg=cfgs/yolov2-16.cfg top=8 tag=$profile size=() batch=()
if [ $whole = 1 ]; then
  cfg=/usr/share/darknet/cfg/yolov2-voc.cfg top=4 tag=whole-$profile size=(--size 224x224) batch=(--batch 8)
fi
c=$out/optimizer-$tag-cluster.json
cluster/edge.sh run -- calibrate --cfg $cfg "${size[@]}" --threads 1 --out "$c" >&2
build/tiletrain plan --cfg $cfg "${size[@]}" "${batch[@]}" --cluster "$c" --optimize --top $top --json \
  >"$out/optimizer-$tag-plan.json"
log=$out/optimizer-$tag.jsonl
: >"$log"
# The candidates: the optimizer's (on as many devices as it uses, any ranks per device),
# then the hand-picked (one rank on each device). A pick is "source|devices|ranks per device|options".
mapfile -t picks < <(python3 - "$out/optimizer-$tag-plan.json" "$cfg" "${size[@]}" "${batch[@]}" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for c in j["best"]:
    used = c["ranks"] // c["ranks_per_device"]
    args = c["command"].split(" -- ", 1)[1].replace("train ", "", 1).replace(" --steps 100", "").split("   #")[0]
    for given in [f"--cfg {sys.argv[2]}", " ".join(sys.argv[3:5]), " ".join(sys.argv[5:7])]:
        if given:
            args = args.replace(given + " ", "")
    print(f"optimizer|{used}|{c['ranks_per_device']}|{args}")
EOF
)
hand=("--grid 1x2 --groups none" "--grid 2x1 --groups none" "--grid 1x2 --groups all" "--grid 2x1 --groups 0,4,8,12"
  "--grid 2x2 --tiles-per-rank 2 --groups none" "--grid 2x2 --tiles-per-rank 2 --groups 0,4,8,12"
  "--grid 1x2 --groups none --low-memory" "--grid 2x1 --groups 0,8,12" "--grid 4x2 --tiles-per-rank 4 --groups none"
  "--grid 1x2 --groups none --cut 12")
if [ $whole = 1 ]; then
  [ "$devices" = 4 ] || { echo "optimizer_check.sh: --whole's hand-picked set is for 4 devices" >&2; exit 1; }
  hand=("--grid 2x2 --tail root" "--grid 2x2 --tail filters" "--grid 2x2 --tail filters --low-memory"
    "--grid 1x1 --replicas 4 --subdivisions 8")
  picks+=("hand|1|1|--grid 1x1")
else
  [ "$devices" = 2 ] || { echo "optimizer_check.sh: the hand-picked set is for 2 devices" >&2; exit 1; }
fi
for h in "${hand[@]}"; do picks+=("hand|$devices|1|$h"); done
for round in $(seq "$rounds"); do
  for p in "${picks[@]}"; do
    IFS='|' read -r src used per args <<<"$p"
    # shellcheck disable=SC2086
    pred=$(build/tiletrain plan --cfg $cfg "${size[@]}" "${batch[@]}" $args --cluster "$c" --ranks-per-device "$per" --json |
      python3 -c "import json,sys; print(json.load(sys.stdin)['prediction']['step_s'])")
    # shellcheck disable=SC2086
    meas=$(cluster/edge.sh run --devices "$used" --ranks-per-device "$per" --timeout 900 -- bench --cfg $cfg "${size[@]}" "${batch[@]}" --threads 1 $args --steps "$steps" --warmup 1 --json |
      tail -n1 | python3 -c "import json,sys; print(json.load(sys.stdin)['step_s'])")
    echo "{\"round\": $round, \"source\": \"$src\", \"devices\": $used, \"ranks_per_device\": $per, \"args\": \"$args\", \"predicted\": $pred, \"measured\": $meas}" >>"$log"
    printf '  %d %-9s %d device(s) x %d %-55s predicted %.3f s, measured %.3f s\n' "$round" "$src" "$used" "$per" "$args" "$pred" "$meas" >&2
  done
done
default_cut=16  # W1's first untiled layer; yolov2-voc's at 224x224 on 2x2: 17
[ $whole = 1 ] && default_cut=17
python3 - "$log" "$default_cut" <<'EOF' >&2
import json, re, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
# One entry per partition (the optimizer's and a hand-picked one may coincide): the median
# of its rounds. The optimizer spells out the defaults (the cut, one tile a rank).
key = lambda r: (r["devices"], r["ranks_per_device"],
                 " ".join(sorted(re.findall(r"--\S+(?: [^-\s]\S*)?", re.sub(r"--(cut " + sys.argv[2] + r"|tiles-per-rank 1)(?!\d)", "", r["args"])))))
rounds = {}
for r in runs:
    rounds.setdefault(key(r), []).append(r)
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
part = {k: dict(v[0], measured=median([r["measured"] for r in v]), spread=(min(r["measured"] for r in v), max(r["measured"] for r in v)))
        for k, v in rounds.items()}
for r in sorted(part.values(), key=lambda r: r["measured"]):
    print(f"  {r['measured']:.3f} s (rounds {r['spread'][0]:.3f}-{r['spread'][1]:.3f}), predicted {r['predicted']:.3f} s: "
          f"{r['devices']} device(s) x {r['ranks_per_device']} {r['args']} ({r['source']})")
best = min(part.values(), key=lambda r: r["measured"])
opt = [r for r in runs if r["source"] == "optimizer"]
if opt:
    top = part[key(opt[0])]
    print(f"optimizer's first choice: {top['args']} measured {top['measured']:.3f} s (median of its rounds); fastest "
          f"measured: {best['args']} ({best['source']}) {best['measured']:.3f} s; choice / fastest = "
          f"{top['measured'] / best['measured']:.3f}")
EOF
