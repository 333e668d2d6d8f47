"""The entity-resolution bench: one JSON object, apply-delta timed beside GraphBuilder
over the whole list, and the state's graph checked equal to the clean build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import graph_resolution as bench

PEOPLE = ["Ada Lovelace", "Charles Babbage", "Alan Turing", "Grace Hopper", "John Smith"]
PLACES = ["London", "Paris", "Princeton", "New York", "Cambridge"]


def test_the_bench_times_an_update_beside_a_clean_resolution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = []
    for i in range(30):
        person, place, other = PEOPLE[i % 5], PLACES[i % 5], PEOPLE[(i + 2) % 5]
        text = f"{person} met {other} in {place} in {1800 + i}. {person} worked in {place}."
        lines.append(json.dumps({"title": f"{person} {i}", "text": text}))
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bench.main(
        [str(corpus), "--work", str(tmp_path / "work"), "--sizes", "20,30", "--repeats", "1"]
    )
    out = json.loads(capsys.readouterr().out)
    for size in ("20", "30"):
        assert out[size]["chunks"] == int(size) and out[size]["entities"] > 0
        for case in ("last", "hub"):
            figures = out[size][case]
            assert figures["equal"] is True
            assert figures["add_replayed"] >= 1 and figures["add_s"] > 0
            assert figures["clean_s"] > 0 and figures["open_s"] > 0
    assert (tmp_path / "work" / "graph_resolution.json").is_file()
