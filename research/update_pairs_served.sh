#!/bin/bash
# What a long-running process (quillian serve) pays to add and delete one document,
# source trees side by side in one run (docs/scale.md, "The link update from the
# catalog's delta").
#
#   research/update_pairs_served.sh BASE ADD_FILE OUT_PREFIX ROUNDS TREE...
#
# ROUNDS times, each TREE in turn (its src/ on PYTHONPATH) on a fresh copy of BASE:
# research/update_stages.py COPY add ADD_FILE --pairs 6 (six add-then-delete pairs in
# one process; the first pair, which loads the models and may bring the stored state to
# a new format, is left out of its medians), written to OUT_PREFIX-TREENAME-ROUND.json.
# Then prints, per tree, the median over rounds of each round's add and delete medians,
# with the rounds' range, and the megabytes each wrote (update_stages.py's written_mb).
# BASE may be an index directory (PostgreSQL: use update_stages.py's --pairs with a
# location directly). PAUSE=S in the environment: S seconds slept before each call
# (updates apart, so that what waits for a pause runs between them). ENGINE=1: each
# call through an Engine, which then opens the build it completed, as quillian serve
# does (update_stages.py --engine).
set -euo pipefail
BASE=$1; ADD=$2; OUT=$3; ROUNDS=$4; shift 4
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python}
copy=$OUT-copy; mkdir -p "$(dirname "$OUT")"
for round in $(seq "$ROUNDS"); do
    for tree in "$@"; do
        rm -rf "$copy"; cp -r "$BASE" "$copy"
        PYTHONPATH=$tree/src $PY "$HERE/update_stages.py" "$copy" add "$ADD" --pairs 6 \
            --pause "${PAUSE:-0}" ${ENGINE:+--engine} > "$OUT-$(basename "$tree")-$round.json" 2> /dev/null
    done
done
rm -rf "$copy"
$PY - "$OUT" "$ROUNDS" "$@" <<'PY'
import json, os, statistics, sys
out, rounds, trees = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for tree in trees:
    runs = [json.load(open(f"{out}-{os.path.basename(tree)}-{r}.json")) for r in range(1, rounds + 1)]
    line = []
    for op in ("add", "delete"):
        values = [r["after_the_first"][f"{op}_s"] for r in runs]
        line.append(f"{op} {statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})")
        written = [r["after_the_first"].get(f"{op}_written_mb") for r in runs]
        if None not in written:
            line[-1] += f" {statistics.median(written):.1f} MB written"
    print(f"{tree}: " + ", ".join(line) + f", peak {max(r['peak_gb'] for r in runs):.2f} GB")
PY
