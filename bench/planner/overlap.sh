#!/usr/bin/env bash
# Overlap of the forward halo with compute (issue #10, item 6): W1 on 4 emulated devices
# (cluster/edge.sh, 0.45 of a core each) on 100 Mbit/s links, grid 2x2, groupings none and
# 0,4,8,12, with --overlap off and auto (interior while the halo is in flight), each run
# twice, interleaved; means of the two are reported. Reports the time in halo exchanges
# (halo_exchange_s: halo_s without the batch-norm all-reduces; halo_exchange_fwd_s: its
# forward part, the one overlap works on) and the compute overlapped.
#
#   bench/planner/overlap.sh [--out DIR]      (root: namespaces, tc, cgroups)
#
# Output: DIR/overlap.jsonl (bench --json of every run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=$here/out
[ "${1:-}" = --out ] && out=$2
mkdir -p "$out"
# shellcheck source=edge_cluster.sh
. "$here/edge_cluster.sh"
edge_cluster overlap --devices 4 --link 100mbit --cores 1 --device-speed 0.45
cfg=cfgs/yolov2-16.cfg
: >"$out/overlap.jsonl"
for round in 1 2; do
  for groups in none 0,4,8,12; do
    for overlap in off auto; do
      cluster/edge.sh run --timeout 600 -- bench --cfg $cfg --threads 1 --grid 2x2 --groups $groups --overlap $overlap --steps 3 \
        --warmup 1 --json | tail -n1 | python3 -c "import json,sys; r=json.load(sys.stdin); r['round']=$round; print(json.dumps(r))" \
        >>"$out/overlap.jsonl"
      tail -n1 "$out/overlap.jsonl" | python3 -c "import json,sys; r=json.load(sys.stdin); print('  groups %-9s overlap %-4s step %.3f s, halo %.3f s, of it exchanges %.3f s (forward %.3f s); overlapped compute %.3f s' % (r['groups'], r['overlap'], r['step_s'], r['halo_s'], r['halo_exchange_s'], r['halo_exchange_fwd_s'], r['halo_overlap_s']))" >&2
    done
  done
done
python3 - "$out/overlap.jsonl" <<'PY' >&2
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for g in sorted({r["groups"] for r in runs}):
    def mean(o, k):
        v = [r[k] for r in runs if r["groups"] == g and r["overlap"] == o]
        return sum(v) / len(v)
    def drop(k): return f"{mean('off', k):.3f} s -> {mean('auto', k):.3f} s ({100 * (1 - mean('auto', k) / mean('off', k)):.0f} % less)"
    print(f"groups {g} (means of the rounds): halo exchanges {drop('halo_exchange_s')}, in forward "
          f"{drop('halo_exchange_fwd_s')}; step {mean('off', 'step_s'):.3f} -> {mean('auto', 'step_s'):.3f} s")
PY
