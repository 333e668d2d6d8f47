#!/bin/bash
# Steady-state cost of adding and deleting one document, two source trees side by side
# in one run, each on its own copy of one base index (docs/scale.md, "Tables patched").
#
#   research/update_pairs.sh OLD_TREE NEW_TREE BASE ADD_FILE DOC_ID OUT_PREFIX [REPEATS]
#
# For each tree (its src/ on PYTHONPATH): copy BASE, run one add and one delete that are
# not measured (the first update after a format change relinks or rebuilds state), then
# REPEATS (default 3) add/delete pairs with research/update_stages.py, each writing
# OUT_PREFIX-{old,new}-{add,del}N.json; then print the medians.
set -euo pipefail
OLD=$1; NEW=$2; BASE=$3; ADD=$4; DOC=$5; OUT=$6; REPEATS=${7:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python}
for tree in old new; do
    src=$OLD/src; [ "$tree" = new ] && src=$NEW/src
    copy=$OUT-$tree-index; rm -rf "$copy"; cp -r "$BASE" "$copy"
    PYTHONPATH=$src $PY "$HERE/update_stages.py" "$copy" add "$ADD" > "$OUT-$tree-warm-add.json"
    PYTHONPATH=$src $PY "$HERE/update_stages.py" "$copy" delete "$DOC" > "$OUT-$tree-warm-del.json"
    for i in $(seq "$REPEATS"); do
        PYTHONPATH=$src $PY "$HERE/update_stages.py" "$copy" add "$ADD" > "$OUT-$tree-add$i.json"
        PYTHONPATH=$src $PY "$HERE/update_stages.py" "$copy" delete "$DOC" > "$OUT-$tree-del$i.json"
    done
    rm -rf "$copy"
done
$PY - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
for tree in ("old", "new"):
    for op in ("add", "del"):
        runs = [json.load(open(f"{out}-{tree}-{op}{i}.json")) for i in range(1, repeats + 1)]
        call = [r["call_s"] for r in runs]
        tables = [r["functions_s"].get("save_state_tables", 0.0) for r in runs]
        graph = [r["stages_s"].get("graph", 0.0) for r in runs]
        embed = [r["stages_s"].get("embed", 0.0) for r in runs]
        print(f"{tree} {op}: call {statistics.median(call):.2f} s (runs {call}),"
              f" graph stage {statistics.median(graph):.2f} s,"
              f" embed stage {statistics.median(embed):.2f} s,"
              f" save_state_tables {statistics.median(tables):.2f} s,"
              f" peak {max(r['peak_gb'] for r in runs):.2f} GB")
PY
